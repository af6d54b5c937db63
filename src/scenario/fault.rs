//! Faults: what a scenario's `[[faults]]` tables mean once checked (a [`Trigger`] and a
//! [`FaultKind`]), and the conversion from the table as written, one function per fault kind.

use std::ops::Range;
use toml::Spanned;

use super::error::{quoted, Ctx, ScenarioError};
use super::spec::RawFault;
pub use super::trigger::Trigger;
use super::Scenario;

/// Which client a client fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRef {
    /// The client whose acquire triggered the fault; for a fault at a fixed time, the client
    /// holding the lock then (none: the pause is skipped and the history says so).
    Holder,
    /// The client with this index (0-based).
    Index(u32),
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// When it fires.
    pub trigger: Trigger,
    /// What it does.
    pub kind: FaultKind,
    /// For a fault at a named point that hits a node (`failover`, `partition`, a clock fault, a
    /// server's `crash` or `pause`): only this client's reaching the point sets it off
    /// (`client = N`). `None`: the first client to reach it. A client's own pause or crash is
    /// aimed by its `client`/`node` key instead.
    pub by_client: Option<u32>,
}

/// The fault kinds. Node names: `redis-<m>`, `redis-<m>-replica-<r>`, `client-<c>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Kill the master of group `master` and promote its first replica after `failover_detect_ms`.
    Failover {
        /// The master group (from 0): `redis-<master>` dies.
        master: u32,
    },
    /// A stop-the-world pause (GC) of a client for `for_ms`.
    Pause {
        /// The paused client: a named one, or whoever holds the lock when the fault fires.
        client: ClientRef,
        /// How long the client is stopped (ms).
        for_ms: u64,
    },
    /// A server process stopped for `for_ms` (`SIGSTOP`, then `SIGCONT`: a VM freeze, a debugger,
    /// a stalled disk): it answers nothing and its own timers stand still while clients' timers
    /// run on. Written `kind = "pause"` with `node`; modelled for the MySQL locks' `mysql-0`.
    ServerPause {
        /// The stopped server.
        node: String,
        /// How long it stays stopped (ms).
        for_ms: u64,
    },
    /// Cut `nodes` off from `from` (everyone when empty) for `for_ms`, in `direction`.
    Partition {
        /// The nodes on one side of the cut.
        nodes: Vec<String>,
        /// The nodes on the other side; empty: everyone else.
        from: Vec<String>,
        /// How long the partition lasts (ms).
        for_ms: u64,
        /// Which way messages are dropped.
        direction: Direction,
    },
    /// Step a node's clocks, wall and monotonic, by `by_ms` (negative: backwards).
    ClockJump {
        /// The node whose clocks jump.
        node: String,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// Step a node's wall clock alone by `by_ms` (an NTP step, an operator): its monotonic clock
    /// goes on. Redis expires keys on its wall clock.
    WallClockJump {
        /// The node whose wall clock jumps.
        node: String,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// Set a node's clock rate error in parts per million.
    ClockDrift {
        /// The node whose clock drifts.
        node: String,
        /// The rate error (ppm; positive runs fast).
        ppm: i64,
    },
    /// Crash a Redis node; it restarts empty (no persistence) after `restart_after_ms`.
    Crash {
        /// The Redis node that crashes.
        node: String,
        /// How long it stays down (ms) before it restarts without its keys.
        restart_after_ms: u64,
    },
    /// A client process dies (at its named point): it never releases and never comes back.
    ClientCrash {
        /// The client (from 0) that dies.
        client: u32,
    },
}

/// Which way a partition cuts the links between `nodes` and the others (`from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Nothing passes either way (the default).
    #[default]
    Both,
    /// `nodes` hear nothing from the others; what they send still arrives.
    Inbound,
    /// What `nodes` send to the others is lost; they still hear them.
    Outbound,
}

impl Direction {
    /// The names scenario files use.
    pub const NAMES: &'static [&'static str] = &["both", "inbound", "outbound"];

    /// The name scenario files use for this direction.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Both => "both",
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }

    fn parse(s: &str) -> Option<Direction> {
        match s {
            "both" => Some(Direction::Both),
            "inbound" => Some(Direction::Inbound),
            "outbound" => Some(Direction::Outbound),
            _ => None,
        }
    }
}

