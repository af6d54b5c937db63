//! Cycles the run's end cut short: clients stop starting cycles at `duration_ms`, so a scenario
//! whose duration is too short for its `cycles` silently tests less than it says. Reports name
//! the clients that did not start all their cycles (a crashed client is not counted: its crash
//! ended its cycles).

use crate::history::{EventKind, History};
use crate::scenario::Scenario;
use std::collections::BTreeMap;
use std::fmt;

/// Which clients started fewer cycles than `[workload] cycles`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutShort {
    /// `cycles` of the scenario.
    pub planned: u32,
    /// `duration_ms` of the scenario.
    pub duration_ms: u64,
    /// Client index -> cycles it started, for the clients that started fewer than `planned`.
    pub started: BTreeMap<u32, u32>,
}

/// The clients of `history` that started fewer cycles than planned and did not crash; `None`
/// when every client ran all its cycles.
pub fn cut_short(scenario: &Scenario, history: &History) -> Option<CutShort> {
    let mut started: BTreeMap<u32, u32> = (0..scenario.workload.clients).map(|c| (c, 0)).collect();
    let mut crashed = Vec::new();
    for e in &history.events {
        match (&e.kind, e.client()) {
            (EventKind::AcquireStart, Some(c)) => *started.entry(c).or_default() += 1,
            (EventKind::Crashed { .. }, Some(c)) => crashed.push(c),
            _ => {}
        }
    }
    let planned = scenario.workload.cycles;
    started.retain(|c, n| *n < planned && !crashed.contains(c));
    (!started.is_empty()).then_some(CutShort {
        planned,
        duration_ms: scenario.duration_ms,
        started,
    })
}

impl fmt::Display for CutShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who: Vec<String> = self
            .started
            .iter()
            .map(|(c, n)| format!("client-{c} {n}"))
            .collect();
        write!(
            f,
            "cycles cut short: the run ended (duration_ms = {}) before every client started its {} cycles ({}); raise `duration_ms` or lower `cycles`",
            self.duration_ms,
            self.planned,
            who.join(", ")
        )
    }
}

impl CutShort {
    /// The JSON form: `{"planned": 10, "duration_ms": 5000, "started": {"client-1": 3}}`.
    pub fn json(&self) -> serde_json::Value {
        let started: serde_json::Map<String, serde_json::Value> = self
            .started
            .iter()
            .map(|(c, n)| (format!("client-{c}"), serde_json::json!(n)))
            .collect();
        serde_json::json!({
            "planned": self.planned,
            "duration_ms": self.duration_ms,
            "started": started,
        })
    }
}
