//! The progress of one long run. `run --seeds N` shows its seeds going by, but a single run of a
//! large workload can take minutes with nothing to show until its report; when its estimate
//! (`world::estimate`) says it will be long, the run's own time is followed instead (from the
//! events it records, `history::watch`) and shown like any other progress: a bar on a terminal,
//! a plain line every few seconds in a log.

use crate::history::watch;
use crate::scenario::Scenario;
use std::sync::mpsc;
use std::time::Duration;

/// A single run estimated to take at least this many seconds shows its progress.
pub const WATCH_FROM_S: f64 = 10.0;

/// Runs `f`, the `runs` runs of `scenario`; while the one run is long, shows how far into the
/// scenario's duration it has got. Always shown when [`crate::progress::EVERY_VAR`] is set. A
/// real run (`real`) is followed on the wall clock against the most it can take
/// ([`crate::world::estimate::real_most_ms`]: its servers' spawn, its duration and the grace
/// period), so the bar moves, and its end nears, even while no client records anything (every
/// client stuck, a server down for good).
pub fn watched<T>(scenario: &Scenario, runs: u64, real: bool, f: impl FnOnce() -> T) -> T {
    let asked = std::env::var_os(crate::progress::EVERY_VAR).is_some();
    let estimate_s = if real {
        crate::world::estimate::real_run_ms(scenario) as f64 / 1000.0
    } else {
        crate::world::estimate::time_estimate_s(scenario)
    };
    let long = estimate_s >= WATCH_FROM_S;
    if runs != 1 || !(long || asked) {
        return f();
    }
    let total_ms = if real {
        crate::world::estimate::real_most_ms(scenario)
    } else {
        scenario.duration_ms
    };
    let poll = crate::progress::every().min(Duration::from_millis(100));
    watch::start();
    let started = std::time::Instant::now();
    let result = std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        scope.spawn(move || {
            let bar = crate::progress::bar(total_ms, "ms of the run", &scenario.name);
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(poll) {
                let done_ms = if real {
                    started.elapsed().as_millis() as u64
                } else {
                    watch::progress().1 / 1000
                };
                bar.tick(done_ms.min(total_ms), None);
            }
            bar.finish();
        });
        let result = f();
        drop(stop);
        result
    });
    watch::stop();
    result
}
