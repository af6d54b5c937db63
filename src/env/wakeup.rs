//! Simulated sleeps that tell an enclosing timeout when they will wake the task.
//!
//! A madsim timer cannot be cancelled: a timeout's timer, once armed, fires at its deadline even
//! when the task it bounds finished long before, and wakes the client for nothing. Redlock bounds
//! every request to every master that way, so most of its timers were such leftovers. Yet a
//! timeout needs no timer of its own while the task it bounds has armed one that fires no later
//! than the deadline: the task is woken then anyway and the timeout looks again. [`Wakeup`] is a
//! madsim sleep that notes its deadline when it arms its timer, and [`watch`] lets a timeout see
//! the earliest one armed while it polled its task ([`crate::sim::SimEnv`]'s `timeout`). When the
//! outcome is decided before the deadline, as it is for a request whose round trip fits in it,
//! the timeout costs no timer at all.

use madsim::time::{Instant, Sleep};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// The earliest deadline a [`Wakeup`] armed since the innermost [`watch`] began.
    static ARMED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// A madsim sleep that reports the deadline it armed (see the module's doc).
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Wakeup {
    sleep: Sleep,
}

impl Wakeup {
    /// Wraps a madsim sleep.
    pub fn new(sleep: Sleep) -> Wakeup {
        Wakeup { sleep }
    }

    /// When it fires.
    pub fn sleep_deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Whether its deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        self.sleep.is_elapsed()
    }
}

impl Future for Wakeup {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let polled = Pin::new(&mut self.sleep).poll(cx);
        if polled.is_pending() {
            // Pending means madsim has just armed a timer that wakes this task at the deadline.
            note(self.sleep.deadline());
        }
        polled
    }
}

fn note(deadline: Instant) {
    ARMED.with(|c| c.set(Some(c.get().map_or(deadline, |t| t.min(deadline)))));
}

/// Runs `f` (a poll of a task) and returns its result with the earliest deadline a [`Wakeup`]
/// armed during it, if any. A watch around it (a timeout around a timeout) sees it too.
pub fn watch<R>(f: impl FnOnce() -> R) -> (R, Option<Instant>) {
    let outer = ARMED.with(Cell::take);
    let out = f();
    let inner = ARMED.with(Cell::get);
    ARMED.with(|c| {
        c.set(match (outer, inner) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    });
    (out, inner)
}
