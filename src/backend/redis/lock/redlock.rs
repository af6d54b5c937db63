//! Redlock: one lock over N independent Redis masters (the Redlock article; antirez, "Distributed locks with
//! Redis"; criticised in Kleppmann, "How to do distributed locking"; defended in antirez, "Is
//! Redlock safe?").
//!
//! Acquire, as the algorithm describes it:
//! 1. read the client's clock (`start`);
//! 2. send `SET key token NX PX ttl` to all N masters at once, each with a timeout that is small
//!    against the TTL, so a dead or unreachable master costs one timeout, not N of them. The
//!    attempt lasts until a majority has said OK (the slowest *needed* reply, never the sum);
//!    the requests still in flight then finish in the background, and their connections return
//!    before the next operation, so a SET that lands late is still released;
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

use crate::env::Env;
use crate::lock::lease::{COMPARE_AND_DELETE, COMPARE_AND_DELETE_SOURCE};
use crate::lock::{Guard, Lock, LockConfig, LockError, Next, Wait};
use futures::stream::{FuturesUnordered, StreamExt};
use redis::aio::ConnectionLike;
use std::time::Duration;

pub use crate::lock::redis_options::{RedlockBug, RedlockOptions};

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
    /// One connection per master; `None` while a request on it is still in flight in the
    /// background (or if that task died with its node).
    conns: Vec<Option<C>>,
    env: E,
    config: LockConfig,
    /// What each master answered in the last attempt, by the time it returned.
    last: Vec<Answer>,
    /// The connections of requests that outlived the last attempt come back through here.
    stragglers: Option<futures::channel::oneshot::Receiver<Vec<(usize, C)>>>,
}

/// The kind's scenario-file name.
pub const NAME: &str = crate::lock::redis_options::REDLOCK;

impl<C, E> Redlock<C, E> {
    /// `conns`: one connection per independent master.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        assert!(!conns.is_empty(), "Redlock needs at least one master");
        Redlock {
            conns: conns.into_iter().map(Some).collect(),
            env,
            config,
            last: Vec::new(),
            stragglers: None,
        }
    }

    /// The masters (by index, in connection order) that had granted the key when the last
    /// attempt returned.
    pub fn granted_by(&self) -> Vec<usize> {
        (self.last.iter().enumerate())
            .filter(|(_, &a)| a == Answer::Locked)
            .map(|(i, _)| i)
            .collect()
    }

    /// How many masters must agree: a strict majority.
    pub fn quorum(&self) -> usize {
        if self.config.redlock.planted == Some(RedlockBug::QuorumOneShort) {
            return (self.conns.len() / 2).max(1);
        }
        self.conns.len() / 2 + 1
    }
}

