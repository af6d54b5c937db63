//! `lockcheck explore`: the command around the explore library (`crate::explore`): its options,
//! what it prints (`explore_report`), and its CI artifacts (`explore_artifacts`).

use super::explore_artifacts as artifacts;
use super::explore_report as report;
use super::run::{EXIT_BAD_INPUT, EXIT_MATCH, EXIT_MISMATCH};
use crate::check::CHECK_NAMES;
use crate::exec::Shard;
use crate::explore::real::{DEFAULT_RUNS, MAX_RUNS, REAL_MAX_SHRINK_STEPS};
use crate::explore::{
    default_out, search_in_phases, write_and_replay, SearchMode, SearchOptions, DEFAULT_CASES,
    MAX_CASES, MAX_JOBS, MAX_SHRINK_STEPS,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// The lock kinds the scenario may name: lockcheck's, and those the program registered.
    pub locks: crate::registry::Registry,
    /// `--real`: run each case on spawned servers (and client processes) instead of simulating it.
    pub real: bool,
    /// `--runs`: on real servers, runs per confirmation and per shrink candidate.
    pub runs: u32,
    /// `--shrink-steps`: the shrink budget (default: [`MAX_SHRINK_STEPS`] in simulation,
    /// [`REAL_MAX_SHRINK_STEPS`] on real servers).
    pub shrink_steps: Option<u32>,
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
            locks: Default::default(),
            real: false,
            runs: DEFAULT_RUNS,
            shrink_steps: None,
        }
    }
}

/// `lockcheck explore`: returns the exit code (1 found, 0 none, 2 bad input).
pub fn explore_command(path: &Path, opts: &ExploreOptions) -> i32 {
    // `--time-limit` bounds the whole command, the finding's replays included.
    let deadline = opts.time_limit.map(|t| std::time::Instant::now() + t);
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
    if !(1..=MAX_CASES).contains(&opts.cases) {
        return fail(format!(
            "--cases {}: give 1 to {MAX_CASES} cases (at thousands of cases a second, the top \
             of that range is days of search)",
            opts.cases
        ));
    }
    if !(1..=MAX_JOBS).contains(&opts.jobs) {
        return fail(format!(
            "--jobs {}: give 1 to {MAX_JOBS} worker threads (0 or none: every core)",
            opts.jobs
        ));
    }
    if !(1..=MAX_RUNS).contains(&opts.runs) {
        return fail(format!(
            "--runs {}: give 1 to {MAX_RUNS} runs per real case (each is a real run of seconds)",
            opts.runs
        ));
    }
    // The same reading as `lockcheck run`: a regular file of at most 1 MiB, in UTF-8.
    let input_text = match crate::scenario::Scenario::read(path) {
        Ok(t) => t,
        Err(e) => return fail(e.to_string()),
    };
    let base = match opts.locks.parse(&path.display().to_string(), &input_text) {
        Ok(mut s) => {
            s.path = Some(path.to_path_buf());
            s
        }
        Err(e) => return fail(e.to_string()),
    };
    for w in &base.warnings {
        eprintln!("warning: {w}");
    }
    if base.lock.kind.is_client_program() && !opts.real {
        // Its lock is another program; in simulation every call would fail and the search would
        // find nothing, vacuously.
        return fail(format!(
            "{}: lock kind `client-program` runs a client program against real servers lockcheck spawns, which the \
             simulator cannot run: add --real to search on spawned servers and client processes",
            path.display()
        ));
    }
    let space = match crate::scenario::Space::of(&base) {
        Ok(s) if opts.real => s.on_real_servers(&base),
        Ok(s) => s,
        Err(m) => return fail(format!("{}: {m}", path.display())),
    };
    if let (Some(limit), true) = (opts.time_limit, opts.real) {
        // Every case is cut at the deadline and judged up to there (`world::cut`), but a real
        // case that cannot fit at all would judge only its servers' start: refused.
        let case_s = crate::world::estimate::real_most_ms(&base) as f64 / 1000.0;
        if case_s > limit.as_secs_f64() {
            return fail(format!(
                "{}: one case of this space is estimated to take about {} (about {} events and \
                 {} round trips that record none), longer than --time-limit {}: no case could \
                 be judged in time; give a longer limit or lower `duration_ms`, \
                 `workload.hold_ms` or `workload.clients`",
                path.display(),
                crate::progress::duration(case_s),
                crate::world::estimate::expected_events(&base),
                crate::world::estimate::silent_round_trips(&base),
                crate::progress::duration(limit.as_secs_f64()),
            ));
        }
    }
    let out = opts.out.clone().unwrap_or_else(|| default_out(path));
    if let Err(m) = super::explore_out::check(path, &out) {
        return fail(m);
    }
    let (mode, max_shrink_steps) = if opts.real {
        for w in crate::scenario::input::real_mode_warnings(&base) {
            eprintln!("warning: {}: {w}", path.display());
        }
        let runs = opts.runs;
        (SearchMode::Real { runs }, REAL_MAX_SHRINK_STEPS)
    } else {
        (SearchMode::Sim, MAX_SHRINK_STEPS)
    };
    let search_opts = SearchOptions {
        cases: opts.cases,
        seed: opts.seed,
        jobs: opts.jobs,
        shard: opts.shard,
        time_limit: opts.time_limit,
        check: opts.check.clone(),
        max_shrink_steps: opts.shrink_steps.unwrap_or(max_shrink_steps),
        keep_going: opts.keep_going,
        locks: opts.locks.clone(),
        mode,
    };
    let phases = super::explore_progress::Phases::new(format!("explore {}", base.name));
    let result = search_in_phases(&base, &space, &search_opts, &|p| phases.report(p));
    phases.finish();
    if let Some(e) = &result.error {
        return fail(format!(
            "{}: a real run could not be made: {e}",
            path.display()
        ));
    }
    if opts.real && result.tried == 0 && result.skipped > 0 {
        return fail(format!(
            "{}: every case drawn was skipped ({}): real mode has no recipe for the faults of \
             this space, so nothing was judged; narrow `[explore] faults` to kinds real mode runs \
             (`lockcheck list` says which)",
            path.display(),
            result.skipped
        ));
    }
    let replayed = match &result.found {
        Some(f) => {
            match write_and_replay(&opts.locks, &input_text, f, &out, mode, opts.jobs, deadline) {
                Ok(r) => Some(r),
                Err(m) => return unwritten(&input_text, f, &out, &m),
            }
        }
        None => None,
    };
    let written = replayed.as_ref().map(|r| report::Written {
        scenario: &r.scenario,
        outcome: &r.outcome,
        text: &r.text,
        out: &out,
        rate: r.rate,
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

/// The finding could not be written to `out` (or its replay failed) after the whole search: the
/// finding is not lost, it is printed in full on standard output, and the exit code is still the
/// finding's.
fn unwritten(input_text: &str, found: &crate::explore::Found, out: &Path, why: &str) -> i32 {
    eprintln!("error: {why}");
    let text = crate::explore::emit::found_scenario(input_text, found, None, None)
        .unwrap_or_else(|e| format!("# the finding could not be rendered either: {e}\n"));
    crate::outln!(
        "FOUND {} violation (case {}, shrunk in {} steps), NOT written to {}; the minimal \
         scenario:",
        found.check,
        found.index,
        found.shrink_steps,
        out.display()
    );
    crate::out!("{text}");
    EXIT_MISMATCH
}
