//! What a backend declares about itself to the scenario format: the table that configures it,
//! the servers of its deployment, the faults its worlds can carry out and how explore may draw
//! them. Each service implements [`BackendDecl`] in its own folder (`backend/<service>/`), and
//! `backend::BACKENDS` lists them; this layer only reads the declarations it is handed (a
//! [`Catalog`]), so no generic code asks "is this ZooKeeper?" and a service added to the list
//! cannot be forgotten by a negation chain that stays silent.
//!
//! Why a trait handed down rather than a match: the scenario format sits below the worlds, the
//! worlds read the format, and a service's answers belong beside its worlds. Jepsen keeps a
//! database's `db`, client and nemesis in its suite and the generic machinery in core; the same
//! split here is the declaration in the backend's folder and this trait in the format.

use super::{Fault, Scenario};
pub use crate::fault::FailoverShape;
use crate::history::Role;
use crate::lock::Service;
use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

/// An error in a service's table: the key to point at (`None`: the table or the file) and what
/// is wrong.
pub type Invalid = (Option<&'static str>, String);

/// What one backend declares about itself to the scenario format. One implementation per
/// service, in its folder; `backend::BACKENDS` is the one list.
pub trait BackendDecl: Debug + Send + Sync {
    /// The service its clients talk to.
    fn service(&self) -> Service;

    /// Its name in messages (`"ZooKeeper"`).
    fn name(&self) -> &'static str;

    /// The scenario table that configures it (`"zookeeper"` for `[zookeeper]`).
    fn table(&self) -> &'static str;

    /// Whether a client program speaks to this service when its scenario has the service's
    /// table (a client program's service is otherwise the first backend's, Redis).
    fn client_programs_select_by_table(&self) -> bool;

    /// The servers of a scenario's deployment, in node-name order, each with the role it starts
    /// the run in. Never empty: a scenario with no server has nothing to hold a lock.
    fn servers(&self, s: &Scenario) -> Vec<(String, Role)>;

    /// Nodes of the deployment that watch the servers and hold no data (Redis's sentinels),
    /// named after the clients so the other nodes keep their places whether or not they run.
    fn watchers(&self, _s: &Scenario) -> Vec<String> {
        Vec::new()
    }

    /// Checks this service's keys of a parsed scenario; `has_table` says whether the file has
    /// the service's table. Called for every scenario, so a service refuses its table in a
    /// scenario whose clients talk to another service.
    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid>;

    /// Checks this service's keys that are a mistake only when the file writes them (a key left
    /// out takes its default); `written(key)` says whether it does. Called after
    /// [`BackendDecl::validate`], for every scenario. None by default.
    fn validate_written(
        &self,
        s: &Scenario,
        written: &dyn Fn(&str) -> bool,
    ) -> Result<(), Invalid> {
        let _ = (s, written);
        Ok(())
    }

    /// The lease a lock on this service gets when the service, not `ttl_ms`, decides it (a
    /// ZooKeeper session's timeout, a MySQL lock's transaction); `None`: `ttl_ms` does.
    fn lease_ms(&self, s: &Scenario) -> Option<u64>;

    /// How long one request to this service waits before its client gives up, in ms: what a
    /// run's grace period is made of (`world::grace_ms`), with the lock's wait and lease. By
    /// default the scenario's `[redis] request_timeout_ms`, as every world's grace once was.
    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        s.redis.request_timeout_ms
    }

    /// About how long real mode takes, in ms of wall time, to spawn a deployment of `s`, start
    /// its clients and take it down again: what a real run costs besides its own time (the
    /// up-front estimates, `world::estimate::real_run_ms` and `real_most_ms`). Measured on a 2-core machine and
    /// rounded up (docs/cli.md, "Commands"). By default 2 s, between a `redis-server`'s and a
    /// MariaDB's.
    fn real_spawn_ms(&self, _s: &Scenario) -> u64 {
        2_000
    }

    /// How many independent masters hold a copy of the lock entry (Redlock's N: a release
    /// counts as done on a majority of them). By default the scenario's `[redis] masters`, 1
    /// unless set; Redis says 1 for a Redis Cluster, whose masters each own other slots.
    fn lock_masters(&self, s: &Scenario) -> u32 {
        s.redis.masters
    }

    /// Whether the deployment promotes a replica by itself when a master stops answering
    /// (Redis Sentinel, a Redis Cluster), so that a master cut off with some clients keeps
    /// serving them while the rest promote another: explore then draws such splits too.
    fn promotes_by_itself(&self, _s: &Scenario) -> bool {
        false
    }

    /// The deployment `lockcheck table` names apart in a lock's row ("Redis Cluster"), or
    /// `None` for the service's usual one.
    fn row_label(&self, _s: &Scenario) -> Option<&'static str> {
        None
    }

    /// Whether this service's worlds can carry fault `f` out; `Err` says why not, so a verdict
    /// is never vacuous.
    fn check_fault(&self, s: &Scenario, f: &Fault) -> Result<(), String>;

    /// Whether a server of this service can be paused (`kind = "pause"` with `node`).
    fn pauses_servers(&self) -> bool;

    /// How a `failover` is shaped here.
    fn failover(&self) -> FailoverShape;

    /// Why explore cannot draw fault kind `kind` for `s`, or `None` when it can.
    fn not_drawable(&self, kind: &str, s: &Scenario) -> Option<String>;

    /// Whether the server ends a client's session on its own while the client lives on
    /// (`kind = "terminate"`: `pg_terminate_backend`), so explore may draw it. No by default:
    /// a backend that says yes carries it out through `Nemesis::end_session`.
    fn ends_sessions(&self) -> bool {
        false
    }

    /// Whether this backend reads its table itself ([`BackendDecl::read_table`]) rather than
    /// through a field of `Scenario` (the older backends' way, kept for their public fields).
    fn reads_own_table(&self) -> bool {
        false
    }

    /// Where the table it reads itself sits, as a path of keys: its own top-level table by
    /// default; a backend whose top-level table is still a field of `Scenario` reads a sub-table
    /// of it instead (Redis reads `[redis.cluster]`).
    fn own_table_path(&self) -> Vec<&'static str> {
        vec![self.table()]
    }

    /// Reads this backend's table as written (`None`: the file has none) into what its worlds
    /// read back with [`Scenario::table`]; the error names the key to point at. Called only when
    /// [`BackendDecl::reads_own_table`].
    fn read_table(
        &self,
        _table: Option<&toml::Value>,
    ) -> Result<Arc<dyn Any + Send + Sync>, Invalid> {
        Ok(Arc::new(()))
    }
}

/// What the scenario format is handed to parse with: every backend's declaration, and the lock
/// kinds a program registered besides lockcheck's own.
#[derive(Clone, Copy)]
pub struct Catalog<'a> {
    /// The backends, in `backend::BACKENDS` order; the first is a client program's service
    /// when its scenario names none.
    pub backends: &'a [&'static dyn BackendDecl],
    /// The lock kinds lockcheck ships, in `lockcheck list` order.
    pub builtins: &'a [crate::lock::LockKind],
    /// Lock kinds a program registered.
    pub own: &'a [super::OwnKind],
}

impl Catalog<'_> {
    /// The declaration of `service`.
    ///
    /// # Panics
    ///
    /// When `service` has no declaration: `backend::BACKENDS` lists every service, which a test
    /// holds.
    pub fn backend(&self, service: Service) -> &'static dyn BackendDecl {
        self.backends
            .iter()
            .copied()
            .find(|b| b.service() == service)
            .unwrap_or_else(|| panic!("service {service:?} has no declaration in BACKENDS"))
    }
}
