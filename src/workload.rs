//! The workload: what each client does, and the protected resource it does it to.
//!
//! A client loops: acquire, enter its critical section, exit, release, think. The critical
//! section works on the protected resource in the storage node ([`crate::resource`]): a
//! read-modify-write of a counter, or the address-book article's address book (count the user's addresses, work,
//! insert one, the default if the count was 0). With `nested = n` the holder also acquires the
//! lock n more times inside its section and releases those inner acquisitions before it finishes
//! its work (reentrancy). `enter`, `exit`, the writes and the nested acquisitions are recorded in
//! true time, so the checkers see what actually happened, whatever the client believed about its
//! lease. This is Jepsen's split: the client (the lock) and the workload are apart from the
//! nemesis (faults), which reaches in only through [`FaultPoints`] and the named points.
//!
//! The workload's named points, in order: `acquired` (just entered), `after_read` (read the
//! resource), `before_write` (worked, about to write it back), `before_release` (left the section,
//! release not yet sent; recorded in the history once a pause there is over, when the release
//! goes out).

use crate::env::{ClockKind, Env};
use crate::history::{EventKind, Recorder};
use crate::lock::{Guard, Lock};
use crate::resource::Store;
use crate::scenario::WorkloadKind;
use redis::aio::ConnectionLike;
use std::future::Future;
use std::time::Duration;

/// The user whose address book the `address-book` workload edits (the address-book article's `uid`).
pub const ADDRESS_BOOK_USER: u32 = 1;

/// Where the nemesis may act on a client between its steps: the named points. A world
/// implements [`FaultPoints::reached`]; `acquired` and `before_write` are the two points the
/// workload itself has a method for.
pub trait FaultPoints: Clone + Send + Sync + 'static {
    /// Called when a client reaches a named point: the workload's (`acquired`, `after_read`,
    /// `before_write`, `before_release`) or a lock's own (through [`Env::point`]). Triggers the
    /// `on = "<point>"` faults. A crash at a point never returns.
    fn reached(&self, client: u32, point: &'static str) -> impl Future<Output = ()> + Send;

    /// Right after a successful acquire, once the holder has entered its critical section (a
    /// simulated GC pause takes effect at the holder's next await; a real-mode pause stalls here).
    fn acquired(&self, client: u32) -> impl Future<Output = ()> + Send {
        self.reached(client, "acquired")
    }

    /// When a holder is about to write to the protected resource: after its validity check, if
    /// it makes one (a pause here is the stall no lease can guard against).
    fn before_write(&self, client: u32) -> impl Future<Output = ()> + Send {
        self.reached(client, "before_write")
    }

    /// The holder's check-to-write window opens (`open`: its last look at its lease, the
    /// validity check, the last renewal or, with neither, the grant, is behind it, and what it
    /// does next is write) or closes (it wrote, gave up, or will look again). No lease lock
    /// survives a pause inside it: that is the workload's weakness, not the lock's, and a search
    /// that asks (`[explore] pause_between_check_and_write = false`) keeps pauses out of it. By
    /// default nothing happens.
    fn write_window(&self, client: u32, open: bool) -> impl Future<Output = ()> + Send {
        let _ = (client, open);
        std::future::ready(())
    }

    /// The faults still waiting for their named point when the run ends: no client reached it
    /// (after its `after_ms`). The run's history names each (`never fired: …`), so a reader,
    /// and `explore`, can tell a fault that did nothing from one that did. By default none.
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        Vec::new()
    }
}

/// No faults.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFaults;

