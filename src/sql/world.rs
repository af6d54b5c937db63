//! What the simulated and the real MySQL worlds share: a client's run and its named-point hook,
//! the cleanup job's pass, how long a run may overrun, and the bookkeeping of which fault a
//! client's step triggers and what the history says of it.

use crate::env::{Env, PointHook};
use crate::faults::schedule::Schedule;
use crate::history::{EventKind, Recorder};
use crate::lock::mysql_insert_unique;
use crate::lock::mysql_options::{Cleanup, MysqlOptions};
use crate::lock::LockConfig;
use crate::resource::Store;
use crate::scenario::{ClientRef, FaultKind, Scenario};
use crate::sql::lock::SqlLock;
use crate::sql::SqlConn;
use crate::workload::{run_client, ClientPlan, FaultPoints};
use std::future::Future;
use std::time::Duration;

/// The faults a client reaching `point` now sets off.
pub fn due(schedule: &Schedule, rec: &Recorder, client: u32, point: &str) -> Vec<FaultKind> {
    schedule
        .take_at_point(rec.now_us() / 1000, client, point)
        .into_iter()
        .map(|f| f.kind)
        .collect()
}

/// The hook a client's locks and workload call at each named point: the nemesis fires what is
/// due there, then the history records that the client passed the point.
pub fn point_hook<N: FaultPoints>(nemesis: &N, rec: &Recorder, client: u32) -> PointHook {
    let nemesis = nemesis.clone();
    let rec = rec.clone();
    PointHook::new(move |p| {
        let nemesis = nemesis.clone();
        let rec = rec.clone();
        async move {
            nemesis.reached(client, p).await;
            rec.record(
                &format!("client-{client}"),
                EventKind::Point { name: p.into() },
            );
        }
    })
}

/// One pass of the article's cleanup job at `now_ms` (the job's clock); a pass that deleted rows
/// is a fault in the history, since it frees locks nobody released.
pub async fn cleanup_pass<C: SqlConn>(
    conn: &mut C,
    options: &MysqlOptions,
    cleanup: Cleanup,
    now_ms: u64,
    rec: &Recorder,
) {
    let deleted = mysql_insert_unique::cleanup_once(conn, options, cleanup.lease_ms, now_ms).await;
    if let Ok(n @ 1..) = deleted {
        rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!(
                    "cleanup job deleted {n} lock row(s) older than {} ms",
                    cleanup.lease_ms
                ),
            },
        );
    }
}

/// Client `client`'s whole run in either world: the scenario's lock on `conn`, its workload plan,
/// and the protected resource in `store`, until the plan's cycles or `duration_ms` are done.
pub fn client_run<C, E, N, S>(
    s: &Scenario,
    client: u32,
    conn: C,
    env: E,
    rec: &Recorder,
    nemesis: &N,
    store: Store<S>,
) -> impl Future<Output = ()> + Send + 'static
where
    C: SqlConn + Sync + 'static,
    E: Env,
    N: FaultPoints,
    S: redis::aio::ConnectionLike + Send + 'static,
{
    let lock = SqlLock::build(
        s.lock.kind,
        conn,
        env.clone(),
        LockConfig::from_spec(&s.lock),
        super::spec::options(&s.lock),
    );
    let plan = ClientPlan::for_scenario(s, client, s.duration_ms * 1000);
    run_client(plan, lock, env, rec.clone(), nemesis.clone(), store)
}

/// How long after `duration_ms` a run waits for its clients to finish: an acquire's whole wait, a
/// lease, the longest section and think time, and one statement's response timeout, plus 5 s.
pub fn grace_ms(s: &Scenario, request_timeout: Duration) -> u64 {
    s.lock.wait_ms
        + s.lock.lease_ms()
        + s.workload.hold_ms[1]
        + s.workload.think_ms[1]
        + request_timeout.as_millis() as u64
        + 5_000
}

/// Records that `client` crashed at `point` (its own event and the nemesis's note, which says
/// how this world carries the crash out).
pub fn record_client_crash(rec: &Recorder, client: u32, point: &str, how: &str) {
    rec.record(
        &format!("client-{client}"),
        EventKind::Crashed {
            point: point.to_string(),
        },
    );
    rec.record(
        "nemesis",
        EventKind::Fault {
            what: format!("client-{client} crashed at {point} ({how})"),
        },
    );
}

/// The client a pause hits: the named one, the triggering client, or the current holder.
pub fn paused_client(client: &ClientRef, holder: Option<u32>, rec: &Recorder) -> Option<u32> {
    match (client, holder) {
        (ClientRef::Index(i), _) => Some(*i),
        (ClientRef::Holder, Some(h)) => Some(h),
        (ClientRef::Holder, None) => rec.snapshot().current_holder(),
    }
}
