//! Deterministic parallel execution of independent simulated runs.
//!
//! Seeds, scenarios and explore cases are independent of each other, so they can run on every
//! core. The result must not depend on how many threads ran them or in which order they
//! finished: [`run_ordered`] hands each finished item to the caller's fold in index order, so
//! `--jobs 1` and `--jobs 8` print the same bytes. [`Shard`] slices the work so that `n` CI jobs
//! together do exactly the work of one, and memory stays flat because results are folded as they
//! arrive instead of being collected.

mod distinct;
mod seed_set;
mod shard;

pub use distinct::DistinctCount;
pub use seed_set::SeedSet;
pub use shard::{Shard, ShardError};

use std::any::Any;
use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// How many worker threads `--jobs` means when it is not given: every core the OS reports.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// The memory the machine can still give, in bytes (`MemAvailable` of `/proc/meminfo`), where
/// the system says; `None` elsewhere.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// Runs `work` on every index in `indices` with `jobs` threads and feeds each result to `fold`
/// in the order of `indices`, whatever order they finished in.
///
/// Only results that finished ahead of a slower earlier item wait in memory, at most `4 * jobs`
/// of them, so aggregating 100,000 seeds never holds more than a few histories. `fold` returns `false` to stop
/// early (for example at the first violation); items after that index are not folded, so the
/// outcome is the same for every `jobs`.
///
/// A panic in `work` (on any thread) or in `fold` stops every worker and is raised again on the
/// caller's thread once they have all returned, so a bug in one run ends the process with its
/// panic message instead of leaving the fold waiting forever for the item that never came.
pub fn run_ordered<T, W, F>(indices: &[u64], jobs: usize, work: W, mut fold: F)
where
    T: Send,
    W: Fn(u64) -> T + Sync,
    F: FnMut(u64, T) -> bool,
{
    let jobs = jobs.max(1).min(indices.len().max(1));
    // A worker may run at most `window` items ahead of the fold, so a thread that stalls (a
    // slow case, or a descheduled thread on a loaded machine) cannot make the others pile up
    // finished histories: at most `window` results wait, whatever the number of items.
    let window = jobs * 4;
    let next = AtomicUsize::new(0);
    let folded = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut panicked: Option<Box<dyn Any + Send>> = None;
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(usize, std::thread::Result<T>)>(window);
        for _ in 0..jobs {
            let tx = tx.clone();
            let (next, folded, stop, work) = (&next, &folded, &stop, &work);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let position = next.fetch_add(1, Ordering::Relaxed);
                let Some(&index) = indices.get(position) else {
                    break;
                };
                // The item at the fold position is always running or done, so this ends (or
                // the fold has stopped, and `stop` says so).
                while position >= folded.load(Ordering::Acquire) + window {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                let result = panic::catch_unwind(AssertUnwindSafe(|| work(index)));
                let failed = result.is_err();
                if failed {
                    // The others stop drawing items at once; the fold gets the panic next.
                    stop.store(true, Ordering::Relaxed);
                }
                if tx.send((position, result)).is_err() || failed {
                    break;
                }
            });
        }
        drop(tx);
        // However the fold loop ends (done, stopped early, a worker's panic, or a panic in
        // `fold` itself), the workers are told to stop, so the scope's join never waits on a
        // worker spinning for a fold position that will not come.
        let _stop_on_exit = StopOnDrop(&stop);
        let mut waiting = BTreeMap::new();
        let mut expected = 0usize;
        for (position, result) in rx.iter() {
            let result = match result {
                Ok(result) => result,
                Err(payload) => {
                    panicked = Some(payload);
                    return;
                }
            };
            waiting.insert(position, result);
            while let Some(result) = waiting.remove(&expected) {
                if !fold(indices[expected], result) {
                    return;
                }
                expected += 1;
                folded.store(expected, Ordering::Release);
            }
        }
    });
    if let Some(payload) = panicked {
        panic::resume_unwind(payload);
    }
}

/// Sets the flag when dropped: the workers' signal to stop, on every way out of the fold loop.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(indices: &[u64], jobs: usize, stop_at: Option<u64>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        run_ordered(
            indices,
            jobs,
            |i| {
                // Uneven work so that threads finish out of order.
                let mut x = i;
                for _ in 0..(i % 7) * 2000 {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                }
                x
            },
            |i, x| {
                out.push((i, x));
                stop_at != Some(i)
            },
        );
        out
    }

    #[test]
    fn one_job_and_many_jobs_fold_the_same_sequence() {
        let indices: Vec<u64> = (0..500).collect();
        let one = folded(&indices, 1, None);
        assert_eq!(one.len(), 500);
        assert_eq!(one, folded(&indices, 4, None));
        assert_eq!(one, folded(&indices, 8, None));
    }

    #[test]
    fn stopping_early_stops_at_the_same_index_for_every_job_count() {
        let indices: Vec<u64> = (0..300).collect();
        let one = folded(&indices, 1, Some(123));
        assert_eq!(one.last().map(|p| p.0), Some(123));
        assert_eq!(one, folded(&indices, 6, Some(123)));
    }

    /// Runs `f` on its own thread and returns its panic message, failing (not hanging) if it
    /// has not returned within a minute.
    fn panic_message_of(f: impl FnOnce() + Send + 'static) -> String {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let r = panic::catch_unwind(AssertUnwindSafe(f));
            let _ = tx.send(r.err().map(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default()
            }));
        });
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("run_ordered hung after a panic")
            .expect("the panic reaches the caller")
    }

    #[test]
    fn a_panicking_worker_ends_the_run_with_its_panic_for_every_job_count() {
        for jobs in [1, 2, 4, 8] {
            let message = panic_message_of(move || {
                let indices: Vec<u64> = (0..10_000).collect();
                run_ordered(
                    &indices,
                    jobs,
                    |i| {
                        if i == 37 {
                            panic!("case {i} went wrong");
                        }
                        std::thread::sleep(std::time::Duration::from_micros(50));
                        i
                    },
                    |_, _| true,
                );
            });
            assert_eq!(message, "case 37 went wrong", "--jobs {jobs}");
        }
    }

    #[test]
    fn a_panicking_fold_stops_the_workers() {
        for jobs in [1, 3] {
            let message = panic_message_of(move || {
                let indices: Vec<u64> = (0..10_000).collect();
                run_ordered(
                    &indices,
                    jobs,
                    |i| i,
                    |i, _| {
                        assert!(i < 5, "fold gave up at {i}");
                        true
                    },
                );
            });
            assert_eq!(message, "fold gave up at 5", "--jobs {jobs}");
        }
    }

    #[test]
    fn union_of_shards_is_the_unsharded_run() {
        let total = 1001u64;
        let all: Vec<u64> = (0..total).collect();
        let whole = folded(&all, 3, None);
        for n in [1u32, 2, 3, 7] {
            let mut union = Vec::new();
            for i in 1..=n {
                let shard = Shard::parse(&format!("{i}/{n}")).unwrap();
                union.extend(folded(&shard.indices(total), 2, None));
            }
            union.sort();
            assert_eq!(union, whole, "shards of {n}");
        }
    }
}
