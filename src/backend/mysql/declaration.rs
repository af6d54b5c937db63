//! The MySQL locks' declaration: the `[database]` table and the lock keys only they take, one
//! database server (`mysql-0`), and the faults its worlds carry out (client pauses, crashes and
//! partitions, the server's crash and pause; no failover, no clocks: the server's transactions,
//! not a clock, keep a MySQL lock).

use super::lock::{for_update, insert_unique};
use super::table::{request_timeout, SERVER};
use crate::fault::FaultKind;
use crate::history::Role;
use crate::lock::Service;
use crate::scenario::{BackendDecl, FailoverShape, Fault, Invalid, Scenario};

/// The service this backend is: what its locks' kinds and its scenarios' clients talk to.
pub const SERVICE: Service = Service::named("mysql");

/// The MySQL/MariaDB backend.
#[derive(Debug)]
pub struct Mysql;

/// Measured real-mode spawn cost (`BackendDecl::real_spawn_ms`), rounded up.
const MARIADB_SPAWN_MS: u64 = 4_000;

impl BackendDecl for Mysql {
    fn service(&self) -> Service {
        SERVICE
    }

    fn name(&self) -> &'static str {
        "MySQL"
    }

    fn table(&self) -> &'static str {
        "database"
    }

    fn client_programs_select_by_table(&self) -> bool {
        false
    }

    fn servers(&self, _s: &Scenario) -> Vec<(String, Role)> {
        vec![(SERVER.to_string(), Role::Standalone)]
    }

    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        validate(s, has_table)
    }

    /// The time scale the liveness bound is three of: the cleanup lease when there is a
    /// cleanup job, else how long a waiter waits inside the server before it hears 1205.
    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        request_timeout(s).as_millis() as u64
    }

    /// A fresh data directory (`mariadb-install-db`) and the server's start.
    fn real_spawn_ms(&self, _s: &Scenario) -> u64 {
        MARIADB_SPAWN_MS
    }

    fn lease_ms(&self, s: &Scenario) -> Option<u64> {
        let o = s.lock.mysql_options();
        Some(
            o.cleanup
                .map(|c| c.lease_ms)
                .unwrap_or(o.lock_wait_timeout_s * 1000),
        )
    }

    fn check_fault(&self, _s: &Scenario, f: &Fault) -> Result<(), String> {
        on_one_database(&f.kind, SERVER)
    }

    fn pauses_servers(&self) -> bool {
        true
    }

    fn failover(&self) -> FailoverShape {
        FailoverShape::None
    }

    fn not_drawable(&self, kind: &str, _s: &Scenario) -> Option<String> {
        match kind {
            "failover" => Some(
                "`failover` promotes a Redis replica; the MySQL locks run on one database server: drop it (`crash` and `server_pause` stop the server)".into(),
            ),
            "clock_jump" | "clock_drift" | "wall_clock_jump" => Some(format!(
                "`{kind}` is not modelled for the MySQL locks (their leases are kept by the server's transactions, not by clocks): drop it"
            )),
            _ => None,
        }
    }
}

