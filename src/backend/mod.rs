//! The services lockcheck runs locks against, one folder each: its declaration (what the
//! scenario format asks of it: its table, its servers, the faults its worlds carry out), its
//! simulated engine, and its two worlds (`sim/`, the service simulated inside madsim; `real/`,
//! the service's own servers that lockcheck spawns), as madsim's `madsim-etcd-client` keeps a
//! service's simulation beside its real client and Jepsen keeps one suite per database. What
//! every service shares stays world-first in `src/sim/` and `src/real/`.
//!
//! [`BACKENDS`] is the one list of them. The layers below never name a service: they are handed
//! the declarations (`scenario::Catalog`), which is why [`Scenario::parse`] and its siblings,
//! which need the list, are assembled here.

pub mod etcd;
pub mod mysql;
pub mod postgres;
pub mod redis;
pub mod zookeeper;

use crate::env::NamedPoint;
use crate::history::History;
use crate::lock::{builtin, LockKind};
use crate::real::{ExternalRedis, RealError, RealRunner};
use crate::scenario::{BackendDecl, Catalog, OwnKind, Scenario, ScenarioError};
use crate::sim::SimRunner;
use std::path::Path;
use std::sync::{Arc, LazyLock};

/// A lock kind a backend ships, with its runs in simulation and on real servers.
pub type LockRuns = (LockKind, Arc<SimRunner>, Arc<RealRunner>);

/// How client programs (any language) run on a service: real mode only.
pub type ProgramRuns = fn(&Scenario, u64, Option<&ExternalRedis>) -> Result<History, RealError>;

/// One backend: what it declares to the scenario format, the locks it ships with their runs, and
/// how client programs run on it (`None`: they cannot). Not to be confused with
/// [`crate::lock::Backend`], a lock kind's tag for what its clients talk to.
#[derive(Clone, Copy)]
pub struct Backend {
    /// Its table, servers and fault support, as the scenario format reads them.
    pub declaration: &'static dyn BackendDecl,
    /// The locks it ships, each with its runs in both worlds.
    pub locks: fn() -> Vec<LockRuns>,
    /// How client programs run on it, if they can.
    pub client_programs: Option<ProgramRuns>,
    /// Whether real mode can run a scenario on it (every fault has a recipe on its spawned
    /// servers), or why not.
    pub real_check: fn(&Scenario) -> Result<(), RealError>,
}

/// Every backend, in `lockcheck list` order. The first is a client program's service when its
/// scenario has no other service's table.
pub static BACKENDS: &[Backend] = &[
    Backend {
        declaration: &redis::declaration::Redis,
        locks: redis::locks,
        client_programs: Some(redis::run_client_programs),
        real_check: redis::real::world::real_check,
    },
    Backend {
        declaration: &mysql::declaration::Mysql,
        locks: mysql::locks,
        client_programs: None,
        real_check: mysql::real::world::real_check,
    },
    Backend {
        declaration: &etcd::declaration::Etcd,
        locks: etcd::locks,
        client_programs: Some(etcd::run_client_programs),
        real_check: etcd::real::world::real_check,
    },
    Backend {
        declaration: &zookeeper::declaration::ZooKeeper,
        locks: zookeeper::locks,
        client_programs: Some(zookeeper::run_client_programs),
        real_check: zookeeper::real::world::real_check,
    },
    Backend {
        declaration: &postgres::declaration::Postgres,
        locks: postgres::locks,
        client_programs: Some(postgres::run_client_programs),
        real_check: postgres::real::world::real_check,
    },
];

/// Every backend's declaration, in [`BACKENDS`] order.
pub fn declarations() -> &'static [&'static dyn BackendDecl] {
    static DECLARATIONS: LazyLock<Vec<&'static dyn BackendDecl>> =
        LazyLock::new(|| BACKENDS.iter().map(|b| b.declaration).collect());
    &DECLARATIONS
}

/// Every lock kind lockcheck ships with its runs, in `lockcheck list` order: the first
/// backend's locks, the client-program kind (whose runs are the registry's: it picks the
/// backend by the scenario's service), then every other backend's.
pub fn lock_runs() -> Vec<LockRuns> {
    let mut v = Vec::new();
    for (i, b) in BACKENDS.iter().enumerate() {
        v.extend((b.locks)());
        if i == 0 {
            v.push(client_program_runs());
        }
    }
    v
}

/// The client-program kind's runs: none in simulation (its lock is a separate program, which
/// only real mode starts), and in real mode those of the backend its scenario speaks to.
fn client_program_runs() -> LockRuns {
    let kind = builtin::client_program();
    let sim = move |s: &Scenario, _seed: u64| -> crate::sim::SimRun {
        panic!(
            "{}: lock kind `{}` runs in real mode only (--real): its lock is a separate program, which only real mode starts",
            s.name,
            kind.name()
        )
    };
    let real = |s: &Scenario, seed: u64, ext: Option<&ExternalRedis>| {
        let backend = BACKENDS
            .iter()
            .find(|b| b.declaration.service() == s.lock.service);
        match backend.and_then(|b| b.client_programs) {
            Some(run) => run(s, seed, ext),
            None => Err(RealError::Unsupported(format!(
                "{}: client programs do not run on {}",
                s.name,
                s.backend().name()
            ))),
        }
    };
    (kind, Arc::new(sim), Arc::new(real))
}

/// The catalog of lockcheck's own backends and locks, with the lock kinds a program registered.
pub fn catalog(own: &[OwnKind]) -> Catalog<'_> {
    Catalog {
        backends: declarations(),
        builtins: LockKind::builtins(),
        own,
    }
}

