//! What a run will cost, told before it starts: about how many events its history will hold
//! (memory) and how much work its clients will do (time). Every source of events and round
//! trips is counted, not only the workload's cycles: a `renew_every_ms = 1` holder of a long
//! critical section records a renewal every millisecond of it, a watchdog renews every third of
//! its lease, and a client waiting for the lock polls (or wakes on its pub/sub timeout) every
//! retry pause for as long as it waits. A 2-second scenario can so hold a run for days of
//! simulated time; counted up front, it is refused with its numbers instead of taking the
//! machine's memory after minutes of silence.

use super::grace_ms;
use crate::scenario::Scenario;

/// Events a history records per completed cycle, about: acquire start, acquired, enter, the
/// resource's read-modify-write, exit, released, and a named point or two (a `set-nx-px` cycle
/// records 7).
pub const EVENTS_PER_CYCLE: u64 = 8;

/// The most events a run reserves room for up front (about 1 GB of address space); a longer
/// history grows as it goes.
pub(super) const RESERVE_AT_MOST: u64 = 1 << 24;

/// What a run holds at its peak per event of its history, in bytes: the event itself, the
/// strings some events carry (owner tokens), and the checkers' tables of grants and writes while
/// the run is judged. Measured: 160 bytes per event at the peak of a 1,000,000-cycle `set-nx-px`
/// run (README, "Speed"); this figure rounds up.
pub const PEAK_BYTES_PER_EVENT: u64 = 192;

/// Simulated steps (an event recorded, a round trip to a server) one core makes per second, at
/// the low end: the 100,000-cycle `set-nx-px` run makes about 800,000 events and 500,000 round
/// trips in 0.8 s (README, "Speed"); this figure leaves room for a slower machine and a busier
/// lock.
pub const STEPS_PER_SECOND: u64 = 500_000;

/// How long, in ms of the run's own time, it can last: its duration, then the grace period in
/// which a client that started a cycle just before the end still finishes it.
pub fn run_ms(scenario: &Scenario) -> u64 {
    scenario
        .duration_ms
        .saturating_add(grace_ms(scenario, scenario.redis.request_timeout_ms))
}

/// The grace period of a run of `scenario` on its own backend (`world::grace_ms` with the
/// backend's request timeout): how long after `duration_ms` a run still waits for its clients
/// and its nemesis, and where a real run is cut whatever its servers do (`real::run_end`).
pub fn run_grace_ms(scenario: &Scenario) -> u64 {
    grace_ms(scenario, scenario.backend().request_timeout_ms(scenario))
}

/// How long one real run of `scenario` can take at most, in ms of wall time: spawning its
/// servers (a measured constant per backend, `BackendDecl::real_spawn_ms`), then at most its
/// duration and the grace period, where the run is cut (`real::run_end`) whatever its servers
/// do. What the budget holds a real run to, the length of its progress bar, and, doubled, where
/// the backstop cuts one that still gets past it (`real::run_end::within_twice_estimate`).
pub fn real_most_ms(scenario: &Scenario) -> u64 {
    scenario
        .backend()
        .real_spawn_ms(scenario)
        .saturating_add(scenario.duration_ms)
        .saturating_add(run_grace_ms(scenario))
}

/// About how long one real run of `scenario` takes, in ms of wall time: spawning its servers,
/// then its clients' cycles at a perfect lock (one critical section at a time, at the shortest
/// hold; or each client's own cycles at the mean hold and think, if longer), or its whole duration if they cannot all be done by then. The
/// grace period is not counted: only a run whose clients get stuck waits it out, and that one is
/// still within 10x of this (measured: `tests/*/ends.rs`). [`real_most_ms`] is the bound.
pub fn real_run_ms(scenario: &Scenario) -> u64 {
    let w = &scenario.workload;
    let mean = |[lo, hi]: [u64; 2]| (lo + hi) / 2;
    let cycles = u64::from(w.cycles);
    // Holds one after the other at their shortest: a wide `hold_ms` draws some short ones, and
    // a run whose lock fails to exclude overlaps them.
    let one_at_a_time = u64::from(w.clients)
        .saturating_mul(cycles)
        .saturating_mul(w.hold_ms[0]);
    let each_its_own = cycles.saturating_mul(mean(w.hold_ms) + mean(w.think_ms));
    scenario
        .backend()
        .real_spawn_ms(scenario)
        .saturating_add(scenario.duration_ms.min(one_at_a_time.max(each_its_own)))
}

/// How long, in ms summed over the clients, the lock can be held: every cycle the workload could
/// complete held for the longest critical section, but no client holding for longer than the run.
fn held_ms(scenario: &Scenario) -> u64 {
    let w = &scenario.workload;
    let by_cycles = scenario.capacity().saturating_mul(w.hold_ms[1].max(1));
    by_cycles.min(u64::from(w.clients).saturating_mul(run_ms(scenario)))
}

