//! ZooKeeper's declaration: the `[zookeeper]` table (which also makes a client program's
//! scenario a ZooKeeper one), its servers `zookeeper-<i>` (one standalone, or an ensemble of
//! three whose `zookeeper-0` leads at the start), a lock's lease (its session's timeout), and
//! the faults its worlds carry out.

use super::table::server_name;
use crate::fault::FaultKind;
use crate::history::Role;
use crate::lock::Service;
use crate::scenario::zookeeper::{ZkConnect, ZooKeeperSpec};
use crate::scenario::{BackendDecl, FailoverShape, Fault, Invalid, Scenario};

/// The service this backend is: what its locks' kinds and its scenarios' clients talk to.
pub const SERVICE: Service = Service::named("zookeeper");

/// The ZooKeeper backend.
#[derive(Debug)]
pub struct ZooKeeper;

/// Measured real-mode spawn costs (`BackendDecl::real_spawn_ms`), rounded up: a three-server
/// ensemble took about 4 s on a 2-core machine, a standalone server about 2 s; with its stop
/// after the run, under `scripts/test`'s four lanes, a standalone server's run once took 2.4 s
/// besides its duration and grace (`ends::a_server_paused_past_the_run_ends_it_by_its_grace`:
/// 14.7 s against the 14.4 s allowed with 1 s here), so the fixed part allows 2 s.
const ZK_SPAWN_MS: u64 = 2_000;
const ZK_SPAWN_PER_SERVER_MS: u64 = 1_200;

impl BackendDecl for ZooKeeper {
    fn service(&self) -> Service {
        SERVICE
    }

    fn name(&self) -> &'static str {
        "ZooKeeper"
    }

    fn table(&self) -> &'static str {
        "zookeeper"
    }

    fn client_programs_select_by_table(&self) -> bool {
        true
    }

    /// A lone ZooKeeper server runs standalone: no election, no leader.
    fn servers(&self, s: &Scenario) -> Vec<(String, Role)> {
        let n = s.zookeeper.servers;
        (0..n)
            .map(|i| {
                let role = match (n, i) {
                    (1, _) => Role::Standalone,
                    (_, 0) => Role::Leader,
                    _ => Role::Follower,
                };
                (server_name(i), role)
            })
            .collect()
    }

    fn validate(&self, s: &Scenario, has_table: bool) -> Result<(), Invalid> {
        validate(s, has_table)
    }

    /// A ZooKeeper lock's node lives as long as its session: the session timeout is its lease.
    fn request_timeout_ms(&self, s: &Scenario) -> u64 {
        s.zookeeper.session_timeout_ms
    }

    /// A JVM per server, and an ensemble's first election.
    fn real_spawn_ms(&self, s: &Scenario) -> u64 {
        ZK_SPAWN_MS + ZK_SPAWN_PER_SERVER_MS * u64::from(s.zookeeper.servers)
    }

    fn lease_ms(&self, s: &Scenario) -> Option<u64> {
        Some(s.zookeeper.session_timeout_ms)
    }

    fn check_fault(&self, s: &Scenario, f: &Fault) -> Result<(), String> {
        check_fault(f, &s.zookeeper)
    }

    fn pauses_servers(&self) -> bool {
        true
    }

    fn failover(&self) -> FailoverShape {
        FailoverShape::Leader
    }

    fn not_drawable(&self, kind: &str, s: &Scenario) -> Option<String> {
        match kind {
            "failover" if s.zookeeper.servers < 3 => Some(
                "`failover` of ZooKeeper needs an ensemble: set `[zookeeper] servers = 3` or drop it".into(),
            ),
            "wall_clock_jump" => Some(
                "`wall_clock_jump` does not touch ZooKeeper, which expires sessions on its monotonic clock: drop it".into(),
            ),
            _ => None,
        }
    }
}

/// Checks the ZooKeeper keys of a parsed scenario; the error names the key to point at.
fn validate(s: &Scenario, has_table: bool) -> Result<(), Invalid> {
    let kind = s.lock.kind;
    if has_table && s.lock.service != SERVICE {
        return Err((
            Some("zookeeper"),
            format!(
                "`[zookeeper]` configures the ZooKeeper locks and client programs; lock kind \
                 `{}` does not use it",
                kind.name()
            ),
        ));
    }
    if s.lock.service != SERVICE {
        return Ok(());
    }
    if s.lock.ttl_ms.is_some() {
        return Err((
            Some("ttl_ms"),
            format!(
                "lock kind `{}` on ZooKeeper has no lease: its node lives as long as its \
                 session; set `[zookeeper] session_timeout_ms` instead",
                kind.name()
            ),
        ));
    }
    let z = &s.zookeeper;
    if z.servers != 1 && z.servers != 3 {
        return Err((
            Some("servers"),
            format!(
                "`servers` is 1 (standalone) or 3 (an ensemble), not {}",
                z.servers
            ),
        ));
    }
    if z.tick_ms == 0 || z.tick_ms > 10_000 {
        return Err((
            Some("tick_ms"),
            "`tick_ms` must be between 1 and 10000".into(),
        ));
    }
    if z.session_timeout_ms < 2 * z.tick_ms || z.session_timeout_ms > 20 * z.tick_ms {
        return Err((
            Some("session_timeout_ms"),
            format!(
                "`session_timeout_ms` must be between 2 and 20 ticks ({} and {} ms with \
                 `tick_ms = {}`): ZooKeeper grants no other",
                2 * z.tick_ms,
                20 * z.tick_ms,
                z.tick_ms
            ),
        ));
    }
    if z.latency_ms[0] > z.latency_ms[1] {
        return Err((
            Some("latency_ms"),
            "`latency_ms` is a range [low, high] and needs low <= high".into(),
        ));
    }
    if z.election_ms == 0 || z.election_ms > 600_000 {
        return Err((
            Some("election_ms"),
            "`election_ms` must be between 1 and 600000".into(),
        ));
    }
    validate_followers(s)
}

