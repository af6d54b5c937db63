//! The parts of writing a counterexample as a scenario that read the
//! trace through [`LockModel`]: the base every model's scenario starts
//! from ([`Scenario::counterexample`]), a pause's fault, and the trace's
//! last tick. They are kept out of [`crate::scenario`] (the file format)
//! because [`LockModel`] names [`Scenario`]: this way `lock_model.rs`
//! imports `scenario.rs`, this file imports both, and nothing imports
//! back.

use crate::lock_model::{LockModel, Path};
use crate::scenario::{fault_time, generated_note, Fault, Scenario};

/// The pause fault of a counterexample whose client pauses in the first
/// step of `rest` (a suffix of the trace): it lasts until the trace takes
/// `resume` (the same client's resume), or one tick past the trace's final
/// true time.
pub(crate) fn pause_fault<M: LockModel>(m: &M, rest: &Path<M>, resume: M::Action) -> Fault {
    let last = last_tick(m, rest);
    let at = rest.first().map_or(last, |(s, _)| m.tick_of(s));
    let end = rest
        .iter()
        .find(|(_, a)| a.as_ref() == Some(&resume))
        .map_or(last + 1, |(s, _)| m.tick_of(s));
    Fault::Pause {
        client: "holder".to_string(),
        at_ms: fault_time(at, m.tick_ms()),
        for_ms: (end - at) as u64 * m.tick_ms(),
    }
}

/// The true time (ticks) at which a trace, or a suffix of one, ends.
fn last_tick<M: LockModel>(m: &M, path: &Path<M>) -> u32 {
    path.last().map_or(0, |(s, _)| m.tick_of(s))
}

impl Scenario {
    /// What every model's counterexample scenario has in common, for a
    /// model's `scenario` to complete with `Scenario { .., ..base }`: a
    /// trace of `property` that expects the violation (and, for
    /// `no_stale_write`, the resource checker's), `clients` clients with
    /// one cycle each that hold half a tick less than the lease of `lease`
    /// ticks, one master without replicas, and a run as long as the trace
    /// plus one lease and a margin. The model supplies `about`, and
    /// whatever else its design changes (deployment, faults, notes).
    pub(crate) fn counterexample<M: LockModel>(
        m: &M,
        property: &str,
        path: &Path<M>,
        lock_kind: &'static str,
        lease: u8,
        clients: u8,
    ) -> Scenario {
        let tick = m.tick_ms();
        let ttl_ms = lease as u64 * tick;
        let duration_ms = (last_tick(m, path) as u64 + lease as u64 + 2) * tick;
        let mut expect_checks = vec![("mutual_exclusion", "violation")];
        if property == "no_stale_write" {
            expect_checks.push(("resource", "violation"));
        }
        Scenario {
            name: format!("model-{}-{}", M::NAME, property.replace('_', "-")),
            about: String::new(),
            notes: vec![generated_note(tick, "")],
            expect: "violation",
            expect_checks,
            seed: 1,
            duration_ms,
            lock_kind,
            ttl_ms,
            wait_ms: duration_ms,
            masters: 1,
            replicas: 0,
            replication_lag_ms: (5, 20),
            failover_detect_ms: 1000,
            clients: clients as u32,
            cycles: 1,
            hold_ms: (ttl_ms - tick / 2, ttl_ms - tick / 2),
            think_ms: (0, 0),
            faults: Vec::new(),
        }
    }
}
