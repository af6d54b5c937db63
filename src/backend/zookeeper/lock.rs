//! The ZooKeeper lock recipe, as Apache Curator's `InterProcessMutex` and kazoo's `Lock` run it,
//! in three kinds: the plain recipe, the recipe with a connection-state listener, and the recipe
//! whose holder passes a fencing token from ZooKeeper to the protected resource.
//!
//! The recipe (ZooKeeper's "Locks" recipe, Curator's `LockInternals`): create
//! `<dir>/_c_<guid>-lock-` as `EPHEMERAL_SEQUENTIAL` (the `_c_<guid>-` prefix is Curator's
//! "protected" mode: after a connection loss during the create, the client looks for a child
//! with its guid before creating another, since the create may have been applied), list the
//! children, and hold if its node has the lowest sequence number; otherwise set an `exists`
//! watch on the node just before its own and wait for it to go. Release deletes the node.
//!
//! Its weakness is ZooKeeper's session: the node lives as long as the client's session, and a
//! server that has not heard from the client for the session timeout expires the session and
//! deletes the node, whatever the client believes. A holder paused or cut off past its timeout
//! still works as the holder while the next waiter is granted the lock (CURATOR-206, "2 clients
//! acquired the same InterProcessLock", apache/curator#727).
//!
//! Its second weakness is the lock loop's retry (CURATOR-604, "Double locking issue while using
//! InterProcessMutex", apache/curator#1121): Curator's `LockInternals.internalLockLoop` lists
//! the children through its `RetryLoop`, which retries a SESSIONEXPIRED too, on the new session
//! Curator opens, and still looks for the node it created under the old one. A server that has
//! not yet applied the old session's close (a follower a moment behind its leader, answering a
//! local session at once) still lists that node, lowest: the client holds a lock whose node is
//! about to go, and the next waiter holds as soon as it does.
//!
//! - `zk-recipe` is the recipe alone: a holder never looks at its session again.
//! - `zk-recipe-listener` gives the lock up when its connection-state listener hears SUSPENDED
//!   (nothing heard from the server for two thirds of the session timeout, the ZooKeeper
//!   client's read timeout) or LOST, as Curator's documentation tells a lock user to. Its
//!   validity time is the moment SUSPENDED would come, and each renewal reads the listener's
//!   state, so a holder that checks before its write stops in time when it is cut off (its own
//!   clock runs while the server's timeout does). It cannot stop a holder that was paused: the
//!   listener runs only once the client runs again, and the client may write first.
//! - `zk-recipe-fenced` passes the lock node's `czxid` (the zxid of the transaction that created
//!   it, which grows with every write of the ensemble) to the resource as its fencing token:
//!   a later holder's node always has a larger one, so the resource rejects the write of a
//!   holder whose session expired once the next holder has written.

use crate::backend::zookeeper::seam::{
    sequence_of, CreateMode, SessionState, ZkClient, ZkError, ZkEvent,
};
use crate::env::{Env, NamedPoint};
use crate::lock::{Guard, Lock, LockConfig, LockError};
use std::marker::PhantomData;

/// What distinguishes the three kinds.
pub trait Variant: Send + Sync + 'static {
    /// The kind's scenario-file name.
    const NAME: &'static str;
    /// The line `lockcheck list` prints.
    const ABOUT: &'static str;
    /// Gives the lock up on SUSPENDED or LOST.
    const LISTENER: bool;
    /// Passes the node's `czxid` as the fencing token.
    const FENCED: bool;
}

/// The plain recipe.
pub struct Plain;
/// The recipe with a connection-state listener.
pub struct Listener;
/// The recipe with the node's `czxid` as a fencing token.
pub struct Fenced;

impl Variant for Plain {
    const NAME: &'static str = "zk-recipe";
    const ABOUT: &'static str = "ZooKeeper: Curator's InterProcessMutex / kazoo's Lock (ephemeral sequential znode, lowest holds, watch the predecessor); a holder whose session expires keeps working (CURATOR-206)";
    const LISTENER: bool = false;
    const FENCED: bool = false;
}

