//! What the runner and a reader see of the redlock model: [`LockModel`]
//! (parameters parsed, properties, expected verdicts, symmetry, the facts of
//! a state, steps in words, the counterexample as a scenario), and the drift
//! arithmetic behind the expected verdict.

use super::action::RedlockAction;
use super::state::{representative, Phase, RedlockState, MAX_CLIENTS, MAX_NODES};
use super::{ClientClock, Redlock, PARAMS};
use crate::clock::Clock;
use crate::counterexample::pause_fault;
use crate::key;
use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::scenario::{fault_time, generated_note, Fault, Scenario};
use crate::ModelError;
use stateright::{Model, Property};

impl LockModel for Redlock {
    const NAME: &'static str = "redlock";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        let nodes = p.int("nodes", 3, MAX_NODES as u8)?;
        if nodes != 3 && nodes != 5 {
            return Err(ModelError::BadParam {
                model: "redlock".into(),
                name: "nodes".into(),
                value: nodes.to_string(),
                expected: "3 or 5".into(),
            });
        }
        let clients = p.clients(MAX_CLIENTS)?;
        Ok(Redlock {
            nodes,
            clients,
            ttl: p.ttl()?,
            time_bound: p.time_bound()?,
            cycles: p.int("cycles", 1, 3)?,
            allowance: p.int("allowance", 0, 50)?,
            drift_period: p.int("drift_period", 0, 100)?,
            fast_nodes: p.int("fast_nodes", 0, nodes)?,
            slow_clients: p.int("slow_clients", 0, clients)?,
            client_clock: [ClientClock::Exact, ClientClock::Drift, ClientClock::Lag]
                [p.choice("client_clock", &["exact", "drift", "lag"])?],
            jump: p.int("jump", 1, 50)?,
            jumps: p.int("jumps", 0, 3)?,
            crashes: p.int("crashes", 0, 3)?,
            restart_delay: p.bool("restart_delay")?,
            pauses: p.int("pauses", 0, 3)?,
            retries: p.int("retries", 0, 5)?,
            recheck_after_acquire: p.bool("recheck_after_acquire")?,
            check_validity_before_write: p.bool("check_validity_before_write")?,
            symmetry: p.bool("symmetry")?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT_PAUSED)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        use Expectation::*;
        if property == "handover" {
            return properties::handover_expected(self.clients, self.cycles);
        }
        if self.clients < 2 {
            return Holds;
        }
        let clock_breaks = self.drift_breaks()
            || (self.jumps > 0
                && self.jump > self.allowance
                && self.time_bound + self.jump >= self.ttl)
            || (self.crashes > 0 && !self.restart_delay)
            || (self.client_clock == ClientClock::Lag && self.time_bound >= self.ttl);
        let long_enough = self.time_bound >= self.ttl;
        let pause_holding = self.pauses > 0 && long_enough;
        // Without the re-check, a client slow between its last SET and
        // counting the majority holds keys that have already expired.
        let slow_acquire = !self.recheck_after_acquire && long_enough;
        let violated = match property {
            "mutual_exclusion" => clock_breaks || pause_holding || slow_acquire,
            _ => {
                clock_breaks || pause_holding || (slow_acquire && !self.check_validity_before_write)
            }
        };
        Expectation::violated_if(violated)
    }

    fn symmetry(&self) -> Option<fn(&RedlockState) -> RedlockState> {
        let same_clocks = self.client_clock != ClientClock::Drift
            || self.drift_period == 0
            || self.slow_clients == 0
            || self.slow_clients == self.clients;
        (self.symmetry && same_clocks)
            .then_some(representative as fn(&RedlockState) -> RedlockState)
    }

