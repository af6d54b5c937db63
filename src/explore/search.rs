//! The search: draw cases from the strategy, run them on every core, stop at the first that
//! violates, and shrink it with proptest's value tree.
//!
//! Case `i` draws from its own `TestRunner`, seeded from (search seed, `i`), so a case is the same
//! whichever thread runs it and whichever shard owns it; `exec::run_ordered` folds results in
//! index order, so the first violating index wins whatever `--jobs` is. Shrinking then runs
//! sequentially on that case's tree, which keeps it deterministic too.

use super::strategy::{cases, Case};
use crate::check::Verdict;
use crate::exec::{run_ordered, Shard};
use crate::judge::{Mode, Outcome};
use crate::registry::Registry;
use crate::scenario::Scenario;
use crate::scenario::Space;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::time::{Duration, Instant};

/// How a search is run.
#[derive(Clone, Debug)]
pub struct SearchOptions {
    /// Cases to try (before sharding).
    pub cases: u64,
    /// The search seed: with `cases`, it fixes every case drawn.
    pub seed: u64,
    /// Worker threads; the result is the same for any count.
    pub jobs: usize,
    /// The slice of the cases this search tries.
    pub shard: Shard,
    /// Stop drawing new cases after this long (the result then depends on the machine's speed).
    pub time_limit: Option<Duration>,
    /// Only this checker's violations count (default: any checker's).
    pub check: Option<String>,
    /// Shrink at most this many steps.
    pub max_shrink_steps: u32,
    /// Run the whole budget and count every violating case (the first one is still the one
    /// shrunk); by default the search stops at the first.
    pub keep_going: bool,
    /// The lock kinds the search can build: lockcheck's, and those a program registered.
    pub locks: Registry,
}

/// The minimal violating case and what it took to find it.
#[derive(Clone, Debug)]
pub struct Found {
    /// Index of the first violating case.
    pub index: u64,
    /// The check it violates (the one shrinking preserved).
    pub check: String,
    /// The shrunk case: the fewest faults and smallest numbers that still violate `check`.
    pub case: Case,
    /// The shrunk case as a scenario.
    pub scenario: Scenario,
    /// The shrunk scenario's judged run.
    pub outcome: Outcome,
    /// Shrink steps proptest took (bounded by [`SearchOptions::max_shrink_steps`]).
    pub shrink_steps: u32,
    /// Wall time until the first violating case finished: how hard the violation was to hit.
    pub time_to_first: Duration,
    /// Wall time spent shrinking.
    pub shrink_time: Duration,
}

/// What a search did.
#[derive(Clone, Debug)]
pub struct SearchResult {
    /// Cases run.
    pub tried: u64,
    /// Cases that violated (more than one only with `keep_going`).
    pub violating: u64,
    /// Distinct trace hashes among the cases tried: how varied the search was.
    pub distinct_traces: u64,
    /// The minimal violating case; `None`: the budget ran out without one.
    pub found: Option<Found>,
    /// Wall time of the whole search (standard error only: it depends on the machine).
    pub elapsed: Duration,
    /// Stopped by `--time-limit` before the budget ran out.
    pub timed_out: bool,
}

/// What one case gave: the violated check (if any) and its trace.
enum CaseResult {
    Ran {
        violated: Option<String>,
        trace: u64,
    },
    OutOfTime,
}

