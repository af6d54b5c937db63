//! One assembly of a run, whichever world it runs in.
//!
//! A run is the same story in simulation, on spawned `redis-server`s and on a database: give
//! every client its connections, its environment (clock, sleeps, named points wired to the
//! nemesis) and its lock; let each run the workload ([`run_client`]) until the scenario's
//! duration is over; cut off the ones that are stuck once a grace period is over; read the
//! protected resource's final state into the history. Only how each of those steps is carried out
//! differs between worlds, and that is what a [`World`] supplies: `sim/` spawns clients on madsim
//! nodes and talks over the simulated network, `real/` spawns tokio tasks on routed TCP
//! connections, `sql/` gives each client one database connection.
//!
//! Keeping the assembly here, once, is what makes the worlds agree: before, each world had its
//! own copy of this loop and the copies had drifted apart (how long a stuck client is waited for
//! was computed three different ways).

pub mod cut;
pub mod estimate;
pub mod points;

/// Paths that moved into `crate::backend`, kept for users' code (see `lib.rs`).
pub use crate::__moved::world::*;
pub use estimate::{expected_events, memory_estimate, EVENTS_PER_CYCLE, PEAK_BYTES_PER_EVENT};

use crate::env::PointHook;
use crate::history::{EventKind, Recorder};
use crate::lock::{Lock, LockConfig};
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::workload::{record_final_state, run_client, ClientPlan, FaultPoints};
use redis::aio::ConnectionLike;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A client's whole run, ready to be spawned by a world.
pub type ClientRun = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a world supplies to [`run_clients`]: connections, environments, the protected resource's
/// store, and a way to run and wait for clients. Implemented by the simulated Redis world, the
/// real Redis world and the two MySQL worlds.
pub trait World {
    /// What a client's lock is built on: one connection per master group for the Redis locks,
    /// one database connection for the MySQL locks.
    type Conns;
    /// A client's environment (clock, sleep, randomness, named points).
    type Env: crate::env::Env + Clone + 'static;
    /// The connection the protected resource's store talks through.
    type StoreConn: ConnectionLike + Send + 'static;
    /// The nemesis: where a client's named points lead.
    type Nemesis: FaultPoints;

    /// The recorder every event of the run goes to.
    fn recorder(&self) -> &Recorder;
    /// The run's nemesis.
    fn nemesis(&self) -> &Self::Nemesis;
    /// Client `c`'s environment, with its named points leading to `points`.
    fn client_env(&mut self, c: u32, points: PointHook) -> Self::Env;
    /// Client `c`'s connections (a simulated database connection runs on its client's `env`).
    fn connections(&mut self, c: u32, env: &Self::Env) -> Self::Conns;
    /// A store of the protected resource; `id` 0 is the checker's own, client `c` uses `c + 1`.
    fn store(&mut self, id: u64) -> Store<Self::StoreConn>;
    /// Starts client `c`'s run.
    fn spawn_client(&mut self, c: u32, run: ClientRun);
    /// Waits until every client has finished (or can never finish: crashed), at most until `end`
    /// on the run's clock (its duration plus the grace period; a simulated world's wait starts
    /// at its time 0, so there it is a limit from now).
    fn wait_clients(&mut self, end: Duration) -> impl Future<Output = ()>;
    /// Lets in-flight faults finish recording before the final state is read, but not past
    /// `end` on the run's clock (`duration_ms` plus the grace period): a real world's nemesis
    /// may be waiting on a server that never comes back (a restart due after the run, a pause
    /// longer than the run), and a run must end whatever its servers do. A simulated world has
    /// nothing under way once its clients are done.
    fn settle(&self, end: Duration) -> impl Future<Output = ()> {
        let _ = end;
        async {}
    }
}

