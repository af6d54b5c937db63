//! Checkers: each reads a [`History`] and reaches a verdict with evidence. One checker per file.
//!
//! Checkers use true time only. They never look at what a client believed about its lease except
//! to show it in the evidence, because the question is what actually happened, not what anyone
//! thought was happening.

pub mod foreign_release;
pub mod liveness;
pub mod mutual_exclusion;
pub mod reentrancy;
pub mod resource;

use crate::history::{EventKind, History};
use crate::scenario::{Scenario, Verdict};
use serde::Serialize;

/// The outcome of one check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckResult {
    pub verdict: Verdict,
    /// One line a human reads first.
    pub summary: String,
    /// Check-specific details, in JSON.
    pub evidence: serde_json::Value,
    /// A short text timeline of the evidence (the report prints it under the verdict).
    #[serde(skip)]
    pub timeline: Vec<String>,
}

/// A property of histories.
pub trait Checker {
    /// The name used in `expect_checks` and in the JSON `checks` object.
    fn name(&self) -> &'static str;
    fn check(&self, history: &History) -> CheckResult;
}

/// Every checker lockcheck runs, in report order, with default parameters (the liveness bound
/// is three times Redisson's default 30 s lease; one master).
pub fn all() -> Vec<Box<dyn Checker>> {
    with(crate::scenario::DEFAULT_WATCHDOG_TIMEOUT_MS, 1)
}

/// Every checker, parameterised for `scenario` (the liveness bound is three of its leases; the
/// foreign-release rule needs the lock to live on one master).
pub fn for_scenario(scenario: &Scenario) -> Vec<Box<dyn Checker>> {
    with(scenario.lock.lease_ms(), scenario.redis.masters)
}

fn with(lease_ms: u64, masters: u32) -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(mutual_exclusion::MutualExclusion),
        Box::new(resource::Resource),
        Box::new(liveness::Liveness::for_lease_ms(lease_ms)),
        Box::new(foreign_release::ForeignRelease::for_masters(masters)),
        Box::new(reentrancy::Reentrancy),
    ]
}

/// One grant: a client's successful (outermost) acquire, and how its holding ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub client: u32,
    /// True time the acquire returned (µs).
    pub acquired_us: u64,
    pub fencing_token: Option<u64>,
    /// True time it left its critical section, if it did.
    pub exit_us: Option<u64>,
    /// True time its release completed (or failed), or it crashed; `None` if it held to the end.
    pub end_us: Option<u64>,
    /// What the outermost release reported (`Some(true)`: it deleted an entry).
    pub released_deleted: Option<bool>,
    /// The client crashed while holding.
    pub crashed: bool,
}

/// Every grant of a history, in true-time order of acquisition.
pub fn grants(history: &History) -> Vec<Grant> {
    let mut out: Vec<Grant> = Vec::new();
    let mut open: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match &e.kind {
            EventKind::Acquired { fencing_token, .. } => {
                open.insert(c, out.len());
                out.push(Grant {
                    client: c,
                    acquired_us: e.at_us,
                    fencing_token: *fencing_token,
                    exit_us: None,
                    end_us: None,
                    released_deleted: None,
                    crashed: false,
                });
            }
            EventKind::Exit => {
                if let Some(&i) = open.get(&c) {
                    out[i].exit_us = Some(e.at_us);
                }
            }
            EventKind::Released { deleted } => {
                if let Some(i) = open.remove(&c) {
                    out[i].end_us = Some(e.at_us);
                    out[i].released_deleted = Some(*deleted);
                }
            }
            EventKind::ReleaseFailed { .. } => {
                // An inner release's failure does not end the holding; an outer one's does.
                if let Some(&i) = open.get(&c) {
                    if out[i].exit_us.is_some() {
                        open.remove(&c);
                        out[i].end_us = Some(e.at_us);
                    }
                }
            }
            EventKind::Crashed { .. } => {
                if let Some(i) = open.remove(&c) {
                    out[i].end_us = Some(e.at_us);
                    out[i].crashed = true;
                }
            }
            _ => {}
        }
    }
    out
}

/// The latest grant to a client other than `except` strictly between `since_us` and `until_us`.
pub(crate) fn granted_between(
    grants: &[Grant],
    except: u32,
    since_us: u64,
    until_us: u64,
) -> Option<&Grant> {
    grants
        .iter()
        .rfind(|g| g.client != except && g.acquired_us > since_us && g.acquired_us < until_us)
}

/// Builds an event (for checker tests).
#[cfg(test)]
pub(crate) fn ev(at_us: u64, node: &str, kind: EventKind) -> crate::history::Event {
    crate::history::Event {
        at_us,
        node: node.to_string(),
        kind,
    }
}

/// A plain acquisition event (for checker tests).
#[cfg(test)]
pub(crate) fn acquired(token: Option<u64>) -> EventKind {
    EventKind::Acquired {
        owner: "o".into(),
        fencing_token: token,
        acquired_at_ms: 0,
        valid_until_ms: 0,
    }
}