impl Variant for Listener {
    const NAME: &'static str = "zk-recipe-listener";
    const ABOUT: &'static str = "ZooKeeper: the recipe with a connection-state listener that gives the lock up on SUSPENDED or LOST (narrows the window of a partition, not of a pause)";
    const LISTENER: bool = true;
    const FENCED: bool = false;
}

impl Variant for Fenced {
    const NAME: &'static str = "zk-recipe-fenced";
    const ABOUT: &'static str = "ZooKeeper: the recipe, with the lock node's czxid as the fencing token the resource checks";
    const LISTENER: bool = false;
    const FENCED: bool = true;
}

/// One client's handle on a ZooKeeper lock of variant `V`.
pub struct ZkRecipe<C, E, V> {
    client: C,
    env: E,
    config: LockConfig,
    /// The node the attempt under way created, until it holds or gives it up.
    pending: Option<String>,
    _variant: PhantomData<V>,
}

/// The recipe's steps where a fault can fire.
pub const POINTS: &[NamedPoint] = &[
    NamedPoint::new(
        "after_create",
        "the client's lock node exists; it has not yet listed the children",
    ),
    NamedPoint::new(
        "before_wait",
        "the client's node is not the lowest; it is about to wait for its predecessor",
    ),
];

/// The lock's directory: `/lockcheck/<key>`.
pub fn lock_dir(key: &str) -> String {
    format!("/lockcheck/{}", key.replace('/', "_"))
}

impl<C, E, V> ZkRecipe<C, E, V> {
    /// One client's lock over its ZooKeeper session.
    pub fn new(config: LockConfig, conns: Vec<C>, env: E) -> Self {
        ZkRecipe {
            client: crate::lock::only_connection(conns),
            env,
            config,
            pending: None,
            _variant: PhantomData,
        }
    }
}

/// Where an attempt stands after a step.
enum Step {
    Held(Guard),
    Again,
    GaveUp,
}

impl<C: ZkClient, E: Env, V: Variant> ZkRecipe<C, E, V> {
    /// A session to work in: after an expiry the client starts a new one, as Curator does.
    async fn session(&mut self) -> Result<(), ZkError> {
        if self.client.state() == SessionState::Lost || self.client.session_id() == 0 {
            self.client.reconnect().await?;
        }
        Ok(())
    }

