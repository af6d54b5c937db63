//! Explore, the library: search a scenario's space of fault schedules, workloads and seeds for a
//! violation with proptest, shrink it, and write it as a scenario `lockcheck run` replays. The
//! `lockcheck explore` command around it (options, output, artifacts) is `cli::explore`.
//!
//! Bundled scenarios test the failures someone already thought of; explore starts from a
//! scenario with no faults at all and finds the schedule itself. The space is the scenario's
//! `[explore]` table (`scenario::explore`), the cases come from a proptest strategy
//! ([`strategy`], what pauses add up to bounded by [`pause_budget`]), the search and proptest's
//! shrinking run in [`mod@search`] and `shrink`, and the finding is written by [`emit`]. On real servers
//! (`--real`) the same search runs real cases, and a verdict is a rate ([`real`]).

pub mod emit;
pub mod pause_budget;
pub mod phase;
pub mod real;
pub mod search;
mod shrink;
pub mod strategy;

pub use phase::Phase;
pub use real::Rate;
pub use search::{search, search_in_phases, Found, SearchMode, SearchOptions, SearchResult};

use crate::judge::{Mode, Outcome, SeedsOutcome};
use crate::registry::Registry;
use crate::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Cases tried when `--cases` is not given: about a minute on one core for the bundled
/// scenarios' sizes (a case is one simulated run of a few simulated seconds).
pub const DEFAULT_CASES: u64 = 2_000;

/// The most cases `--cases` may ask for: 10^9, days of search at the bundled scenarios'
/// thousands of cases a second. The cases' indices are listed a chunk at a time, so memory does
/// not grow with the budget.
pub const MAX_CASES: u64 = 1_000_000_000;

/// The most worker threads `--jobs` may ask for: far more than any machine has cores, far fewer
/// than the threads an OS refuses to spawn.
pub const MAX_JOBS: usize = 1024;

/// Shrink steps at most; proptest's binary searches need a few dozen per drawn number.
pub const MAX_SHRINK_STEPS: u32 = 2_000;

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
    /// On real servers: how often the file's scenario violated when run from the file.
    pub rate: Option<Rate>,
}

/// The input scenario's directory, when `out` is in another one (its relative paths then need
/// rebasing, see [`emit::found_scenario`]).
fn moved_from(found: &Found, out: &Path) -> Option<PathBuf> {
    let dir = |p: &Path| {
        let d = p.parent().filter(|d| !d.as_os_str().is_empty());
        let d = d.unwrap_or(Path::new("."));
        d.canonicalize().unwrap_or_else(|_| d.to_path_buf())
    };
    let input = dir(found.scenario.path.as_deref()?);
    (input != dir(out)).then_some(input)
}

/// `LOCKCHECK_EXPLORE_WRITE_FAILS=1`: writing the finding fails, as it does when the disk fills
/// up or the directory is removed during the search. Internal, for the test that such a finding
/// is still printed in full (the path is checked before the search, so nothing else can fail
/// there on purpose).
pub const WRITE_FAILS_VAR: &str = "LOCKCHECK_EXPLORE_WRITE_FAILS";

/// Writes `text` to `out` and parses it back as `lockcheck run` would.
fn write_and_read(locks: &Registry, text: &str, out: &Path) -> Result<Scenario, String> {
    let written = if std::env::var_os(WRITE_FAILS_VAR).is_some() {
        Err(std::io::Error::other(format!("{WRITE_FAILS_VAR} is set")))
    } else {
        std::fs::write(out, text)
    };
    written.map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    let mut scenario = locks
        .parse(&out.display().to_string(), text)
        .map_err(|e| format!("the written finding does not parse (a bug): {e}"))?;
    scenario.path = Some(out.to_path_buf());
    Ok(scenario)
}

/// How many times at least a real finding's file is run to state its rate.
pub const MIN_FILE_RUNS: u32 = 5;

/// Writes the finding to `out` and replays the written file (its lock built by `locks`), which
/// must give the found trace. On real servers, where no run gives a trace twice, the file is run
/// `runs` times (`jobs` at once) instead, each cut at `deadline` (`--time-limit`), and its
/// `about` states how many violated.
pub fn write_and_replay(
    locks: &Registry,
    input_text: &str,
    found: &Found,
    out: &Path,
    mode: SearchMode,
    jobs: usize,
    deadline: Option<Instant>,
) -> Result<Replayed, String> {
    let moved = moved_from(found, out);
    let moved = moved.as_deref();
    if let SearchMode::Real { runs } = mode {
        let first_text = emit::found_scenario(input_text, found, None, moved)?;
        let scenario = write_and_read(locks, &first_text, out)?;
        let runner = real::Runner {
            locks,
            jobs,
            deadline,
        };
        let (rate, first) = if deadline.is_some_and(|d| Instant::now() >= d) {
            (None, None)
        } else {
            // At least five runs, whatever `--runs` confirmed with: the rate the file states is
            // a measurement a reader replays against.
            let replays = runs.max(MIN_FILE_RUNS);
            let (rate, first, by_check) =
                real::rate_by_check(&runner, &scenario, &found.check, replays, &|_| {})?;
            ((rate.runs > 0).then_some((rate, by_check)), first)
        };
        // Out of time (`--time-limit`) before a run of the file was judged: the file is written
        // as found, its `about` saying it was not yet run from the file.
        let Some((rate, by_check)) = rate else {
            return Ok(Replayed {
                outcome: SeedsOutcome::aggregate(&scenario, vec![found.outcome.clone()]),
                text: first_text,
                scenario,
                rate: None,
            });
        };
        let text =
            emit::found_scenario_replayed(input_text, found, Some(rate), moved, Some(&by_check))?;
        let scenario = write_and_read(locks, &text, out)?;
        // The report shows a run of the file that violated; if none did, the search's own run.
        let shown = first.unwrap_or_else(|| found.outcome.clone());
        return Ok(Replayed {
            outcome: SeedsOutcome::aggregate(&scenario, vec![shown]),
            text,
            scenario,
            rate: Some(rate),
        });
    }
    let text = emit::found_scenario(input_text, found, None, moved)?;
    let scenario = write_and_read(locks, &text, out)?;
    if found.run_cut {
        // The whole run did not fit in the time limit; what was judged is the cut run's prefix.
        return Ok(Replayed {
            outcome: SeedsOutcome::aggregate(&scenario, vec![found.outcome.clone()]),
            text,
            scenario,
            rate: None,
        });
    }
    let run = locks.run_sim(&scenario, scenario.seed);
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
        rate: None,
    })
}
