//! Writing a counterexample as a lockcheck scenario file.
//!
//! # Mapping model time to scenario time
//!
//! The models run on discrete true time: one `Tick` action advances it by
//! one tick, and every other action happens *within* a tick, in the order
//! the trace lists them. A scenario runs on milliseconds of simulated true
//! time. The mapping (tick size `tick_ms`, 100 ms unless the `tick_ms`
//! parameter says otherwise):
//!
//! * tick `k` of the model is the interval `[k * tick_ms, (k + 1) * tick_ms)`;
//! * client operations (acquire, release, write) are driven by the
//!   scenario's workload, not scheduled: the workload starts every client at
//!   0 ms and a client retries `acquire` for `wait_ms`, so the client that
//!   acquires at tick `k` in the trace acquires in the simulation as soon as
//!   the lock becomes free at or after `k * tick_ms`;
//! * faults are scheduled at absolute times: a fault the trace takes in
//!   tick `k` is placed at `k * tick_ms + tick_ms / 2`, half a tick in, so
//!   that the client operations the trace puts before it in the same tick
//!   (a few simulated round trips, well under a millisecond each) have
//!   completed. Durations (`for_ms`, `restart_after_ms`, `by_ms`) are the
//!   trace's tick counts times `tick_ms`;
//! * `hold_ms` (the critical section's length) is chosen per model so that
//!   the holder's critical section covers the part of the trace where the
//!   violation happens, but is shorter than the lease, so the scenario only
//!   fails because of the fault the trace has (see each model's
//!   `scenario` function);
//! * `duration_ms` covers the trace plus one lease and a margin.
//!
//! Node names: `redis-<m>` for master `m` (from 0), `redis-<m>-replica-<r>`,
//! `client-<c>`. A pause names the client as `"holder"` when the paused
//! client holds the lock at that moment in the trace (the simulator decides
//! which client wins the first acquire, so an index could name the wrong
//! one), otherwise `client-<c>`.
//!
//! This file is the format and what it needs no model for; what reads a
//! trace through the models' common trait (the base every counterexample
//! scenario starts from, a pause's fault, the trace's last tick) is in
//! `counterexample.rs`: the trait (`lock_model.rs`) names [`Scenario`], so
//! helpers here that named the trait would make the two files import each
//! other.

use std::fmt::Write as _;

/// A scenario file, as the contract in docs/design.md ("Scenario files") has it.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The scenario's name (`model-<model>-<property>`).
    pub name: String,
    /// One sentence: what the trace shows.
    pub about: String,
    /// Lines written as `#` comments right after the header.
    pub notes: Vec<String>,
    /// `"violation"` or `"safe"`: the mutual-exclusion verdict.
    pub expect: &'static str,
    /// Extra per-check expectations, e.g. `("resource", "violation")`.
    pub expect_checks: Vec<(&'static str, &'static str)>,
    /// The simulation seed.
    pub seed: u64,
    /// Simulated run length (ms): the trace plus one lease and a margin.
    pub duration_ms: u64,
    /// The lockcheck lock kind that implements the model's design.
    pub lock_kind: &'static str,
    /// The lease (ms).
    pub ttl_ms: u64,
    /// How long a client keeps trying to acquire (ms).
    pub wait_ms: u64,
    /// Independent masters.
    pub masters: u32,
    /// Replicas per master.
    pub replicas: u32,
    /// Replication delay range (ms): how long a write takes to reach a replica.
    pub replication_lag_ms: (u64, u64),
    /// How long after a master dies its replica is promoted (ms).
    pub failover_detect_ms: u64,
    /// Clients in the workload.
    pub clients: u32,
    /// Acquisitions per client.
    pub cycles: u32,
    /// Critical-section length range (ms).
    pub hold_ms: (u64, u64),
    /// Pause between a client's cycles (ms).
    pub think_ms: (u64, u64),
    /// The fault schedule, at absolute times.
    pub faults: Vec<Fault>,
}

/// The request timeout written into every scenario (ms): a fifth of a 100 ms tick.
pub const REQUEST_TIMEOUT_MS: u64 = 20;