/// The keys of followers that answer reads: they need an ensemble (and `check_fault` refuses
/// the faults they are not modelled with).
fn validate_followers(s: &Scenario) -> Result<(), Invalid> {
    let z = &s.zookeeper;
    if z.connect == ZkConnect::Leader {
        for (key, set) in [
            ("follower_lag_ms", z.follower_lag_ms > 0),
            ("local_sessions", z.local_sessions),
        ] {
            if set {
                return Err((
                    Some(key),
                    format!(
                        "`{key}` is about the followers clients are connected to; it needs                          `connect = \"followers\"` (every request reaches the leader otherwise)"
                    ),
                ));
            }
        }
        return Ok(());
    }
    if z.servers != 3 {
        return Err((
            Some("connect"),
            "`connect = \"followers\"` needs an ensemble with followers: set `servers = 3`".into(),
        ));
    }
    if z.follower_lag_ms > 600_000 {
        return Err((
            Some("follower_lag_ms"),
            "`follower_lag_ms` must be at most 600000".into(),
        ));
    }
    Ok(())
}

/// Whether the ZooKeeper worlds carry out fault `f`: client pauses, crashes and partitions; a
/// crash or pause of a server; a failover of an ensemble's leader; a server's clock jumping or
/// drifting (its session tracker's clock). The family decides ([`on_zookeeper`]).
/// With followers answering reads, a fault that changes the leader or stops a server is refused:
/// a follower's resynchronisation with a new leader is not simulated.
fn check_fault(f: &Fault, z: &ZooKeeperSpec) -> Result<(), String> {
    on_zookeeper(&f.kind, z.servers)?;
    let server_fault = matches!(
        f.kind,
        FaultKind::Failover { .. } | FaultKind::Crash { .. } | FaultKind::ServerPause { .. }
    );
    if z.connect == ZkConnect::Followers && server_fault {
        return Err(format!(
            "a `{}` of a server with `[zookeeper] connect = \"followers\"` is not modelled: a \
             follower's resynchronisation with a new leader is not simulated; drop one of them",
            f.kind.name()
        ));
    }
    if z.connect == ZkConnect::Followers && separates_servers(&f.kind, z.servers) {
        return Err(
            "a partition between servers with `[zookeeper] connect = \"followers\"` is not \
             modelled: it may take the leader's quorum, and a follower's resynchronisation with \
             a new leader is not simulated; cut clients off instead"
                .into(),
        );
    }
    Ok(())
}

/// Whether `fault` is a partition that cuts some of the `servers` off from others (rather than
/// clients from servers): one that can take the leader's quorum.
fn separates_servers(fault: &FaultKind, servers: u32) -> bool {
    let FaultKind::Partition { nodes, from, .. } = fault else {
        return false;
    };
    let server = |n: &String| is_server(n, servers);
    let here = nodes.iter().filter(|n| server(n)).count() as u32;
    let there = if from.is_empty() {
        servers - here
    } else {
        from.iter().filter(|n| server(n)).count() as u32
    };
    here > 0 && there > 0
}

/// Whether a ZooKeeper world of `servers` servers (`zookeeper-<i>`) and its clients can carry
/// this fault out: client pauses, crashes and partitions; a server's crash or pause; a
/// failover of an ensemble's leader; a server's clock jumping or drifting (the clock its
/// sessions expire on) or a client's. `Err` says why not; the scenario refuses the others at
/// parse time, so a ZooKeeper verdict is never vacuous.
fn on_zookeeper(fault: &FaultKind, servers: u32) -> Result<(), String> {
    let server = |n: &str| is_server(n, servers);
    match fault {
        FaultKind::Pause { .. } | FaultKind::ClientCrash { .. } => Ok(()),
        FaultKind::Partition { .. } => Ok(()),
        FaultKind::Crash { node, .. } | FaultKind::ServerPause { node, .. } if server(node) => {
            Ok(())
        }
        FaultKind::ClockJump { .. } | FaultKind::ClockDrift { .. } => Ok(()),
        FaultKind::Failover { .. } if servers == 3 => Ok(()),
        FaultKind::Failover { .. } => Err(
            "`failover` of a ZooKeeper deployment needs an ensemble: set `[zookeeper] servers = 3`"
                .into(),
        ),
        _ => Err(format!(
            "`kind = \"{}\"` is not modelled for the ZooKeeper locks; they take client `pause`, \
             client `crash`, `partition`, `crash` and `pause` of a `zookeeper-<i>` server, \
             `failover` (3 servers), `clock_jump` and `clock_drift`",
            fault.name()
        )),
    }
}

/// Whether `node` names one of the `servers` servers (`zookeeper-<i>`).
fn is_server(node: &str, servers: u32) -> bool {
    node.strip_prefix("zookeeper-")
        .and_then(|i| i.parse::<u32>().ok())
        .is_some_and(|i| i < servers)
}