impl<C, E> Redlock<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    /// Waits until the requests a previous attempt left in flight are done, and takes their
    /// connections back. Each is bounded by the per-master timeout.
    async fn reclaim(&mut self) {
        if let Some(rx) = self.stragglers.take() {
            if let Ok(back) = rx.await {
                for (i, conn) in back {
                    self.conns[i] = Some(conn);
                }
            }
        }
    }

    /// Sends `cmd` to every master `which` selects, at once, each bounded by the per-master
    /// timeout. Answers come back in arrival order; `enough` says when to stop waiting: the
    /// requests still in flight then finish in a background task. Unselected masters, and those
    /// without a connection, answer [`Answer::Unknown`] without a request.
    async fn broadcast(
        &mut self,
        cmd: redis::Cmd,
        which: impl Fn(usize) -> bool,
        mut enough: impl FnMut(&[Answer]) -> bool,
    ) -> Vec<Answer> {
        self.reclaim().await;
        let timeout = self.config.redlock.node_timeout;
        let mut answers = vec![Answer::Unknown; self.conns.len()];
        let mut pending = FuturesUnordered::new();
        for (i, slot) in self.conns.iter_mut().enumerate() {
            if which(i) {
                if let Some(conn) = slot.take() {
                    pending.push(request(i, conn, self.env.clone(), timeout, cmd.clone()));
                }
            }
        }
        while let Some((i, conn, answer)) = pending.next().await {
            self.conns[i] = Some(conn);
            answers[i] = answer;
            if !pending.is_empty() && enough(&answers) {
                let (tx, rx) = futures::channel::oneshot::channel();
                self.env.spawn(async move {
                    let mut back = Vec::new();
                    while let Some((i, conn, _)) = pending.next().await {
                        back.push((i, conn));
                    }
                    let _ = tx.send(back);
                });
                self.stragglers = Some(rx);
                break;
            }
        }
        answers
    }

    /// `SET NX PX` on every master at once, until a majority has granted it or every master
    /// has answered.
    async fn lock_all(&mut self, owner: &str, ttl_ms: u64) -> Vec<Answer> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(&self.config.key)
            .arg(owner)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        let quorum = self.quorum();
        let granted = move |a: &[Answer]| a.iter().filter(|&&x| x == Answer::Locked).count();
        self.broadcast(cmd, |_| true, move |a| granted(a) >= quorum)
            .await
    }

    /// Compare-and-delete on the masters `which` selects, at once; how many deleted our entry.
    async fn unlock(&mut self, owner: &str, which: impl Fn(usize) -> bool) -> usize {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(COMPARE_AND_DELETE.get_hash())
            .arg(1)
            .arg(&self.config.key)
            .arg(owner);
        let answers = self.broadcast(cmd, which, |_| false).await;
        answers.iter().filter(|&&a| a == Answer::Locked).count()
    }
}

/// One request to one master, owning its connection for the time it is in flight. For `SET NX`,
/// OK is [`Answer::Locked`] and nil [`Answer::Taken`]; for the release script, 1 (deleted) is
/// `Locked` and 0 is `Taken`. A script the server does not know yet is loaded and retried.
async fn request<C, E>(
    i: usize,
    mut conn: C,
    env: E,
    timeout: Duration,
    cmd: redis::Cmd,
) -> (usize, C, Answer)
where
    C: ConnectionLike + Send + 'static,
    E: Env,
{
    let exchange = async {
        let reply = cmd.query_async::<redis::Value>(&mut conn).await;
        match reply {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(COMPARE_AND_DELETE_SOURCE);
                load.query_async::<String>(&mut conn).await?;
                cmd.query_async::<redis::Value>(&mut conn).await
            }
            other => other,
        }
    };
    let answer = match env.timeout(timeout, exchange).await {
        Some(Ok(redis::Value::Okay)) | Some(Ok(redis::Value::Int(1))) => Answer::Locked,
        Some(Ok(redis::Value::Nil)) | Some(Ok(redis::Value::Int(0))) => Answer::Taken,
        // A timeout, a lost connection or a server error: not known.
        _ => Answer::Unknown,
    };
    (i, conn, answer)
}

impl<C, E> Lock for Redlock<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "SET NX PX on N independent masters in parallel; a majority within the validity time (the Redlock article)";
    const RENEWS: bool = false;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let drift = self.config.redlock.drift_allowance_ms(ttl_ms);
        let recheck = self.config.redlock.recheck_after_acquire;
        // The wait bound's own handles: the attempts below borrow the whole lock.
        let (env, config) = (self.env.clone(), self.config.clone());
        let wait = Wait::start(&env, &config);
        loop {
            let start = self.env.monotonic_ms();
            let locked = self.lock_all(&owner, ttl_ms).await;
            let granted = locked.iter().filter(|&&a| a == Answer::Locked).count();
            self.last.clone_from(&locked);
            let counted_from = match self.config.redlock.planted {
                Some(RedlockBug::ValidityNotReducedByAcquireTime) => self.env.monotonic_ms(),
                _ => start,
            };
            let valid_until = (counted_from + ttl_ms).saturating_sub(drift);
            let in_time = !recheck || self.env.monotonic_ms() < valid_until;
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
            // No quorum is a "taken" answer: pause and retry within the wait bound.
            match wait.next(Ok::<Option<()>, redis::RedisError>(None)).await? {
                Next::GaveUp => return Ok(None),
                Next::Again | Next::Granted(()) => {}
            }
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