/// The 32-byte ChaCha seed of case `index` of the search seeded with `seed`.
fn case_rng(seed: u64, index: u64) -> TestRng {
    let mut state = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x6c6f_636b_6368_6b21;
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        // splitmix64: spreads (seed, index) over the whole seed.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// The value tree of case `index`.
fn tree(space: &Space, seed: u64, index: u64) -> Box<dyn ValueTree<Value = Case>> {
    let mut runner = TestRunner::new_with_rng(Config::default(), case_rng(seed, index));
    cases(space)
        .new_tree(&mut runner)
        .expect("explore strategies never reject")
}

/// Runs one case with the scenario's lock (built by `locks`) and judges it.
pub fn judge(locks: &Registry, base: &Scenario, space: &Space, case: &Case) -> (Scenario, Outcome) {
    let scenario = case.scenario(base, space);
    let run = locks.run_sim(&scenario, scenario.seed);
    let outcome = Outcome::judge(&scenario, Mode::Sim, scenario.seed, run.history);
    (scenario, outcome)
}

/// The check of `outcome` that counts as a finding: `check` if violated, else (with no `check`)
/// the first violated one in report order.
pub fn violated(outcome: &Outcome, check: Option<&str>) -> Option<String> {
    let v = |name: &str| outcome.checks.get(name).map(|c| c.verdict) == Some(Verdict::Violation);
    match check {
        Some(c) => v(c).then(|| c.to_string()),
        None => crate::check::CHECK_NAMES
            .iter()
            .find(|c| v(c))
            .map(|c| c.to_string()),
    }
}

/// Cases whose indices are listed at a time: the budget is walked in chunks so that memory does
/// not grow with `--cases` (the fold still sees every case in index order).
const CHUNK: u64 = 1 << 16;

/// `LOCKCHECK_EXPLORE_PANIC_AT=<case>`: that case panics, as a bug in a lock or in lockcheck
/// would. Internal, for the test that a panic in one worker ends the whole search with its
/// message instead of leaving the others (or the fold) waiting.
pub const PANIC_AT_VAR: &str = "LOCKCHECK_EXPLORE_PANIC_AT";

/// Searches the space of `base` for a violation and shrinks the first one found.
/// `progress` is called after each case with (cases tried, cases violating).
pub fn search(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    progress: &dyn Fn(u64, u64),
) -> SearchResult {
    let start = Instant::now();
    let mut tried = 0u64;
    let mut violating = 0u64;
    let mut traces = crate::exec::DistinctCount::default();
    let mut first: Option<(u64, String)> = None;
    let mut timed_out = false;
    let mut first_at = Duration::ZERO;
    let stopped = std::cell::Cell::new(false);
    let check = opts.check.as_deref();
    let panic_at: Option<u64> = std::env::var(PANIC_AT_VAR)
        .ok()
        .and_then(|v| v.parse().ok());
    let work = |i: u64| {
        if opts.time_limit.is_some_and(|t| start.elapsed() > t) {
            return CaseResult::OutOfTime;
        }
        if panic_at == Some(i) {
            panic!("{PANIC_AT_VAR}={i}: case {i} panics on purpose");
        }
        let case = tree(space, opts.seed, i).current();
        let (_, outcome) = judge(&opts.locks, base, space, &case);
        CaseResult::Ran {
            violated: violated(&outcome, check),
            trace: u64::from_str_radix(&outcome.trace_hash, 16).unwrap_or(0),
        }
    };
    let mut fold = |i: u64, r: CaseResult| {
        let go_on = match r {
            CaseResult::OutOfTime => {
                timed_out = true;
                false
            }
            CaseResult::Ran { violated, trace } => {
                tried += 1;
                traces.add(trace);
                if let Some(c) = violated {
                    violating += 1;
                    if first.is_none() {
                        first = Some((i, c));
                        first_at = start.elapsed();
                    }
                }
                progress(tried, violating);
                opts.keep_going || first.is_none()
            }
        };
        stopped.set(!go_on);
        go_on
    };
    for chunk in opts.shard.chunks(opts.cases, CHUNK) {
        run_ordered(&chunk, opts.jobs, work, &mut fold);
        if stopped.get() {
            break;
        }
    }
    let time_to_first = first_at;
    let found = first.map(|(index, check)| {
        let shrink_start = Instant::now();
        let (case, shrink_steps) = shrink(base, space, opts, index, &check);
        let (scenario, outcome) = judge(&opts.locks, base, space, &case);
        Found {
            index,
            check,
            case,
            scenario,
            outcome,
            shrink_steps,
            time_to_first,
            shrink_time: shrink_start.elapsed(),
        }
    });
    SearchResult {
        tried,
        violating,
        distinct_traces: traces.count(),
        found,
        elapsed: start.elapsed(),
        timed_out,
    }
}

/// proptest's shrink loop over case `index`'s tree: simplify while the case still violates
/// `check`, complicate back when a step lost it. Returns the last violating case and the steps.
fn shrink(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    index: u64,
    check: &str,
) -> (Case, u32) {
    let mut tree = tree(space, opts.seed, index);
    let mut minimal = tree.current();
    let mut steps = 0u32;
    if !tree.simplify() {
        return (minimal, steps);
    }
    while steps < opts.max_shrink_steps {
        steps += 1;
        let candidate = tree.current();
        let (_, outcome) = judge(&opts.locks, base, space, &candidate);
        let keeps = violated(&outcome, Some(check)).is_some();
        if keeps {
            minimal = candidate;
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    drop_faults(base, space, opts, check, minimal, steps)
}

/// A last pass after proptest's shrink: drops each remaining fault in turn and keeps the case
/// without it while it still violates `check`, until no fault can go. proptest removes a fault
/// only while it shrinks the schedule, before the seed and the other faults have shrunk; a fault
/// that was needed then (a 1 ms pause that shifted the interleaving) can be spare at the end.
fn drop_faults(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    check: &str,
    mut minimal: Case,
    mut steps: u32,
) -> (Case, u32) {
    let mut i = 0;
    while i < minimal.faults.len() && minimal.faults.len() > 1 && steps < opts.max_shrink_steps {
        steps += 1;
        let mut candidate = minimal.clone();
        candidate.faults.remove(i);
        let (_, outcome) = judge(&opts.locks, base, space, &candidate);
        if violated(&outcome, Some(check)).is_some() {
            minimal = candidate;
            i = 0;
        } else {
            i += 1;
        }
    }
    (minimal, steps)
}
