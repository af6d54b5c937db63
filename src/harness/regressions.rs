//! Explore from a `#[test]`: search a scenario's space for a violation of your lock inside
//! `cargo test`, get the shrunk finding back to assert on, and keep it as a regression.
//!
//! Like proptest's `proptest-regressions/`, a finding is saved as a scenario file
//! (`lockcheck-regressions/<scenario>.<trace>.toml` beside the scenario, the file `explore --out`
//! would write) and replayed first on the next run: while it still violates, the test gets it
//! back at once, without a search; once the lock is fixed, the search runs again. Commit the
//! folder, as you would `proptest-regressions/`; any harness binary replays a saved file with
//! `run`.
//!
//! ```no_run
//! # fn harness() -> lockcheck::Harness { lockcheck::Harness::new() }
//! let found = harness().explore("tests/check_then_set.toml").cases(300).run();
//! let finding = found.expect("the GET-then-SET race is found without any fault");
//! assert_eq!(finding.check, lockcheck::check::MUTUAL_EXCLUSION);
//! ```

use crate::explore::search::violated;
use crate::explore::{search, write_and_replay, SearchMode, SearchOptions, MAX_SHRINK_STEPS};
use crate::judge::{Mode, Outcome, SeedsOutcome};
use crate::registry::Registry;
use crate::scenario::{Scenario, Space};
use std::path::{Path, PathBuf};

/// Cases a test's search tries unless told ([`ExploreTest::cases`]): proptest's default.
pub const DEFAULT_TEST_CASES: u64 = 256;

/// The folder, beside the scenario, that keeps the findings ([`ExploreTest::regressions`]).
pub const REGRESSIONS_DIR: &str = "lockcheck-regressions";

/// A search to run from a test ([`crate::Harness::explore`]); [`ExploreTest::run`] runs it.
#[derive(Clone, Debug)]
pub struct ExploreTest {
    locks: Registry,
    scenario: PathBuf,
    cases: u64,
    seed: u64,
    check: Option<String>,
    jobs: usize,
    regressions: Option<PathBuf>,
}

/// What a test's search found: the minimal violating scenario, saved, and its run.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The violated check (`mutual_exclusion`, `foreign_release`, ...).
    pub check: String,
    /// The minimal scenario, as saved.
    pub scenario: Scenario,
    /// Its run: every check's verdict and evidence, the history, the trace hash.
    pub outcome: Outcome,
    /// Where it is saved.
    pub file: PathBuf,
    /// The file's text.
    pub text: String,
    /// It came from a file saved by an earlier run (replayed first), not from a new search.
    pub replayed: bool,
}

impl std::fmt::Display for Finding {
    /// The file and the report `run` prints for it, for a test's failure message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.replayed {
            "replayed from"
        } else {
            "found, saved to"
        };
        writeln!(f, "{} violation {how} {}:", self.check, self.file.display())?;
        for line in self.text.lines() {
            writeln!(f, "  | {line}")?;
        }
        let run = SeedsOutcome::aggregate(&self.scenario, vec![self.outcome.clone()]);
        f.write_str(&crate::cli::report::text(&self.scenario, &run))
    }
}

impl ExploreTest {
    pub(super) fn new(locks: Registry, scenario: &Path) -> Self {
        ExploreTest {
            locks,
            scenario: scenario.to_path_buf(),
            cases: DEFAULT_TEST_CASES,
            seed: 0,
            check: None,
            jobs: crate::exec::default_jobs(),
            regressions: None,
        }
    }

    /// Cases to try (default [`DEFAULT_TEST_CASES`]).
    pub fn cases(mut self, n: u64) -> Self {
        self.cases = n;
        self
    }

    /// The search seed (default 0): with the case count, it fixes every case drawn.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Only this checker's violations count (default: any checker's).
    pub fn check(mut self, name: &str) -> Self {
        self.check = Some(name.to_string());
        self
    }

    /// Worker threads (default: every core); the finding is the same for any count.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Where findings are saved and replayed from (default: [`REGRESSIONS_DIR`] beside the
    /// scenario).
    pub fn regressions(mut self, dir: impl Into<PathBuf>) -> Self {
        self.regressions = Some(dir.into());
        self
    }

    /// The folder findings go to.
    pub fn regressions_dir(&self) -> PathBuf {
        self.regressions.clone().unwrap_or_else(|| {
            self.scenario
                .parent()
                .unwrap_or(Path::new("."))
                .join(REGRESSIONS_DIR)
        })
    }

    /// Replays the saved findings, then (when none violates any more) searches; the finding,
    /// or `None` when the budget ran out with none.
    ///
    /// # Panics
    ///
    /// On bad input (the scenario or a saved file does not parse, a file cannot be written), with
    /// the error: a test should fail there.
    pub fn run(self) -> Option<Finding> {
        self.try_run().unwrap_or_else(|e| panic!("lockcheck: {e}"))
    }

