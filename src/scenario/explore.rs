//! The search space of `lockcheck explore`: the scenario's optional `[explore]` table, and the
//! default space for a lock kind when the table is absent.
//!
//! Every key is optional; what is not given comes from the scenario (its lease, duration,
//! topology and workload), so a scenario with no `[[faults]]` and no `[explore]` table can be
//! explored as it is.

use super::Scenario;
use serde::Deserialize;

/// The fault kinds explore can draw, as written in `[explore] faults`. `crash` crashes a server
/// (a Redis node restarts empty, the MySQL locks' database keeps its committed rows) and it comes
/// back after `restart_ms`; `client_crash` kills a client at a named point; `server_pause` stops
/// the MySQL locks' database server (`SIGSTOP`) for `pause_ms`; `wall_clock_jump` steps one
/// node's wall clock alone (a lock that measures its validity on the wall clock believes a wrong
/// lease; a Redis node expires keys early or late).
pub const EXPLORE_FAULTS: &[&str] = &[
    "pause",
    "failover",
    "crash",
    "client_crash",
    "partition",
    "clock_jump",
    "clock_drift",
    "wall_clock_jump",
    "server_pause",
    "terminate",
];

/// The kinds drawn only when `[explore] faults` lists them. A wall-clock jump matters to a lock
/// that reads the wall clock: lockcheck's locks measure validity on the monotonic clock, so on
/// a client it changes nothing for them, and on a Redis node (which expires keys on its wall
/// clock) it does what `clock_jump` already draws. A search by default would spend cases on it
/// and find `clock_jump`'s findings under another name.
pub const OPT_IN_FAULTS: &[&str] = &["wall_clock_jump"];

/// Faults per schedule when `max_faults` is not given: small, because a short schedule is what
/// a person can read and what proptest shrinks fastest.
pub const DEFAULT_MAX_FAULTS: usize = 3;

/// The most faults one schedule may have: more cannot be shrunk to a readable schedule.
pub const MAX_FAULTS: usize = 16;

/// Why fault kind `kind` cannot happen to `scenario`'s cluster, or `None` when it can. Explore
/// draws only the kinds that apply (a MySQL lock has no Redis node to fail over), and refuses an
/// `[explore] faults` list that names one that does not.
pub fn not_applicable(kind: &str, scenario: &Scenario) -> Option<String> {
    let backend = scenario.backend;
    if kind == "terminate" && !backend.ends_sessions() {
        return Some(format!(
            "`terminate` ends a server session the client lives on without; {} has none to end: drop it",
            backend.name()
        ));
    }
    backend.not_drawable(kind, scenario)
}

/// How long a scenario's fault-free workload takes at most, when its clients contend: a cycle
/// takes the longest of every client holding the lock in turn (the holds serialize) and one
/// client's own hold and think time (the thinks overlap the others' holds). A fault after this
/// span finds every client done and changes nothing.
pub fn workload_span_ms(scenario: &Scenario) -> u64 {
    let w = &scenario.workload;
    let [_, hold] = w.hold_ms;
    let [_, think] = w.think_ms;
    let cycle = u64::from(w.clients)
        .saturating_mul(hold)
        .max(hold.saturating_add(think))
        .max(1);
    u64::from(w.cycles).saturating_mul(cycle)
}

/// Why a space was refused: the `[explore]` key at fault (`None`: the table as a whole), so the
/// message can name its line and column, and what to write instead.
#[derive(Clone, Debug, PartialEq)]
pub struct SpaceError {
    /// The key of `[explore]` whose value is wrong.
    pub key: Option<&'static str>,
    /// One line: what is wrong and how to fix it.
    pub message: String,
}

impl std::fmt::Display for SpaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SpaceError {}

fn refuse(key: &'static str, message: impl Into<String>) -> SpaceError {
    SpaceError {
        key: Some(key),
        message: format!("[explore] `{key}`: {}", message.into()),
    }
}

/// At most the first 40 characters of a name from the file, so that a message never echoes a
/// huge value whole.
fn excerpt(s: &str) -> String {
    super::input::excerpt(s, 40)
}