    fn facts(&self, s: &RedlockState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        for n in 0..self.nodes as usize {
            let node = &s.nodes[n];
            let v = {
                let key = key::fact(node.key);
                let refuse = if node.refuse_until > 0 {
                    format!(", refuses grants until {}", node.refuse_until)
                } else {
                    String::new()
                };
                format!("clock {}, {key}{refuse}", self.node_clock(s, n))
            };
            f.push((format!("redis-{n}"), v));
        }
        for i in 0..self.clients as usize {
            let c = &s.clients[i];
            let clock = self.client_clock(s, i);
            let got: Vec<String> = (0..self.nodes)
                .filter(|n| c.got & (1 << n) != 0)
                .map(|n| n.to_string())
                .collect();
            let v = match c.phase {
                Phase::Idle => format!("idle, clock {clock}"),
                Phase::Done => format!("done, clock {clock}"),
                Phase::Acquiring => format!(
                    "acquiring since {} (own clock), next redis-{}, granted by [{}], clock {clock}",
                    c.start,
                    c.next,
                    got.join(",")
                ),
                Phase::Holding | Phase::Checked => format!(
                    "HOLDS lease #{} valid until {} on its clock{}, clock {clock}",
                    c.grant,
                    c.valid_until,
                    if c.phase == Phase::Checked {
                        " (checked, about to write)"
                    } else {
                        ""
                    }
                ),
            };
            let v = if c.paused { format!("{v}, PAUSED") } else { v };
            f.push((format!("client-{i}"), v));
        }
        f.extend(s.storage.fact());
        f
    }

    fn action_text(&self, s: &RedlockState, a: &RedlockAction) -> String {
        use RedlockAction::*;
        match *a {
            Tick => format!("tick: true time {} -> {}", s.t, s.t + 1),
            Lock(i) => {
                let idle = s.clients[i as usize].phase == Phase::Idle;
                let n = if idle { 0 } else { s.clients[i as usize].next };
                let ok = self
                    .next_state(s, *a)
                    .map(|s2| s2.clients[i as usize].got & (1 << n) != 0)
                    .unwrap_or(false);
                format!(
                    "client-{i}: {}SET lock client-{i} NX PX {} on redis-{n} -> {}",
                    if idle {
                        format!(
                            "starts at {} on its clock; ",
                            self.client_clock(s, i as usize)
                        )
                    } else {
                        String::new()
                    },
                    self.ttl,
                    if ok { "OK" } else { "refused" }
                )
            }
            Finish(i) => {
                let ok = self
                    .next_state(s, *a)
                    .map(|s2| Redlock::holding(&s2.clients[i as usize]))
                    .unwrap_or(false);
                let c = &s.clients[i as usize];
                format!(
                    "client-{i}: {} of {} nodes{} -> {}",
                    c.got.count_ones(),
                    self.nodes,
                    if self.recheck_after_acquire {
                        format!(
                            ", elapsed {} of validity {}",
                            self.client_clock(s, i as usize).saturating_sub(c.start),
                            self.ttl.saturating_sub(self.allowance)
                        )
                    } else {
                        String::new()
                    },
                    if ok {
                        "acquired"
                    } else {
                        "failed, unlocks its nodes"
                    }
                )
            }
            Check(i) => format!("client-{i} checks its validity before writing"),
            Write(i) => format!("client-{i} writes to the storage"),
            Release(i) => format!("client-{i} releases (compare-and-delete on every node)"),
            Pause(i) => format!("client-{i} pauses"),
            Resume(i) => format!("client-{i} resumes"),
            ClockAdvance(i) => format!("client-{i}'s clock advances one tick"),
            ClockJump(n) => format!("redis-{n}'s clock jumps forward by {} ticks", self.jump),
            Crash(n) => format!(
                "redis-{n} crashes and restarts without its keys (no persistence){}",
                if self.restart_delay {
                    format!(", refusing grants for {} ticks", self.ttl)
                } else {
                    String::new()
                }
            ),
        }
    }

    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String> {
        use RedlockAction::*;
        if self.client_clock == ClientClock::Lag {
            return Err("a client clock that stops has no scenario fault (a clock_drift of -1,000,000 ppm would freeze the client)".to_string());
        }
        if self.restart_delay {
            return Err(
                "the scenario contract has no setting for the delayed-restart rule".to_string(),
            );
        }
        if !self.recheck_after_acquire {
            return Err("the redlock lock kind re-checks the elapsed time after acquiring; the trace needs a client that does not".to_string());
        }
        let tick = self.tick_ms;
        let base =
            Scenario::counterexample(self, property, path, "redlock", self.ttl, self.clients);
        let mut faults = Vec::new();
        for n in 0..self.fast_nodes.min(self.nodes) {
            faults.push(Fault::ClockDrift {
                node: format!("redis-{n}"),
                at_ms: 0,
                ppm: self.node_clock_shape(n as usize).ppm(),
            });
        }
        if self.client_clock == ClientClock::Drift {
            for c in 0..self.slow_clients.min(self.clients) {
                faults.push(Fault::ClockDrift {
                    node: format!("client-{c}"),
                    at_ms: 0,
                    ppm: self.client_clock_shape(c as usize).ppm(),
                });
            }
        }
        for (i, (s, a)) in path.iter().enumerate() {
            match *a {
                Some(ClockJump(n)) => faults.push(Fault::ClockJump {
                    node: format!("redis-{n}"),
                    at_ms: fault_time(s.t as u32, tick),
                    by_ms: self.jump as i64 * tick as i64,
                }),
                Some(Crash(n)) => faults.push(Fault::Crash {
                    node: format!("redis-{n}"),
                    at_ms: fault_time(s.t as u32, tick),
                    // The model restarts at once; the simulator takes a moment.
                    restart_after_ms: tick / 10,
                }),
                Some(Pause(c)) => faults.push(pause_fault(self, &path[i..], Resume(c))),
                _ => {}
            }
        }
        let hold = (self.ttl.saturating_sub(self.allowance) as u64 * tick)
            .saturating_sub(tick / 2)
            .max(1);
        let mut notes = vec![generated_note(
            tick,
            &format!(
                " The lock's drift allowance in the model was {} ms; hold_ms stays inside the validity.",
                self.allowance as u64 * tick
            ),
        )];
        let split = path.iter().any(|(s, a)| {
            matches!(a, Some(Lock(i)) if {
                let c = &s.clients[*i as usize];
                let n = if c.phase == Phase::Idle { 0 } else { c.next as usize };
                matches!(s.nodes[n].key, Some(k) if k.holder != *i)
            })
        });
        if split {
            notes.push("The trace needs the two clients' first acquisitions to interleave (one client gets some nodes first, the other gets a bare majority): the simulator reaches that ordering on some seeds only, so run it with --seeds.".to_string());
        }
        Ok(Scenario {
            name: format!("model-redlock-{}-{}", self.nodes, property.replace('_', "-")),
            about: format!(
                "From the redlock model ({} steps): Redlock over {} masters with a {} ms lease; two clients hold a majority at once.",
                path.len() - 1,
                self.nodes,
                base.ttl_ms
            ),
            notes,
            masters: self.nodes as u32,
            cycles: self.cycles as u32,
            hold_ms: (hold, hold),
            faults,
            ..base
        })
    }
}

