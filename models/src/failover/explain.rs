//! What the runner and a reader see of the failover model: [`LockModel`]
//! (parameters parsed, properties, expected verdicts, the facts of a state,
//! steps in words, the counterexample as a scenario).

use super::action::FailoverAction;
use super::state::{FailoverState, Op, Phase, MAX_CLIENTS, MAX_REPLICAS};
use super::{Failover, PARAMS};
use crate::key;
use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::scenario::{failover_lag, fault_time, generated_note, Fault, Scenario};
use crate::ModelError;
use stateright::Property;

fn node_name(n: usize) -> String {
    if n == 0 {
        "redis-0".to_string()
    } else {
        format!("redis-0-replica-{}", n - 1)
    }
}

impl LockModel for Failover {
    const NAME: &'static str = "failover";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        let replicas = p.int("replicas", 1, MAX_REPLICAS as u8)?;
        Ok(Failover {
            clients: p.clients(MAX_CLIENTS)?,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 2)?,
            replicas,
            wait: p.int("wait", 0, replicas)?,
            wait_timeout: p.int("wait_timeout", 1, 50)?,
            proceed_on_timeout: p.choice("on_wait_timeout", &["proceed", "give-up"])? == 0,
            replica_skew: p.int("replica_skew", 0, 50)?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        if property == "handover" {
            return properties::handover_expected(self.clients, self.cycles);
        }
        if self.clients < 2 {
            return Expectation::Holds;
        }
        let breaks = if self.wait == 0 {
            true
        } else {
            let timeout = self.proceed_on_timeout && self.wait_timeout < self.ttl;
            let other_replica = self.wait < self.replicas;
            let skew = self.replica_skew > 0 && self.time_bound + self.replica_skew >= self.ttl;
            timeout || other_replica || skew
        };
        Expectation::violated_if(breaks)
    }

    fn facts(&self, s: &FailoverState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        for n in 0..self.nodes() {
            let node = &s.nodes[n];
            let role = if !node.up {
                "DOWN".to_string()
            } else if n == s.master as usize {
                "master".to_string()
            } else {
                match node.pending {
                    None => "replica, up to date".to_string(),
                    Some(Op::Del) => "replica, DEL not yet applied".to_string(),
                    Some(Op::Set(k)) => format!("replica, SET client-{} not yet applied", k.holder),
                }
            };
            let key = key::fact(node.key);
            f.push((
                node_name(n),
                if node.up {
                    format!("{role}, clock {}, {key}", self.clock(s, n))
                } else {
                    role
                },
            ));
        }
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let v = match c.phase {
                Phase::Idle => "idle".to_string(),
                Phase::Done => "done".to_string(),
                Phase::Waiting => format!(
                    "in WAIT on {} ({} acks)",
                    node_name(c.master as usize),
                    c.acks.count_ones()
                ),
                Phase::Holding => format!(
                    "HOLDS lease #{} valid until {}",
                    c.grant,
                    c.acquired_at + self.ttl
                ),
            };
            f.push((format!("client-{i}"), v));
        }
        f.extend(s.storage.fact());
        f
    }

    fn action_text(&self, s: &FailoverState, a: &FailoverAction) -> String {
        use FailoverAction::*;
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Acquire(i) => format!(
                "client-{i}: SET lock client-{i} NX PX {} on {} (master) -> OK",
                self.ttl,
                node_name(s.master as usize)
            ),
            WaitOk(i) => format!("client-{i}: WAIT {} -> enough acks, proceeds", self.wait),
            WaitTimeout(i) => format!(
                "client-{i}: WAIT {} {} times out with {} acks -> {}",
                self.wait,
                self.wait_timeout,
                s.clients[i as usize].acks.count_ones(),
                if self.proceed_on_timeout {
                    "proceeds anyway"
                } else {
                    "gives up and releases"
                }
            ),
            WaitError(i) => format!("client-{i}: WAIT fails (connection to the dead master)"),
            Write(i) => format!("client-{i} writes to the storage"),
            Release(i) => format!("client-{i} releases (compare-and-delete)"),
            Replicate(n) => format!(
                "replication: {} applies the next write from the master",
                node_name(n as usize)
            ),
            Failover(n) => format!(
                "failover: {} dies, {} is promoted",
                node_name(s.master as usize),
                node_name(n as usize)
            ),
            Rejoin(n) => format!(
                "{} restarts empty and resyncs as a replica of {}",
                node_name(n as usize),
                node_name(s.master as usize)
            ),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        let tick = self.tick_ms;
        let base =
            Scenario::counterexample(self, property, path, "set-nx-px", self.ttl, self.clients);
        let mut faults = Vec::new();
        let mut replicated = false;
        let mut lag = base.replication_lag_ms;
        for (s, a) in path {
            match a {
                Some(FailoverAction::Replicate(_)) => replicated = true,
                Some(FailoverAction::Failover(n)) => {
                    if *n != 1 {
                        return Err(format!(
                            "the trace promotes {}; the scenario's failover promotes the master's replica without a choice",
                            node_name(*n as usize)
                        ));
                    }
                    let at = fault_time(s.t as u32, tick);
                    let caught_up = (0..self.nodes())
                        .filter(|&r| r != s.master as usize && s.nodes[r].up)
                        .all(|r| s.nodes[r].pending.is_none());
                    lag = failover_lag(lag, replicated, caught_up, at, tick)?;
                    faults.push(Fault::Failover { at_ms: at });
                }
                _ => {}
            }
        }
        let mut notes = vec![generated_note(
            tick,
            " hold_ms is shorter than the lease so only the failover breaks the lock.",
        )];
        if self.wait > 0 {
            notes.push(format!(
                "The model's client ran WAIT {} {} ms after SET ({}); the set-nx-px lock kind does not WAIT. The trace does not depend on it: {}.",
                self.wait,
                self.wait_timeout as u64 * tick,
                if self.proceed_on_timeout { "proceeding on timeout" } else { "giving up on timeout" },
                if self.proceed_on_timeout && !replicated { "WAIT timed out with no acks and the client went on" } else { "the replica had the key, and its clock ran ahead" }
            ));
        }
        if self.replica_skew > 0 {
            for r in 0..self.replicas as usize {
                faults.push(Fault::ClockJump {
                    node: node_name(r + 1),
                    at_ms: 0,
                    by_ms: self.replica_skew as i64 * tick as i64,
                });
            }
        }
        Ok(Scenario {
            about: format!(
                "From the failover model ({} steps): the master grants a {} ms lease and dies; the promoted replica {} and a second client acquires while the first still holds.",
                path.len() - 1,
                base.ttl_ms,
                if self.replica_skew > 0 && replicated {
                    "has the key but its clock runs ahead, so the key expires early,"
                } else {
                    "never received the key,"
                }
            ),
            notes,
            replicas: self.replicas as u32,
            replication_lag_ms: lag,
            failover_detect_ms: tick / 5,
            cycles: self.cycles as u32,
            faults,
            ..base
        })
    }
}