impl FaultPoints for NoFaults {
    async fn reached(&self, _client: u32, _point: &'static str) {}
}

/// What one client does.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    /// The client's index (`client-<index>`).
    pub index: u32,
    /// Acquire/hold/release cycles to run.
    pub cycles: u32,
    /// Critical-section length, uniform in this range.
    pub hold_ms: [u64; 2],
    /// Pause between a release and the next acquire, uniform in this range.
    pub think_ms: [u64; 2],
    /// No new cycle starts at or after this true time (µs).
    pub stop_at_us: u64,
    /// What the critical section does.
    pub workload: WorkloadKind,
    /// Nested acquires inside each critical section.
    pub nested: u32,
    /// Stop working, and skip the write, once the lease's validity has run out on the holder's
    /// own clock (the scenario's `check_validity_before_write`).
    pub check_validity_before_write: bool,
    /// Renew the lease with `Lock::renew` every this many ms of the holder's clock while it
    /// works (0: never).
    pub renew_every_ms: u64,
}

impl ClientPlan {
    /// Client `index`'s plan in `scenario`; no new cycle starts at or after `stop_at_us`.
    pub fn for_scenario(scenario: &crate::scenario::Scenario, index: u32, stop_at_us: u64) -> Self {
        ClientPlan {
            index,
            cycles: scenario.workload.cycles,
            hold_ms: scenario.workload.hold_ms,
            think_ms: scenario.workload.think_ms,
            stop_at_us,
            workload: scenario.workload.kind,
            nested: scenario.workload.nested,
            check_validity_before_write: scenario.lock.check_validity_before_write,
            renew_every_ms: scenario.workload.renew_every_ms,
        }
    }

    /// The client's node name in the history.
    pub fn name(&self) -> String {
        format!("client-{}", self.index)
    }
}

/// Runs one client's loop to completion.
pub async fn run_client<L, E, P, S>(
    plan: ClientPlan,
    mut lock: L,
    env: E,
    rec: Recorder,
    points: P,
    mut store: Store<S>,
) where
    L: Lock,
    E: Env,
    P: FaultPoints,
    S: ConnectionLike + Send,
{
    let me = plan.name();
    for cycle in 0..plan.cycles {
        if rec.now_us() >= plan.stop_at_us {
            break;
        }
        rec.record(&me, EventKind::AcquireStart);
        match lock.acquire().await {
            Ok(Some(mut guard)) => {
                rec.record(
                    &me,
                    EventKind::Acquired {
                        owner: guard.owner.clone(),
                        fencing_token: guard.fencing_token,
                        acquired_at_ms: guard.acquired_at_ms,
                        valid_until_ms: guard.valid_until_ms,
                    },
                );
                rec.record(&me, EventKind::Enter);
                // A holder that neither checks its validity nor renews looks at its lease only
                // when granted: from here to its write is its check-to-write window. (One that
                // renews looks again unless its work is shorter than a renewal interval, which
                // `work_renewing` tells once the hold is drawn.)
                if !plan.check_validity_before_write {
                    points.write_window(plan.index, true).await;
                }
                // The holder is inside its critical section when `on = "acquired"` faults fire,
                // so a pause there is a pause of a holder at work.
                points.acquired(plan.index).await;
                critical_section(
                    &plan, cycle, &mut lock, &env, &rec, &points, &mut store, &mut guard,
                )
                .await;
                points.write_window(plan.index, false).await;
                rec.record(&me, EventKind::Exit);
                points.reached(plan.index, "before_release").await;
                // After the nemesis let it go: the release's request is sent from here, so a
                // holder paused before its release is dated by when its delete went out, not by
                // when it left its section (the foreign-release check's fallback reads it).
                rec.record(
                    &me,
                    EventKind::Point {
                        name: "before_release".into(),
                    },
                );
                release(&mut lock, &guard, &rec, &me).await;
            }
            Ok(None) => rec.record(
                &me,
                EventKind::AcquireFailed {
                    reason: "wait bound reached".into(),
                },
            ),
            Err(e) => rec.record(
                &me,
                EventKind::AcquireFailed {
                    reason: e.to_string(),
                },
            ),
        }
        think(&plan, &env).await;
    }
}

async fn release<L: Lock>(lock: &mut L, guard: &crate::lock::Guard, rec: &Recorder, me: &str) {
    match lock.release(guard).await {
        Ok(deleted) => rec.record(me, EventKind::Released { deleted }),
        Err(e) => rec.record(
            me,
            EventKind::ReleaseFailed {
                error: e.to_string(),
            },
        ),
    }
}