/// `[explore]` as written. Ranges are `[low, high]`, both ends included.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExploreSpec {
    /// Faults per schedule: from 0 to this.
    pub max_faults: Option<usize>,
    /// Which fault kinds to draw (default: every kind that applies to the cluster, but those of
    /// [`OPT_IN_FAULTS`]).
    pub faults: Option<Vec<String>>,
    /// The named points pauses and client crashes may fire at (default: all of the workload's
    /// and the lock's).
    pub points: Option<Vec<String>>,
    /// Length of a pause, of a client or of the database server (default: 1 ms to three leases).
    pub pause_ms: Option<[u64; 2]>,
    /// The pauses of one case together last at most this (default: no bound). Pauses add up:
    /// two back-to-back pauses of a holder, each shorter than its lease, can outlast it, so a
    /// space meant to be safe bounds their sum, not only each one.
    pub max_total_pause_ms: Option<u64>,
    /// How long a crashed server stays down before it restarts (default: 0 to three leases).
    pub restart_ms: Option<[u64; 2]>,
    /// Length of a partition (default: 1 ms to three leases).
    pub partition_ms: Option<[u64; 2]>,
    /// A clock jump's step (default: three leases back to three leases forward).
    pub clock_jump_ms: Option<[i64; 2]>,
    /// A clock's rate error in ppm (default: ±100000, i.e. 10 %).
    pub clock_drift_ppm: Option<[i64; 2]>,
    /// A wall-clock jump's step (default: three leases back to three leases forward).
    pub wall_clock_jump_ms: Option<[i64; 2]>,
    /// Nested acquires inside each critical section (default: 0 to the scenario's `nested`, so
    /// only a scenario that calls its lock reentrant has it taken again).
    pub nested: Option<[u32; 2]>,
    /// Clients in the workload (default: from 2, or 1 for a one-client scenario, up to the
    /// scenario's count: explore never runs more clients than the scenario has).
    pub clients: Option<[u32; 2]>,
    /// Cycles per client (default: 1 to the scenario's count).
    pub cycles: Option<[u32; 2]>,
    /// Critical-section length (default: the scenario's `hold_ms`).
    pub hold_ms: Option<[u64; 2]>,
    /// A fault at a named point fires the first time a client passes the point at or after a
    /// true time drawn from this range (ms; default: 0 to the run's duration). Narrow it to aim
    /// at the first cycles: a point reached late in a run may have no other client left to
    /// conflict with.
    pub after_ms: Option<[u64; 2]>,
    /// Whether a drawn pause may stop a holder inside the workload's own check-to-write window:
    /// after its last look at its lease (its validity check, its last renewal, or with neither
    /// its grant) and before its write. No lease lock survives a pause there, so a search that
    /// allows it flags a correct lock where a broken one is flagged, and cannot tell them apart.
    /// `false` keeps pauses out: none is drawn at `before_write`, and one that fires inside a
    /// window waits until the holder has written (in simulation; real mode draws pauses at named
    /// points only). Default: `true` for lockcheck's own locks (a pause there is how an unfenced
    /// lock's stale write is found), `false` for a lock of the user's own, whose search is about
    /// the lock. A finding records it, so its file replays the same run.
    pub pause_between_check_and_write: Option<bool>,
}

