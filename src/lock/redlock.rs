//! Redlock: one lock over N independent Redis masters (seed 002; antirez, "Distributed locks with
//! Redis"; criticised in Kleppmann, "How to do distributed locking"; defended in antirez, "Is
//! Redlock safe?").
//!
//! Acquire, as the algorithm describes it:
//! 1. read the client's clock (`start`);
//! 2. send `SET key token NX PX ttl` to all N masters at once, each with a timeout that is small
//!    against the TTL, so a dead or unreachable master costs one timeout, not N of them (the
//!    attempt lasts as long as the slowest needed reply, never the sum);
//! 3. (`recheck_after_acquire`, antirez's step 3) read the clock again: the lock is acquired only
//!    if a majority said OK *and* `validity = ttl - (now - start) - drift` is still positive, where
//!    `drift = ttl * drift_factor + drift_ms` allows for the servers' clocks running at a slightly
//!    different rate than the client's;
//! 4. on failure, release on every master (a SET may have landed even where the reply was lost)
//!    and retry after a random delay, until the wait bound.
//!
//! The guard's `valid_until_ms` is `start + ttl - drift` on the client's clock: the end of the
//! validity time. Release runs the compare-and-delete script on every master.
//!
//! What this cannot prevent, and the scenarios in `scenarios/redlock-*.toml` show: a server clock
//! that jumps or runs faster than the drift allowance lets a key expire early; a master that
//! restarts empty within the TTL forgets a lock it granted; a holder that stalls after its last
//! validity check writes with an expired lease. Redlock issues no fencing token.
//!
//! Without `recheck_after_acquire` the client skips step 3: it treats a majority of OK replies
//! as the lock, whenever they were processed, and counts its lease from `start`. That is the
//! ablation that shows what step 3 is for (a client that stalls while the replies wait).

use super::set_nx_px::COMPARE_AND_DELETE;
use super::{Guard, Lock, LockConfig, LockError};
use crate::env::Env;
use redis::aio::ConnectionLike;
use std::time::Duration;

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
}

impl Default for RedlockOptions {
    fn default() -> Self {
        RedlockOptions {
            node_timeout: Duration::from_millis(50),
            drift_factor: 0.01,
            drift_ms: 2,
            recheck_after_acquire: true,
        }
    }
}

impl RedlockOptions {
    /// The drift allowance for a lease of `ttl_ms`: `ttl * drift_factor + drift_ms`, whole ms.
    pub fn drift_allowance_ms(&self, ttl_ms: u64) -> u64 {
        (ttl_ms as f64 * self.drift_factor).floor() as u64 + self.drift_ms
    }
}

/// What one master answered to `SET NX PX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Locked,
    /// Nil: another owner's key is there.
    Taken,
    /// No usable answer in time.
    Unknown,
}

/// One client's handle on a Redlock over `conns.len()` masters.
pub struct Redlock<C, E> {
    conns: Vec<C>,
    env: E,
    config: LockConfig,
    /// What each master answered in the last attempt.
    last: Vec<Answer>,
}

impl<C, E> Redlock<C, E> {
    /// `conns`: one connection per independent master.
    pub fn new(conns: Vec<C>, env: E, config: LockConfig) -> Self {
        assert!(!conns.is_empty(), "Redlock needs at least one master");
        Redlock {
            conns,
            env,
            config,
            last: Vec::new(),
        }
    }

    /// The masters (by index, in connection order) that granted the key in the last attempt.
    pub fn granted_by(&self) -> Vec<usize> {
        (self.last.iter().enumerate())
            .filter(|(_, &a)| a == Answer::Locked)
            .map(|(i, _)| i)
            .collect()
    }

    /// How many masters must agree: a strict majority.
    pub fn quorum(&self) -> usize {
        self.conns.len() / 2 + 1
    }
}

impl<C, E> Redlock<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    /// `SET NX PX` on every master at once; what each one answered.
    async fn lock_all(&mut self, owner: &str, ttl_ms: u64) -> Vec<Answer> {
        let timeout = self.config.redlock.node_timeout;
        let key = &self.config.key;
        let env = &self.env;
        let attempts = self.conns.iter_mut().map(|conn| async move {
            let mut cmd = redis::cmd("SET");
            cmd.arg(key).arg(owner).arg("NX").arg("PX").arg(ttl_ms);
            let set = async move { cmd.query_async::<Option<String>>(conn).await };
            match env.timeout(timeout, set).await {
                Some(Ok(Some(_))) => Answer::Locked,
                Some(Ok(None)) => Answer::Taken,
                // A timeout, a lost connection or a server error: not locked, as far as we know.
                _ => Answer::Unknown,
            }
        });
        futures::future::join_all(attempts).await
    }

    /// Compare-and-delete on the masters `which` selects, at once; how many deleted our entry.
    async fn unlock(&mut self, owner: &str, which: impl Fn(usize) -> bool) -> usize {
        let timeout = self.config.redlock.node_timeout;
        let key = &self.config.key;
        let env = &self.env;
        let selected = self
            .conns
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| which(*i))
            .map(|(_, c)| c);
        let attempts = selected.map(|conn| async move {
            let mut invocation = COMPARE_AND_DELETE.key(key);
            invocation.arg(owner);
            let del = async move { invocation.invoke_async::<i64>(conn).await };
            matches!(env.timeout(timeout, del).await, Some(Ok(1)))
        });
        futures::future::join_all(attempts)
            .await
            .into_iter()
            .filter(|&d| d)
            .count()
    }
}

impl<C, E> Lock for Redlock<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let drift = self.config.redlock.drift_allowance_ms(ttl_ms);
        let recheck = self.config.redlock.recheck_after_acquire;
        let deadline = self.env.now_ms() + self.config.wait.as_millis() as u64;
        loop {
            let start = self.env.now_ms();
            let locked = self.lock_all(&owner, ttl_ms).await;
            let granted = locked.iter().filter(|&&a| a == Answer::Locked).count();
            self.last.clone_from(&locked);
            let valid_until = (start + ttl_ms).saturating_sub(drift);
            let in_time = !recheck || self.env.now_ms() < valid_until;
            if granted >= self.quorum() && in_time {
                return Ok(Some(Guard {
                    owner,
                    fencing_token: None,
                    acquired_at_ms: start,
                    valid_until_ms: valid_until,
                }));
            }
            // Undo where we hold the key, and where a SET whose reply was lost may have landed.
            if locked.iter().any(|&a| a != Answer::Taken) {
                self.unlock(&owner, |i| locked[i] != Answer::Taken).await;
            }
            if self.env.now_ms() >= deadline {
                return Ok(None);
            }
            let (lo, hi) = self.config.retry;
            let pause = self
                .env
                .random_range(lo.as_millis() as u64, hi.as_millis() as u64);
            self.env.sleep(Duration::from_millis(pause)).await;
        }
    }

    /// Deletes our entry on every master; `true` when a majority still had it (the lease had not
    /// run out on most of them).
    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deleted = self.unlock(&guard.owner, |_| true).await;
        Ok(deleted >= self.quorum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_allowance_is_the_reference_formula() {
        let o = RedlockOptions::default();
        assert_eq!(o.drift_allowance_ms(10_000), 102);
        assert_eq!(o.drift_allowance_ms(3_000), 32);
        assert_eq!(o.drift_allowance_ms(50), 2);
    }
}
