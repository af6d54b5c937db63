//! etcd's lock: a key under the lock's prefix attached to a lease the client keeps alive, granted
//! once every key with a lower create revision is gone. This is etcd's v3 `concurrency.Mutex`
//! (`client/v3/concurrency/mutex.go`), which the v3 lock API (`v3lock`) and client libraries'
//! `lock()` (npm `etcd3`'s among them) follow:
//!
//! 1. a session: `LeaseGrant(ttl)` and a keep-alive every TTL/3 (`concurrency.NewSession`);
//! 2. `Txn(If(CreateRevision(prefix/<lease id>) = 0).Then(Put(key, lease), Get(prefix,
//!    FirstCreate)).Else(Get(key), Get(prefix, FirstCreate)))`: the key's create revision is the
//!    client's place in the queue;
//! 3. if the first created key is not its own, wait for every key under the prefix with a lower
//!    create revision to be deleted (`waitDeletes`: read the last one created before it, watch it
//!    until it is deleted, again);
//! 4. release: delete the key and revoke the lease (`Unlock`, `Session.Close`).
//!
//! The claim it is checked against is Jepsen's analysis of etcd 3.4.3 (2020): etcd locks are
//! "fundamentally unsafe" when a holder pauses past its lease TTL, since the lease expires, its
//! key goes and the next waiter is granted the lock while the first still believes it holds it;
//! Jepsen also found that the client kept a lock whose lease had already expired while it waited
//! (`waitDeletes` returned and nothing looked at its own key again). Three kinds:
//!
//! - `etcd-lock`: the 3.4.3 algorithm as above;
//! - `etcd-lock-lease-check`: after the wait it reads its own key and the lease's time to live
//!   and gives up a lock whose key is gone (the fix etcd made after Jepsen's report,
//!   `ErrSessionExpired` in `Mutex.Lock`); the lease's time left becomes the guard's validity,
//!   so `check_validity_before_write` stops a holder whose lease ran out;
//! - `etcd-lock-fenced`: the 3.4.3 algorithm, passing the key's create revision as the fencing
//!   token to the protected resource, the fix Jepsen recommends.

use std::time::Duration;

use crate::backend::etcd::seam::{EtcdClient, EtcdError, LeaseId, RangeRequest, Revision};
use crate::backend::etcd::seam::{Txn, TxnOp, TxnOpResponse};
use crate::env::{Env, NamedPoint, TaskHandle};
use crate::lock::{Guard, Lock, LockConfig, LockError};

/// `etcd-lock`: `concurrency.Mutex` as etcd 3.4.3 had it.
pub const NAME: &str = "etcd-lock";
/// `etcd-lock-lease-check`: the mutex that checks its key and lease after waiting.
pub const NAME_LEASE_CHECK: &str = "etcd-lock-lease-check";
/// `etcd-lock-fenced`: the mutex whose key's create revision fences the resource.
pub const NAME_FENCED: &str = "etcd-lock-fenced";

/// The plain 3.4.3 algorithm.
pub const PLAIN: u8 = 0;
/// Checks its own key and lease after the wait.
pub const LEASE_CHECK: u8 = 1;
/// Passes its create revision as the fencing token.
pub const FENCED: u8 = 2;

const ABOUTS: [&str; 3] = [
    "etcd: concurrency.Mutex (lease kept alive, key under the prefix, wait for lower create revisions) as in etcd 3.4.3 (Jepsen's etcd analysis)",
    "etcd: concurrency.Mutex that reads its key and lease after waiting and gives up a lock whose lease expired (etcd's fix after Jepsen's report); validity = the lease's time left",
    "etcd: concurrency.Mutex passing its key's create revision as a fencing token to the resource (Jepsen's recommended fix)",
];

/// Points where a fault can fire inside an acquire.
const POINTS: &[NamedPoint] = &[
    NamedPoint {
        name: "after_lease_grant",
        about: "the session's lease is granted, before the lock key is put",
    },
    NamedPoint {
        name: "before_wait",
        about: "the lock key is put and others hold the lock: before waiting for their keys to go",
    },
];

/// One client's etcd lock (the variant is `V`: [`PLAIN`], [`LEASE_CHECK`] or [`FENCED`]).
pub struct EtcdMutex<C, E, const V: u8> {
    conn: C,
    env: E,
    config: LockConfig,
    /// The open sessions (the lock held, one being acquired): each lease and its keep-alive.
    sessions: Vec<(LeaseId, TaskHandle)>,
    /// The session of an attempt that failed without an answer: the next attempt goes on with
    /// it, as a caller of `Mutex.Lock` retries with its session (its key, if the transaction
    /// did put it, is then found by the comparison and keeps its place in the queue).
    retrying: Option<LeaseId>,
    /// The session of the attempt under way, until it is granted or ended: a refusal that ends
    /// the call must not leave it behind (see [`Lock::acquire`] below).
    attempting: Option<LeaseId>,
}