/// The resolved space one search draws from: every range known, non-empty and checked, every
/// name checked, every fault kind one that applies to the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    /// Faults per schedule: from 0 to this.
    pub max_faults: usize,
    /// The fault kinds to draw, each one of [`EXPLORE_FAULTS`] that applies to the cluster.
    pub faults: Vec<&'static str>,
    /// The named points pauses and client crashes may fire at, the lock's and the workload's.
    pub points: Vec<String>,
    /// Length of a pause (ms, both ends included), as [`ExploreSpec::pause_ms`] resolved.
    pub pause_ms: [u64; 2],
    /// The pauses of one case add up to at most this (ms; `u64::MAX`: no bound).
    pub max_total_pause_ms: u64,
    /// How long a crashed server stays down (ms).
    pub restart_ms: [u64; 2],
    /// Length of a partition (ms).
    pub partition_ms: [u64; 2],
    /// A clock jump's step (ms; negative jumps back).
    pub clock_jump_ms: [i64; 2],
    /// A clock's rate error (ppm).
    pub clock_drift_ppm: [i64; 2],
    /// A wall-clock jump's step (ms; negative jumps back).
    pub wall_clock_jump_ms: [i64; 2],
    /// Nested acquires inside each critical section.
    pub nested: [u32; 2],
    /// Clients in the workload.
    pub clients: [u32; 2],
    /// Cycles per client.
    pub cycles: [u32; 2],
    /// Critical-section length (ms).
    pub hold_ms: [u64; 2],
    /// Times (`at_ms`, `after_ms`) are drawn below the scenario's duration.
    pub duration_ms: u64,
    /// The range of a point trigger's `after_ms`, when `[explore] after_ms` gives one (else 0 to
    /// `duration_ms`): see [`Space::after_ms`].
    pub after_ms_given: Option<[u64; 2]>,
    /// Master groups (for `failover`).
    pub masters: u32,
    /// `[redis] sentinels`, as read. Explore no longer reads it: the nodes a split may cut a
    /// master off from are the backend's watchers (`BackendDecl::watchers`), whatever the service.
    #[deprecated(
        since = "0.1.0",
        note = "explore takes the deployment's watchers from `BackendDecl::watchers`"
    )]
    pub sentinels: u32,
    /// Whether the deployment promotes a replica by itself (`BackendDecl::promotes_by_itself`:
    /// Sentinel, a Redis Cluster): a `partition` may then also split a master and some clients
    /// from the rest, the split brain its users meet.
    pub split_brain: bool,
    /// The cluster's servers, the nodes a crash, a partition, a clock fault or a server pause
    /// may hit: the Redis nodes, or the MySQL locks' database server.
    pub servers: Vec<String>,
    /// The scenario's seed, every case's seed on real servers (see [`Space::on_real_servers`]).
    pub seed: u64,
    /// The cases run on spawned servers and client processes (`explore --real`).
    pub real: bool,
    /// Whether pauses may stop a holder inside its check-to-write window
    /// ([`ExploreSpec::pause_between_check_and_write`], resolved).
    pub pause_between_check_and_write: bool,
}

