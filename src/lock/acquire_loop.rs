//! The acquire loop the Redis lease locks share: send the locking request, and on "taken" or on
//! no answer pause a random retry interval and try again, until the wait bound on the client's
//! own monotonic clock has passed. Each lock file keeps its article's protocol (which request,
//! what a grant looks like); only the waiting is here.

use super::{LockConfig, LockError};
use crate::env::Env;
use std::time::Duration;

/// Whether a Redis error means "no answer" (timeout, connection lost), after which an attempt may
/// be retried, rather than a reply the lock must not ignore.
pub fn is_transient(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

/// Between two acquire attempts: `false` once the wait bound (`deadline`, on the client's own
/// clock) has passed; otherwise sleeps a uniformly random retry pause, so that contending clients
/// do not retry in lockstep, and returns `true`.
pub(crate) async fn retry_pause<E: Env>(env: &E, config: &LockConfig, deadline: u64) -> bool {
    if env.monotonic_ms() >= deadline {
        return false;
    }
    let (lo, hi) = config.retry;
    let pause = env.random_range(lo.as_millis() as u64, hi.as_millis() as u64);
    env.sleep(Duration::from_millis(pause)).await;
    true
}

/// What to do after one attempt.
pub(crate) enum Next<T> {
    /// The lock was granted.
    Granted(T),
    /// Taken, or no answer: the retry pause has been slept, try again.
    Again,
    /// The wait bound has passed: give up.
    GaveUp,
}

/// The wait bound of one `acquire`, on the client's own monotonic clock. A lock's loop reads the
/// start of each attempt from its clock, sends its request, and hands the reply to [`Self::next`]:
///
/// ```ignore
/// let wait = Wait::start(&self.env, &self.config);
/// loop {
///     let started = self.env.monotonic_ms();
///     match wait.next(request.query_async(&mut self.conn).await).await? {
///         Next::Granted(reply) => return Ok(Some(/* the guard, from `started` */)),
///         Next::Again => {}
///         Next::GaveUp => return Ok(None),
///     }
/// }
/// ```
pub(crate) struct Wait<'a, E> {
    env: &'a E,
    config: &'a LockConfig,
    deadline: u64,
}

impl<'a, E: Env> Wait<'a, E> {
    /// The wait of an `acquire` starting now.
    pub(crate) fn start(env: &'a E, config: &'a LockConfig) -> Self {
        let deadline = env.monotonic_ms() + config.wait.as_millis() as u64;
        Wait {
            env,
            config,
            deadline,
        }
    }

    /// After one attempt's `reply`: a grant (`Ok(Some(_))`) ends the loop; a "taken" answer
    /// (`Ok(None)`) or a transient error (no answer: the request may or may not have run) pauses
    /// and tries again until the bound passes; any other error is the lock's to report.
    pub(crate) async fn next<T>(
        &self,
        reply: Result<Option<T>, redis::RedisError>,
    ) -> Result<Next<T>, LockError> {
        match reply {
            Ok(Some(granted)) => return Ok(Next::Granted(granted)),
            Ok(None) => {}
            Err(e) if is_transient(&e) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(if retry_pause(self.env, self.config, self.deadline).await {
            Next::Again
        } else {
            Next::GaveUp
        })
    }
}
