//! The bundled `scenarios/pg-*.toml` reach their expected verdicts in simulation (several seeds)
//! and on real servers lockcheck spawns (once per suite run; `LOCKCHECK_PG_REAL_RUNS=5` runs
//! each five times), and nothing of ours is left after the real runs. Explore's findings on
//! PostgreSQL are in `tests/explore/finds.rs`.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::{Path, PathBuf};

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("pg-"))
        })
        .collect();
    v.sort();
    v
}

fn assert_expected(s: &Scenario, o: &Outcome) {
    for (check, want) in &s.expect_checks {
        assert_eq!(
            o.checks[check].verdict,
            *want,
            "{} ({:?}, seed {}): {check} should be {want}: {}\n{}",
            s.name,
            o.mode,
            o.seed,
            o.checks[check].summary,
            o.history.render()
        );
    }
    assert_eq!(
        o.verdict(),
        s.expect,
        "{} ({:?}, seed {})",
        s.name,
        o.mode,
        o.seed
    );
}

/// Each scenario on seeds 1 to 5; the safe ones on 40 seeds, since "safe" must hold for every
/// seed, not the one drawn (they are safe by construction: no fault that frees a session lock
/// under a live holder, see each file's `about`).
#[test]
fn postgres_scenarios_reach_their_verdicts_in_simulation() {
    let files = files();
    assert!(files.len() >= 11, "{files:?}");
    for path in &files {
        let s = Scenario::load(path).unwrap();
        let seeds = if s.expect == Verdict::Safe { 40 } else { 5 };
        for seed in 1..=seeds {
            let run = lockcheck::Registry::new().run_sim(&s, seed);
            assert_expected(&s, &Outcome::judge(&s, Mode::Sim, seed, run.history));
        }
    }
}

/// The transaction pooler's two holders happen for the reason the scenario gives: an unlock
/// answered `f` (it landed on another server connection) while the lock stayed held.
#[test]
fn the_pooler_scenario_shows_an_unlock_that_freed_nothing() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/pg-pgbouncer-transaction-two-holders.toml");
    let s = Scenario::load(&path).unwrap();
    let run = lockcheck::Registry::new().run_sim(&s, s.seed);
    let rendered = run.history.render();
    assert!(rendered.contains("released deleted=false"), "{rendered}");
}

/// Orphans: `postgres` or `pgbouncer` processes of lockcheck's whose directory is gone (every
/// run removes its servers' directories after killing them, so a process still running from a
/// removed directory outlived its run). Other tests' servers, running beside this one, still
/// have their directories and are not counted.
fn orphans() -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("postgres") || c.contains("pgbouncer"))
        .filter(|c| {
            c.split_whitespace()
                .filter(|w| w.starts_with('/') && w.contains("/lockcheck-"))
                .any(|w| {
                    let p = Path::new(w);
                    let dir = if p.extension().is_some() {
                        p.parent().unwrap_or(p)
                    } else {
                        p
                    };
                    !dir.exists()
                })
        })
        .collect()
}

#[test]
fn postgres_scenarios_reach_their_verdicts_on_real_servers() {
    let _turn = crate::real_turn();
    let runs: u32 = std::env::var("LOCKCHECK_PG_REAL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    for path in files() {
        let s = Scenario::load(&path).unwrap();
        assert_eq!(s.real_mode_unsupported(), None, "{}", s.name);
        for _ in 0..runs {
            let history = lockcheck::Registry::new()
                .run_real(&s, s.seed)
                .unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_expected(&s, &Outcome::judge(&s, Mode::Real, s.seed, history));
        }
    }
    assert_eq!(orphans(), Vec::<String>::new());
}

/// Behind PgBouncer in transaction mode the session lock fails with no fault at all: explore,
/// started from the fault-free bundled file, finds two holders and shrinks whatever it drew
/// away.
#[test]
fn explore_finds_the_pooler_failure_from_the_fault_free_file() {
    use lockcheck::exec::Shard;
    use lockcheck::explore::{search, SearchMode, SearchOptions};
    use lockcheck::scenario::Space;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/pg-pgbouncer-transaction-two-holders.toml");
    let base = Scenario::load(&path).unwrap();
    assert!(base.faults.is_empty());
    let space = Space::of(&base).unwrap();
    let opts = SearchOptions {
        cases: 50,
        seed: 0,
        jobs: 1,
        shard: Shard::WHOLE,
        time_limit: None,
        check: Some("mutual_exclusion".into()),
        max_shrink_steps: lockcheck::explore::MAX_SHRINK_STEPS,
        keep_going: false,
        locks: Default::default(),
        mode: SearchMode::Sim,
    };
    let result = search(&base, &space, &opts, &|_, _| {});
    let found = result
        .found
        .expect("explore finds the pooler's two holders");
    assert_eq!(found.check, "mutual_exclusion");
    assert!(
        found.scenario.faults.len() <= 2,
        "{:?}",
        found.scenario.faults
    );
}