/// The fault kinds' names, as written in scenario files.
pub const FAULT_KINDS: &[&str] = &[
    "failover",
    "pause",
    "partition",
    "clock_jump",
    "wall_clock_jump",
    "clock_drift",
    "crash",
];

/// The keys each fault kind takes besides `kind`, `on`, `after_ms` and `at_ms`.
fn keys_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "failover" => &["master", "client"],
        "pause" => &["client", "node", "for_ms"],
        "partition" => &["nodes", "from", "for_ms", "direction", "client"],
        "clock_jump" | "wall_clock_jump" => &["node", "by_ms", "client"],
        "clock_drift" => &["node", "ppm", "client"],
        "crash" => &["node", "restart_after_ms", "client"],
        _ => unreachable!("checked against FAULT_KINDS"),
    }
}

/// Checks one `[[faults]]` table against its kind's keys and the topology. Returns the fault and,
/// when its trigger is ambiguous ([`ambiguous_trigger`]), a warning at its `on` key.
pub(super) fn convert(
    ctx: &Ctx<'_>,
    f: Spanned<RawFault>,
    nodes: &[String],
    scenario: &Scenario,
) -> Result<(Fault, Option<ScenarioError>), ScenarioError> {
    let span = f.span();
    let raw = f.into_inner();
    let kind = raw.kind.get_ref().as_str();
    if !FAULT_KINDS.contains(&kind) {
        return Err(ctx.err(
            raw.kind.span(),
            format!(
                "unknown fault kind `{kind}`, expected one of {}",
                quoted(FAULT_KINDS)
            ),
        ));
    }
    let table = Table {
        ctx,
        raw: &raw,
        span,
        kind,
        nodes,
        scenario,
    };
    table.reject_foreign_keys()?;
    let trigger = table.trigger()?;
    let kind = match kind {
        "failover" => table.failover()?,
        "pause" => table.pause()?,
        "partition" => table.partition()?,
        "clock_jump" | "wall_clock_jump" => table.clock_jump()?,
        "clock_drift" => table.clock_drift()?,
        "crash" => table.crash(&trigger)?,
        _ => unreachable!("checked against FAULT_KINDS"),
    };
    let by_client = table.by_client(&trigger, &kind)?;
    let fault = Fault {
        trigger,
        kind,
        by_client,
    };
    let warning = ambiguous_trigger(&fault, raw.client.is_some(), scenario)
        .map(|m| ctx.err(raw.on.as_ref().map_or(0..0, |on| on.span()), m));
    Ok((fault, warning))
}

/// Why a fault's trigger is ambiguous, if it is: it fires at a point of the lock's own, names no
/// client, and the scenario has more than one. The workload's points (`acquired`, `after_read`,
/// `before_write`, `before_release`) are reached only by the holder, so "the first client to
/// reach it" is whoever holds the lock. A lock's own point may sit inside `acquire`, where every
/// client that tries reaches it, holder or not: which one comes first is up to the run's timing,
/// and a scenario written with one client in mind may be testing another.
fn ambiguous_trigger(fault: &Fault, client_written: bool, scenario: &Scenario) -> Option<String> {
    let Trigger::Point { point, .. } = &fault.trigger else {
        return None;
    };
    let clients = scenario.workload.clients;
    if clients < 2 || client_written || super::WORKLOAD_POINTS.iter().any(|p| p.name == point) {
        return None;
    }
    match &fault.kind {
        FaultKind::Pause { .. } => Some(format!(
            "`on = \"{point}\"` with no `client`: the pause hits the first of the {clients} clients to reach this point of the lock's own, which may not hold the lock; write `client = N` to aim it at one client, or `client = \"holder\"` to keep this meaning"
        )),
        FaultKind::ClientCrash { .. } => None,
        _ => Some(format!(
            "`on = \"{point}\"` with no `client`: this fault fires when the first of the {clients} clients reaches this point of the lock's own, holder or not, whichever that is in this run; add `client = N` to aim it at one client's point"
        )),
    }
}

