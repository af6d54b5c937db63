//! etcd's declaration: the `[etcd]` table (which also makes a client program's scenario an
//! etcd one), its members `etcd-<i>` (`etcd-0` leads at the start), and the faults its worlds
//! carry out (client pauses, crashes and partitions, a member's crash and restart, clocks; no
//! server pause, and raft between members is not cut).

use super::table::member;
use crate::fault::FaultKind;
use crate::history::Role;
use crate::lock::Service;
use crate::scenario::{BackendDecl, FailoverShape, Fault, Invalid, Scenario};

/// The service this backend is: what its locks' kinds and its scenarios' clients talk to.
pub const SERVICE: Service = Service::named("etcd");

/// The etcd backend.
#[derive(Debug)]
pub struct Etcd;

/// Measured real-mode spawn cost (`BackendDecl::real_spawn_ms`), rounded up.
const ETCD_SPAWN_MS: u64 = 2_000;

impl BackendDecl for Etcd {
    fn service(&self) -> Service {
        SERVICE
    }

    fn name(&self) -> &'static str {
        "etcd"
    }

    fn table(&self) -> &'static str {
        "etcd"
    }

    fn client_programs_select_by_table(&self) -> bool {
        true
    }

    /// A lone etcd member is a raft of one: it elects itself and leads.
    fn servers(&self, s: &Scenario) -> Vec<(String, Role)> {
        (0..s.etcd.servers)
            .map(|i| {
                let role = if i == 0 { Role::Leader } else { Role::Follower };
                (member(i), role)
            })
            .collect()
    }

    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        validate(s, has_table)
    }

    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        s.etcd.request_timeout_ms
    }

    /// Its members and their first election.
    fn real_spawn_ms(&self, _s: &Scenario) -> u64 {
        ETCD_SPAWN_MS
    }

    fn lease_ms(&self, _s: &Scenario) -> Option<u64> {
        None
    }

    fn check_fault(&self, s: &Scenario, f: &Fault) -> Result<(), String> {
        on_etcd(&f.kind, s.etcd.servers)
    }

    fn pauses_servers(&self) -> bool {
        false
    }

    fn failover(&self) -> FailoverShape {
        FailoverShape::None
    }

    fn not_drawable(&self, kind: &str, _s: &Scenario) -> Option<String> {
        match kind {
            "failover" => Some(
                "`failover` is not modelled on etcd: a `crash` of the leading member `etcd-0` is its leader failover; drop it".into(),
            ),
            "server_pause" => Some(
                "`server_pause` is not modelled on etcd: drop it (`pause` stops a client, `partition` cuts a member off)".into(),
            ),
            _ => None,
        }
    }
}

/// Checks the etcd keys of a parsed scenario: which kinds take `[etcd]`, the cluster's size and
/// timing, and the lease etcd can grant. The error names the key to point at.
fn validate(s: &Scenario, has_etcd: bool) -> Result<(), Invalid> {
    let kind = s.lock.kind;
    if s.lock.service != SERVICE {
        if has_etcd {
            return Err((
                Some("etcd"),
                format!(
                    "`[etcd]` configures the cluster of the etcd locks and client programs; lock \
                     kind `{}` does not use it",
                    kind.name()
                ),
            ));
        }
        return Ok(());
    }
    let e = &s.etcd;
    if e.servers != 1 && e.servers != 3 {
        return Err((
            Some("servers"),
            format!(
                "`servers = {}`: an etcd cluster here has 1 or 3 members",
                e.servers
            ),
        ));
    }
    if e.latency_ms[0] > e.latency_ms[1] {
        return Err((
            Some("latency_ms"),
            "`latency_ms` is a range [low, high] and needs low <= high".into(),
        ));
    }
    if e.request_timeout_ms == 0 || e.heartbeat_ms == 0 {
        return Err((
            Some("etcd"),
            "`request_timeout_ms` and `heartbeat_ms` must be at least 1".into(),
        ));
    }
    if e.election_timeout_ms < 5 * e.heartbeat_ms {
        return Err((
            Some("election_timeout_ms"),
            format!(
                "`election_timeout_ms = {}` must be at least 5 × `heartbeat_ms` ({}), as etcd \
                 requires",
                e.election_timeout_ms, e.heartbeat_ms
            ),
        ));
    }
    let ttl = s.lock.ttl_ms.unwrap_or(0);
    let min = e.min_ttl_s() as u64 * 1000;
    if !ttl.is_multiple_of(1000) || ttl < min {
        return Err((
            Some("ttl_ms"),
            format!(
                "etcd grants leases in whole seconds, at least {min} ms with an election timeout \
                 of {} ms: set `ttl_ms` to a multiple of 1000 that is at least {min}",
                e.election_timeout_ms
            ),
        ));
    }
    Ok(())
}

/// Whether a simulated or spawned etcd cluster of `servers` members (`etcd-<i>`) and its
/// clients can carry this fault out: client pauses, crashes and partitions, a member's
/// crash and restart (`etcd-0` leads at the start, so its crash is a leader failover), and
/// clock jumps and drift; `Err` says why not, so an etcd verdict is never vacuous.
fn on_etcd(fault: &FaultKind, servers: u32) -> Result<(), String> {
    let member = |node: &str| (0..servers).any(|i| node == format!("etcd-{i}"));
    match fault {
        FaultKind::Pause { .. } | FaultKind::ClientCrash { .. } => Ok(()),
        FaultKind::Partition { nodes, from, .. } => {
            // Raft between members is not simulated: a cut may separate clients from
            // members, not members from each other.
            let here = nodes.iter().filter(|n| member(n)).count() as u32;
            let there = if from.is_empty() {
                servers - here
            } else {
                from.iter().filter(|n| member(n)).count() as u32
            };
            if here > 0 && there > 0 {
                Err(
                    "a partition of an etcd scenario cuts clients from members; one that \
                     separates members from each other is not modelled"
                        .into(),
                )
            } else {
                Ok(())
            }
        }
        FaultKind::ClockJump { .. }
        | FaultKind::WallClockJump { .. }
        | FaultKind::ClockDrift { .. } => Ok(()),
        FaultKind::Crash { node, .. } if member(node) => Ok(()),
        _ => Err(format!(
            "`kind = \"{}\"` is not modelled for the etcd locks; they take client `pause`, \
             client `crash`, `crash` of a member `etcd-<i>` (with `restart_after_ms`; \
             `etcd-0` leads at the start), `partition` and the clock faults",
            fault.name()
        )),
    }
}
