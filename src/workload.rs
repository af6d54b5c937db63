//! The workload: what each client does, and the protected resource it does it to.
//!
//! A client loops: acquire, enter its critical section (a read-modify-write of a shared counter
//! that takes `hold_ms`), exit, release, think. `enter`, `exit` and the write are recorded in true
//! time, so the checkers see what actually happened, whatever the client believed about its lease.
//! This is Jepsen's split: the client (the lock) and the workload are apart from the nemesis (faults),
//! which reaches in only through [`FaultPoints`].

use crate::env::Env;
use crate::history::{EventKind, Recorder};
use crate::lock::Lock;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the nemesis may act on a client between its steps.
pub trait FaultPoints: Clone + Send + Sync + 'static {
    /// Called right after a successful acquire, once the holder has entered its critical
    /// section. Triggers `on = "acquired"` faults (a simulated GC pause takes effect at the
    /// holder's next await; a real-mode pause stalls here).
    fn acquired(&self, client: u32) -> impl Future<Output = ()> + Send;

    /// Called when a holder is about to write to the protected resource: after its validity
    /// check, if it makes one. Triggers `on = "before_write"` faults (a pause here is the stall
    /// no lease can guard against).
    fn before_write(&self, client: u32) -> impl Future<Output = ()> + Send {
        let _ = client;
        async {}
    }
}

/// No faults.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFaults;

impl FaultPoints for NoFaults {
    async fn acquired(&self, _client: u32) {}
}

/// What one client does.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    pub index: u32,
    pub cycles: u32,
    pub hold_ms: [u64; 2],
    pub think_ms: [u64; 2],
    /// No new cycle starts at or after this true time (µs).
    pub stop_at_us: u64,
    /// Stop working, and skip the write, once the lease's validity has run out on the holder's
    /// own clock (the scenario's `check_validity_before_write`).
    pub check_validity_before_write: bool,
}

impl ClientPlan {
    pub fn name(&self) -> String {
        format!("client-{}", self.index)
    }
}

/// The protected resource: a counter that holders read, then (after their work) write back
/// incremented. Under a correct lock its final value equals the number of writes; a lost update
/// is the damage two holders do.
#[derive(Clone, Debug, Default)]
pub struct Counter {
    inner: Arc<Mutex<CounterState>>,
}

#[derive(Debug, Default)]
struct CounterState {
    value: u64,
    writes: u64,
}

impl Counter {
    pub fn read(&self) -> u64 {
        self.inner.lock().unwrap().value
    }

    /// Writes `value`; returns true (a plain counter accepts every write).
    pub fn write(&self, value: u64) -> bool {
        let mut g = self.inner.lock().unwrap();
        g.value = value;
        g.writes += 1;
        true
    }

    /// (final value, number of writes).
    pub fn totals(&self) -> (u64, u64) {
        let g = self.inner.lock().unwrap();
        (g.value, g.writes)
    }
}

/// Runs one client's loop to completion.
pub async fn run_client<L, E, P>(
    plan: ClientPlan,
    mut lock: L,
    env: E,
    rec: Recorder,
    points: P,
    counter: Counter,
) where
    L: Lock,
    E: Env,
    P: FaultPoints,
{
    let me = plan.name();
    for _ in 0..plan.cycles {
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
                let read = counter.read();
                let hold = env.random_range(plan.hold_ms[0], plan.hold_ms[1]);
                if plan.check_validity_before_write {
                    // Work no longer than the lease lasts, by this client's clock.
                    let left = guard.valid_until_ms.saturating_sub(env.now_ms());
                    env.sleep(Duration::from_millis(hold.min(left))).await;
                    let now_ms = env.now_ms();
                    if now_ms >= guard.valid_until_ms {
                        rec.record(
                            &me,
                            EventKind::LeaseExpired {
                                valid_until_ms: guard.valid_until_ms,
                                now_ms,
                            },
                        );
                        rec.record(&me, EventKind::Exit);
                        release(&mut lock, &guard, &rec, &me).await;
                        think(&plan, &env).await;
                        continue;
                    }
                } else {
                    env.sleep(Duration::from_millis(hold)).await;
                }
                points.before_write(plan.index).await;
                let accepted = counter.write(read + 1);
                rec.record(
                    &me,
                    EventKind::ResourceWrite {
                        read,
                        wrote: read + 1,
                        fencing_token: guard.fencing_token,
                        accepted,
                    },
                );
                rec.record(&me, EventKind::Exit);
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
