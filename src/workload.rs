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
//! release not yet sent).

use crate::env::Env;
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
            Ok(Some(guard)) => {
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
                // The holder is inside its critical section when `on = "acquired"` faults fire,
                // so a pause there is a pause of a holder at work.
                points.acquired(plan.index).await;
                critical_section(
                    &plan, cycle, &mut lock, &env, &rec, &points, &mut store, &guard,
                )
                .await;
                rec.record(&me, EventKind::Exit);
                points.reached(plan.index, "before_release").await;
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
/// for `hold_ms` (no longer than its validity, if it checks it: then it skips the write once the
/// lease ran out on its clock), write back.
#[allow(clippy::too_many_arguments)]
async fn critical_section<L, E, P, S>(
    plan: &ClientPlan,
    cycle: u32,
    lock: &mut L,
    env: &E,
    rec: &Recorder,
    points: &P,
    store: &mut Store<S>,
    guard: &Guard,
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
    if plan.check_validity_before_write {
        // Work no longer than the lease lasts, by the clock the lock measures validity with
        // (the monotonic one, unless the lock says otherwise).
        let clock = lock.validity_clock();
        let left = guard.valid_until_ms.saturating_sub(clock.read(env));
        env.sleep(Duration::from_millis(hold.min(left))).await;
        let now_ms = clock.read(env);
        if now_ms >= guard.valid_until_ms {
            rec.record(
                &me,
                EventKind::LeaseExpired {
                    valid_until_ms: guard.valid_until_ms,
                    now_ms,
                },
            );
            return;
        }
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
