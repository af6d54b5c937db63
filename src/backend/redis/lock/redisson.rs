//! Redisson's `RLock` (the Redisson article).
//!
//! The lock is a hash: one field, the holder's name (the client's uuid `:` thread id), whose value
//! is the hold count, so reentrancy is counted on the server. Acquire: if the hash is absent or
//! the field is ours, `HINCRBY` and `PEXPIRE`, else return the `PTTL`. Release: decrement; at zero
//! delete the hash and `PUBLISH` an unlock message on the lock's channel.
//!
//! Two lease modes, as in Redisson:
//! - watchdog (the scenario sets no `ttl_ms`, as `lock()` without a lease): the lease is the
//!   watchdog timeout (`lockWatchdogTimeout`, 30 s by default; `watchdog_timeout_ms` in `[lock]`),
//!   and a background task renews it every third of that while the lock is held. A renewal that
//!   finds the field gone, or fails, stops the watchdog (Redisson stops renewing on an error).
//! - explicit lease (`ttl_ms` set, as `lock(leaseTime)`): no watchdog; the lock expires after it.
//!
//! Waiters subscribe to the lock's channel and try again when the unlock message arrives or after
//! the returned PTTL, whichever is first (bounded by the wait time, as `tryLock(waitTime, ...)`).
//! The watchdog runs on the client's node, so a GC pause stops it too: a pause longer than the
//! time left on the lease loses the lock.
//!
//! With `[lock] wait_replicas`, every acquire and unlock script goes out in one batch with
//! `WAIT`, as Redisson's `checkLockSyncedSlaves` sends it, and a call no replica acknowledged
//! fails; `[lock] unsynced_attempt` picks what a failed attempt leaves behind
//! ([`super::synced_slaves`]: after a failover that choice is a liveness bug or none).

use super::synced_slaves::{self, UnsyncedAttempt, RETRY_ATTEMPTS};
use crate::env::{Env, TaskHandle};
use crate::lock::{is_transient, Guard, Lock, LockConfig, LockError};
use crate::subscription::{Subscribe, Subscription};
use redis::aio::ConnectionLike;
use std::sync::LazyLock;
use std::time::Duration;

/// Redisson's acquire script (hash field `uuid:thread`, count, `PEXPIRE`; returns `PTTL` when busy).
pub static ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/redisson_acquire.lua")));
/// The watchdog's renewal: `PEXPIRE` only while the field is still ours.
pub static RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/redisson_renew.lua")));
/// Release: decrement, delete at zero, publish the unlock message.
pub static RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("scripts/redisson_release.lua")));

pub use crate::lock::redis_options::DEFAULT_WATCHDOG_TIMEOUT_MS;

/// Redisson's default `retryInterval` (ms): how long it waits before retrying a command that got
/// no answer.
pub const RETRY_INTERVAL_MS: i64 = 1500;

/// Redisson's `LockPubSub.UNLOCK_MESSAGE`.
pub const UNLOCK_MESSAGE: &str = "0";

/// The lock's pub/sub channel (`redisson_lock__channel:{name}`).
pub fn channel(lock_key: &str) -> String {
    format!("redisson_lock__channel:{{{lock_key}}}")
}

/// One client's handle on a Redisson lock (one client = one Redisson instance, one thread).
pub struct Redisson<C: Subscribe, E> {
    conn: C,
    env: E,
    config: LockConfig,
    /// The holder's field: `uuid:thread`, made on first use.
    name: Option<String>,
    /// Hold count as this client tracks it (for the watchdog, as Redisson's ExpirationEntry).
    depth: u32,
    watchdog: Option<TaskHandle>,
    held: Option<Guard>,
    sub: Option<C::Subscription>,
}

/// The kind's scenario-file name.
pub const NAME: &str = crate::lock::redis_options::REDISSON;

impl<C: Subscribe, E> Redisson<C, E> {
    /// A Redisson client on `conn`, with its clock and tasks from `env`.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        Redisson {
            conn: crate::lock::only_connection(conns),
            env,
            config,
            name: None,
            depth: 0,
            watchdog: None,
            held: None,
            sub: None,
        }
    }
}

