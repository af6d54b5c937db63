//! A lock's configuration and where it comes from: the scenario's `[lock]` table as serde reads
//! it ([`LockSpec`], with the defaults a missing key takes) and the [`LockConfig`] every client's
//! lock is built with ([`LockConfig::from_spec`]). They live together so a key and what it
//! becomes are read in one place; the checks serde cannot make are the scenario's
//! (`scenario/validate.rs`, `scenario/database.rs`).

use super::mysql_options::{Cleanup, MysqlOptions, WaitMode};
use super::{LockKind, RedlockOptions, Service};
use serde::Deserialize;
use std::time::Duration;
use toml::Spanned;

/// `[lock]`: which lock and its lease parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockSpec {
    /// Which lock implementation runs (`kind = "set-nx-px"`, ...; a name a program registered
    /// with the harness is that lock's kind). Resolved from the name as written when the
    /// scenario is parsed.
    #[serde(skip, default = "unresolved")]
    pub kind: LockKind,
    /// `kind` as written, resolved into `kind` by `Scenario::parse_with_locks`.
    #[serde(rename = "kind")]
    pub(crate) kind_name: Spanned<String>,
    /// `[lock.params]`: the settings of a lock of your own, handed to its constructor read into
    /// its parameter type (lockcheck's own kinds take none).
    #[serde(default)]
    pub params: Option<toml::Table>,
    /// The lease (PX) in ms. Optional because some locks (Redisson) have a default lease mode.
    pub ttl_ms: Option<u64>,
    /// How long `acquire` keeps retrying before it gives up.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u64,
    /// The key the lock lives under.
    #[serde(default = "default_key")]
    pub key: String,
    /// Pause between failed attempts: a uniform range, so contending clients do not move in lockstep.
    #[serde(default = "default_retry_ms")]
    pub retry_ms: [u64; 2],
    /// Redisson's `lockWatchdogTimeout`: the lease of a lock taken without `ttl_ms`, renewed by the
    /// watchdog every third of it. Redisson's default is 30000; real-mode scenarios scale it down.
    #[serde(default)]
    pub watchdog_timeout_ms: Option<u64>,
    // Redlock's keys (kind = "redlock" only); defaults in `lock::RedlockOptions`.
    /// Per-master request timeout, small against the TTL (default 50).
    pub node_timeout_ms: Option<u64>,
    /// Share of the TTL allowed for clock-rate error (default 0.01).
    pub drift_factor: Option<f64>,
    /// Fixed drift allowance in ms (default 2).
    pub drift_ms: Option<u64>,
    /// Antirez's step 3: re-check the elapsed time after the replies (default true).
    pub recheck_after_acquire: Option<bool>,
    // `set-nx-px`'s `WAIT` (lock::WaitReplicas).
    /// After a grant, `WAIT` until this many replicas have the entry; a grant they have not
    /// acknowledged within `wait_timeout_ms` is given back and the acquire tries again.
    pub wait_replicas: Option<u32>,
    /// How long `WAIT` blocks (ms; default 100). Needs `wait_replicas`.
    pub wait_timeout_ms: Option<u64>,
    /// `redisson` only, with `wait_replicas`: what a lock attempt whose `WAIT` found no replica
    /// synced leaves behind: `"undo"` (default, today's Redisson) or `"keep"` (Redisson before
    /// the fix for redisson#4822). See [`UnsyncedAttempt`].
    pub unsynced_attempt: Option<UnsyncedAttempt>,
    // Any kind.
    /// The holder stops working, and skips its write, once its validity time has run out on
    /// its own clock (default false: it works for `hold_ms` and writes whatever its lease says).
    #[serde(default)]
    pub check_validity_before_write: bool,
    /// `kind = "client-program"` only: the client program and its arguments, started once per client
    /// (a path with a `/` is relative to the scenario file's directory).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    // The MySQL locks' keys (docs/mysql.md); checked in `database.rs`.
    /// `innodb_lock_wait_timeout` of the lock's sessions, whole seconds (default 50).
    pub lock_wait_timeout_s: Option<u64>,
    /// `mysql-for-update`: `"wait"` (default), `"nowait"` or `"skip-locked"`.
    pub for_update: Option<WaitMode>,
    /// `mysql-insert-unique`: the cleanup job deletes lock rows older than this (no job if absent).
    pub cleanup_lease_ms: Option<u64>,
    /// `mysql-insert-unique`: how often the cleanup job runs (default: a tenth of the lease).
    pub cleanup_interval_ms: Option<u64>,
    /// `mysql-insert-unique`: each grant takes a fencing token from a counter row.
    pub fencing: Option<bool>,
    /// Deprecated: no longer set (it was the ZooKeeper session timeout, copied from
    /// `[zookeeper] session_timeout_ms`); read [`LockSpec::lease_ms`], which is the session
    /// timeout on ZooKeeper, or [`LockSpec::service_lease_ms`].
    #[deprecated(note = "no longer set: read `LockSpec::lease_ms()` or `service_lease_ms`")]
    #[serde(skip)]
    pub session_timeout_ms: Option<u64>,
    /// The lease when the service decides it rather than `ttl_ms` (a ZooKeeper lock's node
    /// lives as long as its session; a MySQL lock holds while its transaction or row lives),
    /// set when the scenario is parsed from its backend's declaration
    /// (`scenario::BackendDecl::lease_ms`).
    #[serde(skip)]
    pub service_lease_ms: Option<u64>,
    /// The service the clients talk to, resolved when the scenario is parsed: the kind's own,
    /// or for a client program the one its scenario configures (`[zookeeper]`, `[etcd]`, else
    /// Redis).
    #[serde(skip)]
    pub service: Service,
}