/// One `[[faults]]` entry, always at an absolute time.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Kill the master of shard `master`, promote its replica after
    /// `failover_detect_ms`.
    Failover {
        /// When the master dies (ms).
        at_ms: u64,
    },
    /// A stop-the-world pause of a client.
    Pause {
        /// `holder`, or `client-<c>` when the paused client holds nothing then.
        client: String,
        /// When the pause starts (ms).
        at_ms: u64,
        /// How long the client is stopped (ms).
        for_ms: u64,
    },
    /// A node's clock steps.
    ClockJump {
        /// The node whose clock jumps.
        node: String,
        /// When it jumps (ms).
        at_ms: u64,
        /// The step (ms; negative goes back).
        by_ms: i64,
    },
    /// A node's clock runs at the wrong rate.
    ClockDrift {
        /// The node whose clock drifts.
        node: String,
        /// When the drift starts (ms).
        at_ms: u64,
        /// The rate error (ppm; positive runs fast).
        ppm: i64,
    },
    /// A Redis node crashes and restarts without its keys.
    Crash {
        /// The node that crashes.
        node: String,
        /// When it crashes (ms).
        at_ms: u64,
        /// How long it stays down (ms).
        restart_after_ms: u64,
    },
    /// Nodes lose the network to other nodes.
    Partition {
        /// The nodes on one side of the cut.
        nodes: Vec<String>,
        /// The nodes on the other side; empty: everyone else.
        from: Vec<String>,
        /// When the partition starts (ms).
        at_ms: u64,
        /// How long it lasts (ms).
        for_ms: u64,
    },
}

impl Fault {
    /// When the fault fires (ms): the scenario lists faults in this order.
    pub fn at_ms(&self) -> u64 {
        match self {
            Fault::Failover { at_ms }
            | Fault::Pause { at_ms, .. }
            | Fault::ClockJump { at_ms, .. }
            | Fault::ClockDrift { at_ms, .. }
            | Fault::Crash { at_ms, .. }
            | Fault::Partition { at_ms, .. } => *at_ms,
        }
    }
}

/// Where a fault taken in tick `tick` goes: half a tick in.
pub fn fault_time(tick: u32, tick_ms: u64) -> u64 {
    tick as u64 * tick_ms + tick_ms / 2
}

/// The replication lag a scenario needs for a failover the trace takes at
/// `at_ms`, given the `lag` it has so far. A scenario has one lag range
/// for every write, so it can say "nothing reached the replica before the
/// failover" (`replicated` false: a lag that outlasts the failover) or
/// "everything did" (`caught_up`: the lag so far), but not that one write
/// was replicated and a later one was not.
pub(crate) fn failover_lag(
    lag: (u64, u64),
    replicated: bool,
    caught_up: bool,
    at_ms: u64,
    tick_ms: u64,
) -> Result<(u64, u64), String> {
    if !replicated {
        Ok((at_ms + tick_ms, at_ms + tick_ms))
    } else if caught_up {
        Ok(lag)
    } else {
        Err("the trace needs one write replicated and a later one not; the scenario has one replication-lag range for all writes".to_string())
    }
}

/// The first note of every generated scenario: where it came from and how
/// model time maps to scenario time. `more` (empty, or starting with a
/// space) is what the model adds about its trace.
pub(crate) fn generated_note(tick_ms: u64, more: &str) -> String {
    format!("Generated by lockcheck-models from a BFS counterexample; 1 model tick = {tick_ms} ms, faults half a tick into their tick.{more}")
}

fn q(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| q(s)).collect();
    format!("[{}]", quoted.join(", "))
}

