//! Scenario files: the TOML contract that says which lock runs, on what Redis topology, under
//! which workload and faults, and what verdict the run must reach.
//!
//! The keys are a contract (tests outside this repository write these files), so parsing is strict:
//! an unknown key, lock kind, fault kind or node name is an error that names the file, line and
//! column and lists the valid choices. Nothing is silently ignored, because a typo in a fault would
//! otherwise turn a "violation" scenario into a vacuous "safe" one.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

use crate::lock::LockKind;

/// The verdict a check reaches, and the verdict a scenario expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Safe,
    Violation,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Safe => "safe",
            Verdict::Violation => "violation",
        })
    }
}

/// A parsed, validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub about: String,
    /// The expected mutual-exclusion verdict.
    pub expect: Verdict,
    /// Optional per-check expectations (check name -> verdict).
    pub expect_checks: BTreeMap<String, Verdict>,
    pub seed: u64,
    pub duration_ms: u64,
    pub lock: LockSpec,
    pub redis: RedisSpec,
    pub workload: WorkloadSpec,
    /// Node clocks at the start of the run (offsets and drifts; faults change them later).
    pub clocks: ClocksSpec,
    /// `[database]`: the MySQL locks' server (docs/mysql.md).
    pub database: crate::sql::spec::DatabaseSpec,
    pub faults: Vec<Fault>,
    /// `[explore]`: the space `lockcheck explore` searches (validated when parsed).
    pub explore: Option<crate::explore::ExploreSpec>,
    /// Where it was read from (for messages and the replay command).
    pub path: Option<PathBuf>,
}

/// `[lock]`: which lock and its lease parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockSpec {
    pub kind: LockKind,
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
    // Any kind.
    /// The holder stops working, and skips its write, once its validity time has run out on
    /// its own clock (default false: it works for `hold_ms` and writes whatever its lease says).
    #[serde(default)]
    pub check_validity_before_write: bool,
    /// `kind = "process"` only: the client program and its arguments, started once per client
    /// (a path with a `/` is relative to the scenario file's directory).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    // The MySQL locks' keys (docs/mysql.md); checked in `sql::spec`.
    /// `innodb_lock_wait_timeout` of the lock's sessions, whole seconds (default 50).
    pub lock_wait_timeout_s: Option<u64>,
    /// `mysql-for-update`: `"wait"` (default), `"nowait"` or `"skip-locked"`.
    pub for_update: Option<crate::lock::mysql_options::WaitMode>,
    /// `mysql-insert-unique`: the cleanup job deletes lock rows older than this (no job if absent).
    pub cleanup_lease_ms: Option<u64>,
    /// `mysql-insert-unique`: how often the cleanup job runs (default: a tenth of the lease).
    pub cleanup_interval_ms: Option<u64>,
    /// `mysql-insert-unique`: each grant takes a fencing token from a counter row.
    pub fencing: Option<bool>,
}

/// Redisson's default `lockWatchdogTimeout`.
pub const DEFAULT_WATCHDOG_TIMEOUT_MS: u64 = 30_000;

impl LockSpec {
    /// The lease a grant gets: `ttl_ms`, or for a lock with a default lease (Redisson's watchdog
    /// mode) its watchdog timeout.
    pub fn lease_ms(&self) -> u64 {
        if let Some(ms) = crate::sql::spec::lease_ms(self) {
            return ms;
        }
        self.ttl_ms.unwrap_or(
            self.watchdog_timeout_ms
                .unwrap_or(DEFAULT_WATCHDOG_TIMEOUT_MS),
        )
    }

    /// The keys that only `kind = "redlock"` takes, with whether each is set.
    fn redlock_keys(&self) -> [(&'static str, bool); 4] {
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

fn default_wait_ms() -> u64 {
    5000
}
fn default_key() -> String {
    "lockcheck:lock".to_string()
}
fn default_retry_ms() -> [u64; 2] {
    [5, 20]
}

/// `[redis]`: the topology the lock runs against.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSpec {
    #[serde(default = "one")]
    pub masters: u32,
    /// Replicas per master.
    #[serde(default)]
    pub replicas: u32,
    /// Asynchronous replication delay, uniform in this range.
    #[serde(default = "default_lag")]
    pub replication_lag_ms: [u64; 2],
    /// From the master's death until a replica is promoted (what Sentinel's down-after gives).
    #[serde(default = "default_failover_detect")]
    pub failover_detect_ms: u64,
    /// One-way network latency between any two nodes, uniform in this range (ms). madsim's
    /// timers never fire sooner than 1 ms after they are set, so 1 ms is the floor.
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// A request that gets no answer within this time fails, as a real client's response timeout.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
}

fn one() -> u32 {
    1
}
fn default_lag() -> [u64; 2] {
    [5, 20]
}
fn default_failover_detect() -> u64 {
    1000
}
fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_request_timeout() -> u64 {
    500
}

impl Default for RedisSpec {
    fn default() -> Self {
        RedisSpec {
            masters: 1,
            replicas: 0,
            replication_lag_ms: default_lag(),
            failover_detect_ms: default_failover_detect(),
            latency_ms: default_latency_ms(),
            request_timeout_ms: default_request_timeout(),
        }
    }
}

/// `[workload]`: what every client does: acquire, critical section, release, think.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    #[serde(default = "two")]
    pub clients: u32,
    #[serde(default = "ten")]
    pub cycles: u32,
    /// Critical-section length, uniform in this range.
    #[serde(default = "default_hold")]
    pub hold_ms: [u64; 2],
    /// Pause between a release and the next acquire, uniform in this range.
    #[serde(default = "default_think")]
    pub think_ms: [u64; 2],
    /// What the critical section does to the protected resource.
    #[serde(default)]
    pub kind: WorkloadKind,
    /// Nested acquires of the same lock inside each critical section (reentrancy), each released
    /// before the holder finishes its work.
    #[serde(default)]
    pub nested: u32,
}

/// The protected resource and what a holder does to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A read-modify-write of a counter in the storage node: read, work, write read + 1.
    #[default]
    Counter,
    /// Seed 004: count the user's addresses, work, insert one that is the default when the count
    /// was 0. Invariant: each user has exactly one default address.
    AddressBook,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Counter => "counter",
            WorkloadKind::AddressBook => "address-book",
        }
    }
}

