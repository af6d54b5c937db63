//! Messages on the wire, run at their arrival time without a timer of their own.
//!
//! A simulated round trip used to be two sleeps of the client's task: one to the server, where the
//! request ran, and one back. A sleep is a madsim timer and a task poll, so every round trip paid
//! twice. Now the client sends its request here with its arrival time and sleeps once, until the
//! reply is due; the request itself runs on the server *lazily but exactly on time*: before
//! anything at a later time can observe or change what it touches, every message due by then is
//! run, in arrival order, with the simulator's clock reading its arrival time.
//!
//! "Before anything can observe" is kept by [`settle`]: everything that reads or changes a
//! server's state (the cluster's and the storage's every entry point), the network's links, a
//! node's clock, or the history (the recorder's clock) calls it first. Since a message arrives at
//! least one millisecond after it is sent, a settle at time `t` leaves nothing due at `t`, so a
//! later settle at the same instant (inside a locked section, say) runs nothing.
//!
//! What runs on the wire must not wait: commands a server holds (`WAIT`, `BLPOP`) keep the
//! client-driven path. What runs here may schedule follow-ups (a replication batch, a pub/sub
//! message), which read the arrival time as "now" and so are timed from the arrival, not from
//! whenever the message was run.
//!
//! A request on the wire belongs to the network, not to its client: a client paused after sending
//! (a GC pause, `SIGSTOP`) does not hold it back; the server runs it on arrival and only the
//! reading of the reply waits for the client, as on a real server.
//!
//! One simulation runs on one thread (madsim's executor), so the wire is per thread; each run
//! starts and ends with an empty one ([`reset`]).

use madsim::time::{Instant, TimeHandle};
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Running a message on its server.
pub enum Delivery {
    /// A client's request, run by its connection's shared state (`arrive(server, seq)`): sending
    /// it takes a reference count, not an allocation, and every simulated round trip sends one.
    Request(Arc<dyn Arrive>, usize, u64),
    /// Anything else (a storage request, a replication batch, an abandoned request's copy).
    Once(Box<dyn FnOnce()>),
}

impl Delivery {
    fn run(self) {
        match self {
            Delivery::Request(to, server, seq) => to.arrive(server, seq),
            Delivery::Once(f) => f(),
        }
    }
}

/// What runs a client's request when it arrives at `server`; `seq` tells the request apart from
/// the client's later ones.
pub trait Arrive {
    /// Runs the request numbered `seq` on `server`, at its arrival (the clock reads it).
    fn arrive(&self, server: usize, seq: u64);
}

/// A message not yet run, ordered so that the heap's top is the earliest arrival, then the
/// earliest sent.
struct Pending {
    at: Instant,
    seq: u64,
    deliver: Delivery,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Pending {}

impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pending {
    /// Reversed: `BinaryHeap` is a max-heap, and the earliest message must come out first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

thread_local! {
    /// Messages not yet run, earliest arrival (then earliest sent) on top. A heap rather than an
    /// ordered map: a handful of messages are in flight at a time, and the heap keeps its buffer
    /// where a map would allocate a node whenever it fills up from empty, every round trip.
    static PENDING: RefCell<BinaryHeap<Pending>> = const { RefCell::new(BinaryHeap::new()) };
    /// The earliest arrival pending (`None`: nothing), read on every settle without a borrow.
    static NEXT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Messages sent so far: the tie-break for equal arrival times.
    static SENT: Cell<u64> = const { Cell::new(0) };
    /// The arrival time of the message being run, which the simulator's clock reads meanwhile.
    static RUNNING_AT: Cell<Option<Instant>> = const { Cell::new(None) };
    /// The running simulation's time, kept from [`start`]: every settle reads the clock, and
    /// `Instant::now()` finds madsim's runtime through its `clock_gettime` hook each time.
    static CLOCK: RefCell<Option<TimeHandle>> = const { RefCell::new(None) };
}

/// True time now, through the kept handle when a simulation has started on this thread.
fn true_now() -> Instant {
    CLOCK
        .with_borrow(|c| c.as_ref().map(TimeHandle::now_instant))
        .unwrap_or_else(Instant::now)
}

/// Puts a message on the wire: `deliver` runs at `arrival` (see the module docs).
pub fn send(arrival: Instant, deliver: Delivery) {
    let seq = SENT.get();
    SENT.set(seq + 1);
    PENDING.with_borrow_mut(|p| {
        p.push(Pending {
            at: arrival,
            seq,
            deliver,
        })
    });
    if NEXT.get().is_none_or(|n| arrival < n) {
        NEXT.set(Some(arrival));
    }
}

/// Runs every message due by `now` (the simulator's true time), in arrival order, each with the
/// clock reading its arrival. A no-op while a message runs (it is itself on time).
pub fn settle_until(now: Instant) {
    if NEXT.get().is_none_or(|n| n > now) || RUNNING_AT.get().is_some() {
        return;
    }
    loop {
        let next = PENDING.with_borrow_mut(|p| {
            if p.peek()?.at > now {
                return None;
            }
            p.pop().map(|m| (m.at, m.deliver))
        });
        let Some((at, deliver)) = next else { break };
        RUNNING_AT.set(Some(at));
        deliver.run();
        RUNNING_AT.set(None);
    }
    NEXT.set(PENDING.with_borrow(|p| p.peek().map(|m| m.at)));
}

/// Runs every message due now. Call before reading or changing anything a message may touch.
pub fn settle() {
    if NEXT.get().is_none() || RUNNING_AT.get().is_some() {
        return;
    }
    settle_until(true_now());
}

/// The simulator's "now": the arrival time of the message being run, else the true time.
pub fn now() -> Instant {
    RUNNING_AT.get().unwrap_or_else(true_now)
}

/// The arrival time of the message being run, if one is: the simulator's "now" meanwhile.
pub fn running_at() -> Option<Instant> {
    RUNNING_AT.get()
}

/// Empties the wire (messages of an earlier run on this thread are dropped unrun).
pub fn reset() {
    let dropped = PENDING.with_borrow_mut(std::mem::take);
    NEXT.set(None);
    SENT.set(0);
    RUNNING_AT.set(None);
    CLOCK.set(None);
    drop(dropped);
}

/// Starts a simulation's wire on this thread: empty, on the running madsim runtime's clock. Call
/// inside the runtime.
pub fn start() {
    reset();
    CLOCK.set(Some(TimeHandle::current()));
}

/// Copies `cmd`'s arguments into `buf`, reusing its vectors; returns how many there are (the
/// first that many of `buf`). Every simulated command goes through here.
#[inline]
pub(crate) fn fill_args(buf: &mut Vec<Vec<u8>>, cmd: &redis::Cmd) -> usize {
    let mut n = 0;
    for a in cmd.args_iter() {
        let bytes: &[u8] = match a {
            redis::Arg::Simple(b) => b,
            // A cursor argument (SCAN family); the locks never use one.
            _ => b"0",
        };
        match buf.get_mut(n) {
            Some(to) => {
                to.clear();
                to.extend_from_slice(bytes);
            }
            None => buf.push(bytes.to_vec()),
        }
        n += 1;
    }
    n
}
