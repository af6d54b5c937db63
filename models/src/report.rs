//! The result of one checker run, as text and JSON.

use serde_json::json;
use std::fmt::Write as _;

/// What a model declares for a property in a configuration, or what the
/// checker found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// `always` property: no reachable state breaks it (within the bound).
    /// `sometimes` property: some reachable state satisfies it.
    Holds,
    /// `always` property: a reachable state breaks it.
    /// `sometimes` property: no reachable state satisfies it (a vacuous model).
    Violated,
}

impl Expectation {
    /// `Violated` when a model's reasoning about its configuration says the
    /// property breaks, else `Holds`: how the models' `expected` ends.
    pub fn violated_if(violated: bool) -> Expectation {
        if violated {
            Expectation::Violated
        } else {
            Expectation::Holds
        }
    }

    /// The word text and JSON reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Expectation::Holds => "holds",
            Expectation::Violated => "violated",
        }
    }
}

/// `always`: an invariant (a counterexample is a failure); `sometimes`: a
/// reachability check (an example is a success).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertyKind {
    /// An invariant: a counterexample is a failure.
    Always,
    /// A reachability check: an example is a success, and none means the model is vacuous.
    Sometimes,
}

/// Breadth-first (shortest counterexample) or depth-first (less memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Breadth-first: the shortest counterexample, on one thread.
    #[default]
    Bfs,
    /// Depth-first: exhaustive proofs in less memory, on every core.
    Dfs,
}

impl Strategy {
    /// The word text and JSON reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Bfs => "bfs",
            Strategy::Dfs => "dfs",
        }
    }
}

/// One step of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// 1-based position in the trace.
    pub index: usize,
    /// True time (ticks) when the action was taken.
    pub tick: u32,
    /// The action, in the field's words.
    pub action: String,
    /// What changed: `"subject: before -> after"`.
    pub changes: Vec<String>,
}

/// What the model checker found: the property held within the bound, or a trace breaks it.
/// (A judged simulation or real run is `lockcheck::Outcome`; this is the model's counterpart.)
#[derive(Clone, Debug, PartialEq)]
pub enum Finding {
    /// Invariant: no counterexample in the explored space. Reachability: an
    /// example was found (it is in [`ModelReport::witness`]).
    Holds {
        /// States generated, duplicates included.
        states: usize,
        /// Distinct states: the size of what the proof covered.
        unique_states: usize,
        /// Wall time of the check (depends on the machine).
        secs: f64,
    },
    /// Invariant: a counterexample (the shortest, with BFS on one thread).
    /// Reachability: no example exists (the trace is empty).
    Violated {
        /// The steps from the initial state to the violation.
        trace: Vec<Step>,
        /// Wall time of the check (depends on the machine).
        secs: f64,
        /// States generated before the violation was found.
        states: usize,
    },
    /// The search was cut at `max_depth` steps (`--max-depth`) and found nothing within them:
    /// no counterexample of an invariant, no example of a reachability property. Deeper states
    /// were never checked, so this decides nothing: it is neither [`Finding::Holds`] (a proof)
    /// nor [`Finding::Violated`] (a vacuous reachability property). Its own variant so that no
    /// caller can print a cut search as a proof by matching `Holds`.
    Bounded {
        /// The depth limit, in steps from an initial state.
        max_depth: usize,
        /// States generated, duplicates included (the cut ones too).
        states: usize,
        /// Distinct states generated, the first level past the limit included (generated, not
        /// checked).
        unique_states: usize,
        /// Wall time of the check (depends on the machine).
        secs: f64,
    },
}

impl Finding {
    /// Held or violated, to compare with the model's declared expectation; `None` for a search
    /// cut by its depth limit ([`Finding::Bounded`]), which decided neither.
    pub fn verdict(&self) -> Option<Expectation> {
        match self {
            Finding::Holds { .. } => Some(Expectation::Holds),
            Finding::Violated { .. } => Some(Expectation::Violated),
            Finding::Bounded { .. } => None,
        }
    }
    /// Wall time of the check, whichever the finding.
    pub fn secs(&self) -> f64 {
        match self {
            Finding::Holds { secs, .. }
            | Finding::Violated { secs, .. }
            | Finding::Bounded { secs, .. } => *secs,
        }
    }