/// The thread id part of the holder's name: one thread per client here.
const THREAD_ID: u64 = 1;

impl<C, E> Redisson<C, E>
where
    C: ConnectionLike + Subscribe + Clone + Send + Sync + 'static,
    E: Env,
{
    fn holder(&mut self) -> String {
        if self.name.is_none() {
            self.name = Some(format!("{}:{THREAD_ID}", self.env.uuid()));
        }
        self.name.clone().expect("set above")
    }

    fn lease_ms(&self) -> u64 {
        self.config.ttl.as_millis() as u64
    }

    /// One attempt: `None` when acquired, `Some(pttl)` when held by another. With
    /// `wait_replicas`, an attempt no replica acknowledged fails with
    /// [`synced_slaves::none_synced`], undone first when `unsynced_attempt = "undo"`.
    async fn try_acquire(&mut self, holder: &str) -> redis::RedisResult<Option<i64>> {
        let mut acquire = ACQUIRE.prepare_invoke();
        acquire
            .key(&self.config.key)
            .arg(self.lease_ms())
            .arg(holder);
        let wait = self.config.wait_replicas;
        let (reply, synced) =
            synced_slaves::eval_write(&mut self.conn, &ACQUIRE, &acquire, wait).await?;
        if synced {
            return Ok(reply);
        }
        if self.undoes_unsynced() {
            // `handleNoSync`: the unlock script takes back what the attempt wrote (nothing if the
            // lock was another's). Its own `WAIT` fails too while no replica follows; Redisson
            // reports the attempt's error either way, so its outcome is not looked at.
            let _ = self.unlock_script(holder).await;
        }
        Err(synced_slaves::none_synced(wait))
    }

    /// Whether an unsynced attempt is undone and retried (today's Redisson).
    fn undoes_unsynced(&self) -> bool {
        self.config
            .wait_replicas
            .is_some_and(|w| w.unsynced == UnsyncedAttempt::Undo)
    }

    /// Redisson's unlock script (decrement; at zero delete and publish), sent as every lock write
    /// is: its reply (1 deleted, 0 still held, nil not ours) and whether a replica acknowledged it.
    async fn unlock_script(&mut self, holder: &str) -> redis::RedisResult<(Option<i64>, bool)> {
        let mut release = RELEASE.prepare_invoke();
        release
            .key(&self.config.key)
            .key(channel(&self.config.key))
            .arg(UNLOCK_MESSAGE)
            .arg(self.lease_ms())
            .arg(holder);
        synced_slaves::eval_write(
            &mut self.conn,
            &RELEASE,
            &release,
            self.config.wait_replicas,
        )
        .await
    }

    fn acquired(&mut self, holder: String, started: u64) -> Guard {
        self.depth += 1;
        if self.depth == 1 {
            if self.config.watchdog {
                self.start_watchdog(holder.clone());
            }
            self.held = Some(Guard {
                owner: holder,
                fencing_token: None,
                acquired_at_ms: started,
                valid_until_ms: started + self.lease_ms(),
            });
        }
        self.held.clone().expect("held")
    }

    /// The watchdog: every lease/3, extend the lease while the field is still ours.
    fn start_watchdog(&mut self, holder: String) {
        let mut conn = self.conn.clone();
        let env = self.env.clone();
        let key = self.config.key.clone();
        let lease = self.lease_ms();
        let task = self.env.spawn(async move {
            loop {
                env.sleep(Duration::from_millis(lease / 3)).await;
                let renewed: redis::RedisResult<i64> = RENEW
                    .key(&key)
                    .arg(lease)
                    .arg(&holder)
                    .invoke_async(&mut conn)
                    .await;
                if renewed.ok() != Some(1) {
                    break;
                }
            }
        });
        self.watchdog = Some(task);
    }

    fn stop_watchdog(&mut self) {
        if let Some(w) = self.watchdog.take() {
            w.abort();
        }
    }
}

