//! The search: draw cases from the strategy, run them on every core, stop at the first that
//! violates, and shrink it with proptest's value tree.
//!
//! Case `i` draws from its own `TestRunner`, seeded from (search seed, `i`), so a case is the same
//! whichever thread runs it and whichever shard owns it; `exec::run_ordered` folds results in
//! index order, so the first violating index wins whatever `--jobs` is. Shrinking then runs
//! sequentially on that case's tree, which keeps it deterministic too.
//!
//! On real servers ([`SearchMode::Real`]) the same loop runs real cases instead, and a verdict becomes
//! a rate: see [`super::real`].

use super::real::{self, Rate, RealRun};
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
    /// The whole search's wall time, shrinking included: no case is drawn and no shrink step is
    /// taken after it (the result then depends on the machine's speed). A shrink it cuts short
    /// keeps the smallest violating case so far ([`Found::cut_short`]).
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
    /// Where the cases run.
    pub mode: SearchMode,
}

/// Where the cases run: the search's [`crate::judge::Mode`], with the runs a real verdict is a
/// rate over (a world, `world::World`, is what runs one case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchMode {
    /// The simulator: a case is a function of its seed, and one run decides it.
    Sim,
    /// Spawned servers and client processes (`--real`): a verdict is a rate over `runs` runs
    /// ([`super::real`]).
    Real {
        /// Runs per confirmation and per shrink candidate.
        runs: u32,
    },
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
    /// Wall time spent shrinking (on real servers, confirming the first case included).
    pub shrink_time: Duration,
    /// On real servers: how often the first violating case violated again when rerun.
    pub confirmed: Option<Rate>,
    /// On real servers: the last shrink steps taken back because the cases they kept violated in
    /// fewer than half of their runs ([`real::settle`]).
    pub taken_back: u32,
    /// The time limit ended the shrink before it was done: the case still violates, but a
    /// smaller one may too.
    pub cut_short: bool,
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
    /// Cases not run because real mode has no recipe for one of their faults (0 in simulation).
    pub skipped: u64,
    /// Why the search stopped without a verdict: a real run that could not be made (a missing
    /// `redis-server`, a client program that died at start). `None` in simulation.
    pub error: Option<String>,
}