    /// The headline word of text and HTML reports: `HOLDS`, `VIOLATED`, or for a cut search
    /// `NO COUNTEREXAMPLE WITHIN DEPTH N (bounded: not a proof)` (a `sometimes` property:
    /// `NO EXAMPLE WITHIN …`), never `HOLDS` for a search that did not finish.
    pub fn headline(&self, kind: PropertyKind) -> String {
        match (self, kind) {
            (Finding::Bounded { max_depth, .. }, PropertyKind::Always) => {
                format!("NO COUNTEREXAMPLE WITHIN DEPTH {max_depth} (bounded: not a proof)")
            }
            (Finding::Bounded { max_depth, .. }, PropertyKind::Sometimes) => format!(
                "NO EXAMPLE WITHIN DEPTH {max_depth} (bounded: not a proof that none exists)"
            ),
            (f, _) => f
                .verdict()
                .map(|v| v.as_str().to_uppercase())
                .unwrap_or_default(),
        }
    }
}

/// The result of [`crate::run`].
#[derive(Clone, Debug, PartialEq)]
pub struct ModelReport {
    /// The model checked.
    pub model: String,
    /// The property checked (one per run).
    pub property: String,
    /// Invariant or reachability: decides whether a trace is a failure or an example.
    pub property_kind: PropertyKind,
    /// One sentence saying what the property means.
    pub property_about: String,
    /// Every parameter with the value in force.
    pub params: Vec<(String, String)>,
    /// How the state space was searched.
    pub strategy: Strategy,
    /// Checker threads used (BFS traces are shortest only on one).
    pub threads: usize,
    /// `--max-depth`, if one was given: states more than this many steps from an initial state
    /// are not explored.
    pub max_depth: Option<usize>,
    /// Steps from an initial state to the deepest state the checker checked (at most
    /// `max_depth`).
    pub depth_reached: usize,
    /// The model's declared expectation for this configuration.
    pub expected: Expectation,
    /// What the checker found.
    pub outcome: Finding,
    /// Unique states seen (also for violations).
    pub unique_states: usize,
    /// For a `sometimes` property that holds: the example that shows it.
    pub witness: Option<Vec<Step>>,
    /// The initial state's facts, `"subject: value"`.
    pub initial: Vec<String>,
    /// Simulated milliseconds per model tick (for the scenario mapping).
    pub tick_ms: u64,
    /// Why no scenario can be written, when a counterexample exists but the
    /// scenario contract cannot express it faithfully.
    pub scenario_note: Option<String>,
    pub(crate) scenario: Option<String>,
}

