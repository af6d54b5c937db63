//! How far the run being recorded has got, for a command that shows a long run's progress: the
//! events recorded so far and the true time of the last one. Counted only while someone watches
//! ([`start`]), so the thousands of runs of a search pay one relaxed load per event and share no
//! counter between threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

static WATCHED: AtomicBool = AtomicBool::new(false);
static EVENTS: AtomicU64 = AtomicU64::new(0);
static LAST_US: AtomicU64 = AtomicU64::new(0);

/// Starts counting from zero (one run at a time is watched).
pub fn start() {
    EVENTS.store(0, Relaxed);
    LAST_US.store(0, Relaxed);
    WATCHED.store(true, Relaxed);
}

/// Stops counting.
pub fn stop() {
    WATCHED.store(false, Relaxed);
}

/// Events recorded since [`start`], and the true time (µs since its run started) of the last.
pub fn progress() -> (u64, u64) {
    (EVENTS.load(Relaxed), LAST_US.load(Relaxed))
}

/// Counts an event stamped `at_us`, when watched.
#[inline]
pub(super) fn recorded(at_us: u64) {
    if WATCHED.load(Relaxed) {
        EVENTS.fetch_add(1, Relaxed);
        LAST_US.fetch_max(at_us, Relaxed);
    }
}