    /// Creates the lock's directory (persistent) if it is not there yet.
    async fn ensure_dir(&mut self, dir: &str) -> Result<(), ZkError> {
        for path in ["/lockcheck", dir] {
            match self.client.create(path, b"", CreateMode::Persistent).await {
                Ok(_) | Err(ZkError::NodeExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Curator's protected create: the node named with this attempt's guid, or, after a
    /// connection loss, the one the lost create made if the server has it. A node found under a
    /// session other than the one the create was sent in is not ours to use: it belongs to a
    /// session that has ended and goes with it (CURATOR-498's fix, apache/curator#1018:
    /// `ProtectedMode.validateFoundNode` drops a found node when the session id changed).
    async fn create_protected(&mut self, dir: &str, guid: &str) -> Result<String, ZkError> {
        let prefix = format!("{dir}/_c_{guid}-lock-");
        let sent_in = self.client.session_id();
        let mut created = self
            .client
            .create(&prefix, b"", CreateMode::EphemeralSequential)
            .await;
        if let Err(ZkError::NoNode(_)) = created {
            // Curator's `creatingParentContainersIfNeeded`: the parents are made only when the
            // create finds them missing (each create, even a refused one, is a transaction the
            // leader orders, as slow as a write).
            self.ensure_dir(dir).await?;
            created = self
                .client
                .create(&prefix, b"", CreateMode::EphemeralSequential)
                .await;
        }
        match created {
            Ok((name, _)) => Ok(name),
            Err(ZkError::ConnectionLoss(why)) => {
                // The create may have been applied: look for our guid before creating again.
                self.session().await?;
                let children = self.client.get_children(dir, false).await?;
                let mine = children.iter().find(|c| c.contains(guid));
                match mine {
                    Some(name) if self.client.session_id() == sent_in => {
                        Ok(format!("{dir}/{name}"))
                    }
                    _ => Err(ZkError::ConnectionLoss(why)),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Curator's `RetryLoop` around a read of the lock loop: a connection loss or a session
    /// expiry is retried (`RetryPolicy.allowRetry` lists CONNECTIONLOSS and SESSIONEXPIRED among
    /// the retryable codes) after the retry pause, until the wait bound; after an expiry the
    /// retry runs on a new session, as Curator's `ConnectionState` replaces an expired handle.
    /// `Ok` when the read should be tried again.
    async fn retry_read(&mut self, e: ZkError, deadline: u64) -> Result<(), ZkError> {
        if !matches!(e, ZkError::ConnectionLoss(_) | ZkError::SessionExpired(_)) {
            return Err(e);
        }
        if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
            return Err(e);
        }
        match self.session().await {
            Ok(()) | Err(ZkError::ConnectionLoss(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The lock directory's children (`LockInternals.getSortedChildren`), through the retry
    /// loop. The lock loop keeps the node it created across the retries: after a session
    /// expiry, a server that still lists that node (a follower that has not yet applied the old
    /// session's close) lets the new session take it for its own — CURATOR-604.
    async fn children(&mut self, dir: &str, deadline: u64) -> Result<Vec<String>, ZkError> {
        loop {
            match self.client.get_children(dir, false).await {
                Ok(children) => return Ok(children),
                Err(e) => self.retry_read(e, deadline).await?,
            }
        }
    }

    /// A watch on the predecessor (`getData().usingWatcher(...)` in Curator), through the retry
    /// loop: whether it still exists.
    async fn watch(&mut self, predecessor: &str, deadline: u64) -> Result<bool, ZkError> {
        loop {
            match self.client.exists(predecessor, true).await {
                Ok(stat) => return Ok(stat.is_some()),
                Err(e) => self.retry_read(e, deadline).await?,
            }
        }
    }

    /// The guard of a holder of `node`, with its validity time and token.
    async fn holder(&mut self, node: &str, started: u64) -> Result<Guard, ZkError> {
        if V::LISTENER {
            // What the listener heard while the client waited is over: a SUSPENDED that a
            // reconnect followed says nothing about the hold that starts now.
            while self.client.next_event(0).await.is_some() {}
        }
        let fencing_token = if V::FENCED {
            // The node's czxid, read back from the server (create returned it too, but after a
            // protected-mode recovery only a read knows it).
            match self.client.exists(node, false).await? {
                Some(stat) => Some(stat.czxid as u64),
                None => return Err(ZkError::NoNode(node.to_string())),
            }
        } else {
            None
        };
        Ok(Guard {
            owner: node.to_string(),
            fencing_token,
            acquired_at_ms: started,
            valid_until_ms: self.valid_until(),
        })
    }

    /// Where the holder believes its hold ends: never, for the plain recipe (it does not look);
    /// with the listener, when SUSPENDED would come if nothing more is heard.
    fn valid_until(&self) -> u64 {
        if V::LISTENER {
            self.client.last_heard_ms() + self.client.session_timeout_ms() * 2 / 3
        } else {
            u64::MAX
        }
    }

    /// Deletes `node`, retrying through connection losses until `deadline`; `Ok(false)` when it
    /// was gone already (its session expired, or a delete whose reply was lost applied).
    async fn delete_guaranteed(&mut self, node: &str, deadline: u64) -> Result<bool, ZkError> {
        loop {
            match self.client.delete(node, None).await {
                Ok(()) => return Ok(true),
                Err(ZkError::NoNode(_) | ZkError::SessionExpired(_)) => return Ok(false),
                Err(e @ ZkError::ConnectionLoss(_)) => {
                    if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt: create the node, then wait until it is the lowest or the wait bound passes.
    async fn attempt(&mut self, deadline: u64) -> Result<Step, ZkError> {
        self.session().await?;
        let dir = lock_dir(&self.config.key);
        let guid = self.env.uuid().simple().to_string();
        let started = self.env.monotonic_ms();
        let node = self.create_protected(&dir, &guid).await?;
        self.pending = Some(node.clone());
        self.env.point("after_create").await;
        let my_seq = sequence_of(&node);
        loop {
            let mut children = self.children(&dir, deadline).await?;
            children.sort_by_key(|c| sequence_of(c));
            let Some(at) = children.iter().position(|c| format!("{dir}/{c}") == node) else {
                // Our node is gone (its session expired): start over (Curator's
                // `validateOurIndex` throws NoNode, and `attemptLock` creates again).
                return Ok(Step::Again);
            };
            if at == 0 {
                return Ok(Step::Held(self.holder(&node, started).await?));
            }
            debug_assert!(my_seq.is_some());
            let predecessor = format!("{dir}/{}", children[at - 1]);
            if !self.watch(&predecessor, deadline).await? {
                continue;
            }
            self.env.point("before_wait").await;
            loop {
                let now = self.env.monotonic_ms();
                if now >= deadline {
                    // Give up: take our node out of the queue.
                    let _ = self.client.delete(&node, None).await;
                    return Ok(Step::GaveUp);
                }
                match self.client.next_event(deadline - now).await {
                    Some(ZkEvent::NodeDeleted(p)) if p == predecessor => break,
                    // ZooKeeper hands an expiry to every watcher; Curator's lock loop wakes and
                    // lists the children again, through its retry loop, on a new session.
                    Some(ZkEvent::Session(SessionState::Lost)) => break,
                    Some(_) => {}
                    None => {}
                }
            }
        }
    }
}

impl<C, E, V> Lock for ZkRecipe<C, E, V>
where
    C: ZkClient + Sync + 'static,
    E: Env,
    V: Variant,
{
    const POINTS: &'static [NamedPoint] = POINTS;
    const ABOUT: &'static str = V::ABOUT;
    const RENEWS: bool = V::LISTENER;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        loop {
            let step = self.attempt(deadline).await;
            let pending = self.pending.take();
            match step {
                Ok(Step::Held(guard)) => return Ok(Some(guard)),
                Ok(Step::GaveUp) => return Ok(None),
                Ok(Step::Again) => {}
                // No answer, or the session went: the recipe tries again (Curator's retry
                // policy), until the wait bound, after deleting the node this attempt made (as
                // Curator's lock loop does): left behind in a live session, it would hold the
                // lock for nobody, and a new node of ours would wait behind it forever.
                Err(ZkError::ConnectionLoss(_) | ZkError::SessionExpired(_)) => {
                    if let Some(node) = pending {
                        // If even that fails the wait bound has passed; the loop gives up.
                        let _ = self.delete_guaranteed(&node, deadline).await;
                    }
                }
                Err(e) => return Err(LockError::Zk(e)),
            }
            if !crate::lock::retry_pause(&self.env, &self.config, deadline).await {
                return Ok(None);
            }
        }
    }

    /// Deletes the lock node, retrying through connection losses (Curator deletes it with
    /// `guaranteed()`, kazoo with its retry policy): a node left behind by a lost delete would
    /// keep its live session's lock forever, and every waiter behind it.
    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        self.delete_guaranteed(&guard.owner, deadline)
            .await
            .map_err(LockError::Zk)
    }

    /// The listener's check: the hold goes on while the session is connected, until SUSPENDED
    /// would come; `Ok(false)` once the listener heard SUSPENDED or LOST.
    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        if !V::LISTENER {
            return Err(LockError::Unsupported("renew"));
        }
        // Take what the listener has been told since the last look.
        while let Some(event) = self.client.next_event(0).await {
            if let ZkEvent::Session(SessionState::Suspended | SessionState::Lost) = event {
                return Ok(false);
            }
        }
        if self.client.state() != SessionState::Connected {
            return Ok(false);
        }
        guard.valid_until_ms = self.valid_until();
        Ok(true)
    }
}