impl Scenario {
    /// The scenario as TOML text, keys in the contract's order.
    pub fn to_toml(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "name = {}", q(&self.name));
        let _ = writeln!(s, "about = {}", q(&self.about));
        for n in &self.notes {
            for line in n.lines() {
                let _ = writeln!(s, "# {line}");
            }
        }
        let _ = writeln!(s, "expect = {}", q(self.expect));
        if !self.expect_checks.is_empty() {
            let parts: Vec<String> = self
                .expect_checks
                .iter()
                .map(|(k, v)| format!("{k} = {}", q(v)))
                .collect();
            let _ = writeln!(s, "expect_checks = {{ {} }}", parts.join(", "));
        }
        let _ = writeln!(s, "seed = {}", self.seed);
        let _ = writeln!(s, "duration_ms = {}", self.duration_ms);
        let _ = writeln!(s, "\n[lock]");
        let _ = writeln!(s, "kind = {}", q(self.lock_kind));
        let _ = writeln!(s, "ttl_ms = {}", self.ttl_ms);
        let _ = writeln!(s, "wait_ms = {}", self.wait_ms);
        let _ = writeln!(s, "\n[redis]");
        let _ = writeln!(s, "masters = {}", self.masters);
        let _ = writeln!(s, "replicas = {}", self.replicas);
        let _ = writeln!(
            s,
            "replication_lag_ms = [{}, {}]",
            self.replication_lag_ms.0, self.replication_lag_ms.1
        );
        let _ = writeln!(s, "failover_detect_ms = {}", self.failover_detect_ms);
        // The model's steps are instantaneous: a client must notice a dead master well within a
        // tick, so requests time out after a fifth of one (the default 500 ms spans five ticks).
        let _ = writeln!(s, "request_timeout_ms = {}", REQUEST_TIMEOUT_MS);
        let _ = writeln!(s, "\n[workload]");
        let _ = writeln!(s, "clients = {}", self.clients);
        let _ = writeln!(s, "cycles = {}", self.cycles);
        let _ = writeln!(s, "hold_ms = [{}, {}]", self.hold_ms.0, self.hold_ms.1);
        let _ = writeln!(s, "think_ms = [{}, {}]", self.think_ms.0, self.think_ms.1);
        let mut faults = self.faults.clone();
        faults.sort_by_key(|f| f.at_ms());
        for f in &faults {
            let _ = writeln!(s, "\n[[faults]]");
            match f {
                Fault::Failover { at_ms } => {
                    let _ = writeln!(s, "kind = \"failover\"\nat_ms = {at_ms}");
                }
                Fault::Pause {
                    client,
                    at_ms,
                    for_ms,
                } => {
                    let _ = writeln!(
                        s,
                        "kind = \"pause\"\nclient = {}\nat_ms = {at_ms}\nfor_ms = {for_ms}",
                        q(client)
                    );
                }
                Fault::ClockJump { node, at_ms, by_ms } => {
                    let _ = writeln!(
                        s,
                        "kind = \"clock_jump\"\nnode = {}\nat_ms = {at_ms}\nby_ms = {by_ms}",
                        q(node)
                    );
                }
                Fault::ClockDrift { node, at_ms, ppm } => {
                    let _ = writeln!(
                        s,
                        "kind = \"clock_drift\"\nnode = {}\nat_ms = {at_ms}\nppm = {ppm}",
                        q(node)
                    );
                }
                Fault::Crash {
                    node,
                    at_ms,
                    restart_after_ms,
                } => {
                    let _ = writeln!(
                        s,
                        "kind = \"crash\"\nnode = {}\nat_ms = {at_ms}\nrestart_after_ms = {restart_after_ms}",
                        q(node)
                    );
                }
                Fault::Partition {
                    nodes,
                    from,
                    at_ms,
                    for_ms,
                } => {
                    let _ = writeln!(s, "kind = \"partition\"\nnodes = {}", list(nodes));
                    if !from.is_empty() {
                        let _ = writeln!(s, "from = {}", list(from));
                    }
                    let _ = writeln!(s, "at_ms = {at_ms}\nfor_ms = {for_ms}");
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_parseable_toml_in_contract_shape() {
        let sc = Scenario {
            name: "x".into(),
            about: "a \"quoted\" line".into(),
            notes: vec!["note".into()],
            expect: "violation",
            expect_checks: vec![("mutual_exclusion", "violation")],
            seed: 1,
            duration_ms: 1000,
            lock_kind: "set-nx-px",
            ttl_ms: 300,
            wait_ms: 1000,
            masters: 1,
            replicas: 0,
            replication_lag_ms: (5, 20),
            failover_detect_ms: 10,
            clients: 2,
            cycles: 1,
            hold_ms: (250, 250),
            think_ms: (0, 0),
            faults: vec![
                Fault::Pause {
                    client: "holder".into(),
                    at_ms: 50,
                    for_ms: 400,
                },
                Fault::Partition {
                    nodes: vec!["redis-0-replica-0".into()],
                    from: vec![],
                    at_ms: 0,
                    for_ms: 10,
                },
            ],
        };
        let v: toml::Value = toml::from_str(&sc.to_toml()).unwrap();
        assert_eq!(v["about"].as_str(), Some("a \"quoted\" line"));
        assert_eq!(v["lock"]["kind"].as_str(), Some("set-nx-px"));
        let faults = v["faults"].as_array().unwrap();
        assert_eq!(faults[0]["kind"].as_str(), Some("partition"));
        assert_eq!(faults[1]["for_ms"].as_integer(), Some(400));
        assert_eq!(
            v["expect_checks"]["mutual_exclusion"].as_str(),
            Some("violation")
        );
    }
}