impl LockKind {
    /// Every kind lockcheck ships, in `lockcheck list` order ([`lock_runs`]).
    pub fn builtins() -> &'static [LockKind] {
        static KINDS: LazyLock<Vec<LockKind>> =
            LazyLock::new(|| lock_runs().into_iter().map(|(k, _, _)| k).collect());
        &KINDS
    }

    /// The kind lockcheck ships under `name` (its scenario-file name or an alias), if any.
    pub fn builtin(name: &str) -> Option<LockKind> {
        LockKind::builtins()
            .iter()
            .copied()
            .find(|k| k.answers_to(name))
    }
}

impl Scenario {
    /// Why real mode cannot run this scenario (a fault with no recipe on its backend's spawned
    /// servers, a topology real mode does not build), or `None` when `--real` can. A real suite
    /// asks this first so it can list `SKIP <name>: <reason>` and go on instead of failing the
    /// whole run.
    pub fn real_mode_unsupported(&self) -> Option<String> {
        let backend = BACKENDS
            .iter()
            .find(|b| b.declaration.service() == self.lock.service)?;
        (backend.real_check)(self).err().map(|e| e.to_string())
    }

    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_with_locks(path, &[])
    }

    /// Parses and validates scenario text; `file` is only used in messages.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse_in(catalog(&[]), file, text, &[])
    }

    /// [`Scenario::parse`] for a lock of your own that declares named points
    /// ([`Lock::POINTS`](crate::lock::Lock::POINTS)): faults may fire at those too.
    pub fn parse_with_points(
        file: &str,
        text: &str,
        lock_points: &[NamedPoint],
    ) -> Result<Scenario, ScenarioError> {
        Scenario::parse_in(catalog(&[]), file, text, lock_points)
    }

    /// [`Scenario::parse`] that also knows the lock kinds a program registered with the harness:
    /// `[lock] kind` may name one of them ([`OwnKind`]), its named points are accepted in
    /// `on = ...`, and its `[lock.params]` are checked against the lock's parameter type.
    pub fn parse_with_locks(
        file: &str,
        text: &str,
        own: &[OwnKind],
    ) -> Result<Scenario, ScenarioError> {
        Scenario::parse_in(catalog(own), file, text, &[])
    }

    /// [`Scenario::load`] that knows the lock kinds of [`Scenario::parse_with_locks`].
    pub fn load_with_locks(path: &Path, own: &[OwnKind]) -> Result<Scenario, ScenarioError> {
        Scenario::load_in(catalog(own), path)
    }
}

/// What is wrong with a list of declarations, whatever scenario runs: a service declared twice
/// or not at all (`every_service`), a name or table that is empty, a table two backends claim or
/// that a generic part of the format already uses. `backend::BACKENDS` has none (a test holds
/// it), and a backend added without them fails that test.
pub fn list_problems(
    backends: &[&'static dyn BackendDecl],
    every_service: &[crate::lock::Service],
) -> Vec<String> {
    const GENERIC: [&str; 7] = [
        "lock",
        "workload",
        "clocks",
        "faults",
        "checks",
        "explore",
        "expect_checks",
    ];
    let mut problems = Vec::new();
    for service in every_service {
        let n = backends.iter().filter(|b| b.service() == *service).count();
        if n != 1 {
            problems.push(format!(
                "service {service:?} is declared {n} times in BACKENDS"
            ));
        }
    }
    for (i, b) in backends.iter().enumerate() {
        if b.name().is_empty() {
            problems.push(format!("{:?} declares no name", b.service()));
        }
        let table = b.table();
        if table.is_empty() || GENERIC.contains(&table) {
            problems.push(format!(
                "{:?} declares table `[{table}]`: a backend needs a scenario table of its own",
                b.service()
            ));
        }
        if backends[..i].iter().any(|o| o.table() == table) {
            problems.push(format!("two backends declare table `[{table}]`"));
        }
    }
    problems
}

/// What is wrong with `decl`'s answers for a scenario `s` on its service: no servers, a server
/// named twice or named like a client, a client pause (which every world carries out) refused,
/// or a fault kind neither drawable nor refused with a reason.
pub fn declaration_problems(decl: &dyn BackendDecl, s: &Scenario) -> Vec<String> {
    let mut problems = Vec::new();
    let name = decl.name();
    let servers: Vec<String> = decl.servers(s).into_iter().map(|(n, _)| n).collect();
    if servers.is_empty() {
        problems.push(format!("{name} declares no servers for `{}`", s.name));
    }
    for (i, n) in servers.iter().enumerate() {
        if servers[..i].contains(n) || n.starts_with("client-") || n.is_empty() {
            problems.push(format!(
                "{name} declares server `{n}` twice or like a client"
            ));
        }
    }
    let pause = crate::fault::Fault {
        trigger: crate::fault::Trigger::At(0),
        kind: crate::fault::FaultKind::Pause {
            client: crate::fault::ClientRef::Index(0),
            for_ms: 1,
        },
        by_client: None,
    };
    if let Err(m) = decl.check_fault(s, &pause) {
        problems.push(format!("{name} refuses a client pause: {m}"));
    }
    for kind in crate::fault::FAULT_KINDS {
        if let Some(reason) = decl.not_drawable(kind, s) {
            if reason.trim().is_empty() {
                problems.push(format!("{name} refuses to draw `{kind}` without a reason"));
            }
        }
    }
    problems
}