/// Named points in the workload's critical section where a fault can fire (`on = "<point>"`).
/// `acquired`: right after a successful acquire, inside the critical section. `after_read`: the
/// holder has read the resource (the counter, or the user's address count) and not yet written.
/// `before_write`: it worked and is about to write (main's point). `before_release`: the holder
/// left its critical section and is about to release.
pub const WORKLOAD_POINTS: &[&str] = &["acquired", "after_read", "before_write", "before_release"];

fn two() -> u32 {
    2
}
fn ten() -> u32 {
    10
}
fn default_hold() -> [u64; 2] {
    [10, 50]
}
fn default_think() -> [u64; 2] {
    [0, 50]
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            clients: 2,
            cycles: 10,
            hold_ms: default_hold(),
            think_ms: default_think(),
            kind: WorkloadKind::Counter,
            nested: 0,
        }
    }
}

/// `[clocks]`: every node's clock at the start of a run. Each node (or each node of `nodes`)
/// draws its own start offset and rate error, uniformly in these ranges, from the run's seed, so
/// `--seeds N` explores N different clock configurations. The defaults are perfect clocks.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClocksSpec {
    /// How far a node's clock starts from true time (ms; negative: behind).
    #[serde(default)]
    pub offset_ms: [i64; 2],
    /// A node's rate error in parts per million (+1000: 0.1% fast; -1000: 0.1% slow).
    #[serde(default)]
    pub drift_ppm: [i64; 2],
    /// The nodes these clocks apply to; every node when absent.
    #[serde(default)]
    pub nodes: Option<Spanned<Vec<String>>>,
}

impl ClocksSpec {
    /// Whether every clock starts true (no random draws are made then, so adding an empty
    /// `[clocks]` table changes no history).
    pub fn is_perfect(&self) -> bool {
        self.offset_ms == [0, 0] && self.drift_ppm == [0, 0]
    }

    /// The node names the table applies to, out of `all`.
    pub fn applies_to(&self, all: &[String]) -> Vec<String> {
        match &self.nodes {
            None => all.to_vec(),
            Some(n) => all
                .iter()
                .filter(|x| n.get_ref().contains(x))
                .cloned()
                .collect(),
        }
    }
}

/// When a fault fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At this true time (ms since the simulation started).
    At(u64),
    /// At the first successful acquire at or after this true time (by the named client, if the
    /// fault names one).
    Acquired { after_ms: u64 },
    /// The first time a client (the named one, if the fault names one) reaches the named point at
    /// or after this true time: a workload point (`after_read`, `before_release`) or one of the
    /// lock's own (`after_setnx` of `naive-setnx-expire`).
    Point { point: String, after_ms: u64 },
    /// When a holder, at or after this true time, is about to write to the protected resource
    /// (after its validity check, if it makes one): `on = "before_write"`.
    BeforeWrite { after_ms: u64 },
}

impl Trigger {
    /// The trigger `on = "<point>"` with `after_ms` means, as the parser builds it (explore's
    /// schedules use it too, so a found scenario parses back to the very same trigger).
    pub fn on_point(point: &str, after_ms: u64) -> Trigger {
        match point {
            "acquired" => Trigger::Acquired { after_ms },
            "before_write" => Trigger::BeforeWrite { after_ms },
            p => Trigger::Point {
                point: p.to_string(),
                after_ms,
            },
        }
    }

    /// For client-point triggers: the earliest true time (ms) at which it may fire.
    pub fn point_after_ms(&self, point: ClientPoint) -> Option<u64> {
        match (self, point) {
            (Trigger::Acquired { after_ms }, ClientPoint::Acquired)
            | (Trigger::BeforeWrite { after_ms }, ClientPoint::BeforeWrite) => Some(*after_ms),
            _ => None,
        }
    }
}

/// The points in a client's cycle where `on = ...` faults fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientPoint {
    Acquired,
    BeforeWrite,
}

/// Which client a client fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRef {
    /// The client whose acquire triggered the fault; for a fault at a fixed time, the client
    /// holding the lock then (none: the pause is skipped and the history says so).
    Holder,
    Index(u32),
}

