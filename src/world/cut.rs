//! Cutting a simulated run at a wall-clock deadline (`explore --time-limit`). A valid scenario
//! can hold one run for a minute of wall time (Redisson renewing a lease through a critical
//! section of 10^9 ms: 65 s on this machine), so a time limit that is checked only between runs
//! does not bind. With a deadline set on the thread that runs the simulation, the run's wait for
//! its clients ends when the deadline passes, as it ends when the grace period runs out for a
//! client that is stuck: the run's end and the resource's final state are recorded and the
//! history so far is judged. What a cut run judges is a prefix of the whole run, and a violation
//! in it is one of the whole run too (the simulation before the cut is the same).
//!
//! The deadline is per thread because a simulation runs on the thread that calls it (madsim's
//! executor is single-threaded), and `explore --jobs N` runs N at once. A real run is cut the
//! same way: its world drives the run with `block_on` on the calling thread, where the deadline
//! is set, and [`Signal`] reads the clock when the run's wait for its clients wakes it. The simulation asks
//! whether the deadline has passed where it already does work for every step that takes time
//! (each sleep and timeout a node arms, each request a client sends): with no deadline set that
//! is a thread-local read, and the run's events and trace are the same as without this module.
//!
//! Inside a simulation `Instant::now()` is madsim's simulated time (it intercepts the libc
//! clock), which passes days in a second of wall time, so the deadline is kept and compared as
//! the kernel's monotonic clock, read with the system call itself.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// The state of the thread's cut.
#[derive(Default)]
struct Cut {
    /// When runs on this thread are cut, in ns of the kernel's monotonic clock; `None`: never.
    deadline: Option<u128>,
    /// The current run was cut.
    cut: bool,
    /// The run's wait for its clients, woken when the deadline is seen passed.
    waiter: Option<Waker>,
    /// Calls since the clock was last read: it is read once every [`READ_EVERY`] calls.
    calls: u32,
}

/// The wall clock is read once per this many steps of the simulation (a few microseconds of
/// simulation each), so checking costs nothing measurable.
const READ_EVERY: u32 = 64;

thread_local! {
    static CUT: RefCell<Cut> = RefCell::new(Cut::default());
}

/// The kernel's monotonic clock in ns, read past madsim's interception of the libc clock.
fn kernel_now_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a live one; the raw system call is what
    // madsim cannot intercept.
    unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_MONOTONIC,
            &mut ts as *mut libc::timespec,
        );
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32).as_nanos()
}

/// Cuts the simulated runs this thread makes from now on at `deadline` (`None`: never). Called
/// outside a simulation, where `Instant` is the wall clock.
pub fn set_deadline(deadline: Option<Instant>) {
    let deadline =
        deadline.map(|d| kernel_now_ns() + d.saturating_duration_since(Instant::now()).as_nanos());
    CUT.with(|c| {
        let mut c = c.borrow_mut();
        c.deadline = deadline;
        c.cut = false;
        c.waiter = None;
    });
}

/// The deadline set on this thread, if any (one already passed reads as now): so that a
/// tighter deadline of its own (the real-mode backstop, `real::run_end`) can be set for one run
/// and this one put back after it.
pub fn deadline() -> Option<Instant> {
    let ns = CUT.with(|c| c.borrow().deadline)?;
    let left = ns.saturating_sub(kernel_now_ns());
    Some(Instant::now() + Duration::from_nanos(left.min(u64::MAX as u128) as u64))
}

/// Whether the last run on this thread was cut at the deadline; resets the flag.
pub fn take_cut() -> bool {
    CUT.with(|c| std::mem::take(&mut c.borrow_mut().cut))
}

/// A step of the simulation: once the deadline has passed, marks the run cut and wakes its wait.
pub fn check() {
    CUT.with(|c| {
        let mut c = c.borrow_mut();
        let Some(deadline) = c.deadline else { return };
        if c.cut {
            return;
        }
        c.calls += 1;
        if c.calls < READ_EVERY {
            return;
        }
        c.calls = 0;
        if kernel_now_ns() >= deadline {
            c.cut = true;
            if let Some(w) = c.waiter.take() {
                w.wake();
            }
        }
    });
}

/// A future that completes when the run is cut: never, with no deadline.
pub fn signal() -> Signal {
    Signal
}

/// See [`signal`].
pub struct Signal;

impl Future for Signal {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        CUT.with(|c| {
            let mut c = c.borrow_mut();
            if c.cut {
                return Poll::Ready(());
            }
            // A real run's steps do not call `check` (no simulation ticks), but its wait for
            // the clients wakes the run every few milliseconds, and `select` polls this each
            // time: the clock is read here too, so a real run is cut within one such wake-up.
            if let Some(deadline) = c.deadline {
                if kernel_now_ns() >= deadline {
                    c.cut = true;
                    return Poll::Ready(());
                }
                c.waiter = Some(cx.waker().clone());
            }
            Poll::Pending
        })
    }
}