    /// [`ExploreTest::run`], with bad input as an error.
    pub fn try_run(self) -> Result<Option<Finding>, String> {
        let text = Scenario::read(&self.scenario).map_err(|e| e.to_string())?;
        let mut base = self
            .locks
            .parse(&self.scenario.display().to_string(), &text)
            .map_err(|e| e.to_string())?;
        base.path = Some(self.scenario.clone());
        if let Some(found) = self.replay_saved(&base, &text)? {
            return Ok(Some(found));
        }
        let space = Space::of(&base).map_err(|m| format!("{}: {m}", self.scenario.display()))?;
        let opts = SearchOptions {
            cases: self.cases,
            seed: self.seed,
            jobs: self.jobs,
            shard: crate::exec::Shard::WHOLE,
            time_limit: None,
            check: self.check.clone(),
            max_shrink_steps: MAX_SHRINK_STEPS,
            keep_going: false,
            locks: self.locks.clone(),
            mode: SearchMode::Sim,
        };
        let result = search(&base, &space, &opts, &|_, _| {});
        let Some(found) = result.found else {
            return Ok(None);
        };
        let dir = self.regressions_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let file = dir.join(format!("{}.{}.toml", self.stem(), found.outcome.trace_hash));
        let replayed = write_and_replay(
            &self.locks,
            &text,
            &found,
            &file,
            SearchMode::Sim,
            self.jobs,
            None,
        )?;
        eprintln!(
            "lockcheck: {} violated (case {} of {}); minimal scenario saved to {}",
            found.check,
            found.index,
            self.cases,
            file.display()
        );
        Ok(Some(Finding {
            check: found.check,
            scenario: replayed.scenario,
            outcome: replayed.outcome.shown,
            file,
            text: replayed.text,
            replayed: false,
        }))
    }

    /// The scenario's file name without `.toml`: the saved findings' prefix.
    fn stem(&self) -> String {
        self.scenario
            .file_stem()
            .map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned())
    }

    /// The saved findings of this scenario, oldest name first: `<stem>.<16 hex digits>.toml`.
    fn saved(&self) -> Vec<PathBuf> {
        let stem = self.stem();
        let Ok(entries) = std::fs::read_dir(self.regressions_dir()) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                name.as_deref()
                    .and_then(|n| n.strip_prefix(&stem))
                    .and_then(|n| n.strip_prefix('.'))
                    .and_then(|n| n.strip_suffix(".toml"))
                    .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            })
            .collect();
        files.sort();
        files
    }

    /// The first saved finding that still violates, run at its own seed with today's `[lock]`
    /// (`base`'s, from `base_text`): a finding is a schedule and a workload found against a
    /// lock, and the test asks about the lock as it is now. A finding saved with another
    /// `[lock]` (the parameters were tuned, the kind changed) is replayed with today's and, when
    /// it no longer violates, reported stale on stderr (delete it, or keep it as a case that
    /// once failed).
    fn replay_saved(&self, base: &Scenario, base_text: &str) -> Result<Option<Finding>, String> {
        let today = lock_table(base_text);
        for file in self.saved() {
            let text = Scenario::read(&file).map_err(|e| e.to_string())?;
            let mut s = self
                .locks
                .parse(&file.display().to_string(), &text)
                .map_err(|e| format!("a saved finding no longer parses: {e}"))?;
            s.path = Some(file.clone());
            let changed = lock_table(&text) != today;
            s.lock = base.lock.clone();
            let run = self.locks.run_sim(&s, s.seed);
            let outcome = Outcome::judge(&s, Mode::Sim, s.seed, run.history);
            if let Some(check) = violated(&outcome, self.check.as_deref()) {
                eprintln!(
                    "lockcheck: {check} still violated by the saved finding {}{}",
                    file.display(),
                    if changed {
                        " (replayed with today's [lock])"
                    } else {
                        ""
                    }
                );
                return Ok(Some(Finding {
                    check,
                    scenario: s,
                    outcome,
                    file,
                    text,
                    replayed: true,
                }));
            }
            if changed {
                eprintln!(
                    "lockcheck: the saved finding {} is stale: found with another [lock], it no \
                     longer violates with today's",
                    file.display()
                );
            }
        }
        Ok(None)
    }
}

/// A scenario text's `[lock]` table, without `command` (which a written finding rebases to
/// absolute paths): what decides whether a saved finding was found against today's lock.
fn lock_table(text: &str) -> Option<toml::Table> {
    let mut lock = text.parse::<toml::Table>().ok()?.remove("lock")?;
    let table = lock.as_table_mut()?;
    table.remove("command");
    Some(table.clone())
}
