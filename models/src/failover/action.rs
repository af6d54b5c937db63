//! The steps of the failover model: client steps, replication, true time,
//! and the failover.

/// A step of the failover model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailoverAction {
    /// True time advances one tick: keys expire on each node's clock, holders whose lease ran out
    /// leave.
    Tick,
    /// `SET lock c NX PX ttl` on the current master.
    Acquire(u8),
    /// `WAIT` returns with enough acknowledgements.
    WaitOk(u8),
    /// `WAIT` returns at its timeout short of acknowledgements.
    WaitTimeout(u8),
    /// `WAIT` fails: the master it was sent to died.
    WaitError(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// Compare-and-delete on the current master, and leave the critical section.
    Release(u8),
    /// The next log entry reaches replica node `n`.
    Replicate(u8),
    /// The master dies; node `n` is promoted.
    Failover(u8),
    /// The dead old master restarts empty and rejoins as a replica of the
    /// new master (full resync), as Sentinel reconfigures it.
    Rejoin(u8),
}