/// How long after `duration_ms` a run still waits for clients that have not finished: enough for
/// a client that started a cycle just before the end to wait for the lock, hold it for a whole
/// lease, run its longest critical section, and have one request time out. A client still
/// running after that is stuck (paused for good, waiting on a lost lock) or thinking, and is cut
/// off, so that every run ends. Think time is not waited out: after the end a client starts no
/// other cycle, so its think has nothing left to show, and a `think_ms` of 10^9 would otherwise
/// keep a simulated run busy for seconds and a real one for days.
pub fn grace_ms(scenario: &Scenario, request_timeout_ms: u64) -> u64 {
    scenario.lock.wait_ms
        + scenario.lock.lease_ms()
        + scenario.workload.hold_ms[1]
        + request_timeout_ms
        + 5_000
}

/// Client `client`'s named points: each is passed to the nemesis (which may fire faults there)
/// and recorded, since a lock's own points time its steps in the history.
pub fn point_hook<N: FaultPoints>(nemesis: N, rec: Recorder, client: u32) -> PointHook {
    let lane = format!("client-{client}");
    PointHook::new(move |p| {
        let nemesis = nemesis.clone();
        let rec = rec.clone();
        let lane = lane.clone();
        async move {
            nemesis.reached(client, p).await;
            rec.record(&lane, EventKind::Point { name: p.into() });
        }
    })
}

/// How the history names a fault that never fired: its family and the point it waited for.
pub fn never_fired(fault: &crate::fault::Fault) -> String {
    match fault.trigger.point() {
        Some((point, 0)) => format!("never fired: {} on \"{point}\"", fault.kind.name()),
        Some((point, after_ms)) => format!(
            "never fired: {} on \"{point}\" after {after_ms} ms",
            fault.kind.name()
        ),
        None => format!("never fired: {} at its time", fault.kind.name()),
    }
}

/// Runs the scenario's clients in `world`, each with the lock `make_lock` builds for it (client
/// index, lock settings, its connections, its environment), waits for them (at most `grace`
/// after the scenario's duration), lets the faults under way finish (by the same deadline:
/// `duration_ms + grace` is the one end of a run, whatever its clients and servers do), then
/// records the protected resource's final state. Returns the
/// checker's store, from which a world may read more (the simulated counter's totals).
pub async fn run_clients<W, L, F>(
    world: &mut W,
    scenario: &Scenario,
    grace: Duration,
    mut make_lock: F,
) -> Store<W::StoreConn>
where
    W: World,
    L: Lock + 'static,
    F: FnMut(u32, LockConfig, W::Conns, W::Env) -> L,
{
    let rec = world.recorder().clone();
    rec.reserve(expected_events(scenario).min(estimate::RESERVE_AT_MOST) as usize);
    let nemesis = world.nemesis().clone();
    let config = LockConfig::from_spec(&scenario.lock);
    let stop_at_us = scenario.duration_ms * 1000;
    for c in 0..scenario.workload.clients {
        let points = point_hook(nemesis.clone(), rec.clone(), c);
        let env = world.client_env(c, points);
        let conns = world.connections(c, &env);
        let lock = make_lock(c, config.clone(), conns, env.clone());
        let plan = ClientPlan::for_scenario(scenario, c, stop_at_us);
        let store = world.store(c as u64 + 1);
        let run = run_client(plan, lock, env, rec.clone(), nemesis.clone(), store);
        world.spawn_client(c, Box::pin(run));
    }
    // A wall-clock deadline (`explore --time-limit`) ends the wait as the grace period does.
    let end = Duration::from_millis(scenario.duration_ms) + grace;
    let wait = world.wait_clients(end);
    futures::future::select(std::pin::pin!(wait), cut::signal()).await;
    rec.record("run", EventKind::RunEnd);
    for fault in nemesis.never_fired() {
        rec.record(
            "nemesis",
            EventKind::Fault {
                what: never_fired(&fault),
            },
        );
    }
    // A simulated world's settle is ready at once, so the signal is never polled there.
    futures::future::select(std::pin::pin!(world.settle(end)), cut::signal()).await;
    let mut store = world.store(0);
    record_final_state(scenario.workload.kind, &mut store, &rec).await;
    store
}