/// The pause between a client's cycles.
async fn think<E: Env>(plan: &ClientPlan, env: &E) {
    let think = env.random_range(plan.think_ms[0], plan.think_ms[1]);
    if think > 0 {
        env.sleep(Duration::from_millis(think)).await;
    }
}

/// The holder's work: read the resource, acquire and release the lock `nested` more times, work
/// for `hold_ms` (renewing its lease every `renew_every_ms`; no longer than its validity, if it
/// checks it: then it skips the write once the lease ran out on its clock), write back.
#[allow(clippy::too_many_arguments)]
async fn critical_section<L, E, P, S>(
    plan: &ClientPlan,
    cycle: u32,
    lock: &mut L,
    env: &E,
    rec: &Recorder,
    points: &P,
    store: &mut Store<S>,
    guard: &mut Guard,
) where
    L: Lock,
    E: Env,
    P: FaultPoints,
    S: ConnectionLike + Send,
{
    let me = plan.name();
    let token = guard.fencing_token;
    let read = match plan.workload {
        WorkloadKind::Counter => store.read().await,
        WorkloadKind::AddressBook => store.count_addresses(ADDRESS_BOOK_USER).await,
    }
    .unwrap_or(0);
    points.reached(plan.index, "after_read").await;

    // Reentrancy: the holder takes the lock again (a nested call that needs it too), then
    // releases those inner acquisitions, innermost first, and keeps working: a correct reentrant
    // lock stays held until the outermost release.
    let mut inner: Vec<Guard> = Vec::new();
    for _ in 0..plan.nested {
        let depth = inner.len() as u32 + 2;
        match lock.acquire().await {
            Ok(Some(g)) => {
                rec.record(&me, EventKind::Reentered { depth });
                inner.push(g);
            }
            Ok(None) => {
                rec.record(
                    &me,
                    EventKind::ReentryFailed {
                        depth,
                        reason: "wait bound reached".into(),
                    },
                );
                break;
            }
            Err(e) => {
                rec.record(
                    &me,
                    EventKind::ReentryFailed {
                        depth,
                        reason: e.to_string(),
                    },
                );
                break;
            }
        }
    }
    while let Some(g) = inner.pop() {
        let depth = inner.len() as u32 + 2;
        match lock.release(&g).await {
            Ok(deleted) => rec.record(&me, EventKind::InnerReleased { depth, deleted }),
            Err(e) => rec.record(
                &me,
                EventKind::ReleaseFailed {
                    error: e.to_string(),
                },
            ),
        }
    }

    let hold = env.random_range(plan.hold_ms[0], plan.hold_ms[1]);
    if plan.renew_every_ms > 0 {
        if !work_renewing(plan, hold, lock, env, rec, points, guard).await {
            return;
        }
    } else if plan.check_validity_before_write {
        // Work no longer than the lease lasts, by the clock the lock measures validity with
        // (the monotonic one, unless the lock says otherwise).
        let clock = lock.validity_clock();
        let left = guard.valid_until_ms.saturating_sub(clock.read(env));
        env.sleep(Duration::from_millis(hold.min(left))).await;
        if lease_expired(plan, clock, env, rec, guard) {
            return;
        }
        points.write_window(plan.index, true).await;
    } else {
        env.sleep(Duration::from_millis(hold)).await;
    }
    points.before_write(plan.index).await;

    match plan.workload {
        WorkloadKind::Counter => {
            let seq = store.write(read + 1, token).await.unwrap_or(None);
            rec.record(
                &me,
                EventKind::ResourceWrite {
                    read,
                    wrote: read + 1,
                    fencing_token: token,
                    accepted: seq.is_some(),
                    seq,
                },
            );
        }
        WorkloadKind::AddressBook => {
            // The address-book article: the first address becomes the default.
            let is_default = read == 0;
            let id = format!("{me}#{cycle}");
            let seq = store
                .insert_address(ADDRESS_BOOK_USER, &id, is_default, token)
                .await
                .unwrap_or(None);
            rec.record(
                &me,
                EventKind::AddressInserted {
                    user: ADDRESS_BOOK_USER,
                    count_seen: read,
                    is_default,
                    fencing_token: token,
                    accepted: seq.is_some(),
                    seq,
                },
            );
        }
    }
}