/// One fault of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub trigger: Trigger,
    pub kind: FaultKind,
}

/// The fault kinds. Node names: `redis-<m>`, `redis-<m>-replica-<r>`, `client-<c>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Kill the master of group `master` and promote its first replica after `failover_detect_ms`.
    Failover { master: u32 },
    /// A stop-the-world pause (GC) of a client for `for_ms`.
    Pause { client: ClientRef, for_ms: u64 },
    /// Cut `nodes` off from `from` (everyone when empty) for `for_ms`, in `direction`.
    Partition {
        nodes: Vec<String>,
        from: Vec<String>,
        for_ms: u64,
        direction: Direction,
    },
    /// Step a node's clock by `by_ms` (negative: backwards).
    ClockJump { node: String, by_ms: i64 },
    /// Set a node's clock rate error in parts per million.
    ClockDrift { node: String, ppm: i64 },
    /// Crash a Redis node; it restarts empty (no persistence) after `restart_after_ms`.
    Crash { node: String, restart_after_ms: u64 },
    /// A client process dies (at its trigger point): it never releases and never comes back.
    ClientCrash { client: u32 },
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
    "clock_drift",
    "crash",
];

/// The fault table as written: a flat set of optional keys, checked per kind after parsing so
/// errors can point at the exact key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    kind: Spanned<String>,
    on: Option<Spanned<String>>,
    after_ms: Option<Spanned<u64>>,
    at_ms: Option<Spanned<u64>>,
    client: Option<Spanned<toml::Value>>,
    master: Option<Spanned<u32>>,
    for_ms: Option<Spanned<u64>>,
    nodes: Option<Spanned<Vec<String>>>,
    from: Option<Spanned<Vec<String>>>,
    direction: Option<Spanned<String>>,
    node: Option<Spanned<String>>,
    by_ms: Option<Spanned<i64>>,
    ppm: Option<Spanned<i64>>,
    restart_after_ms: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    about: String,
    expect: Verdict,
    #[serde(default)]
    expect_checks: BTreeMap<Spanned<String>, Verdict>,
    #[serde(default = "default_seed")]
    seed: u64,
    duration_ms: u64,
    lock: LockSpec,
    #[serde(default)]
    redis: RedisSpec,
    #[serde(default)]
    workload: WorkloadSpec,
    #[serde(default)]
    clocks: ClocksSpec,
    database: Option<crate::sql::spec::DatabaseSpec>,
    #[serde(default)]
    faults: Vec<Spanned<RawFault>>,
    explore: Option<Spanned<crate::explore::ExploreSpec>>,
}

fn default_seed() -> u64 {
    1
}

/// A scenario error, located in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ScenarioError {}

