//! The search space of `lockcheck explore`: the scenario's optional `[explore]` table, and the
//! default space for a lock kind when the table is absent.
//!
//! Every key is optional; what is not given comes from the scenario (its lease, duration,
//! topology and workload), so a scenario with no `[[faults]]` and no `[explore]` table can be
//! explored as it is.

use super::Scenario;
use serde::Deserialize;

/// The fault kinds explore can draw, as written in `[explore] faults`. `crash` crashes a Redis
/// node (it restarts empty after `restart_ms`); `client_crash` kills a client at a named point;
/// `wall_clock_jump` steps one node's wall clock alone (a lock that measures its validity on the
/// wall clock believes a wrong lease; a Redis node expires keys early or late).
pub const EXPLORE_FAULTS: &[&str] = &[
    "pause",
    "failover",
    "crash",
    "client_crash",
    "partition",
    "clock_jump",
    "clock_drift",
    "wall_clock_jump",
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
    /// Length of a GC pause (default: 1 ms to three leases).
    pub pause_ms: Option<[u64; 2]>,
    /// How long a crashed Redis node stays down before it restarts empty (default: 0 to three leases).
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
    /// Clients in the workload (default: from 2 (or 1) to the scenario's count).
    pub clients: Option<[u32; 2]>,
    /// Cycles per client (default: 1 to the scenario's count).
    pub cycles: Option<[u32; 2]>,
    /// Critical-section length (default: the scenario's `hold_ms`).
    pub hold_ms: Option<[u64; 2]>,
}

/// The resolved space one search draws from: every range known, every name checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    /// Faults per schedule: from 0 to this.
    pub max_faults: usize,
    /// The fault kinds to draw, each one of [`EXPLORE_FAULTS`] that applies to the cluster.
    pub faults: Vec<&'static str>,
    /// The named points pauses and client crashes may fire at, the lock's and the workload's.
    pub points: Vec<String>,
    /// Length of a GC pause (ms, both ends included), as [`ExploreSpec::pause_ms`] resolved.
    pub pause_ms: [u64; 2],
    /// How long a crashed Redis node stays down (ms).
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
    /// Master groups (for `failover`).
    pub masters: u32,
    /// The Redis nodes' names (for `crash`, partitions and clocks).
    pub redis_nodes: Vec<String>,
}

impl Space {
    /// The space of `scenario`: its `[explore]` table over the default for its lock kind.
    /// An error is one line naming the key and what to write instead.
    pub fn of(scenario: &Scenario) -> Result<Space, String> {
        let spec = scenario.explore.clone().unwrap_or_default();
        let lease = scenario.lock.lease_ms().max(1);
        let three = lease.saturating_mul(3);
        let applies = |k: &str| k != "failover" || scenario.redis.replicas > 0;
        let faults: Vec<&'static str> = match &spec.faults {
            None => EXPLORE_FAULTS
                .iter()
                .copied()
                .filter(|k| applies(k) && !OPT_IN_FAULTS.contains(k))
                .collect(),
            Some(names) => {
                let mut v = Vec::new();
                for n in names {
                    let Some(k) = EXPLORE_FAULTS.iter().find(|k| *k == n) else {
                        return Err(format!(
                            "[explore] faults: unknown fault kind `{n}`, expected one of {}",
                            EXPLORE_FAULTS.join(", ")
                        ));
                    };
                    if !applies(k) {
                        return Err(
                            "[explore] faults: `failover` needs a replica to promote: set `[redis] replicas = 1` or drop it"
                                .to_string(),
                        );
                    }
                    v.push(*k);
                }
                v
            }
        };
        let all_points: Vec<String> = scenario.points().iter().map(|p| p.to_string()).collect();
        let points = match &spec.points {
            None => all_points,
            Some(p) => {
                if let Some(bad) = p.iter().find(|x| !all_points.contains(x)) {
                    return Err(format!(
                        "[explore] points: unknown point `{bad}`, expected some of {}",
                        all_points.join(", ")
                    ));
                }
                if p.is_empty() {
                    return Err("[explore] points: give at least one point".to_string());
                }
                p.clone()
            }
        };
        let w = &scenario.workload;
        let space = Space {
            max_faults: spec.max_faults.unwrap_or(DEFAULT_MAX_FAULTS),
            faults,
            points,
            pause_ms: spec.pause_ms.unwrap_or([1, three]),
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
            clients: spec.clients.unwrap_or([w.clients.min(2), w.clients.max(2)]),
            cycles: spec.cycles.unwrap_or([1, w.cycles]),
            hold_ms: spec.hold_ms.unwrap_or(w.hold_ms),
            duration_ms: scenario.duration_ms,
            masters: scenario.redis.masters,
            redis_nodes: scenario
                .node_names()
                .into_iter()
                .filter(|n| n.starts_with("redis-"))
                .collect(),
        };
        space.validate()?;
        Ok(space)
    }

    fn validate(&self) -> Result<(), String> {
        let unsigned = [
            ("pause_ms", self.pause_ms),
            ("restart_ms", self.restart_ms),
            ("partition_ms", self.partition_ms),
            ("hold_ms", self.hold_ms),
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
        for (key, [lo, hi]) in unsigned {
            if lo > hi {
                return Err(format!(
                    "[explore] `{key}` is a range [low, high] and needs low <= high, got [{lo}, {hi}]"
                ));
            }
        }
        for (key, [lo, hi]) in [
            ("clock_jump_ms", self.clock_jump_ms),
            ("clock_drift_ppm", self.clock_drift_ppm),
            ("wall_clock_jump_ms", self.wall_clock_jump_ms),
        ] {
            if lo > hi {
                return Err(format!(
                    "[explore] `{key}` is a range [low, high] and needs low <= high, got [{lo}, {hi}]"
                ));
            }
        }
        if self.clock_drift_ppm[0] <= -1_000_000 {
            return Err(
                "[explore] `clock_drift_ppm` must stay above -1000000 (a clock that stands still)"
                    .to_string(),
            );
        }
        if self.clients[0] == 0 {
            return Err("[explore] `clients` must start at 1 or more".to_string());
        }
        if self.cycles[0] == 0 {
            return Err("[explore] `cycles` must start at 1 or more".to_string());
        }
        if self.max_faults > 0 && self.faults.is_empty() {
            return Err(
                "[explore] `faults` is empty: list some fault kinds or set `max_faults = 0`"
                    .to_string(),
            );
        }
        if self.max_faults > 16 {
            return Err(format!(
                "[explore] `max_faults` = {} is too many to shrink to a readable schedule; use 16 or fewer",
                self.max_faults
            ));
        }
        Ok(())
    }
}