/// Whether the holder's validity time has run out on `clock`; if so it records that it stops
/// and skips its write.
fn lease_expired<E: Env>(
    plan: &ClientPlan,
    clock: ClockKind,
    env: &E,
    rec: &Recorder,
    guard: &Guard,
) -> bool {
    let now_ms = clock.read(env);
    let expired = now_ms >= guard.valid_until_ms;
    if expired {
        rec.record(
            &plan.name(),
            EventKind::LeaseExpired {
                valid_until_ms: guard.valid_until_ms,
                now_ms,
            },
        );
    }
    expired
}

/// Works for `hold` ms, renewing the lease every `renew_every_ms` of the holder's clock until
/// the work is done (the last stretch needs no renewal). A renewal that succeeds moves the
/// validity time the holder believes (`guard`); one the lock answers "no longer yours" stops
/// the work. With `check_validity_before_write` no stretch outlasts the validity time.
/// `true`: the holder still believes it holds, and writes.
async fn work_renewing<L, E, P>(
    plan: &ClientPlan,
    hold: u64,
    lock: &mut L,
    env: &E,
    rec: &Recorder,
    points: &P,
    guard: &mut Guard,
) -> bool
where
    L: Lock,
    E: Env,
    P: FaultPoints,
{
    let me = plan.name();
    let clock = lock.validity_clock();
    let mut left = hold;
    // Without a validity check the window opened at the grant; a renewal to come is another
    // look, so it closes until the last renewal (below).
    if !plan.check_validity_before_write && left > plan.renew_every_ms {
        points.write_window(plan.index, false).await;
    }
    loop {
        let mut stretch = left.min(plan.renew_every_ms);
        if plan.check_validity_before_write {
            stretch = stretch.min(guard.valid_until_ms.saturating_sub(clock.read(env)));
        }
        env.sleep(Duration::from_millis(stretch)).await;
        left -= stretch;
        if plan.check_validity_before_write && lease_expired(plan, clock, env, rec, guard) {
            return false;
        }
        if left == 0 {
            if plan.check_validity_before_write {
                points.write_window(plan.index, true).await;
            }
            return true;
        }
        match lock.renew(guard).await {
            Ok(true) => {
                rec.record(
                    &me,
                    EventKind::Renewed {
                        valid_until_ms: guard.valid_until_ms,
                    },
                );
            }
            Ok(false) => {
                rec.record(
                    &me,
                    EventKind::RenewalFailed {
                        lost: true,
                        reason: "the lock entry is no longer ours".into(),
                    },
                );
                return false;
            }
            Err(e) => rec.record(
                &me,
                EventKind::RenewalFailed {
                    lost: false,
                    reason: e.to_string(),
                },
            ),
        }
        // The last renewal before the write is behind it: what follows is the window.
        if !plan.check_validity_before_write && left <= plan.renew_every_ms {
            points.write_window(plan.index, true).await;
        }
    }
}

/// Records the resource's final state where the invariant is about the end state (the address
/// book: each user has exactly one default address).
pub async fn record_final_state<S: ConnectionLike + Send>(
    workload: WorkloadKind,
    store: &mut Store<S>,
    rec: &Recorder,
) {
    if workload == WorkloadKind::AddressBook {
        if let Ok((addresses, defaults)) = store.address_book(ADDRESS_BOOK_USER).await {
            rec.record(
                "storage",
                EventKind::AddressBookState {
                    user: ADDRESS_BOOK_USER,
                    addresses,
                    defaults,
                },
            );
        }
    }
}
