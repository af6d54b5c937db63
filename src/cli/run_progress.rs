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
/// scenario's duration it has got. Always shown when [`crate::progress::EVERY_VAR`] is set.
pub fn watched<T>(scenario: &Scenario, runs: u64, f: impl FnOnce() -> T) -> T {
    let asked = std::env::var_os(crate::progress::EVERY_VAR).is_some();
    let long = crate::world::estimate::time_estimate_s(scenario) >= WATCH_FROM_S;
    if runs != 1 || !(long || asked) {
        return f();
    }
    let total_ms = scenario.duration_ms;
    let poll = crate::progress::every().min(Duration::from_millis(100));
    watch::start();
    let result = std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        scope.spawn(move || {
            let bar = crate::progress::bar(total_ms, "ms of the run", &scenario.name);
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(poll) {
                let (_, last_us) = watch::progress();
                bar.tick((last_us / 1000).min(total_ms), None);
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
