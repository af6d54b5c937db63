//! The context every command runs in: the [`Db`] it reads and writes, and the [`Ctx`] of one
//! execution unit (a top-level command, a whole script, or the application of a replication
//! stream).
//!
//! The context carries the clock reading, how expiry is treated ([`Expiry`]), and collects
//! what the unit wrote so it can be replicated. Each command records its own replication
//! effect, because that is what Redis 7.0 does: relative expiries are rewritten to absolute
//! ones (`SET k v PXAT t`, `PEXPIREAT k t`), an expiry already in the past becomes `DEL`, a
//! `SET ... GET` loses its `GET`, and a command that changed nothing (a failed `SET NX`, a
//! `DEL` of nothing) is not replicated at all. All of that was observed on a real 7.0.15
//! replication stream.
//!
//! Why a file of its own: every command family (`strings.rs`, `expiry.rs`, `zsets.rs`, ...),
//! the command table, the script host and the engine use these types, while the command table
//! also names every family's handlers. With the context here, below all of them, the families
//! import it and the table imports the families, and nothing imports back.

use super::keyspace::{Data, Keyspace};
use super::pubsub::PubSub;
use super::role::ClientId;

/// The engine's data: everything a command can touch.
#[derive(Debug, Default)]
pub struct Db {
    pub keys: Keyspace,
    pub pubsub: PubSub,
}

/// How a lookup treats a logically expired key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// A master: the key is deleted on access and a `DEL` is replicated (Redis's lazy expiry).
    Delete,
    /// A replica answering its own clients: the key is reported missing but kept. Why: a
    /// replica must not diverge from its master, so only the master's `DEL` removes keys; but
    /// a replica whose clock says the key is dead does not serve it (Redis >= 3.2).
    Hide,
    /// Applying the master's stream: expiry is the master's business, keys are used as stored.
    Ignore,
}

/// One execution unit in progress.
#[derive(Debug)]
pub struct Ctx {
    /// This node's clock, unix ms. Frozen for the whole unit, as Redis freezes time for a script.
    pub now: i64,
    pub expiry: Expiry,
    /// Effects recorded so far (each a full command).
    pub ops: Vec<Vec<Vec<u8>>>,
    /// Whether writes are recorded in `ops` (scripts may turn this off with `redis.set_repl`).
    pub replicate: bool,
    /// Whether anyone wants the effects themselves (a replica, a `WATCH`): when nobody does,
    /// only their count is kept (`writes`), which spares copying every write's arguments.
    pub record: bool,
    /// How many effects the unit produced, recorded in `ops` or not.
    pub writes: usize,
    pub messages: Vec<(ClientId, Vec<u8>, Vec<u8>)>,
}

impl Ctx {
    pub fn new(now: i64, expiry: Expiry) -> Self {
        Ctx {
            now,
            expiry,
            ops: Vec::new(),
            replicate: true,
            record: true,
            writes: 0,
            messages: Vec::new(),
        }
    }

    /// Records the effect `cmd` builds (built only when someone wants it, see `record`).
    pub(crate) fn propagate(&mut self, cmd: impl FnOnce() -> Vec<Vec<u8>>) {
        if self.replicate && self.expiry != Expiry::Ignore {
            self.effect(cmd);
        }
    }

    pub(crate) fn propagate_args(&mut self, args: &[Vec<u8>]) {
        if self.replicate && self.expiry != Expiry::Ignore {
            self.effect(|| args.to_vec());
        }
    }

    /// Counts one effect, and records it when someone wants it.
    fn effect(&mut self, cmd: impl FnOnce() -> Vec<Vec<u8>>) {
        self.writes += 1;
        if self.record {
            self.ops.push(cmd());
        }
    }

    /// Redis's `expireIfNeeded`: true if the key must be treated as missing.
    pub fn expire_if_needed(&mut self, ks: &mut Keyspace, key: &[u8]) -> bool {
        if !ks.is_expired(key, self.now) {
            return false;
        }
        match self.expiry {
            Expiry::Ignore => false,
            Expiry::Hide => true,
            Expiry::Delete => {
                ks.remove(key);
                // Expiry deletions are always replicated, even under `set_repl(REPL_NONE)`.
                self.effect(|| vec![b"DEL".to_vec(), key.to_vec()]);
                true
            }
        }
    }

    /// The live value of a key, after lazy expiry.
    pub(crate) fn lookup<'a>(&mut self, ks: &'a mut Keyspace, key: &[u8]) -> Option<&'a mut Data> {
        if self.expire_if_needed(ks, key) {
            return None;
        }
        ks.get_mut(key)
    }

    /// [`Ctx::lookup`] for reading only (it leaves the keyspace's version alone unless the key
    /// expired and was deleted).
    pub(crate) fn lookup_ref<'a>(&mut self, ks: &'a mut Keyspace, key: &[u8]) -> Option<&'a Data> {
        if self.expire_if_needed(ks, key) {
            return None;
        }
        ks.get(key)
    }

    /// Whether an absolute expiry is already in the past (Redis's `checkAlreadyExpired`).
    /// Never on a replica applying its master's stream: there the key must stay until the
    /// master's `DEL` arrives.
    pub(crate) fn already_expired(&self, when: i64) -> bool {
        when <= self.now && self.expiry != Expiry::Ignore
    }
}

/// Whether a command argument is the option `b`, ASCII case-insensitively (`nx`, `NX`, `Nx`).
/// Inlined: option parsing calls it for every option of every simulated command.
#[inline]
pub(crate) fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}
