//! `lockcheck explore`: search a scenario's space of fault schedules, workloads and seeds for a
//! violation with proptest, shrink it, and write it as a scenario `lockcheck run` replays.
//!
//! Bundled scenarios test the failures someone already thought of; explore starts from a
//! scenario with no faults at all and finds the schedule itself. The space is the scenario's
//! `[explore]` table ([`space`]), the cases come from a proptest strategy ([`strategy`]), the
//! search and proptest's shrinking run in [`mod@search`], the finding is written by [`emit`] and
//! printed by [`report`].

mod artifacts;
pub mod emit;
pub mod report;
pub mod search;
pub mod space;
pub mod strategy;

pub use search::{search, Found, SearchOptions, SearchResult};
pub use space::{ExploreSpec, Space};

use crate::check::judge::{Mode, Outcome, SeedsOutcome};
use crate::check::CHECK_NAMES;
use crate::cli::run::{EXIT_BAD_INPUT, EXIT_MATCH, EXIT_MISMATCH};
use crate::exec::Shard;
use crate::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Cases tried when `--cases` is not given: about a minute on one core for the bundled
/// scenarios' sizes (a case is one simulated run of a few simulated seconds).
pub const DEFAULT_CASES: u64 = 2_000;

/// Shrink steps at most; proptest's binary searches need a few dozen per drawn number.
pub const MAX_SHRINK_STEPS: u32 = 2_000;

/// Options of `lockcheck explore`.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    /// `--cases`: how many cases to draw, the search's budget.
    pub cases: u64,
    /// `--seed`: with `cases`, it fixes every case drawn, so a search can be repeated.
    pub seed: u64,
    /// `--time-limit`: stop drawing cases after this long (the result then depends on speed).
    pub time_limit: Option<Duration>,
    /// `--check`: only this checker's violations count (default: any checker's).
    pub check: Option<String>,
    /// `--json`: print one JSON object instead of text, for scripts.
    pub json: bool,
    /// `--out`: where to write the minimal scenario (default: [`default_out`]).
    pub out: Option<PathBuf>,
    /// `--jobs`: worker threads; the output is the same for any value.
    pub jobs: usize,
    /// `--shard`: the slice of the cases this process tries, to split a search across machines.
    pub shard: Shard,
    /// `--keep-going`: run the whole budget and count every violating case (the first is still
    /// the one shrunk and written), to see how common the violation is.
    pub keep_going: bool,
    /// `--junit FILE` / `--report DIR`.
    pub artifacts: crate::suite::Artifacts,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            cases: DEFAULT_CASES,
            seed: 0,
            time_limit: None,
            check: None,
            json: false,
            out: None,
            jobs: crate::exec::default_jobs(),
            shard: Shard::WHOLE,
            keep_going: false,
            artifacts: Default::default(),
        }
    }
}

/// Where the finding goes by default: next to the input, `<name>.found.toml`.
pub fn default_out(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "scenario".into());
    input.with_file_name(format!("{stem}.found.toml"))
}

/// A finding written to disk and replayed from the file.
pub struct Replayed {
    /// The scenario file's text as written.
    pub text: String,
    /// The written file parsed back, as `lockcheck run` would read it.
    pub scenario: Scenario,
    /// The replay's judged run: the proof that the file reproduces the finding.
    pub outcome: SeedsOutcome,
}

/// Writes the finding to `out` and replays the written file, which must give the found trace.
pub fn write_and_replay(input_text: &str, found: &Found, out: &Path) -> Result<Replayed, String> {
    let text = emit::found_scenario(input_text, found)?;
    std::fs::write(out, &text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let mut scenario = Scenario::parse(&out.display().to_string(), &text)
        .map_err(|e| format!("the written finding does not parse (a bug): {e}"))?;
    scenario.path = Some(out.to_path_buf());
    let run = crate::sim::run(&scenario, scenario.seed);
    let outcome = Outcome::judge(&scenario, Mode::Sim, scenario.seed, run.history);
    if outcome.trace_hash != found.outcome.trace_hash {
        return Err(format!(
            "the written finding replays to trace {} instead of {} (a bug)",
            outcome.trace_hash, found.outcome.trace_hash
        ));
    }
    let outcome = SeedsOutcome::aggregate(&scenario, vec![outcome]);
    Ok(Replayed {
        text,
        scenario,
        outcome,
    })
}

/// `lockcheck explore`: returns the exit code (1 found, 0 none, 2 bad input).
pub fn explore_command(path: &Path, opts: &ExploreOptions) -> i32 {
    let fail = |m: String| {
        eprintln!("error: {m}");
        EXIT_BAD_INPUT
    };
    if let Some(c) = &opts.check {
        if !CHECK_NAMES.contains(&c.as_str()) {
            return fail(format!(
                "--check {c}: unknown checker, expected one of {}",
                CHECK_NAMES.join(", ")
            ));
        }
    }
    if opts.cases == 0 {
        return fail("--cases must be at least 1".into());
    }
    let input_text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            return fail(format!(
                "{}: cannot read scenario file: {e}",
                path.display()
            ))
        }
    };
    let base = match Scenario::parse(&path.display().to_string(), &input_text) {
        Ok(mut s) => {
            s.path = Some(path.to_path_buf());
            s
        }
        Err(e) => return fail(e.to_string()),
    };
    let space = match Space::of(&base) {
        Ok(s) => s,
        Err(m) => return fail(format!("{}: {m}", path.display())),
    };
    let search_opts = SearchOptions {
        cases: opts.cases,
        seed: opts.seed,
        jobs: opts.jobs,
        shard: opts.shard,
        time_limit: opts.time_limit,
        check: opts.check.clone(),
        max_shrink_steps: MAX_SHRINK_STEPS,
        keep_going: opts.keep_going,
    };
    let bar = crate::progress::bar(opts.shard.indices(opts.cases).len() as u64, "cases");
    let result = search(&base, &space, &search_opts, &|tried, violating| {
        crate::progress::tick(&bar, tried, violating)
    });
    bar.finish_and_clear();
    let out = opts.out.clone().unwrap_or_else(|| default_out(path));
    let replayed = match &result.found {
        Some(f) => match write_and_replay(&input_text, f, &out) {
            Ok(r) => Some(r),
            Err(m) => return fail(m),
        },
        None => None,
    };
    let written = replayed.as_ref().map(|r| report::Written {
        scenario: &r.scenario,
        outcome: &r.outcome,
        text: &r.text,
        out: &out,
    });
    if opts.json {
        let v = report::json(&base, &result, written.as_ref());
        crate::outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        crate::out!("{}", report::text(&base, &result, written.as_ref()));
    }
    eprintln!("{}", report::timing(&result, opts.jobs));
    let written = replayed.as_ref().map(|r| (&r.scenario, &r.outcome));
    if let Err(e) = artifacts::write(&base, &result, written, &opts.artifacts) {
        return fail(e);
    }
    if result.found.is_some() {
        EXIT_MISMATCH
    } else {
        EXIT_MATCH
    }
}