/// Converts a byte offset into 1-based line and column.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map(|nl| before[nl + 1..].chars().count() + 1)
        .unwrap_or_else(|| before.chars().count() + 1);
    (line, col)
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = line_col(self.text, span.start);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// The check names a scenario may name in `expect_checks`.
pub const CHECK_NAMES: &[&str] = &[
    "mutual_exclusion",
    "resource",
    "liveness",
    "foreign_release",
    "reentrancy",
];

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            file: path.display().to_string(),
            line: 0,
            column: 0,
            message: format!("cannot read scenario file: {e}"),
        })?;
        let mut s = Scenario::parse(&path.display().to_string(), &text)?;
        s.path = Some(path.to_path_buf());
        Ok(s)
    }

    /// Parses and validates scenario text; `file` is only used in messages.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx { file, text };
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            ctx.err(span, e.message().trim().to_string())
        })?;
        let mut expect_checks = BTreeMap::new();
        for (name, verdict) in raw.expect_checks {
            if !CHECK_NAMES.contains(&name.get_ref().as_str()) {
                return Err(ctx.err(
                    name.span(),
                    format!(
                        "unknown check `{}` in expect_checks, expected one of {}",
                        name.get_ref(),
                        quoted(CHECK_NAMES)
                    ),
                ));
            }
            expect_checks.insert(name.into_inner(), verdict);
        }
        let scenario = Scenario {
            name: raw.name,
            about: raw.about,
            expect: raw.expect,
            expect_checks,
            seed: raw.seed,
            duration_ms: raw.duration_ms,
            lock: raw.lock,
            redis: raw.redis,
            workload: raw.workload,
            clocks: raw.clocks,
            database: raw.database.clone().unwrap_or_default(),
            faults: Vec::new(),
            explore: raw.explore.as_ref().map(|e| e.get_ref().clone()),
            path: None,
        };
        scenario.validate_numbers(&ctx)?;
        crate::sql::spec::validate(&scenario, raw.database.is_some())
            .map_err(|(key, m)| ctx.err(key.map_or(0..0, |k| at_key(text, k)), m))?;
        let nodes = scenario.node_names();
        if let Some(listed) = &scenario.clocks.nodes {
            for n in listed.get_ref() {
                if !nodes.contains(n) {
                    return Err(ctx.err(
                        listed.span(),
                        format!(
                            "unknown node `{n}` in [clocks] nodes; this scenario's nodes are {}",
                            quoted(&nodes.iter().map(String::as_str).collect::<Vec<_>>())
                        ),
                    ));
                }
            }
        }
        let mut faults = Vec::new();
        for f in raw.faults {
            faults.push(convert_fault(&ctx, f, &nodes, &scenario)?);
        }
        let scenario = Scenario { faults, ..scenario };
        if let Some(table) = &raw.explore {
            crate::explore::Space::of(&scenario).map_err(|m| ctx.err(table.span(), m))?;
        }
        Ok(scenario)
    }

    fn validate_numbers(&self, ctx: &Ctx<'_>) -> Result<(), ScenarioError> {
        let at = |key: &str| {
            // Point at the key if we can find it; the whole file otherwise.
            let off = ctx.text.find(&format!("{key} ")).unwrap_or(0);
            off..off
        };
        let ranges = [
            ("replication_lag_ms", self.redis.replication_lag_ms),
            ("latency_ms", self.redis.latency_ms),
            ("hold_ms", self.workload.hold_ms),
            ("think_ms", self.workload.think_ms),
            ("retry_ms", self.lock.retry_ms),
        ];
        let signed = [
            ("offset_ms", self.clocks.offset_ms),
            ("drift_ppm", self.clocks.drift_ppm),
        ];
        for (key, [lo, hi]) in signed {
            if lo > hi {
                return Err(ctx.err(
                    at(key),
                    format!(
                        "`{key}` is a range [low, high] and needs low <= high, got [{lo}, {hi}]"
                    ),
                ));
            }
        }
        if self.clocks.drift_ppm[0] <= -1_000_000 {
            return Err(ctx.err(
                at("drift_ppm"),
                "`drift_ppm` must stay above -1000000 (a clock that stands still or runs backwards)",
            ));
        }
        for (key, [lo, hi]) in ranges {
            if lo > hi {
                return Err(ctx.err(
                    at(key),
                    format!(
                        "`{key}` is a range [low, high] and needs low <= high, got [{lo}, {hi}]"
                    ),
                ));
            }
        }
        if self.lock.ttl_ms == Some(0) {
            return Err(ctx.err(at("ttl_ms"), "`ttl_ms` must be at least 1"));
        }
        if self.lock.ttl_ms.is_none()
            && !self.lock.kind.has_default_lease()
            && !self.lock.kind.is_mysql()
        {
            return Err(ctx.err(
                at("kind"),
                format!(
                    "lock kind `{}` needs `ttl_ms` (its lease) in [lock]",
                    self.lock.kind.name()
                ),
            ));
        }
        if self.lock.watchdog_timeout_ms.is_some() && !self.lock.kind.has_default_lease() {
            return Err(ctx.err(
                at("watchdog_timeout_ms"),
                format!(
                    "`watchdog_timeout_ms` is the watchdog lease of {}; lock kind `{}` has no watchdog",
                    quoted(
                        &LockKind::ALL
                            .iter()
                            .filter(|k| k.has_default_lease())
                            .map(|k| k.name())
                            .collect::<Vec<_>>()
                    ),
                    self.lock.kind.name()
                ),
            ));
        }
        if self.lock.watchdog_timeout_ms == Some(0) {
            return Err(ctx.err(
                at("watchdog_timeout_ms"),
                "`watchdog_timeout_ms` must be at least 1",
            ));
        }
        match (&self.lock.command, self.lock.kind) {
            (None, LockKind::Process) => {
                return Err(ctx.err(
                    at("kind"),
                    "lock kind `process` needs `command = [\"program\", \"arg\", ...]` in [lock] (the client program to start)",
                ))
            }
            (Some(c), LockKind::Process) if c.is_empty() => {
                return Err(ctx.err(
                    at("command"),
                    "`command` is empty: give the client program and its arguments",
                ))
            }
            (Some(_), kind) if kind != LockKind::Process => {
                return Err(ctx.err(
                    at("command"),
                    format!(
                        "`command` is the client program of lock kind `process`; lock kind `{}` does not take it",
                        kind.name()
                    ),
                ))
            }
            _ => {}
        }
        if self.lock.kind != LockKind::Redlock {
            if let Some((key, _)) = self.lock.redlock_keys().iter().find(|(_, set)| *set) {
                return Err(ctx.err(
                    at(key),
                    format!(
                        "`{key}` is a Redlock parameter; lock kind `{}` does not take it",
                        self.lock.kind.name()
                    ),
                ));
            }
        }
        if let Some(f) = self.lock.drift_factor {
            if !(0.0..1.0).contains(&f) {
                return Err(ctx.err(
                    at("drift_factor"),
                    format!("`drift_factor` is a share of the TTL in [0, 1), got {f}"),
                ));
            }
        }
        if self.lock.node_timeout_ms == Some(0) {
            return Err(ctx.err(
                at("node_timeout_ms"),
                "`node_timeout_ms` must be at least 1",
            ));
        }
        if self.redis.masters == 0 {
            return Err(ctx.err(at("masters"), "`masters` must be at least 1"));
        }
        if self.workload.clients == 0 {
            return Err(ctx.err(at("clients"), "`clients` must be at least 1"));
        }
        if self.redis.request_timeout_ms == 0 {
            return Err(ctx.err(
                at("request_timeout_ms"),
                "`request_timeout_ms` must be at least 1",
            ));
        }
        Ok(())
    }

    /// Every node name this scenario's topology has, in a fixed order.
    pub fn node_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.lock.kind.is_mysql() {
            v.push(crate::sql::spec::SERVER.to_string());
        }
        for m in 0..self.redis.masters * u32::from(!self.lock.kind.is_mysql()) {
            v.push(format!("redis-{m}"));
            for r in 0..self.redis.replicas {
                v.push(format!("redis-{m}-replica-{r}"));
            }
        }
        for c in 0..self.workload.clients {
            v.push(format!("client-{c}"));
        }
        v
    }

    /// The points a fault may fire at (`on = ...`): the workload's, then the lock kind's own.
    pub fn points(&self) -> Vec<&'static str> {
        let mut v = WORKLOAD_POINTS.to_vec();
        v.extend_from_slice(self.lock.kind.points());
        v
    }

    /// The expectation for one check: `expect_checks` first; `expect` is the mutual-exclusion one.
    pub fn expected(&self, check: &str) -> Option<Verdict> {
        self.expect_checks
            .get(check)
            .copied()
            .or_else(|| (check == "mutual_exclusion").then_some(self.expect))
    }
}