impl Space {
    /// The space of `scenario`: its `[explore]` table over the default for its lock kind.
    /// An error names the key and says what to write instead.
    pub fn of(scenario: &Scenario) -> Result<Space, SpaceError> {
        let spec = scenario.explore.clone().unwrap_or_default();
        let lease = scenario.lock.lease_ms().max(1);
        let three = lease.saturating_mul(3);
        let faults: Vec<&'static str> = match &spec.faults {
            None => EXPLORE_FAULTS
                .iter()
                .copied()
                .filter(|k| not_applicable(k, scenario).is_none() && !OPT_IN_FAULTS.contains(k))
                .collect(),
            Some(names) => {
                let mut v = Vec::new();
                for n in names {
                    let Some(k) = EXPLORE_FAULTS.iter().find(|k| *k == n) else {
                        return Err(refuse(
                            "faults",
                            format!(
                                "unknown fault kind `{}`, expected one of {}",
                                excerpt(n),
                                EXPLORE_FAULTS.join(", ")
                            ),
                        ));
                    };
                    if let Some(why) = not_applicable(k, scenario) {
                        return Err(refuse("faults", why));
                    }
                    if !v.contains(k) {
                        v.push(*k);
                    }
                }
                v
            }
        };
        let all_points: Vec<String> = scenario.points().iter().map(|p| p.to_string()).collect();
        let points = match &spec.points {
            None => all_points,
            Some(p) => {
                if let Some(bad) = p.iter().find(|x| !all_points.contains(x)) {
                    return Err(refuse(
                        "points",
                        format!(
                            "unknown point `{}`, expected some of {}",
                            excerpt(bad),
                            all_points.join(", ")
                        ),
                    ));
                }
                p.clone()
            }
        };
        let w = &scenario.workload;
        #[allow(deprecated)] // `sentinels`, filled for code that still reads it
        let space = Space {
            max_faults: spec.max_faults.unwrap_or(DEFAULT_MAX_FAULTS),
            faults,
            points,
            pause_ms: spec.pause_ms.unwrap_or([1, three]),
            max_total_pause_ms: spec.max_total_pause_ms.unwrap_or(u64::MAX),
            restart_ms: spec.restart_ms.unwrap_or([0, three]),
            partition_ms: spec.partition_ms.unwrap_or([1, three]),
            clock_jump_ms: spec
                .clock_jump_ms
                .unwrap_or([-(three as i64), three as i64]),
            clock_drift_ppm: spec.clock_drift_ppm.unwrap_or([-100_000, 100_000]),
            wall_clock_jump_ms: spec
                .wall_clock_jump_ms
                .unwrap_or([-(three as i64), three as i64]),
            nested: spec.nested.unwrap_or([0, w.nested]),
            clients: {
                let [lo, hi] = spec.clients.unwrap_or([w.clients.min(2), w.clients]);
                // An inverted range is left as written, for the range check to refuse.
                if lo <= hi {
                    [lo.max(clients_named(scenario)).min(hi), hi]
                } else {
                    [lo, hi]
                }
            },
            cycles: spec.cycles.unwrap_or([1, w.cycles]),
            hold_ms: spec.hold_ms.unwrap_or(w.hold_ms),
            duration_ms: scenario.duration_ms,
            after_ms_given: spec.after_ms,
            masters: scenario.redis.masters,
            sentinels: scenario.redis.sentinels,
            split_brain: scenario.backend().promotes_by_itself(scenario),
            servers: {
                let watchers = scenario.backend().watchers(scenario);
                scenario
                    .node_names()
                    .into_iter()
                    .filter(|n| !n.starts_with("client-") && !watchers.contains(n))
                    .collect()
            },
            seed: scenario.seed,
            real: false,
            pause_between_check_and_write: spec
                .pause_between_check_and_write
                .unwrap_or(scenario.lock.kind.origin() == crate::lock::Origin::Builtin),
        };
        let named = clients_named(scenario);
        if space.clients[1] < named {
            return Err(refuse(
                "clients",
                format!(
                    "`[clocks] nodes` names client-{}, so every case needs at least {named} \
                     clients: draw `clients = [{named}, {}]` or more",
                    named - 1,
                    named.max(space.clients[1])
                ),
            ));
        }
        space.validate()?;
        Ok(space)
    }

    /// The same space searched on real servers (`explore --real`). Three things change in what
    /// is drawn, because a real run is not a function of its seed and costs a second, not a
    /// millisecond:
    /// - every case keeps the scenario's seed: it fixes only lockcheck's own draws (think and
    ///   hold times), not the servers' and the processes' timing, so drawing and shrinking it
    ///   would spend real runs on noise;
    /// - each fault is fired the way real mode can fire it: a client pause at a named point (real
    ///   mode stops a process when it reaches one, never at a bare time), a server or network
    ///   fault at a time, a clock drift from the start (libfaketime sets a server's rate when it
    ///   starts). A case real mode still has no recipe for (say a clock fault on a replica) is
    ///   skipped and counted, not run;
    /// - times (`at_ms`, `after_ms`) are drawn below the workload's own length when that is
    ///   shorter than `duration_ms`: a real run ends when its clients have done their cycles, so
    ///   a fault drawn after that never fires, and the case is a second spent on a fault-free run.
    ///   The length is [`workload_span_ms`], and so that it is the run's, every case keeps the
    ///   scenario's cycles unless `[explore] cycles` says otherwise. (In simulation a wasted case
    ///   costs a millisecond, and the space stays as it always was.)
    pub fn on_real_servers(mut self, scenario: &Scenario) -> Space {
        self.real = true;
        self.duration_ms = self.duration_ms.min(workload_span_ms(scenario));
        let given = scenario.explore.as_ref().and_then(|e| e.cycles);
        if given.is_none() {
            self.cycles = [scenario.workload.cycles; 2];
        }
        self
    }

    /// The range a point trigger's `after_ms` is drawn from (ms, both ends included).
    pub fn after_ms(&self) -> [u64; 2] {
        self.after_ms_given.unwrap_or([0, self.duration_ms])
    }

    /// Every range the strategy draws from must be non-empty (proptest panics on an empty one)
    /// and every count within what a run and a shrink can take.
    fn validate(&self) -> Result<(), SpaceError> {
        let unsigned = [
            ("pause_ms", self.pause_ms),
            ("restart_ms", self.restart_ms),
            ("partition_ms", self.partition_ms),
            ("hold_ms", self.hold_ms),
            ("after_ms", self.after_ms()),
            (
                "clients",
                [u64::from(self.clients[0]), u64::from(self.clients[1])],
            ),
            (
                "cycles",
                [u64::from(self.cycles[0]), u64::from(self.cycles[1])],
            ),
            (
                "nested",
                [u64::from(self.nested[0]), u64::from(self.nested[1])],
            ),
        ];
        let signed = [
            ("clock_jump_ms", self.clock_jump_ms),
            ("clock_drift_ppm", self.clock_drift_ppm),
            ("wall_clock_jump_ms", self.wall_clock_jump_ms),
        ];
        let reversed = unsigned
            .iter()
            .map(|&(k, [lo, hi])| (k, lo > hi, format!("[{lo}, {hi}]")))
            .chain(
                signed
                    .iter()
                    .map(|&(k, [lo, hi])| (k, lo > hi, format!("[{lo}, {hi}]"))),
            );
        for (key, bad, got) in reversed {
            if bad {
                return Err(refuse(
                    key,
                    format!("a range [low, high] needs low <= high, got {got}"),
                ));
            }
        }
        if self.clock_drift_ppm[0] <= -1_000_000 {
            return Err(refuse(
                "clock_drift_ppm",
                "must stay above -1000000 (a clock that stands still)",
            ));
        }
        if self.clients[0] == 0 {
            return Err(refuse("clients", "must start at 1 or more"));
        }
        if self.cycles[0] == 0 {
            return Err(refuse("cycles", "must start at 1 or more"));
        }
        if self.max_faults > 0 && self.faults.is_empty() {
            return Err(refuse(
                "faults",
                "is empty: list some fault kinds or set `max_faults = 0`",
            ));
        }
        if self.max_faults > MAX_FAULTS {
            return Err(refuse(
                "max_faults",
                format!(
                    "{} is too many to shrink to a readable schedule; use {MAX_FAULTS} or fewer",
                    self.max_faults
                ),
            ));
        }
        if self.points.is_empty() && self.max_faults > 0 {
            return Err(refuse(
                "points",
                "give at least one point (faults fire at a time or at a named point)",
            ));
        }
        if self.max_total_pause_ms < self.pause_ms[0] {
            return Err(refuse(
                "max_total_pause_ms",
                format!(
                    "{} is below the shortest pause (`pause_ms` starts at {}): no pause could be drawn",
                    self.max_total_pause_ms, self.pause_ms[0]
                ),
            ));
        }
        let needs_servers = [
            "crash",
            "partition",
            "clock_jump",
            "clock_drift",
            "server_pause",
        ];
        if self.servers.is_empty() {
            if let Some(k) = self.faults.iter().find(|k| needs_servers.contains(k)) {
                return Err(refuse(
                    "faults",
                    format!("`{k}` needs a server, and the cluster has none: drop it"),
                ));
            }
        }
        if self.faults.contains(&"failover") && self.masters == 0 {
            return Err(refuse("faults", "`failover` needs a master: drop it"));
        }
        Ok(())
    }
}

/// How many clients a case needs so that every client `[clocks] nodes` names exists (the
/// highest named index plus one; 0 when it names none). A case with fewer would write a finding
/// that does not parse: the scenario's `[clocks]` table would name a node it does not have.
/// (Drawn faults name only the case's own clients, and the scenario's own `[[faults]]` are not
/// part of a case.)
fn clients_named(scenario: &Scenario) -> u32 {
    scenario
        .clocks
        .nodes
        .as_ref()
        .map(|n| {
            n.get_ref()
                .iter()
                .filter_map(|x| x.strip_prefix("client-")?.parse::<u32>().ok())
                .map(|c| c + 1)
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}