/// Renewals the workload asks for (`renew_every_ms`): one every `renew_every_ms` of every hold.
/// Each is an event in the history and a round trip.
pub fn expected_renewals(scenario: &Scenario) -> u64 {
    match scenario.workload.renew_every_ms {
        0 => 0,
        every => held_ms(scenario) / every,
    }
}

/// About how many events `scenario`'s history will hold: its workload's cycles at
/// [`EVENTS_PER_CYCLE`] and one per renewal. What a run reserves, and what its memory estimate
/// is made of.
pub fn expected_events(scenario: &Scenario) -> u64 {
    scenario
        .capacity()
        .saturating_mul(EVENTS_PER_CYCLE)
        .saturating_add(expected_renewals(scenario))
}

/// About how much memory one run of `scenario` needs at its peak, in bytes.
pub fn memory_estimate(scenario: &Scenario) -> u64 {
    expected_events(scenario).saturating_mul(PEAK_BYTES_PER_EVENT)
}

/// Round trips that record nothing: a watchdog's renewals (every third of the lease, while the
/// lock is held, for a lock taken without `ttl_ms` that has one), the polls of clients that wait
/// while another holds (one per shortest retry pause for the whole run), and for a lock whose
/// waiters listen on pub/sub (Redisson) instead, one wake-up per third of the lease (when the
/// lease they wait out is renewed) and one unlock message per waiter per cycle.
pub fn silent_round_trips(scenario: &Scenario) -> u64 {
    let lock = &scenario.lock;
    let third_of_lease = (lock.lease_ms() / 3).max(1);
    let watchdog = if lock.kind.has_default_lease() && lock.ttl_ms.is_none() {
        held_ms(scenario) / third_of_lease
    } else {
        0
    };
    let waiters = u64::from(scenario.workload.clients.saturating_sub(1));
    let polls = if lock.kind.has_default_lease() {
        let wake_ups = run_ms(scenario) / third_of_lease;
        let messages = scenario.capacity();
        waiters.saturating_mul(wake_ups.saturating_add(messages))
    } else {
        waiters.saturating_mul(run_ms(scenario) / lock.retry_ms[0].max(1))
    };
    watchdog.saturating_add(polls)
}

/// About how many simulated steps one run of `scenario` takes: its events and every round trip
/// that records none.
pub fn expected_steps(scenario: &Scenario) -> u64 {
    expected_events(scenario).saturating_add(silent_round_trips(scenario))
}

/// About how long one simulated run of `scenario` takes on one core, in seconds, at
/// [`STEPS_PER_SECOND`].
pub fn time_estimate_s(scenario: &Scenario) -> f64 {
    expected_steps(scenario) as f64 / STEPS_PER_SECOND as f64
}

#[cfg(test)]
mod tests {
    use super::{real_most_ms, real_run_ms};
    use crate::scenario::Scenario;
    use std::path::Path;

    /// The least wall time a real run of `s` can take, without running it: its servers' spawn
    /// (at least half the measured constant, which rounds the measurements up by less than
    /// that), then its own time until its duration ends or its clients have run every cycle,
    /// each holding the lock at least `hold_ms[0]`.
    fn real_floor_ms(s: &Scenario) -> u64 {
        let spawn = s.backend().real_spawn_ms(s) / 2;
        let w = &s.workload;
        let cycles = u64::from(w.cycles).saturating_mul(w.hold_ms[0] + w.think_ms[0]);
        spawn + s.duration_ms.min(cycles)
    }

    /// Every scenario file under `dir`, recursively, that loads as one (spaces and broken
    /// inputs of the test suite do not).
    fn scenarios(dir: &Path, out: &mut Vec<Scenario>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                scenarios(&path, out);
            } else if path.extension().is_some_and(|e| e == "toml") {
                if let Ok(s) = Scenario::load(&path) {
                    out.push(s);
                }
            }
        }
    }

    /// The up-front estimate of a real run (what it can take at most) is within 10x of what it
    /// can take at least, for the bundled scenarios and the scenario files of the test suite:
    /// so within 10x of whatever it measures (the real-mode tests measure some, `tests/*/ends.rs`).
    #[test]
    fn real_estimates_are_within_ten_times_of_a_run() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut all = Vec::new();
        scenarios(&root.join("scenarios"), &mut all);
        let bundled = all.len();
        scenarios(&root.join("tests"), &mut all);
        assert!(
            bundled > 50 && all.len() > bundled,
            "{bundled} of {}",
            all.len()
        );
        let far: Vec<String> = all
            .iter()
            .filter(|s| real_run_ms(s) > 10 * real_floor_ms(s) || real_run_ms(s) > real_most_ms(s))
            .map(|s| {
                format!(
                    "{}: estimate {} ms, at least {} ms",
                    s.path.as_ref().unwrap().display(),
                    real_run_ms(s),
                    real_floor_ms(s)
                )
            })
            .collect();
        assert!(far.is_empty(), "{}", far.join("\n"));
    }
}