/// What one case gave: the violated check (if any) and its trace.
enum CaseResult {
    Ran {
        violated: Option<String>,
        trace: u64,
        /// On real servers, the violating run (it cannot be had again by rerunning the case).
        outcome: Option<Box<Outcome>>,
    },
    OutOfTime,
    /// Real mode has no recipe for one of the case's faults.
    Skipped,
    /// A real run could not be made.
    Failed(String),
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
    let deadline = opts.time_limit.map(|t| start + t);
    // The longest case so far (µs): no case is drawn that could not finish, and leave time to
    // replay a finding, before the deadline.
    let longest_us = std::sync::atomic::AtomicU64::new(0);
    let longest = || Duration::from_micros(longest_us.load(std::sync::atomic::Ordering::Relaxed));
    let mut tried = 0u64;
    let mut violating = 0u64;
    let mut traces = crate::exec::DistinctCount::default();
    let mut first: Option<(u64, String, Option<Box<Outcome>>)> = None;
    let mut timed_out = false;
    let mut skipped = 0u64;
    let mut error = None;
    let mut first_at = Duration::ZERO;
    let stopped = std::cell::Cell::new(false);
    let check = opts.check.as_deref();
    let panic_at: Option<u64> = std::env::var(PANIC_AT_VAR)
        .ok()
        .and_then(|v| v.parse().ok());
    let work = |i: u64| {
        if past_with(deadline, longest() * 2) {
            return CaseResult::OutOfTime;
        }
        if panic_at == Some(i) {
            panic!("{PANIC_AT_VAR}={i}: case {i} panics on purpose");
        }
        let case_start = Instant::now();
        let case = tree(space, opts.seed, i).current();
        let outcome = match opts.mode {
            SearchMode::Sim => Box::new(judge(&opts.locks, base, space, &case).1),
            SearchMode::Real { .. } => {
                match real::run_once(&opts.locks, &case.scenario(base, space)) {
                    RealRun::Judged(o) => o,
                    RealRun::Unsupported(_) => return CaseResult::Skipped,
                    RealRun::Failed(m) => return CaseResult::Failed(m),
                }
            }
        };
        let violated = violated(&outcome, check);
        let trace = u64::from_str_radix(&outcome.trace_hash, 16).unwrap_or(0);
        let took = case_start.elapsed().as_micros() as u64;
        longest_us.fetch_max(took, std::sync::atomic::Ordering::Relaxed);
        // Kept in both worlds: a finding's outcome is then not run again when no shrink step can
        // be afforded.
        let keep = violated.is_some();
        CaseResult::Ran {
            violated,
            trace,
            outcome: keep.then_some(outcome),
        }
    };
    let mut fold = |i: u64, r: CaseResult| {
        let go_on = match r {
            CaseResult::OutOfTime => {
                timed_out = true;
                false
            }
            CaseResult::Ran {
                violated,
                trace,
                outcome,
            } => {
                tried += 1;
                traces.add(trace);
                if let Some(c) = violated {
                    violating += 1;
                    if first.is_none() {
                        first = Some((i, c, outcome));
                        first_at = start.elapsed();
                    }
                }
                progress(tried + skipped, violating);
                opts.keep_going || first.is_none()
            }
            CaseResult::Skipped => {
                skipped += 1;
                progress(tried + skipped, violating);
                true
            }
            CaseResult::Failed(m) => {
                error = Some(m);
                false
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
    let mut found = None;
    if let Some((index, check, seen)) = first.filter(|_| error.is_none()) {
        let budget = Budget {
            deadline,
            step: longest(),
        };
        match found_case(base, space, opts, budget, index, check, seen) {
            Ok(mut f) => {
                f.time_to_first = time_to_first;
                found = Some(f);
            }
            Err(m) => error = Some(m),
        }
    }
    SearchResult {
        tried,
        violating,
        distinct_traces: traces.count(),
        found,
        elapsed: start.elapsed(),
        timed_out,
        skipped,
        error,
    }
}

/// Whether less than `margin` is left before the search's `deadline` (from `--time-limit`).
fn past_with(deadline: Option<Instant>, margin: Duration) -> bool {
    deadline.is_some_and(|d| Instant::now() + margin >= d)
}

/// The time a shrink may take: until `deadline`, with room for one more step as long as the
/// longest one so far and the finding's replay after it.
#[derive(Clone, Copy)]
struct Budget {
    deadline: Option<Instant>,
    /// The longest case or step so far.
    step: Duration,
}

impl Budget {
    /// Whether another step (and the replay after it) would end past the deadline.
    fn spent(&self) -> bool {
        past_with(self.deadline, self.step * 2)
    }

    /// Runs one step, `f`, and remembers how long it took.
    fn step<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let t = f();
        self.step = self.step.max(start.elapsed());
        t
    }
}

/// The finding of case `index`, which violated `check`: confirmed (on real servers) and shrunk;
/// its outcome is the last kept step's run (in simulation, where a case is a function of its
/// seed) or the settled one (on real servers). `seen` is its violating run in the search. Once
/// `budget` is spent, the confirmation is skipped and the shrink stops where it is.
fn found_case(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    budget: Budget,
    index: u64,
    check: String,
    seen: Option<Box<Outcome>>,
) -> Result<Found, String> {
    let shrink_start = Instant::now();
    let confirmed = match opts.mode {
        SearchMode::Sim => None,
        SearchMode::Real { .. } if budget.spent() => None,
        SearchMode::Real { runs } => {
            let scenario = tree(space, opts.seed, index)
                .current()
                .scenario(base, space);
            Some(real::rate(&opts.locks, &scenario, &check, runs, opts.jobs)?.0)
        }
    };
    let mut shrunk = shrink(base, space, opts, budget, index, &check)?;
    let cut_short = shrunk.cut_short;
    let mut taken_back = 0;
    let (case, outcome) = match opts.mode {
        // The last kept step's run, or the search's own run of the case as drawn: a simulated
        // case is a function of its seed, so neither is run again.
        SearchMode::Sim => match shrunk.kept_outcome.take() {
            Some(o) => (shrunk.case().clone(), *o),
            None => {
                let seen = seen.expect("a case is found only from a violating run");
                (shrunk.case().clone(), *seen)
            }
        },
        SearchMode::Real { runs } => {
            let kept: Vec<Scenario> = shrunk
                .kept
                .iter()
                .map(|c| c.scenario(base, space))
                .collect();
            // Out of time, no candidate is re-run: the case as drawn, with its violating run.
            let settled = if budget.spent() {
                None
            } else {
                real::settle(&opts.locks, &kept, &check, runs, opts.jobs)?
            };
            match settled {
                Some((i, _, outcome)) => {
                    taken_back = (kept.len() - 1 - i) as u32;
                    (shrunk.kept[i].clone(), outcome)
                }
                // No kept candidate reproduces: the case as drawn, with its violating run.
                None => {
                    taken_back = shrunk.kept.len() as u32;
                    let seen = seen.expect("a real case is found only from a violating run");
                    (shrunk.drawn, *seen)
                }
            }
        }
    };
    Ok(Found {
        index,
        check,
        scenario: case.scenario(base, space),
        case,
        outcome,
        shrink_steps: shrunk.steps,
        time_to_first: Duration::ZERO,
        shrink_time: shrink_start.elapsed(),
        confirmed,
        taken_back,
        cut_short,
    })
}

/// Whether `case` still violates `check`: in its one simulated run (`Some` with that run), or on
/// real servers in at least one of `runs` runs (`Some(None)`: which run is settled later).
fn still_violates(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    case: &Case,
    check: &str,
) -> Result<Option<Option<Box<Outcome>>>, String> {
    match opts.mode {
        SearchMode::Sim => {
            let (_, outcome) = judge(&opts.locks, base, space, case);
            Ok(violated(&outcome, Some(check)).map(|_| Some(Box::new(outcome))))
        }
        SearchMode::Real { runs } => Ok(real::violates_in(
            &opts.locks,
            &case.scenario(base, space),
            check,
            runs,
            opts.jobs,
        )?
        .map(|_| None)),
    }
}

/// What a shrink ended with.
struct Shrunk {
    /// The case as drawn.
    drawn: Case,
    /// Steps taken.
    steps: u32,
    /// Every case a step kept, in order: the last is the smallest. On real servers the end of
    /// this chain may be taken back ([`real::settle`]).
    kept: Vec<Case>,
    /// The deadline stopped the shrink before it was done.
    cut_short: bool,
    /// In simulation, the run of the last kept case.
    kept_outcome: Option<Box<Outcome>>,
}

/// proptest's shrink loop over case `index`'s tree: simplify while the case still violates
/// `check`, complicate back when a step lost it. Returns the last violating case and the steps;
/// no step starts that `budget` cannot afford.
fn shrink(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    mut budget: Budget,
    index: u64,
    check: &str,
) -> Result<Shrunk, String> {
    let mut tree = tree(space, opts.seed, index);
    let mut shrunk = Shrunk {
        drawn: tree.current(),
        steps: 0,
        kept: Vec::new(),
        cut_short: false,
        kept_outcome: None,
    };
    if !tree.simplify() {
        return Ok(shrunk);
    }
    while shrunk.steps < opts.max_shrink_steps {
        if budget.spent() {
            shrunk.cut_short = true;
            return Ok(shrunk);
        }
        shrunk.steps += 1;
        let candidate = tree.current();
        if let Some(o) = budget.step(|| still_violates(base, space, opts, &candidate, check))? {
            shrunk.kept.push(candidate);
            shrunk.kept_outcome = o;
            if !tree.simplify() {
                break;
            }
        } else if !tree.complicate() {
            break;
        }
    }
    drop_faults(base, space, opts, budget, check, shrunk)
}

impl Shrunk {
    /// The smallest case that kept the violation (the case as drawn, when no step kept it).
    fn case(&self) -> &Case {
        self.kept.last().unwrap_or(&self.drawn)
    }
}

/// A last pass after proptest's shrink: drops each remaining fault in turn and keeps the case
/// without it while it still violates `check`, until no fault can go: the finding is then
/// 1-minimal (removing any one of its faults loses the violation), unless the deadline cut it
/// short. proptest removes a fault
/// only while it shrinks the schedule, before the seed and the other faults have shrunk; a fault
/// that was needed then (a 1 ms pause that shifted the interleaving) can be spare at the end.
///
/// It is not bounded by `max_shrink_steps`: it tries at most n(n+1)/2 removals for n faults
/// (`max_faults` is at most 16), and a spare fault is what a reader of the finding would trip on
/// first, also when the numbers' budget ran out (on real servers it always does). It is bounded
/// by `deadline`, like every step.
fn drop_faults(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    mut budget: Budget,
    check: &str,
    mut shrunk: Shrunk,
) -> Result<Shrunk, String> {
    let mut i = 0;
    // Down to none: a case that still violates without any fault (a race) is 1-minimal only
    // when even its last fault was tried.
    while i < shrunk.case().faults.len() {
        if budget.spent() {
            shrunk.cut_short = true;
            break;
        }
        shrunk.steps += 1;
        let mut candidate = shrunk.case().clone();
        candidate.faults.remove(i);
        if let Some(o) = budget.step(|| still_violates(base, space, opts, &candidate, check))? {
            shrunk.kept.push(candidate);
            shrunk.kept_outcome = o;
            i = 0;
        } else {
            i += 1;
        }
    }
    Ok(shrunk)
}