pub use super::redis_options::DEFAULT_WATCHDOG_TIMEOUT_MS;

impl LockSpec {
    /// The lease a grant gets: `ttl_ms`, or for a lock with a default lease (Redisson's watchdog
    /// mode) its watchdog timeout.
    pub fn lease_ms(&self) -> u64 {
        if let Some(lease) = self.service_lease_ms {
            return lease;
        }
        self.ttl_ms.unwrap_or(
            self.watchdog_timeout_ms
                .unwrap_or(DEFAULT_WATCHDOG_TIMEOUT_MS),
        )
    }

    /// Whether the clients talk to etcd (an etcd lock, or a client program with `[etcd]`).
    #[deprecated(
        note = "compare `service` with `lock::Service`; lockcheck's own code asks the backend's declaration"
    )]
    pub fn on_etcd(&self) -> bool {
        self.service == Service::Etcd
    }

    /// Whether the clients talk to ZooKeeper (a ZooKeeper lock, or a client program with
    /// `[zookeeper]`).
    #[deprecated(
        note = "compare `service` with `lock::Service`; lockcheck's own code asks the backend's declaration"
    )]
    pub fn on_zookeeper(&self) -> bool {
        self.service == Service::ZooKeeper
    }

    /// The MySQL locks' options from their keys (docs/mysql.md), defaults for those left out.
    pub fn mysql_options(&self) -> MysqlOptions {
        let d = MysqlOptions::default();
        MysqlOptions {
            lock_wait_timeout_s: self.lock_wait_timeout_s.unwrap_or(d.lock_wait_timeout_s),
            wait_mode: self.for_update.unwrap_or(d.wait_mode),
            cleanup: self.cleanup_lease_ms.map(|lease_ms| Cleanup {
                lease_ms,
                interval_ms: self.cleanup_interval_ms.unwrap_or((lease_ms / 10).max(1)),
            }),
            fencing: self.fencing.unwrap_or(false),
            ..d
        }
    }

    /// The keys that only `kind = "redlock"` takes, with whether each is set.
    pub(crate) fn redlock_keys(&self) -> [(&'static str, bool); 4] {
        [
            ("node_timeout_ms", self.node_timeout_ms.is_some()),
            ("drift_factor", self.drift_factor.is_some()),
            ("drift_ms", self.drift_ms.is_some()),
            (
                "recheck_after_acquire",
                self.recheck_after_acquire.is_some(),
            ),
        ]
    }
}

/// `kind` before the name is resolved (never seen outside parsing).
fn unresolved() -> LockKind {
    super::builtin::client_program()
}

/// `WAIT`'s timeout when `wait_timeout_ms` is not given: ten times the simulated default
/// replication lag's upper end, so that a healthy replica always answers in time.
pub const DEFAULT_WAIT_TIMEOUT_MS: u64 = 100;

fn default_wait_ms() -> u64 {
    5000
}
fn default_key() -> String {
    "lockcheck:lock".to_string()
}
fn default_retry_ms() -> [u64; 2] {
    [5, 20]
}

