//! The scenario side of the ZooKeeper locks: the `[zookeeper]` table, its checks, and the faults
//! a ZooKeeper scenario may have.

use super::Scenario;
use serde::Deserialize;

/// The name of server `i` of the deployment (faults name them).
pub fn server_name(i: u32) -> String {
    format!("zookeeper-{i}")
}

/// Which server a client of an ensemble is connected to (`[zookeeper] connect`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ZkConnect {
    /// Every request reaches the leader, which answers it (what the simulation always did: the
    /// ensemble seen through its leader).
    #[default]
    Leader,
    /// Client `c` is connected to follower `zookeeper-(1 + c mod 2)` of a three-server
    /// ensemble: the follower forwards writes and session changes to the leader and answers
    /// reads from what it has applied, `follower_lag_ms` behind the leader. On real servers each
    /// client is given only its follower's address.
    Followers,
}

/// `[zookeeper]`: the service the ZooKeeper locks talk to.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ZooKeeperSpec {
    /// 1 (a standalone server) or 3 (an ensemble, which survives a leader failover).
    #[serde(default = "default_servers")]
    pub servers: u32,
    /// The session timeout a client asks for: a client not heard from for this long loses its
    /// session and its ephemeral nodes. ZooKeeper grants it within 2 to 20 ticks.
    #[serde(default = "default_session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// ZooKeeper's `tickTime`: sessions expire on the first tick after their timeout.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// One-way latency between a client and the service, uniform in this range (ms; simulation).
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// How long an ensemble has no leader after its leader fails (ms; simulation: a ZooKeeper
    /// 3.8 ensemble on one machine elected a new leader about 0.5 s after its leader was killed).
    #[serde(default = "default_election_ms")]
    pub election_ms: u64,
    /// Which server a client is connected to: `"leader"` (the default) or `"followers"`.
    #[serde(default)]
    pub connect: ZkConnect,
    /// How long after the leader commits a transaction a follower applies it (ms; with
    /// `connect = "followers"`): how far behind the leader the reads a follower answers are. On
    /// real servers the leader's traffic to each follower is delayed by half of it, so a write
    /// commits after one half (a follower's acknowledgement of the late proposal) and reaches
    /// the followers after the other; a write through a follower is answered this long after
    /// it was sent, in both worlds.
    #[serde(default)]
    pub follower_lag_ms: u64,
    /// New sessions are local to their follower (ZooKeeper's `localSessionsEnabled`, with
    /// upgrading): no transaction, so the follower answers them at once; a session becomes global
    /// when it first creates an ephemeral node. Needs `connect = "followers"`.
    #[serde(default)]
    pub local_sessions: bool,
}

fn default_servers() -> u32 {
    1
}
fn default_session_timeout_ms() -> u64 {
    1_000
}
fn default_tick_ms() -> u64 {
    100
}
fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_election_ms() -> u64 {
    500
}

impl Default for ZooKeeperSpec {
    fn default() -> Self {
        ZooKeeperSpec {
            servers: default_servers(),
            session_timeout_ms: default_session_timeout_ms(),
            tick_ms: default_tick_ms(),
            latency_ms: default_latency_ms(),
            election_ms: default_election_ms(),
            connect: ZkConnect::default(),
            follower_lag_ms: 0,
            local_sessions: false,
        }
    }
}

type Invalid = (Option<&'static str>, String);

/// Checks the ZooKeeper keys of a parsed scenario; the error names the key to point at.
pub fn validate(s: &Scenario, has_table: bool) -> Result<(), Invalid> {
    let kind = s.lock.kind;
    if has_table && !s.lock.on_zookeeper() {
        return Err((
            Some("zookeeper"),
            format!(
                "`[zookeeper]` configures the ZooKeeper locks and client programs; lock kind \
                 `{}` does not use it",
                kind.name()
            ),
        ));
    }
    if !s.lock.on_zookeeper() {
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
/// drifting (its session tracker's clock). The family decides (`FaultKind::on_zookeeper`).
/// With followers answering reads, a fault that changes the leader or stops a server is refused:
/// a follower's resynchronisation with a new leader is not simulated.
pub fn check_fault(f: &super::Fault, z: &ZooKeeperSpec) -> Result<(), String> {
    f.kind.on_zookeeper(z.servers)?;
    let server_fault = matches!(
        f.kind,
        super::FaultKind::Failover { .. }
            | super::FaultKind::Crash { .. }
            | super::FaultKind::ServerPause { .. }
    );
    if z.connect == ZkConnect::Followers && server_fault {
        return Err(format!(
            "a `{}` of a server with `[zookeeper] connect = \"followers\"` is not modelled: a \
             follower's resynchronisation with a new leader is not simulated; drop one of them",
            f.kind.name()
        ));
    }
    Ok(())
}
