//! The scenario side of the MySQL locks: the `[database]` table, the lock keys they take, and
//! what a scenario with one of them may ask for.

use super::Scenario;
use crate::lock::{mysql_for_update, mysql_insert_unique};
use serde::Deserialize;
use std::time::Duration;

/// The database server's node name in a MySQL scenario (faults name it).
pub const SERVER: &str = "mysql-0";

/// `[database]`: the server the MySQL locks talk to.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    /// One-way latency between a client and the server, uniform in this range (ms; simulation).
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// A statement that gets no answer within this time fails and its connection is dropped
    /// (default: the lock wait timeout plus 2 s, so a waiting `FOR UPDATE` hears 1205 first).
    pub request_timeout_ms: Option<u64>,
    /// The server's `wait_timeout` (s): an idle connection is closed, and its transaction rolled
    /// back, after this long. A partitioned client's session dies only then. MySQL's default is
    /// 28800 (8 hours).
    #[serde(default = "default_wait_timeout_s")]
    pub wait_timeout_s: u64,
}

fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_wait_timeout_s() -> u64 {
    28_800
}

impl Default for DatabaseSpec {
    fn default() -> Self {
        DatabaseSpec {
            latency_ms: default_latency_ms(),
            request_timeout_ms: None,
            wait_timeout_s: default_wait_timeout_s(),
        }
    }
}

/// A statement's response timeout.
pub fn request_timeout(s: &Scenario) -> Duration {
    let ms = s
        .database
        .request_timeout_ms
        .unwrap_or(s.lock.mysql_options().lock_wait_timeout_s * 1000 + 2000);
    Duration::from_millis(ms)
}

type Invalid = (Option<&'static str>, String);

/// Checks the MySQL keys of a parsed scenario: which kinds take them, their ranges, and the faults
/// a MySQL scenario can have. The error names the key to point at.
pub fn validate(s: &Scenario, has_database: bool) -> Result<(), Invalid> {
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
    let both = [mysql_for_update::NAME, mysql_insert_unique::NAME];
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
    if !kind.is_mysql() {
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

/// Whether the MySQL worlds carry out fault `f` (checked once the faults are converted, so the
/// error points at the fault's own table); the family decides (`FaultKind::on_one_database`).
pub fn check_fault(f: &super::Fault) -> Result<(), String> {
    f.kind.on_one_database(SERVER)
}