/// How a client's lock is configured (from the scenario's `[lock]`). `P` is the type a lock of
/// your own reads its `[lock.params]` table into (with serde); lockcheck's locks take none.
#[derive(Clone, Debug)]
pub struct LockConfig<P = ()> {
    /// The key the lock lives under.
    pub key: String,
    /// The lease each grant asks for (or the watchdog timeout).
    pub ttl: Duration,
    /// How long `acquire` keeps trying before it gives up.
    pub wait: Duration,
    /// Pause between failed attempts, uniform in this range.
    pub retry: (Duration, Duration),
    /// No explicit lease was set: a lock with a watchdog (Redisson) takes `ttl` as its watchdog
    /// timeout and renews it while held.
    pub watchdog: bool,
    /// Redlock's parameters (ignored by other kinds).
    pub redlock: RedlockOptions,
    /// `set-nx-px` only: after a grant, `WAIT` for this many replicas to have the entry, and
    /// give the grant back when they do not (`None`: no `WAIT`, the articles' lock).
    pub wait_replicas: Option<WaitReplicas>,
    /// The MySQL locks' options: their table, lock wait timeout, wait mode, cleanup job and
    /// fencing (ignored by the Redis locks).
    pub mysql: MysqlOptions,
    /// The scenario's `[lock.params]`, read into the lock's own parameter type.
    pub params: P,
}

impl<P> LockConfig<P> {
    /// The same configuration with `params` as its parameters.
    pub fn with_params<Q>(self, params: Q) -> LockConfig<Q> {
        LockConfig {
            key: self.key,
            ttl: self.ttl,
            wait: self.wait,
            retry: self.retry,
            watchdog: self.watchdog,
            redlock: self.redlock,
            wait_replicas: self.wait_replicas,
            mysql: self.mysql,
            params,
        }
    }
}

/// `WAIT numreplicas timeout` after a grant: the mitigation the Redis documentation offers for a
/// failover to a replica that never received the key. `WAIT` makes the write synchronous for the
/// replicas that acknowledge it; a grant they have not acknowledged is given back, so no holder
/// enters on an entry a promoted replica would not have. (It does not make the lock safe under
/// a crash that restarts a master empty, or under pauses and clock jumps: only the failover
/// window closes.)
///
/// Redisson's `RLock` takes it too, as its `checkLockSyncedSlaves`: there `WAIT` follows every
/// lock write in the same batch, and a call fails only when no replica acknowledged it
/// (`backend::redis::lock::synced_slaves`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitReplicas {
    /// Replicas that must acknowledge the grant.
    pub replicas: u32,
    /// How long `WAIT` blocks for them.
    pub timeout: Duration,
    /// Redisson only: what an attempt that no replica acknowledged leaves behind.
    pub unsynced: UnsyncedAttempt,
}

/// What a Redisson lock attempt does when the `WAIT` after its script found no replica synced
/// (`[lock] unsynced_attempt`). The script has run on the master by then and written the
/// client's hold count; see `backend::redis::lock::synced_slaves` for why that outlives a failover.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnsyncedAttempt {
    /// Today's Redisson (the fix for redisson#4822, `handleNoSync`): the unlock script undoes
    /// the attempt, and the attempt is tried again up to `retryAttempts` (3) times, each after
    /// `retryInterval` (1.5 s), before `lock()` fails.
    #[default]
    Undo,
    /// Redisson before that fix: `lock()` fails at once and the hold count stays, so the same
    /// client's later attempts count up on it and its unlocks never bring it to zero.
    Keep,
}

impl LockConfig {
    /// The configuration every client's lock gets from the scenario's `[lock]` table, with
    /// Redlock's defaults for the keys left out.
    pub fn from_spec(spec: &LockSpec) -> Self {
        LockConfig {
            key: spec.key.clone(),
            ttl: Duration::from_millis(spec.lease_ms()),
            wait: Duration::from_millis(spec.wait_ms),
            retry: (
                Duration::from_millis(spec.retry_ms[0]),
                Duration::from_millis(spec.retry_ms[1]),
            ),
            watchdog: spec.ttl_ms.is_none(),
            params: (),
            mysql: spec.mysql_options(),
            wait_replicas: spec.wait_replicas.map(|replicas| WaitReplicas {
                replicas,
                timeout: Duration::from_millis(
                    spec.wait_timeout_ms.unwrap_or(DEFAULT_WAIT_TIMEOUT_MS),
                ),
                unsynced: spec.unsynced_attempt.unwrap_or_default(),
            }),
            redlock: {
                let d = RedlockOptions::default();
                RedlockOptions {
                    node_timeout: spec
                        .node_timeout_ms
                        .map(Duration::from_millis)
                        .unwrap_or(d.node_timeout),
                    drift_factor: spec.drift_factor.unwrap_or(d.drift_factor),
                    drift_ms: spec.drift_ms.unwrap_or(d.drift_ms),
                    recheck_after_acquire: spec
                        .recheck_after_acquire
                        .unwrap_or(d.recheck_after_acquire),
                    ..d
                }
            },
        }
    }
}