/// Checks the MySQL keys of a parsed scenario: which kinds take them, their ranges, and the faults
/// a MySQL scenario can have. The error names the key to point at.
fn validate(s: &Scenario, has_database: bool) -> Result<(), Invalid> {
    let kind = s.lock.kind;
    let l = &s.lock;
    let only = |key: &'static str, set: bool, kinds: &[&str]| -> Result<(), Invalid> {
        if set && !kinds.contains(&kind.name()) {
            let names: Vec<String> = kinds.iter().map(|k| format!("`{k}`")).collect();
            return Err((
                Some(key),
                format!(
                    "`{key}` is an option of lock kind {}; lock kind `{}` does not take it",
                    names.join(" and "),
                    kind.name()
                ),
            ));
        }
        Ok(())
    };
    let both = [for_update::NAME, insert_unique::NAME];
    only(
        "lock_wait_timeout_s",
        l.lock_wait_timeout_s.is_some(),
        &both,
    )?;
    only("for_update", l.for_update.is_some(), &both[..1])?;
    only("cleanup_lease_ms", l.cleanup_lease_ms.is_some(), &both[1..])?;
    only(
        "cleanup_interval_ms",
        l.cleanup_interval_ms.is_some(),
        &both[1..],
    )?;
    only("fencing", l.fencing.is_some(), &both[1..])?;
    only("database", has_database, &both)?;
    if s.lock.service != SERVICE {
        return Ok(());
    }
    if l.ttl_ms.is_some() {
        return Err((
            Some("ttl_ms"),
            format!(
                "lock kind `{}` has no lease: it holds while its transaction or row lives \
                 (`mysql-insert-unique` takes `cleanup_lease_ms` for its cleanup job)",
                kind.name()
            ),
        ));
    }
    if l.lock_wait_timeout_s == Some(0) {
        return Err((
            Some("lock_wait_timeout_s"),
            "`lock_wait_timeout_s` must be at least 1 (MariaDB takes whole seconds)".into(),
        ));
    }
    if l.cleanup_lease_ms == Some(0) || l.cleanup_interval_ms == Some(0) {
        return Err((
            Some("cleanup_lease_ms"),
            "`cleanup_lease_ms` and `cleanup_interval_ms` must be at least 1".into(),
        ));
    }
    if l.cleanup_interval_ms.is_some() && l.cleanup_lease_ms.is_none() {
        return Err((
            Some("cleanup_interval_ms"),
            "`cleanup_interval_ms` needs `cleanup_lease_ms` (the age past which rows are deleted)"
                .into(),
        ));
    }
    let d = &s.database;
    if d.latency_ms[0] > d.latency_ms[1] {
        return Err((
            Some("latency_ms"),
            "`latency_ms` is a range [low, high] and needs low <= high".into(),
        ));
    }
    // MariaDB's own upper bounds are larger; a year keeps every millisecond sum in range.
    const YEAR_S: u64 = 31_536_000;
    if l.lock_wait_timeout_s.is_some_and(|s| s > YEAR_S) || d.wait_timeout_s > YEAR_S {
        return Err((
            Some("database"),
            format!("`lock_wait_timeout_s` and `wait_timeout_s` must be at most {YEAR_S} (a year)"),
        ));
    }
    if d.wait_timeout_s == 0 || d.request_timeout_ms == Some(0) {
        return Err((
            Some("database"),
            "`wait_timeout_s` and `request_timeout_ms` must be at least 1".into(),
        ));
    }
    if !s.clocks.is_perfect() {
        return Err((
            Some("clocks"),
            "the MySQL locks run with true clocks: `[clocks]` is not supported with them".into(),
        ));
    }
    Ok(())
}

/// Whether a world of one database server named `server` and its clients can carry this
/// fault out (the MySQL locks' worlds): client pauses and crashes, the server's crash and
/// pause, and partitions that cut clients from the server; `Err` says why not. The scenario
/// refuses the others at parse time, so a MySQL verdict is never vacuous.
fn on_one_database(fault: &FaultKind, server: &str) -> Result<(), String> {
    match fault {
        FaultKind::Pause { .. } | FaultKind::ClientCrash { .. } => Ok(()),
        FaultKind::Crash { node, .. } | FaultKind::ServerPause { node, .. } if node == server => {
            Ok(())
        }
        FaultKind::Partition { nodes, from, .. } => {
            if nodes.iter().chain(from).any(|n| n == server) || from.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "a partition of a MySQL scenario cuts clients from `{server}`"
                ))
            }
        }
        _ => Err(format!(
            "`kind = \"{}\"` is not modelled for the MySQL locks; they take client `pause`, \
             client `crash`, `crash` of `{server}` (with `restart_after_ms`), `pause` of \
             `{server}` and `partition`",
            fault.name()
        )),
    }
}
