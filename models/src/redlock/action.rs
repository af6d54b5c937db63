//! The steps of the redlock model: client steps, true time, and faults.

/// A step of the redlock model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedlockAction {
    /// True time advances one tick: keys expire on each node's clock, holders whose validity ran
    /// out on their clock leave.
    Tick,
    /// `SET lock c NX PX ttl` on the client's next node; from idle, note
    /// the clock first (start acquiring). Noting the clock and sending the
    /// first `SET` are one step: a delay between them only moves the start
    /// earlier, which shortens the validity, so every violation with such
    /// a delay also happens without it.
    Lock(u8),
    /// Count the majority (and re-check the elapsed time).
    Finish(u8),
    /// Check validity before a write.
    Check(u8),
    /// The holder writes to the storage.
    Write(u8),
    /// Compare-and-delete on every node, and leave the critical section.
    Release(u8),
    /// A stop-the-world pause of the holder starts.
    Pause(u8),
    /// The paused client resumes.
    Resume(u8),
    /// `client_clock=lag`: the client's clock advances one tick.
    ClockAdvance(u8),
    /// The node's clock jumps forward by `jump` ticks.
    ClockJump(u8),
    /// The node crashes and restarts at once, without its keys (no
    /// persistence); with `restart_delay` it then refuses grants for a TTL.
    Crash(u8),
}
