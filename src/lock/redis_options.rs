//! The options of the Redis locks that the `[lock]` table carries, and the names of the kinds
//! whose keys those are.
//!
//! The locks themselves live in their backend's folder (`backend::redis::lock`); their options
//! stay here, beside the `[lock]` table that carries their keys (`LockConfig::redlock` is one),
//! as the MySQL locks' do (`mysql_options.rs`), so that the table and its checks need nothing
//! above them.

use std::time::Duration;

/// `kind = "set-nx-px"`: the only lease lock that takes `wait_replicas` besides Redisson.
pub const SET_NX_PX: &str = "set-nx-px";
/// `kind = "redisson"`: takes `wait_replicas`, `wait_timeout_ms` and `unsynced_attempt`.
pub const REDISSON: &str = "redisson";
/// `kind = "redlock"`: takes the Redlock keys (`node_timeout_ms`, `drift_factor`, `drift_ms`,
/// `recheck_after_acquire`).
pub const REDLOCK: &str = "redlock";

/// Redisson's default `lockWatchdogTimeout` (ms): the lease of a lock taken without one.
pub const DEFAULT_WATCHDOG_TIMEOUT_MS: u64 = 30_000;

/// Redlock's own parameters (the scenario's `[lock]` keys of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct RedlockOptions {
    /// Per-master bound on one request, on the client's clock.
    pub node_timeout: Duration,
    /// Part of the TTL allowed for clock-rate differences (0.01 in the reference).
    pub drift_factor: f64,
    /// Fixed part of the drift allowance, ms (2 in the reference).
    pub drift_ms: u64,
    /// Antirez's step 3: re-read the clock after the replies and require validity left.
    pub recheck_after_acquire: bool,
    /// A bug planted on purpose, for lockcheck's own mutant tests (`tests/sim/mutants.rs`): a
    /// check is worth something only if it catches these. No scenario key sets it.
    #[doc(hidden)]
    pub planted: Option<RedlockBug>,
}

/// A mistake a Redlock implementation can make, planted by the mutant tests (never by a scenario).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedlockBug {
    /// The quorum is `N / 2` instead of `N / 2 + 1`: two clients can each count half of the
    /// masters (of three masters, one) as a majority.
    QuorumOneShort,
    /// The validity time is counted from when the replies arrived instead of from before the
    /// requests were sent: the time spent acquiring is not taken off the lease, so a slow
    /// acquisition leaves the holder believing in a lease that has already partly run out.
    ValidityNotReducedByAcquireTime,
}

impl Default for RedlockOptions {
    fn default() -> Self {
        RedlockOptions {
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            drift_ms: 2,
            recheck_after_acquire: true,
            planted: None,
        }
    }
}

impl RedlockOptions {
    /// The drift allowance for a lease of `ttl_ms`: `ttl * drift_factor + drift_ms`, whole ms.
    pub fn drift_allowance_ms(&self, ttl_ms: u64) -> u64 {
        (ttl_ms as f64 * self.drift_factor).floor() as u64 + self.drift_ms
    }
}