impl<C: Clone, E, const V: u8> EtcdMutex<C, E, V> {
    /// One client's lock on its etcd connection (the keep-alive task uses a copy of it, as etcd's
    /// client multiplexes its keep-alive stream on the same connection).
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        EtcdMutex {
            conn: crate::lock::only_connection(conns),
            env,
            config,
            sessions: Vec::new(),
            retrying: None,
            attempting: None,
        }
    }
}

/// The lock's prefix: every waiter's key lives under it.
fn prefix(key: &str) -> String {
    format!("{key}/")
}

/// A session's key under the lock's prefix: the lease id in hex, as `concurrency.Mutex` names it.
fn key_of(key: &str, lease: LeaseId) -> String {
    format!("{}{lease:x}", prefix(key))
}

/// The lease TTL in whole seconds (etcd's unit), rounded up.
fn ttl_s(config: &LockConfig) -> i64 {
    (config.ttl.as_millis() as i64 + 999) / 1000
}

/// The lease a lock key was put with: its last path segment, the lease id in hex (as
/// `concurrency.Mutex` names its key).
fn lease_of(my_key: &str) -> Option<LeaseId> {
    let hex = my_key.rsplit('/').next()?;
    u64::from_str_radix(hex, 16).ok().map(|id| id as LeaseId)
}

/// What one attempt came to.
enum Attempt {
    Granted(Guard),
    /// No answer, or the session ended while waiting: start again with a new session.
    Again,
    /// The wait bound passed.
    GaveUp,
}

