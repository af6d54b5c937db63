//! No false alarm: every bundled scenario that expects mutual exclusion to hold keeps every check
//! it expects safe over 2,000 seeds.
//!
//! Each seed draws new latencies, hold and think times, retry jitter, replication lags and node
//! clocks, so 2,000 seeds try 2,000 interleavings of the same faults. A checker that flags a
//! correct lock on one of them would make every "violation" lockcheck reports suspect.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const SEEDS: u64 = 2_000;

fn safe_scenarios() -> Vec<Scenario> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| Scenario::load(p).unwrap())
        .filter(|s| s.expect == Verdict::Safe)
        .collect()
}

#[test]
fn safe_scenarios_stay_safe_over_2000_seeds() {
    let scenarios = safe_scenarios();
    assert!(
        scenarios.len() >= 10,
        "expected the bundled safe scenarios, found {}",
        scenarios.len()
    );
    // Work items: (scenario index, seed), handed out to one worker per core.
    let total = scenarios.len() as u64 * SEEDS;
    let next = AtomicU64::new(0);
    let alarms = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let s = &scenarios[(i / SEEDS) as usize];
                let seed = 1 + i % SEEDS;
                let run = lockcheck::Registry::new().run_sim(s, seed);
                let outcome = Outcome::judge(s, Mode::Sim, seed, run.history);
                for (check, result) in &outcome.checks {
                    if s.expected(check) == Some(Verdict::Safe)
                        && result.verdict == Verdict::Violation
                    {
                        alarms.lock().unwrap().push(format!(
                            "{} seed {seed}: {check}: {}",
                            s.name, result.summary
                        ));
                    }
                }
            });
        }
    });
    let mut alarms = alarms.into_inner().unwrap();
    alarms.sort();
    assert!(
        alarms.is_empty(),
        "{} false alarm(s) over {} runs:\n{}",
        alarms.len(),
        total,
        alarms.join("\n")
    );
}