/// One `[[faults]]` table being converted, with what its errors need to point into the file.
struct Table<'a> {
    ctx: &'a Ctx<'a>,
    raw: &'a RawFault,
    /// The whole table, for errors about a key that is missing.
    span: Range<usize>,
    kind: &'a str,
    nodes: &'a [String],
    scenario: &'a Scenario,
}

impl Table<'_> {
    /// `client = N` on a fault that hits a node: whose reaching of the named point sets it off.
    /// Only with `on` (a fixed time is nobody's), and only an index (`"holder"` names a victim,
    /// which a node fault does not have).
    fn by_client(&self, trigger: &Trigger, kind: &FaultKind) -> Result<Option<u32>, ScenarioError> {
        let aims_at_client = matches!(
            kind,
            FaultKind::Pause { .. } | FaultKind::ClientCrash { .. }
        );
        if let (FaultKind::ClientCrash { .. }, Some(c)) = (kind, &self.raw.client) {
            return Err(self.ctx.err(
                c.span(),
                "a client crash names its client with `node = \"client-<c>\"`; `client` is not used",
            ));
        }
        let Some(c) = self.raw.client.as_ref().filter(|_| !aims_at_client) else {
            return Ok(None);
        };
        if trigger.point().is_none() {
            return Err(self.ctx.err(
                c.span(),
                "`client` on this fault says whose named point sets it off; it needs `on = \"<point>\"`",
            ));
        }
        let clients = self.scenario.workload.clients;
        match c.get_ref() {
            toml::Value::Integer(i) if *i >= 0 && (*i as u64) < clients as u64 => Ok(Some(*i as u32)),
            other => Err(self.ctx.err(
                c.span(),
                format!(
                    "`client` on a `{}` fault is the client index 0..{clients} whose point sets it off, got {}",
                    self.kind,
                    other.to_string().chars().take(40).collect::<String>()
                ),
            )),
        }
    }

    /// A key of another fault kind is an error, so a fault cannot silently ignore it.
    fn reject_foreign_keys(&self) -> Result<(), ScenarioError> {
        let f = self.raw;
        let allowed = keys_of(self.kind);
        let present: [(&str, Option<Range<usize>>); 10] = [
            ("client", f.client.as_ref().map(|s| s.span())),
            ("master", f.master.as_ref().map(|s| s.span())),
            ("for_ms", f.for_ms.as_ref().map(|s| s.span())),
            ("nodes", f.nodes.as_ref().map(|s| s.span())),
            ("from", f.from.as_ref().map(|s| s.span())),
            ("direction", f.direction.as_ref().map(|s| s.span())),
            ("node", f.node.as_ref().map(|s| s.span())),
            ("by_ms", f.by_ms.as_ref().map(|s| s.span())),
            ("ppm", f.ppm.as_ref().map(|s| s.span())),
            (
                "restart_after_ms",
                f.restart_after_ms.as_ref().map(|s| s.span()),
            ),
        ];
        for (key, span) in present {
            if let Some(span) = span {
                if !allowed.contains(&key) {
                    return Err(self.ctx.err(
                        span,
                        format!(
                            "fault kind `{}` has no key `{key}`; its keys are `kind`, `on`, `after_ms`, `at_ms`, {}",
                            self.kind,
                            quoted(allowed)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The error for a key this kind needs and the table lacks.
    fn need(&self, key: &str) -> ScenarioError {
        self.ctx.err(
            self.span.clone(),
            format!("fault `{}` needs `{key}`", self.kind),
        )
    }

    /// A required key's value.
    fn required<'v, T>(
        &self,
        key: &str,
        v: &'v Option<Spanned<T>>,
    ) -> Result<&'v T, ScenarioError> {
        v.as_ref()
            .map(|s| s.get_ref())
            .ok_or_else(|| self.need(key))
    }

    /// A node name, checked against the scenario's topology.
    fn node(&self, name: &Spanned<String>) -> Result<String, ScenarioError> {
        if self.nodes.iter().any(|n| n == name.get_ref()) {
            Ok(name.get_ref().clone())
        } else {
            Err(self.ctx.err(
                name.span(),
                format!(
                    "unknown node `{}`; this scenario's nodes are {}",
                    name.get_ref(),
                    quoted(&self.nodes.iter().map(String::as_str).collect::<Vec<_>>())
                ),
            ))
        }
    }

    /// A list of node names, each checked against the topology.
    fn node_list(&self, v: &Spanned<Vec<String>>) -> Result<Vec<String>, ScenarioError> {
        v.get_ref()
            .iter()
            .map(|n| self.node(&Spanned::new(v.span(), n.clone())))
            .collect()
    }

    /// `at_ms = <ms>`, or `on = "<point>"` with an optional `after_ms`.
    fn trigger(&self) -> Result<Trigger, ScenarioError> {
        let f = self.raw;
        match (&f.on, &f.at_ms) {
            (Some(_), Some(at)) => Err(self
                .ctx
                .err(at.span(), "a fault fires either `at_ms` or `on`, not both")),
            (None, Some(at)) => {
                if let Some(a) = &f.after_ms {
                    return Err(self
                        .ctx
                        .err(a.span(), "`after_ms` goes with `on`, not with `at_ms`"));
                }
                Ok(Trigger::At(*at.get_ref()))
            }
            (Some(on), None) => {
                let after_ms = f.after_ms.as_ref().map(|a| *a.get_ref()).unwrap_or(0);
                let points = self.scenario.points();
                let point = on.get_ref().as_str();
                if points.contains(&point) {
                    Ok(Trigger::on_point(point, after_ms))
                } else {
                    Err(self.ctx.err(
                        on.span(),
                        format!(
                            "unknown named point `{point}`, expected one of {} (the workload's and those declared by lock kind `{}`)",
                            quoted(&points),
                            self.scenario.lock.kind.name()
                        ),
                    ))
                }
            }
            (None, None) => Err(self.ctx.err(
                self.span.clone(),
                format!(
                    "fault `{}` needs a trigger: `at_ms = <ms>` or `on = \"acquired\"`",
                    self.kind
                ),
            )),
        }
    }

    fn failover(&self) -> Result<FaultKind, ScenarioError> {
        let f = self.raw;
        let redis = &self.scenario.redis;
        if redis.sentinels > 0 {
            return Err(self.ctx.err(
                f.kind.span(),
                "with `sentinels` the sentinels decide a failover: crash, pause or partition the master instead of a `failover` fault",
            ));
        }
        let master = f.master.as_ref().map(|m| *m.get_ref()).unwrap_or(0);
        if master >= redis.masters {
            let span = f
                .master
                .as_ref()
                .map(|m| m.span())
                .unwrap_or(self.span.clone());
            return Err(self.ctx.err(
                span,
                format!(
                    "`master = {master}` but the scenario has {} master(s)",
                    redis.masters
                ),
            ));
        }
        if redis.replicas == 0 {
            return Err(self.ctx.err(
                self.span.clone(),
                "a `failover` needs a replica to promote: set `[redis] replicas = 1` or more",
            ));
        }
        Ok(FaultKind::Failover { master })
    }

    fn pause(&self) -> Result<FaultKind, ScenarioError> {
        if let Some(node) = &self.raw.node {
            return self.server_pause(node);
        }
        let clients = self.scenario.workload.clients;
        let client = match &self.raw.client {
            None => ClientRef::Holder,
            Some(c) => match c.get_ref() {
                toml::Value::String(s) if s == "holder" => ClientRef::Holder,
                toml::Value::Integer(i) if *i >= 0 && (*i as u64) < clients as u64 => {
                    ClientRef::Index(*i as u32)
                }
                other => {
                    return Err(self.ctx.err(
                        c.span(),
                        format!(
                        "`client` must be \"holder\" or a client index 0..{clients}, got {other}"
                    ),
                    ))
                }
            },
        };
        Ok(FaultKind::Pause {
            client,
            for_ms: *self.required("for_ms", &self.raw.for_ms)?,
        })
    }

    /// `kind = "pause"` with `node`: a server process is stopped. Only the MySQL locks' server
    /// has a model of what a stopped server does; a client is paused with `client`.
    fn server_pause(&self, node: &Spanned<String>) -> Result<FaultKind, ScenarioError> {
        if let Some(c) = &self.raw.client {
            return Err(self.ctx.err(
                c.span(),
                "a pause names either `client` (a client process) or `node` (a server), not both",
            ));
        }
        let name = self.node(node)?;
        if name.starts_with("client-") {
            return Err(self.ctx.err(
                node.span(),
                format!(
                    "a client is paused with `client = {}`; `node` names a server",
                    name.trim_start_matches("client-")
                ),
            ));
        }
        if !self.scenario.lock.kind.is_mysql() {
            return Err(self.ctx.err(
                node.span(),
                format!(
                    "a server pause is modelled for the MySQL locks' `{}` only; pause a client \
                     with `client`, or cut `{name}` off with a `partition`",
                    super::database::SERVER
                ),
            ));
        }
        Ok(FaultKind::ServerPause {
            node: name,
            for_ms: *self.required("for_ms", &self.raw.for_ms)?,
        })
    }

    fn partition(&self) -> Result<FaultKind, ScenarioError> {
        let f = self.raw;
        let nodes = self.node_list(f.nodes.as_ref().ok_or_else(|| self.need("nodes"))?)?;
        let from = match &f.from {
            Some(fr) => self.node_list(fr)?,
            None => Vec::new(),
        };
        if let Some(both) = nodes.iter().find(|n| from.contains(n)) {
            let span = f
                .from
                .as_ref()
                .map(|s| s.span())
                .unwrap_or(self.span.clone());
            return Err(self.ctx.err(
                span,
                format!(
                    "`{both}` is in both `nodes` and `from`: a node cannot be cut off from itself"
                ),
            ));
        }
        let direction = match &f.direction {
            None => Direction::Both,
            Some(d) => Direction::parse(d.get_ref()).ok_or_else(|| {
                self.ctx.err(
                    d.span(),
                    format!(
                        "unknown direction `{}`, expected one of {}",
                        d.get_ref(),
                        quoted(Direction::NAMES)
                    ),
                )
            })?,
        };
        Ok(FaultKind::Partition {
            nodes,
            from,
            for_ms: *self.required("for_ms", &f.for_ms)?,
            direction,
        })
    }

    /// `clock_jump` (both clocks) or `wall_clock_jump` (the wall clock alone).
    fn clock_jump(&self) -> Result<FaultKind, ScenarioError> {
        let f = self.raw;
        let node = self.node(f.node.as_ref().ok_or_else(|| self.need("node"))?)?;
        let by_ms = *self.required("by_ms", &f.by_ms)?;
        Ok(if self.kind == "wall_clock_jump" {
            FaultKind::WallClockJump { node, by_ms }
        } else {
            FaultKind::ClockJump { node, by_ms }
        })
    }

    fn clock_drift(&self) -> Result<FaultKind, ScenarioError> {
        let f = self.raw;
        let ppm = f.ppm.as_ref().ok_or_else(|| self.need("ppm"))?;
        if *ppm.get_ref() <= -1_000_000 {
            return Err(self.ctx.err(
                ppm.span(),
                "`ppm` must stay above -1000000 (a clock that stands still or runs backwards)",
            ));
        }
        Ok(FaultKind::ClockDrift {
            node: self.node(f.node.as_ref().ok_or_else(|| self.need("node"))?)?,
            ppm: *ppm.get_ref(),
        })
    }

    /// A Redis node crashes and restarts empty; a client crashes for good, at a named point.
    fn crash(&self, trigger: &Trigger) -> Result<FaultKind, ScenarioError> {
        let f = self.raw;
        let node = self.node(f.node.as_ref().ok_or_else(|| self.need("node"))?)?;
        let Some(c) = node.strip_prefix("client-") else {
            return Ok(FaultKind::Crash {
                restart_after_ms: *self.required("restart_after_ms", &f.restart_after_ms)?,
                node,
            });
        };
        if let Some(r) = &f.restart_after_ms {
            return Err(self.ctx.err(
                r.span(),
                "a crashed client does not restart: `restart_after_ms` is for Redis nodes",
            ));
        }
        if matches!(trigger, Trigger::At(_)) {
            return Err(self.ctx.err(
                self.span.clone(),
                format!(
                    "a client crash fires at a named point: use `on = ...` with one of {}",
                    quoted(&self.scenario.points())
                ),
            ));
        }
        Ok(FaultKind::ClientCrash {
            client: c.parse().expect("client names are client-<index>"),
        })
    }
}