fn fmt_count(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn write_steps(out: &mut String, steps: &[Step]) {
    for step in steps {
        let _ = writeln!(out, "{:>3}. t={:<3} {}", step.index, step.tick, step.action);
        for c in &step.changes {
            let _ = writeln!(out, "              {c}");
        }
    }
}

fn steps_json(steps: &[Step]) -> serde_json::Value {
    serde_json::Value::Array(
        steps
            .iter()
            .map(|s| {
                json!({
                    "index": s.index,
                    "tick": s.tick,
                    "action": s.action,
                    "changes": s.changes,
                })
            })
            .collect(),
    )
}

impl ModelReport {
    /// Whether the checker's verdict is the one the model declares: never for a search cut by
    /// its depth limit, which decided nothing (see [`ModelReport::is_bounded`]).
    pub fn matches_expectation(&self) -> bool {
        self.outcome.verdict() == Some(self.expected)
    }

    /// Whether the search was cut by `--max-depth` before it found anything
    /// ([`Finding::Bounded`]): the result is neither a proof nor a mismatch, and `lockcheck
    /// model` exits with its own code for it, so CI can tell it from both.
    pub fn is_bounded(&self) -> bool {
        matches!(self.outcome, Finding::Bounded { .. })
    }

    /// The counterexample, if the outcome is a violation with a trace.
    pub fn trace(&self) -> Option<&[Step]> {
        match &self.outcome {
            Finding::Violated { trace, .. } if !trace.is_empty() => Some(trace),
            _ => None,
        }
    }

    /// A human report: verdict first, then the evidence.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let kind = match self.property_kind {
            PropertyKind::Always => "always",
            PropertyKind::Sometimes => "sometimes",
        };
        let _ = writeln!(
            out,
            "{} {}: {} ({}, expected {}: {})",
            self.model,
            self.property,
            self.outcome.headline(self.property_kind),
            kind,
            self.expected.as_str(),
            if self.is_bounded() {
                "not decided within the bound"
            } else if self.matches_expectation() {
                "matches"
            } else {
                "DOES NOT MATCH"
            }
        );
        let _ = writeln!(out, "  {}", self.property_about);
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(out, "  params: {}", params.join(" "));
        let _ = writeln!(
            out,
            "  search: {}, {} thread{}{}; 1 tick = {} ms",
            self.strategy.as_str(),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            match self.max_depth {
                Some(d) => format!(", max depth {d}"),
                None => String::new(),
            },
            self.tick_ms
        );
        match &self.outcome {
            Finding::Holds {
                states,
                unique_states,
                secs,
            } => match self.property_kind {
                PropertyKind::Always => {
                    let _ = writeln!(
                        out,
                        "  no counterexample in {} unique states ({} generated, depth {}) within the model's time bound{}, {:.3} s",
                        fmt_count(*unique_states),
                        fmt_count(*states),
                        self.depth_reached,
                        match self.max_depth {
                            Some(d) => format!(" (the whole space: the depth limit {d} was never reached)"),
                            None => String::new(),
                        },
                        secs
                    );
                }
                PropertyKind::Sometimes => {
                    let w = self.witness.as_deref().unwrap_or(&[]);
                    let _ = writeln!(
                        out,
                        "  example found in {:.3} s after {} unique states, {} steps:",
                        secs,
                        fmt_count(*unique_states),
                        w.len()
                    );
                    let _ = writeln!(out, "  initial: {}", self.initial.join("; "));
                    write_steps(&mut out, w);
                }
            },
            Finding::Violated {
                trace,
                secs,
                states,
            } => match self.property_kind {
                PropertyKind::Always => {
                    let _ = writeln!(
                        out,
                        "  counterexample ({} steps{}) found in {:.3} s after {} unique states ({} generated):",
                        trace.len(),
                        if self.strategy == Strategy::Bfs && self.threads == 1 {
                            ", shortest"
                        } else {
                            ""
                        },
                        secs,
                        fmt_count(self.unique_states),
                        fmt_count(*states)
                    );
                    let _ = writeln!(out, "  initial: {}", self.initial.join("; "));
                    write_steps(&mut out, trace);
                }
                PropertyKind::Sometimes => {
                    let _ = writeln!(
                        out,
                        "  never reached: {} unique states explored, {:.3} s (the model is vacuous in this configuration)",
                        fmt_count(self.unique_states),
                        secs
                    );
                }
            },
            Finding::Bounded {
                max_depth,
                states,
                unique_states,
                secs,
            } => {
                let _ = writeln!(
                    out,
                    "  no {} within {max_depth} step{} ({} unique states generated, {} with \
                     duplicates, the level past the limit included), {:.3} s; the search was cut \
                     there and deeper states were not checked: this is not a proof. Run without \
                     --max-depth for one (within the model's time bound).",
                    match self.property_kind {
                        PropertyKind::Always => "counterexample",
                        PropertyKind::Sometimes => "example",
                    },
                    if *max_depth == 1 { "" } else { "s" },
                    fmt_count(*unique_states),
                    fmt_count(*states),
                    secs
                );
            }
        }
        if let Some(note) = &self.scenario_note {
            let _ = writeln!(out, "  scenario: {note}");
        }
        out
    }

    /// One JSON object with everything in the report.
    pub fn to_json(&self) -> serde_json::Value {
        let params: serde_json::Map<String, serde_json::Value> = self
            .params
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let outcome = match &self.outcome {
            Finding::Holds {
                states,
                unique_states,
                secs,
            } => json!({
                "verdict": "holds",
                "states": states,
                "unique_states": unique_states,
                "secs": secs,
            }),
            Finding::Violated {
                trace,
                secs,
                states,
            } => json!({
                "verdict": "violated",
                "states": states,
                "unique_states": self.unique_states,
                "secs": secs,
                "trace_len": trace.len(),
                "trace": steps_json(trace),
            }),
            Finding::Bounded {
                max_depth,
                states,
                unique_states,
                secs,
            } => json!({
                "verdict": "bounded",
                "max_depth": max_depth,
                "states": states,
                "unique_states": unique_states,
                "secs": secs,
            }),
        };
        json!({
            "model": self.model,
            "property": self.property,
            "property_kind": match self.property_kind {
                PropertyKind::Always => "always",
                PropertyKind::Sometimes => "sometimes",
            },
            "property_about": self.property_about,
            "params": params,
            "strategy": self.strategy.as_str(),
            "threads": self.threads,
            "max_depth": self.max_depth,
            "depth_reached": self.depth_reached,
            "tick_ms": self.tick_ms,
            "expected": self.expected.as_str(),
            "verdict": self.outcome.verdict().map_or("bounded", Expectation::as_str),
            "bounded": self.is_bounded(),
            "matches_expectation": self.matches_expectation(),
            "outcome": outcome,
            "initial": self.initial,
            "witness": self.witness.as_deref().map(steps_json),
            "scenario": self.scenario,
            "scenario_note": self.scenario_note,
        })
    }

    /// The counterexample as a lockcheck scenario file (see
    /// [`crate::scenario`] for the mapping), or `None` when there is no
    /// counterexample or the contract cannot express it
    /// ([`ModelReport::scenario_note`] says why).
    pub fn to_scenario_toml(&self) -> Option<String> {
        self.scenario.clone()
    }
}