impl Redlock {
    /// Whether the configured drift beats the allowance: some lease whose
    /// key on a fast node expires (true time) before the holder's validity
    /// ends on its (possibly slow) clock, within the time bound. A second
    /// client then gets the majority: the nodes the first did not get plus
    /// the expired one (the first can end up with exactly a majority).
    fn drift_breaks(&self) -> bool {
        if self.drift_period == 0 || (self.fast_nodes == 0 && self.slow_clients == 0) {
            return false;
        }
        let node = if self.fast_nodes > 0 {
            self.node_clock_shape(0)
        } else {
            Clock::EXACT
        };
        let client = if self.client_clock == ClientClock::Drift && self.slow_clients > 0 {
            self.client_clock_shape(0)
        } else {
            Clock::EXACT
        };
        let first = |f: &dyn Fn(u8) -> bool| (0..=u8::MAX).find(|&t| f(t)).unwrap_or(u8::MAX);
        (0..=self.time_bound).any(|s0| {
            let expiry = first(&|t| node.at(t, 0) >= node.at(s0, 0) + self.ttl as i16);
            let exit = first(&|t| {
                client.at(t, 0) >= client.at(s0, 0) + self.ttl as i16 - self.allowance as i16
            });
            expiry < exit && expiry <= self.time_bound
        })
    }
}