impl<C, E, const V: u8> EtcdMutex<C, E, V>
where
    C: EtcdClient + Clone + Sync + 'static,
    E: Env,
{
    /// `concurrency.NewSession`: a lease and its keep-alive every TTL/3 until the lease is gone.
    async fn new_session(&mut self) -> Result<LeaseId, EtcdError> {
        let lease = self.conn.lease_grant(ttl_s(&self.config)).await?;
        let mut keeper = self.conn.clone();
        let env = self.env.clone();
        let every = Duration::from_millis((lease.ttl_s as u64 * 1000 / 3).max(1));
        let task = self.env.spawn(async move {
            loop {
                env.sleep(every).await;
                // No answer: etcd's client keeps trying while the lease may live; a lease
                // that is gone ends the session.
                if let Err(EtcdError::LeaseNotFound) = keeper.lease_keep_alive(lease.id).await {
                    return;
                }
            }
        });
        self.sessions.push((lease.id, task));
        Ok(lease.id)
    }

    /// `Session.Close`: stops the lease's keep-alive and revokes it (its keys go with it).
    async fn close_session(&mut self, lease: LeaseId) {
        let at = self.sessions.iter().position(|(l, _)| *l == lease);
        if let Some(at) = at {
            let (_, task) = self.sessions.remove(at);
            if self.attempting == Some(lease) {
                self.attempting = None;
            }
            task.abort();
            let _ = self.conn.lease_revoke(lease).await;
        }
    }

    /// `waitDeletes`: waits until no key under the prefix has a create revision below `mine`.
    async fn wait_deletes(&mut self, mine: Revision) -> Result<(), EtcdError> {
        let prefix = prefix(&self.config.key);
        loop {
            let ahead = self
                .conn
                .range(RangeRequest::prefix(prefix.clone()).last_created_up_to(mine - 1))
                .await?;
            let Some(last) = ahead.kvs.first() else {
                return Ok(());
            };
            self.conn.wait_deleted(&last.key, ahead.revision).await?;
        }
    }

    async fn attempt(&mut self, deadline: u64) -> Result<Attempt, LockError> {
        let lease = match self.retrying.take() {
            Some(lease) => lease,
            None => match self.new_session().await {
                Ok(lease) => lease,
                Err(e) if e.is_unknown() => return Ok(Attempt::Again),
                Err(e) => return Err(e.into()),
            },
        };
        self.attempting = Some(lease);
        self.env.point("after_lease_grant").await;
        let prefix = prefix(&self.config.key);
        let my_key = key_of(&self.config.key, lease);
        let owner = TxnOp::Range(RangeRequest::prefix(prefix.clone()).first_created());
        let txn = Txn {
            compare: vec![(my_key.clone(), 0)],
            success: vec![
                TxnOp::Put {
                    key: my_key.clone(),
                    value: String::new(),
                    lease,
                },
                owner.clone(),
            ],
            failure: vec![TxnOp::Range(RangeRequest::key(my_key.clone())), owner],
        };
        let started = self.env.monotonic_ms();
        let reply = match self.conn.txn(txn).await {
            Ok(reply) => reply,
            Err(e) if e.is_unknown() => {
                self.retrying = Some(lease);
                return Ok(Attempt::Again);
            }
            // The session's lease expired: a new session.
            Err(EtcdError::LeaseNotFound) => {
                self.close_session(lease).await;
                return Ok(Attempt::Again);
            }
            Err(e) => return Err(e.into()),
        };
        let kvs = |i: usize| match reply.responses.get(i) {
            Some(TxnOpResponse::Range(kvs)) => kvs.clone(),
            _ => Vec::new(),
        };
        let mine = if reply.succeeded {
            reply.revision
        } else {
            kvs(0)
                .first()
                .map_or(reply.revision, |kv| kv.create_revision)
        };
        let first = kvs(1).first().map(|kv| kv.create_revision);
        if first.is_some_and(|f| f != mine) {
            self.env.point("before_wait").await;
            let left = deadline.saturating_sub(self.env.monotonic_ms());
            let env = self.env.clone();
            let waited = env
                .timeout(Duration::from_millis(left), self.wait_deletes(mine))
                .await;
            match waited {
                Some(Ok(())) => {}
                Some(Err(e)) if !e.is_unknown() => return Err(e.into()),
                // No answer while waiting: etcd's `Lock` deletes its key and returns the error;
                // the caller tries again with its session.
                Some(Err(_)) => {
                    let _ = self.conn.delete(&my_key).await;
                    self.retrying = Some(lease);
                    return Ok(Attempt::Again);
                }
                None => {
                    self.abandon(lease, &my_key).await;
                    return Ok(Attempt::GaveUp);
                }
            }
        }
        let mut valid_until_ms = u64::MAX;
        if V == LEASE_CHECK {
            let checked_at = self.env.monotonic_ms();
            let still = self.conn.range(RangeRequest::key(my_key.clone())).await;
            let left = self.conn.lease_time_to_live(lease).await;
            match (still, left) {
                (Ok(r), Ok(left)) if !r.kvs.is_empty() => {
                    valid_until_ms = checked_at + left as u64 * 1000;
                }
                // `ErrSessionExpired`: the key went with the lease while we waited.
                _ => {
                    self.abandon(lease, &my_key).await;
                    return Ok(Attempt::Again);
                }
            }
        }
        self.attempting = None;
        Ok(Attempt::Granted(Guard {
            owner: my_key,
            fencing_token: (V == FENCED).then_some(mine as u64),
            acquired_at_ms: started,
            valid_until_ms,
        }))
    }

    /// Gives up an attempt: deletes its key (as `Mutex.Lock` does on an error) and ends the
    /// session.
    async fn abandon(&mut self, lease: LeaseId, my_key: &str) {
        let _ = self.conn.delete(my_key).await;
        self.close_session(lease).await;
    }
}

impl<C, E, const V: u8> Lock for EtcdMutex<C, E, V>
where
    C: EtcdClient + Clone + Sync + 'static,
    E: Env,
{
    const ABOUT: &'static str = ABOUTS[V as usize];
    const POINTS: &'static [NamedPoint] = POINTS;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        loop {
            let outcome = match self.attempt(deadline).await {
                Ok(outcome) => outcome,
                // A refusal ends the call, as `Mutex.Lock` returns its error; the attempt's
                // session must end with it (`Lock` deletes its key on an error, and a caller
                // closes its session). A session left behind keeps its key alive in the queue,
                // and every later attempt, this client's and everyone's, waits behind it.
                Err(e) => {
                    self.retrying = None;
                    if let Some(lease) = self.attempting.take() {
                        let my_key = key_of(&self.config.key, lease);
                        self.abandon(lease, &my_key).await;
                    }
                    return Err(e);
                }
            };
            match outcome {
                Attempt::Granted(guard) => return Ok(Some(guard)),
                Attempt::GaveUp => return Ok(None),
                Attempt::Again => {
                    if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
                        if let Some(lease) = self.retrying.take() {
                            self.close_session(lease).await;
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deleted = self.conn.delete(&guard.owner).await;
        if let Some(lease) = lease_of(&guard.owner) {
            self.close_session(lease).await;
        }
        Ok(deleted?.0 == 1)
    }
}