impl<C, E> Lock for Redisson<C, E>
where
    C: ConnectionLike + Subscribe + Clone + Send + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = "Redisson RLock: hash lock uuid:thread -> count, watchdog lease 30 s renewed every 10 s, unlock publishes to waiters (the Redisson article)";
    const RENEWS: bool = true;
    const DEFAULT_LEASE: bool = true;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let holder = self.holder();
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        let channel = channel(&self.config.key);
        let mut subscribed = false;
        let mut unsynced_retries = RETRY_ATTEMPTS;
        let result = loop {
            let started = self.env.monotonic_ms();
            let ttl = match self.try_acquire(&holder).await {
                Ok(None) => break Ok(Some(self.acquired(holder.clone(), started))),
                Ok(Some(ttl)) => Some(ttl),
                // No answer: try again after Redisson's default retryInterval.
                Err(e) if is_transient(&e) => Some(RETRY_INTERVAL_MS),
                // Undone already; today's Redisson tries again after its retryInterval, a
                // timer of its own (no unlock message is awaited), `retryAttempts` times.
                Err(e) if synced_slaves::is_none_synced(&e) && self.undoes_unsynced() => {
                    if unsynced_retries == 0 || self.env.monotonic_ms() >= deadline {
                        break Err(e.into());
                    }
                    unsynced_retries -= 1;
                    let left = deadline.saturating_sub(self.env.monotonic_ms());
                    let pause = (RETRY_INTERVAL_MS as u64).min(left).max(1);
                    self.env.sleep(Duration::from_millis(pause)).await;
                    continue;
                }
                Err(e) => break Err(e.into()),
            };
            let now = self.env.monotonic_ms();
            if now >= deadline {
                break Ok(None);
            }
            if !subscribed {
                // Subscribe once, then wait for the unlock message or the lease, whichever first.
                let sub = self.sub.get_or_insert_with(|| self.conn.subscription());
                subscribed = sub.subscribe(&channel).await.is_ok();
            }
            let left = deadline.saturating_sub(self.env.monotonic_ms());
            let wait = match ttl {
                Some(t) if t >= 0 && (t as u64) < left => t as u64,
                _ => left,
            };
            let sleep = self.env.sleep(Duration::from_millis(wait.max(1)));
            futures::pin_mut!(sleep);
            // A subscription that closes (its server died) is made again once, on whichever
            // server now serves the channel, as Redisson resubscribes its channels after a
            // disconnect; if that fails too, the lease is waited out.
            let mut resubscribed = false;
            loop {
                let Some(sub) = self.sub.as_mut().filter(|_| subscribed) else {
                    sleep.as_mut().await;
                    break;
                };
                let closed = {
                    let message = sub.next_message();
                    futures::pin_mut!(message);
                    matches!(
                        futures::future::select(message, sleep.as_mut()).await,
                        futures::future::Either::Left((None, _))
                    )
                };
                if !closed {
                    break;
                }
                subscribed = !resubscribed && sub.subscribe(&channel).await.is_ok();
                resubscribed = true;
            }
        };
        if subscribed {
            if let Some(sub) = self.sub.as_mut() {
                let _ = sub.unsubscribe(&channel).await;
            }
        }
        result
    }

    async fn release(&mut self, _guard: &Guard) -> Result<bool, LockError> {
        let holder = self.holder();
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            // Redisson cancels the renewal whatever the unlock returns.
            self.stop_watchdog();
            self.held = None;
        }
        let (reply, synced) = self.unlock_script(&holder).await?;
        if !synced {
            // The script ran (the count went down, the hash may be gone); Redisson's unlock
            // still fails with the error.
            return Err(synced_slaves::none_synced(self.config.wait_replicas).into());
        }
        Ok(reply == Some(1))
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        let holder = self.holder();
        let started = self.env.monotonic_ms();
        let renewed: i64 = RENEW
            .key(&self.config.key)
            .arg(self.lease_ms())
            .arg(&holder)
            .invoke_async(&mut self.conn)
            .await?;
        if renewed == 1 {
            guard.valid_until_ms = started + self.lease_ms();
        }
        Ok(renewed == 1)
    }
}