/// Where `key` first appears in `text` (a `[table]` header or `key = `), for messages about a
/// key serde already accepted; the start of the file when it is not found.
fn at_key(text: &str, key: &str) -> std::ops::Range<usize> {
    let off = text
        .find(&format!("{key} "))
        .or_else(|| text.find(key))
        .unwrap_or(0);
    off..off
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks one `[[faults]]` table against its kind's keys and the topology.
fn convert_fault(
    ctx: &Ctx<'_>,
    f: Spanned<RawFault>,
    nodes: &[String],
    scenario: &Scenario,
) -> Result<Fault, ScenarioError> {
    let table_span = f.span();
    let f = f.into_inner();
    let kind = f.kind.get_ref().as_str();
    if !FAULT_KINDS.contains(&kind) {
        return Err(ctx.err(
            f.kind.span(),
            format!(
                "unknown fault kind `{kind}`, expected one of {}",
                quoted(FAULT_KINDS)
            ),
        ));
    }
    // Which keys this kind takes (besides kind/on/after_ms/at_ms).
    let allowed: &[&str] = match kind {
        "failover" => &["master"],
        "pause" => &["client", "for_ms"],
        "partition" => &["nodes", "from", "for_ms", "direction"],
        "clock_jump" => &["node", "by_ms"],
        "clock_drift" => &["node", "ppm"],
        "crash" => &["node", "restart_after_ms"],
        _ => unreachable!("checked against FAULT_KINDS"),
    };
    let present: [(&str, Option<std::ops::Range<usize>>); 10] = [
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
    for (key, span) in &present {
        if let Some(span) = span {
            if !allowed.contains(key) {
                return Err(ctx.err(
                    span.clone(),
                    format!(
                        "fault kind `{kind}` has no key `{key}`; its keys are `kind`, `on`, `after_ms`, `at_ms`, {}",
                        quoted(allowed)
                    ),
                ));
            }
        }
    }
    let need = |key: &str| ctx.err(table_span.clone(), format!("fault `{kind}` needs `{key}`"));
    let check_node = |name: &Spanned<String>| -> Result<String, ScenarioError> {
        if nodes.iter().any(|n| n == name.get_ref()) {
            Ok(name.get_ref().clone())
        } else {
            Err(ctx.err(
                name.span(),
                format!(
                    "unknown node `{}`; this scenario's nodes are {}",
                    name.get_ref(),
                    quoted(&nodes.iter().map(String::as_str).collect::<Vec<_>>())
                ),
            ))
        }
    };

    let trigger = match (&f.on, &f.at_ms) {
        (Some(_), Some(at)) => {
            return Err(ctx.err(at.span(), "a fault fires either `at_ms` or `on`, not both"))
        }
        (None, Some(at)) => {
            if let Some(a) = &f.after_ms {
                return Err(ctx.err(a.span(), "`after_ms` goes with `on`, not with `at_ms`"));
            }
            Trigger::At(*at.get_ref())
        }
        (Some(on), None) => {
            let after_ms = f.after_ms.as_ref().map(|a| *a.get_ref()).unwrap_or(0);
            let points = scenario.points();
            let point = on.get_ref().as_str();
            match point {
                p if points.contains(&p) => Trigger::on_point(p, after_ms),
                other => {
                    return Err(ctx.err(
                        on.span(),
                        format!(
                            "unknown trigger `{other}`, expected one of {} (the workload's points and those of lock kind `{}`)",
                            quoted(&points),
                            scenario.lock.kind.name()
                        ),
                    ))
                }
            }
        }
        (None, None) => {
            return Err(ctx.err(
                table_span,
                format!("fault `{kind}` needs a trigger: `at_ms = <ms>` or `on = \"acquired\"`"),
            ))
        }
    };

    let kind = match kind {
        "failover" => {
            let master = f.master.as_ref().map(|m| *m.get_ref()).unwrap_or(0);
            if master >= scenario.redis.masters {
                let span = f.master.as_ref().map(|m| m.span()).unwrap_or(table_span);
                return Err(ctx.err(
                    span,
                    format!(
                        "`master = {master}` but the scenario has {} master(s)",
                        scenario.redis.masters
                    ),
                ));
            }
            if scenario.redis.replicas == 0 {
                return Err(ctx.err(
                    table_span,
                    "a `failover` needs a replica to promote: set `[redis] replicas = 1` or more",
                ));
            }
            FaultKind::Failover { master }
        }
        "pause" => {
            let client = match &f.client {
                None => ClientRef::Holder,
                Some(c) => match c.get_ref() {
                    toml::Value::String(s) if s == "holder" => ClientRef::Holder,
                    toml::Value::Integer(i)
                        if *i >= 0 && (*i as u64) < scenario.workload.clients as u64 =>
                    {
                        ClientRef::Index(*i as u32)
                    }
                    other => {
                        return Err(ctx.err(
                            c.span(),
                            format!(
                                "`client` must be \"holder\" or a client index 0..{}, got {other}",
                                scenario.workload.clients
                            ),
                        ))
                    }
                },
            };
            FaultKind::Pause {
                client,
                for_ms: *f.for_ms.as_ref().ok_or_else(|| need("for_ms"))?.get_ref(),
            }
        }
        "partition" => {
            let names = f.nodes.as_ref().ok_or_else(|| need("nodes"))?;
            let list = |v: &Spanned<Vec<String>>| -> Result<Vec<String>, ScenarioError> {
                v.get_ref()
                    .iter()
                    .map(|n| check_node(&Spanned::new(v.span(), n.clone())))
                    .collect()
            };
            let nodes = list(names)?;
            let from = match &f.from {
                Some(fr) => list(fr)?,
                None => Vec::new(),
            };
            if let Some(both) = nodes.iter().find(|n| from.contains(n)) {
                let span = f.from.as_ref().map(|s| s.span()).unwrap_or(table_span);
                return Err(ctx.err(
                    span,
                    format!("`{both}` is in both `nodes` and `from`: a node cannot be cut off from itself"),
                ));
            }
            let direction = match &f.direction {
                None => Direction::Both,
                Some(d) => Direction::parse(d.get_ref()).ok_or_else(|| {
                    ctx.err(
                        d.span(),
                        format!(
                            "unknown direction `{}`, expected one of {}",
                            d.get_ref(),
                            quoted(Direction::NAMES)
                        ),
                    )
                })?,
            };
            FaultKind::Partition {
                nodes,
                from,
                for_ms: *f.for_ms.as_ref().ok_or_else(|| need("for_ms"))?.get_ref(),
                direction,
            }
        }
        "clock_jump" => FaultKind::ClockJump {
            node: check_node(f.node.as_ref().ok_or_else(|| need("node"))?)?,
            by_ms: *f.by_ms.as_ref().ok_or_else(|| need("by_ms"))?.get_ref(),
        },
        "clock_drift" => {
            let ppm = f.ppm.as_ref().ok_or_else(|| need("ppm"))?;
            if *ppm.get_ref() <= -1_000_000 {
                return Err(ctx.err(
                    ppm.span(),
                    "`ppm` must stay above -1000000 (a clock that stands still or runs backwards)",
                ));
            }
            FaultKind::ClockDrift {
                node: check_node(f.node.as_ref().ok_or_else(|| need("node"))?)?,
                ppm: *ppm.get_ref(),
            }
        }
        "crash" => {
            let node_key = f.node.as_ref().ok_or_else(|| need("node"))?;
            let node = check_node(node_key)?;
            if let Some(c) = node.strip_prefix("client-") {
                // A client crash: the process dies at its trigger and never comes back.
                if let Some(r) = &f.restart_after_ms {
                    return Err(ctx.err(
                        r.span(),
                        "a crashed client does not restart: `restart_after_ms` is for Redis nodes",
                    ));
                }
                if matches!(trigger, Trigger::At(_)) {
                    return Err(ctx.err(
                        table_span,
                        format!(
                            "a client crash fires at a named point: use `on = ...` with one of {}",
                            quoted(&scenario.points())
                        ),
                    ));
                }
                FaultKind::ClientCrash {
                    client: c.parse().expect("client names are client-<index>"),
                }
            } else {
                FaultKind::Crash {
                    node,
                    restart_after_ms: *f
                        .restart_after_ms
                        .as_ref()
                        .ok_or_else(|| need("restart_after_ms"))?
                        .get_ref(),
                }
            }
        }
        _ => unreachable!(),
    };
    Ok(Fault { trigger, kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
expect = "violation"
duration_ms = 1000
[lock]
kind = "set-nx-px"
ttl_ms = 100
[redis]
replicas = 1
[[faults]]
kind = "failover"
on = "acquired"
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 500
"#;

    #[test]
    fn parses_the_contract_example() {
        let s = Scenario::parse("t.toml", GOOD).unwrap();
        assert_eq!(s.faults.len(), 2);
        assert_eq!(s.faults[0].kind, FaultKind::Failover { master: 0 });
        assert_eq!(s.faults[0].trigger, Trigger::Acquired { after_ms: 0 });
        assert_eq!(
            s.faults[1].kind,
            FaultKind::Pause {
                client: ClientRef::Holder,
                for_ms: 500
            }
        );
        assert_eq!(s.expected("mutual_exclusion"), Some(Verdict::Violation));
    }

    #[test]
    fn unknown_lock_kind_names_the_choices_and_position() {
        let text = GOOD.replace("set-nx-px", "sux");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert_eq!((e.line, e.file.as_str()), (6, "t.toml"));
        assert!(e.message.contains("set-nx-px"), "{e}");
    }

    #[test]
    fn unknown_key_is_located() {
        let text = GOOD.replace("ttl_ms = 100", "ttl_ms = 100\nttl = 5");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert_eq!(e.line, 8, "{e}");
        assert!(e.message.contains("unknown field `ttl`"), "{e}");
    }

    #[test]
    fn unknown_fault_kind_and_node() {
        let e = Scenario::parse("t.toml", &GOOD.replace("\"failover\"", "\"meteor\"")).unwrap_err();
        assert_eq!(e.line, 11, "{e}");
        assert!(e.message.contains("`clock_jump`"), "{e}");
        let text = format!("{GOOD}\n[[faults]]\nkind = \"crash\"\nnode = \"redis-7\"\nat_ms = 5\nrestart_after_ms = 1\n");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("unknown node `redis-7`"), "{e}");
        assert!(e.message.contains("`redis-0-replica-0`"), "{e}");
    }

    #[test]
    fn key_of_another_fault_kind_is_rejected() {
        let text = GOOD.replace("for_ms = 500", "for_ms = 500\nby_ms = 3");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("has no key `by_ms`"), "{e}");
        assert_eq!(e.line, 18);
    }

    #[test]
    fn bad_ranges_and_missing_trigger() {
        let text = GOOD.replace("replicas = 1", "replicas = 1\nreplication_lag_ms = [9, 1]");
        assert!(Scenario::parse("t.toml", &text)
            .unwrap_err()
            .message
            .contains("low <= high"));
        let text = GOOD.replace("on = \"acquired\"\n[[faults]]", "[[faults]]");
        assert!(Scenario::parse("t.toml", &text)
            .unwrap_err()
            .message
            .contains("needs a trigger"));
    }

    const NAIVE: &str = r#"
name = "t"
expect = "safe"
duration_ms = 1000
[lock]
kind = "naive-setnx-expire"
ttl_ms = 1000
[[faults]]
kind = "crash"
node = "client-0"
on = "after_setnx"
"#;

    #[test]
    fn a_client_crash_fires_at_a_named_point() {
        let s = Scenario::parse("t.toml", NAIVE).unwrap();
        assert_eq!(s.faults[0].kind, FaultKind::ClientCrash { client: 0 });
        assert_eq!(
            s.faults[0].trigger,
            Trigger::Point {
                point: "after_setnx".into(),
                after_ms: 0
            }
        );
        // A crash while holding: the `acquired` trigger.
        let s = Scenario::parse("t.toml", &NAIVE.replace("after_setnx", "acquired")).unwrap();
        assert_eq!(s.faults[0].trigger, Trigger::Acquired { after_ms: 0 });
    }

    #[test]
    fn an_unknown_point_names_the_choices_of_that_lock() {
        let e = Scenario::parse("t.toml", &NAIVE.replace("after_setnx", "after-set")).unwrap_err();
        assert_eq!(e.line, 11, "{e}");
        for p in [
            "`acquired`",
            "`after_read`",
            "`before_release`",
            "`after_setnx`",
            "`before_del`",
        ] {
            assert!(e.message.contains(p), "{e}");
        }
        // Another lock has no `after_setnx`: a scenario cannot silently never fire.
        let text = NAIVE.replace("naive-setnx-expire", "set-nx-px");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("unknown trigger `after_setnx`"), "{e}");
        assert!(e.message.contains("lock kind `set-nx-px`"), "{e}");
    }

    #[test]
    fn a_crashed_client_neither_restarts_nor_crashes_at_a_time() {
        let text = NAIVE.replace(
            "on = \"after_setnx\"",
            "on = \"after_setnx\"\nrestart_after_ms = 5",
        );
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("does not restart"), "{e}");
        let text = NAIVE.replace("on = \"after_setnx\"", "at_ms = 5");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("named point"), "{e}");
        assert!(e.message.contains("`after_setnx`"), "{e}");
        // A Redis node crash still needs its restart time.
        let text = format!("{GOOD}\n[[faults]]\nkind = \"crash\"\nnode = \"redis-0\"\nat_ms = 5\n");
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("needs `restart_after_ms`"), "{e}");
    }

    #[test]
    fn watchdog_timeout_is_redissons_and_a_redisson_lease_is_optional() {
        let e = Scenario::parse(
            "t.toml",
            &GOOD.replace("ttl_ms = 100", "ttl_ms = 100\nwatchdog_timeout_ms = 3000"),
        )
        .unwrap_err();
        assert!(e.message.contains("`redisson`"), "{e}");
        assert!(e.message.contains("has no watchdog"), "{e}");
        let text = GOOD
            .replace("set-nx-px", "redisson")
            .replace("ttl_ms = 100", "watchdog_timeout_ms = 3000");
        let s = Scenario::parse("t.toml", &text).unwrap();
        assert_eq!(s.lock.lease_ms(), 3000);
        assert_eq!(s.lock.ttl_ms, None);
        let s = Scenario::parse("t.toml", &GOOD.replace("set-nx-px", "redisson")).unwrap();
        assert_eq!(s.lock.lease_ms(), 100, "ttl_ms set: an explicit lease");
        // Without ttl_ms, a lock with no default lease is refused.
        let e = Scenario::parse("t.toml", &GOOD.replace("ttl_ms = 100", "")).unwrap_err();
        assert!(e.message.contains("needs `ttl_ms`"), "{e}");
    }

    #[test]
    fn workload_kind_and_nesting() {
        let text = GOOD.replace(
            "[redis]",
            "[workload]\nkind = \"address-book\"\nnested = 2\n[redis]",
        );
        let s = Scenario::parse("t.toml", &text).unwrap();
        assert_eq!(s.workload.kind, WorkloadKind::AddressBook);
        assert_eq!(s.workload.nested, 2);
        let e = Scenario::parse("t.toml", &text.replace("address-book", "ledger")).unwrap_err();
        assert!(
            e.message.contains("`counter`") && e.message.contains("`address-book`"),
            "{e}"
        );
    }

    #[test]
    fn every_check_name_is_accepted_in_expect_checks() {
        for c in CHECK_NAMES {
            let text = GOOD.replace(
                "expect = \"violation\"",
                &format!("expect = \"violation\"\nexpect_checks = {{ {c} = \"safe\" }}"),
            );
            let s = Scenario::parse("t.toml", &text).unwrap();
            assert_eq!(s.expected(c), Some(Verdict::Safe));
        }
        let text = GOOD.replace(
            "expect = \"violation\"",
            "expect = \"violation\"\nexpect_checks = { damage = \"safe\" }",
        );
        let e = Scenario::parse("t.toml", &text).unwrap_err();
        assert!(e.message.contains("`foreign_release`"), "{e}");
    }

    #[test]
    fn partition_direction_is_strict_and_defaults_to_both() {
        let base = format!(
            "{GOOD}\n[[faults]]\nkind = \"partition\"\nnodes = [\"redis-0\"]\nfrom = [\"client-0\"]\nat_ms = 0\nfor_ms = 5\n"
        );
        let s = Scenario::parse("t.toml", &base).unwrap();
        let FaultKind::Partition { direction, .. } = &s.faults[2].kind else {
            panic!("{:?}", s.faults[2]);
        };
        assert_eq!(*direction, Direction::Both);
        let s = Scenario::parse("t.toml", &format!("{base}direction = \"outbound\"\n")).unwrap();
        assert!(matches!(
            s.faults[2].kind,
            FaultKind::Partition {
                direction: Direction::Outbound,
                ..
            }
        ));
        let e =
            Scenario::parse("t.toml", &format!("{base}direction = \"sideways\"\n")).unwrap_err();
        assert!(e.message.contains("unknown direction `sideways`"), "{e}");
        assert!(e.message.contains("`inbound`"), "{e}");
        // A direction on another kind of fault is rejected like any foreign key.
        let e = Scenario::parse(
            "t.toml",
            &GOOD.replace("for_ms = 500", "for_ms = 500\ndirection = \"both\""),
        )
        .unwrap_err();
        assert!(e.message.contains("has no key `direction`"), "{e}");
        let e = Scenario::parse("t.toml", &base.replace("[\"client-0\"]", "[\"redis-0\"]"))
            .unwrap_err();
        assert!(e.message.contains("cannot be cut off from itself"), "{e}");
    }

    #[test]
    fn redlock_keys_belong_to_redlock_and_before_write_is_a_trigger() {
        let e = Scenario::parse(
            "t.toml",
            &GOOD.replace("ttl_ms = 100", "ttl_ms = 100\ndrift_factor = 0.02"),
        )
        .unwrap_err();
        assert!(
            e.message.contains("`drift_factor` is a Redlock parameter"),
            "{e}"
        );
        assert_eq!(e.line, 8);
        let redlock = GOOD
            .replace("set-nx-px", "redlock")
            .replace("ttl_ms = 100", "ttl_ms = 100\ndrift_factor = 0.02\nrecheck_after_acquire = false\ncheck_validity_before_write = true")
            .replace("on = \"acquired\"\nfor_ms", "on = \"before_write\"\nfor_ms");
        let s = Scenario::parse("t.toml", &redlock).unwrap();
        let c = crate::lock::LockConfig::from_spec(&s.lock);
        assert_eq!(c.redlock.drift_factor, 0.02);
        assert!(!c.redlock.recheck_after_acquire);
        assert!(s.lock.check_validity_before_write);
        assert_eq!(s.faults[1].trigger, Trigger::BeforeWrite { after_ms: 0 });
        let e = Scenario::parse("t.toml", &redlock.replace("0.02", "1.5")).unwrap_err();
        assert!(e.message.contains("[0, 1)"), "{e}");
        let e = Scenario::parse(
            "t.toml",
            &GOOD.replace("on = \"acquired\"\nfor_ms", "on = \"released\"\nfor_ms"),
        )
        .unwrap_err();
        assert!(e.message.contains("`before_write`"), "{e}");
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
