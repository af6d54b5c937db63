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

use super::phase::Phase;
use super::real::{self, Margin, Rate, RealRun};
use super::shrink::{shrink, Shrinking};
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
    /// On real servers: the last shrink steps taken back because the cases they kept fell short
    /// of the margin when run again ([`real::settle`]).
    pub taken_back: u32,
    /// The time limit ended the shrink before it was done: the case still violates, but a
    /// smaller one may too.
    pub cut_short: bool,
    /// The time limit cut the violating case's own simulated run: `outcome` judges the run up
    /// to the cut (a violation there is one of the whole run), and the finding is written
    /// without replaying the whole run, which did not fit in the limit.
    pub run_cut: bool,
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
    /// The time limit cut the last case's simulated run: it was judged up to the cut.
    pub cut_run: bool,
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
        /// The time limit cut the simulated run ([`crate::world::cut`]).
        cut: bool,
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
pub(super) fn tree(space: &Space, seed: u64, index: u64) -> Box<dyn ValueTree<Value = Case>> {
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

/// [`judge`], with the run cut at `deadline` ([`crate::world::cut`]): also whether it was.
fn judge_until(
    locks: &Registry,
    base: &Scenario,
    space: &Space,
    case: &Case,
    deadline: Option<Instant>,
) -> (Outcome, bool) {
    crate::world::cut::set_deadline(deadline);
    let (_, outcome) = judge(locks, base, space, case);
    let cut = crate::world::cut::take_cut();
    crate::world::cut::set_deadline(None);
    (outcome, cut)
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
    search_in_phases(base, space, opts, &|p| {
        if let Phase::Search {
            done, violating, ..
        } = p
        {
            progress(done, violating)
        }
    })
}

/// [`search`], reporting every phase: each case of the search, each run confirming the finding
/// on real servers, each shrink step and each run settling it.
pub fn search_in_phases(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    progress: &dyn Fn(Phase),
) -> SearchResult {
    let total = opts.shard.len(opts.cases);
    let searched = |done, violating| {
        progress(Phase::Search {
            done,
            total,
            violating,
        })
    };
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
    let mut cut_run = false;
    let mut found_cut = false;
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
        let mut cut = false;
        let outcome = match opts.mode {
            SearchMode::Sim => {
                // A case longer than what is left of the limit is cut at the deadline and judged
                // up to there, rather than not run or run past the limit.
                let (outcome, was_cut) = judge_until(&opts.locks, base, space, &case, deadline);
                cut = was_cut;
                Box::new(outcome)
            }
            SearchMode::Real { .. } => {
                match real::run_once(&opts.locks, &case.scenario(base, space), deadline) {
                    RealRun::Judged(o) => o,
                    RealRun::Cut(o) => {
                        cut = true;
                        o
                    }
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
            cut,
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
                cut,
            } => {
                tried += 1;
                traces.add(trace);
                if let Some(c) = violated {
                    violating += 1;
                    if first.is_none() {
                        first = Some((i, c, outcome));
                        first_at = start.elapsed();
                        // A finding from a cut run cannot be shrunk or replayed in the limit.
                        found_cut = cut;
                    }
                }
                searched(tried + skipped, violating);
                if cut {
                    // The deadline has passed: no other case can run.
                    timed_out = true;
                    cut_run = true;
                }
                !cut && (opts.keep_going || first.is_none())
            }
            CaseResult::Skipped => {
                skipped += 1;
                searched(tried + skipped, violating);
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
        let made = if found_cut {
            Ok(found_in_cut_run(base, space, opts, index, check, seen))
        } else {
            found_case(base, space, opts, budget, (index, check, seen), progress)
        };
        match made {
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
        cut_run,
        skipped,
        error,
    }
}

/// The finding of case `index`, whose violating run `seen` the time limit cut: neither shrunk
/// nor confirmed, since the deadline has passed.
fn found_in_cut_run(
    base: &Scenario,
    space: &Space,
    opts: &SearchOptions,
    index: u64,
    check: String,
    seen: Option<Box<Outcome>>,
) -> Found {
    let case = tree(space, opts.seed, index).current();
    Found {
        index,
        check,
        scenario: case.scenario(base, space),
        case,
        outcome: *seen.expect("a case is found only from a violating run"),
        shrink_steps: 0,
        time_to_first: Duration::ZERO,
        shrink_time: Duration::ZERO,
        confirmed: None,
        taken_back: 0,
        cut_short: true,
        run_cut: true,
    }
}

/// Whether less than `margin` is left before the search's `deadline` (from `--time-limit`).
fn past_with(deadline: Option<Instant>, margin: Duration) -> bool {
    deadline.is_some_and(|d| Instant::now() + margin >= d)
}

/// The time a shrink may take: until `deadline`, with room for one more step as long as the
/// longest one so far and the finding's replay after it.
#[derive(Clone, Copy)]
pub(super) struct Budget {
    deadline: Option<Instant>,
    /// The longest case or step so far.
    step: Duration,
}

impl Budget {
    /// Whether another step (and the replay after it) would end past the deadline.
    pub(super) fn spent(&self) -> bool {
        past_with(self.deadline, self.step * 2)
    }

    /// Real runs within this budget: each is cut at its deadline.
    pub(super) fn runner<'a>(&self, opts: &'a SearchOptions) -> real::Runner<'a> {
        real::Runner {
            locks: &opts.locks,
            jobs: opts.jobs,
            deadline: self.deadline,
        }
    }

    /// Runs one step, `f`, and remembers how long it took.
    pub(super) fn step<T>(&mut self, f: impl FnOnce() -> T) -> T {
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
    (index, check, seen): (u64, String, Option<Box<Outcome>>),
    progress: &dyn Fn(Phase),
) -> Result<Found, String> {
    let shrink_start = Instant::now();
    let confirmed = match opts.mode {
        SearchMode::Sim => None,
        SearchMode::Real { .. } if budget.spent() => None,
        SearchMode::Real { runs } => {
            let scenario = tree(space, opts.seed, index)
                .current()
                .scenario(base, space);
            let tick = |r: Rate| progress(Phase::Confirm { done: r.runs, runs });
            tick(Rate {
                violated: 0,
                runs: 0,
            });
            Some(real::rate(&budget.runner(opts), &scenario, &check, runs, &tick)?.0)
        }
    };
    // Unconfirmed (out of time): the search's own violating run is the evidence.
    let margin = match (opts.mode, confirmed) {
        (SearchMode::Real { runs }, None) => Margin { needed: 1, runs },
        (_, Some(c)) => Margin::of(c),
        (SearchMode::Sim, None) => Margin { needed: 1, runs: 1 },
    };
    let shrinking = Shrinking {
        opts,
        check: &check,
        margin,
        progress,
    };
    let mut shrunk = shrink(base, space, &shrinking, budget, index)?;
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
            progress(Phase::Settle { done: 0, runs });
            let kept: Vec<Scenario> = shrunk
                .kept
                .iter()
                .map(|c| c.scenario(base, space))
                .collect();
            // Out of time, no candidate is re-run: the case as drawn, with its violating run.
            let settled = if budget.spent() {
                None
            } else {
                real::settle(&budget.runner(opts), &kept, &check, margin)?
            };
            match settled {
                Some((i, outcome)) => {
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
    // On real servers, a pause the shrink left at the lease's edge is moved off it when the
    // violation holds there at the margin: a finding's file should replay at the rate it states.
    let (case, outcome) = match opts.mode {
        SearchMode::Real { .. } if !budget.spent() => {
            match real::off_the_edge(&case, base.lock.lease_ms(), space.pause_ms[1]) {
                Some(wider) => {
                    let runner = budget.runner(opts);
                    let scenario = wider.scenario(base, space);
                    match real::decide(&runner, &scenario, &check, margin)? {
                        Some((_, o)) => (wider, o),
                        None => (case, outcome),
                    }
                }
                None => (case, outcome),
            }
        }
        _ => (case, outcome),
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
        run_cut: false,
    })
}
