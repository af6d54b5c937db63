//! The one end of a real run: `duration_ms` plus the grace period (`world::grace_ms`), on the
//! run's own clock, whatever its clients and servers do. Before, every wait after the clients'
//! own had no bound: a nemesis settling a MariaDB or PostgreSQL restart due after the run, a
//! ZooKeeper server paused for longer than the run, an ensemble electing without a quorum, held
//! the run until its restart (minutes, days) or for good, and the command printed nothing until
//! killed. Every real world waits for its clients ([`wait_for_live_clients`]) and for its
//! nemesis ([`settle_by`]) through here, so the deadline is kept in one place.
//!
//! What the deadline leaves is judged as the history saw it: a client still waiting for the lock
//! is a liveness finding (`check::liveness`), a server that never came back is one the run's
//! faults explain, and the history says the run was cut and what was still under way (a note on
//! the `run` lane), so a cut is never mistaken for a run that ended on its own.

use super::Gate;
use crate::history::{EventKind, Recorder};
use crate::scenario::Scenario;
use crate::world::{cut, estimate};
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How long from now until `end` on `rec`'s clock (zero once it has passed).
fn left(rec: &Recorder, end: Duration) -> Duration {
    end.saturating_sub(Duration::from_micros(rec.now_us()))
}

/// Notes in the history that the run was cut at `end`, and what `pending` was then.
fn note_cut(rec: &Recorder, end: Duration, pending: &str) {
    rec.record(
        "run",
        EventKind::Fault {
            what: format!(
                "run cut at duration_ms + grace ({} ms): {pending}",
                end.as_millis()
            ),
        },
    );
}

/// Stops the client tasks when dropped: at the end of the wait, and also when the wait itself is
/// dropped because the run was cut at a wall-clock deadline (`explore --time-limit`,
/// `world::cut`), which ends the wait without letting it finish.
///
/// Why every end must stop them: the history is judged once the run is over, and the servers'
/// word in it (the `MONITOR` witness's removals) ends where the witness stopped reading. A client
/// left running past that point could release, be answered "released", and record it, while the
/// witness no longer saw the removal: the release check then reads a lie that never was (seen
/// once in `a_real_run_is_cut_at_the_deadline`: a release answered 0.4 ms after the cut). A task
/// that is stopped records nothing more: one being polled when it is stopped may finish that
/// poll, but what it records then answers a reply that had already arrived, so the server ran
/// the command before the witness's end marker and the witness read it.
struct StopOnDrop<'a>(&'a [JoinHandle<()>]);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        for t in self.0 {
            t.abort();
        }
    }
}

/// Waits until every client task has finished or its gate says it crashed (a crashed client
/// never finishes), but not past `end` on the run's clock; the clients still running then are
/// named in the history (each is judged as the history saw it: one waiting for the lock is a
/// liveness finding). Every client task is stopped when the wait ends or is dropped (a cut):
/// nothing a client does after the run's end reaches its history ([`StopOnDrop`]).
pub async fn wait_for_live_clients(
    rec: &Recorder,
    tasks: &[JoinHandle<()>],
    gates: &[Gate],
    end: Duration,
) {
    let _stop = StopOnDrop(tasks);
    let running = || {
        tasks
            .iter()
            .zip(gates)
            .enumerate()
            .filter(|(_, (t, g))| !t.is_finished() && !g.is_dead())
            .map(|(c, _)| c)
            .collect::<Vec<_>>()
    };
    let all = async {
        while !running().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(left(rec, end), all).await.is_err() {
        let names: Vec<String> = running().iter().map(|c| format!("client-{c}")).collect();
        note_cut(
            rec,
            end,
            &format!(
                "{} still running (stuck in a call, waiting for the lock or paused), stopped there",
                names.join(", ")
            ),
        );
    }
}

/// Lets the nemesis's faults under way finish (`settle`), but not past `end` on the run's
/// clock: what is still under way then (`what`: a server restart, a pause, an election) is
/// left as it stands and noted in the history.
pub(crate) async fn settle_by(
    rec: &Recorder,
    end: Duration,
    settle: impl Future<Output = ()>,
    what: &str,
) {
    if tokio::time::timeout(left(rec, end), settle).await.is_err() {
        note_cut(
            rec,
            end,
            &format!("{what} still under way, left as it stands"),
        );
    }
}

/// Runs `run`, one real run of `scenario`, cut at twice the most it can take
/// ([`estimate::real_most_ms`]: spawning its servers, its duration and the grace period) if it
/// gets that far, with a message naming the scenario and both figures. With the deadline above
/// kept, no run gets there: this is the backstop for a wait nobody bounded yet, so that a real
/// run is never again silent until killed. The cut is the thread's (`world::cut`), which ends
/// the run's waits for its clients and its nemesis; an earlier deadline already set there
/// (`explore --time-limit`) stays in force and is put back afterwards.
pub fn within_twice_estimate<T>(scenario: &Scenario, run: impl FnOnce() -> T) -> T {
    let estimate = Duration::from_millis(estimate::real_most_ms(scenario));
    let started = Instant::now();
    let backstop = started + 2 * estimate;
    let outer = cut::deadline();
    if outer.is_some_and(|o| o <= backstop) {
        return run();
    }
    cut::set_deadline(Some(backstop));
    let out = run();
    let was_cut = cut::take_cut();
    cut::set_deadline(outer);
    let took = started.elapsed();
    if was_cut || took > 2 * estimate {
        eprintln!(
            "lockcheck: {}: the real run took {:.1} s, past twice its estimate of at most {:.1} s \
             (spawning its servers, `duration_ms` and the grace period){}; please report this \
             (a wait without a bound)",
            scenario.name,
            took.as_secs_f64(),
            estimate.as_secs_f64(),
            if was_cut {
                format!(
                    ": cut at {:.1} s and judged as far as it got",
                    (2 * estimate).as_secs_f64()
                )
            } else {
                String::new()
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client still running when the run ends, or when its wait is dropped at a cut, records
    /// nothing more: without the stop, the task below goes on recording after the wait is gone.
    #[test]
    fn clients_are_stopped_at_the_end_and_at_a_cut() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let rec = Recorder::real();
            let busy = |rec: Recorder| {
                tokio::spawn(async move {
                    loop {
                        rec.record(
                            "client-0",
                            EventKind::Point {
                                name: "tick".into(),
                            },
                        );
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            };
            let count = |rec: &Recorder| rec.snapshot().events.len();
            // The wait ends at `end`.
            let tasks = vec![busy(rec.clone())];
            let end = Duration::from_micros(rec.now_us()) + Duration::from_millis(50);
            wait_for_live_clients(&rec, &tasks, &[Gate::default()], end).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(
                tasks[0].is_finished(),
                "the task runs on after the run's end"
            );
            // The wait is dropped before its end (a cut).
            let tasks = vec![busy(rec.clone())];
            let far = Duration::from_secs(3600);
            let gates = [Gate::default()];
            let wait = wait_for_live_clients(&rec, &tasks, &gates, far);
            let _ = tokio::time::timeout(Duration::from_millis(30), wait).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let after_cut = count(&rec);
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert!(tasks[0].is_finished(), "the task runs on after the cut");
            assert_eq!(count(&rec), after_cut, "events recorded after the cut");
        });
    }
}
