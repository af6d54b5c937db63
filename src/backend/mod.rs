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
pub mod redis;
pub mod zookeeper;

use crate::env::NamedPoint;
use crate::scenario::{BackendDecl, Catalog, OwnKind, Scenario, ScenarioError};
use std::path::Path;

/// Every backend, each by its declaration. The first is a client program's service when its
/// scenario has no other service's table.
pub static BACKENDS: &[&dyn BackendDecl] = &[
    &redis::declaration::Redis,
    &mysql::declaration::Mysql,
    &etcd::declaration::Etcd,
    &zookeeper::declaration::ZooKeeper,
];

/// The catalog of lockcheck's own backends, with the lock kinds a program registered.
pub fn catalog(own: &[OwnKind]) -> Catalog<'_> {
    Catalog {
        backends: BACKENDS,
        own,
    }
}

impl Scenario {
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
