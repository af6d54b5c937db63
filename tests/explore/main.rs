//! `lockcheck explore`: from scenarios with no `[[faults]]`, the search must find each known
//! failure (and replay it from the written file to the same trace), and must find nothing where
//! the lock holds. Each test prints how long it took.

mod bounded;
mod bounds;
mod cli;
mod every_lock;
mod finds;
mod guard;
mod harness;
mod minimal;
mod never_fired;
mod pairs;
mod parallel;
mod renewal;
mod safe;

use lockcheck::exec::Shard;
use lockcheck::explore::{
    search, write_and_replay, Replayed, SearchMode, SearchOptions, SearchResult,
};
use lockcheck::scenario::Space;
use lockcheck::scenario::{FaultKind, Scenario};
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// Runs the `lockcheck` binary: (exit code, stdout, stderr).
pub fn lockcheck<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A fresh temporary directory for one test.
pub fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockcheck-explore-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fixture beside this file.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/explore/scenarios")
        .join(format!("{name}.toml"))
}

/// Search options for tests: every core, search seed 0.
pub fn options(cases: u64, check: Option<&str>) -> SearchOptions {
    SearchOptions {
        cases,
        seed: 0,
        jobs: lockcheck::exec::default_jobs(),
        shard: Shard::WHOLE,
        time_limit: None,
        check: check.map(str::to_string),
        max_shrink_steps: lockcheck::explore::MAX_SHRINK_STEPS,
        keep_going: false,
        locks: Default::default(),
        mode: SearchMode::Sim,
    }
}

/// Explores a fixture and, when something was found, writes it to a temp file and replays it
/// twice: in process (`write_and_replay` fails unless the replay gives the found trace hash) and
/// with `lockcheck run <found.toml> --json`, which must exit 0 (the file expects what it does)
/// and print the found trace hash.
pub fn explore(name: &str, opts: &SearchOptions) -> (Scenario, SearchResult, Option<Replayed>) {
    let start = Instant::now();
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let base = Scenario::load(&path).unwrap();
    assert!(
        base.faults.is_empty(),
        "{name}: fixtures have no [[faults]]"
    );
    let space = Space::of(&base).unwrap();
    let result = search(&base, &space, opts, &|_, _| {});
    let replayed = result.found.as_ref().map(|f| {
        let out = std::env::temp_dir().join(format!(
            "lockcheck-explore-test-{}-{name}.found.toml",
            std::process::id()
        ));
        let r = write_and_replay(
            &opts.locks,
            &text,
            f,
            &out,
            SearchMode::Sim,
            opts.jobs,
            None,
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (code, json, err) = lockcheck(&["run".as_ref(), out.as_os_str(), "--json".as_ref()]);
        assert_eq!(
            code, 0,
            "{name}: lockcheck run on the found file: {json}{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            v["trace_hash"].as_str(),
            Some(f.outcome.trace_hash.as_str()),
            "{name}: `lockcheck run` replays the found trace"
        );
        assert_eq!(v["checks"][&f.check]["verdict"], "violation", "{name}");
        let _ = std::fs::remove_file(&out);
        r
    });
    eprintln!(
        "{name}: {} cases, found {:?}, time to first {:?}, shrink {:?}, test took {:.2?}",
        result.tried,
        result.found.as_ref().map(|f| &f.check),
        result.found.as_ref().map(|f| f.time_to_first),
        result.found.as_ref().map(|f| f.shrink_time),
        start.elapsed()
    );
    (base, result, replayed)
}

/// The kinds of the found schedule's faults, as scenario files name them.
pub fn fault_kinds(r: &Replayed) -> Vec<&'static str> {
    r.scenario
        .faults
        .iter()
        .map(|f| match explore_kind(&f.kind) {
            "server_pause" => "pause",
            k => k,
        })
        .collect()
}

/// A fault's kind as `[explore] faults` names it (a server pause is `server_pause` there,
/// `kind = "pause"` with a `node` in a scenario file).
pub fn explore_kind(kind: &FaultKind) -> &'static str {
    match kind {
        FaultKind::Failover { .. } => "failover",
        FaultKind::Pause { .. } => "pause",
        FaultKind::ServerPause { .. } => "server_pause",
        FaultKind::Partition { .. } => "partition",
        FaultKind::ClockJump { .. } => "clock_jump",
        FaultKind::WallClockJump { .. } => "wall_clock_jump",
        FaultKind::ClockDrift { .. } => "clock_drift",
        FaultKind::Crash { .. } => "crash",
        FaultKind::ClientCrash { .. } => "client_crash",
        FaultKind::Terminate { .. } => "terminate",
        // Not drawn by explore (an operator's command, not a fault): the guard's exclusions
        // say where its claims are kept.
        FaultKind::ClusterFailover { .. } => "cluster_failover",
        FaultKind::SlotMigration { .. } => "migrate_slot",
        other => panic!("a fault kind this test does not know: {other:?}"),
    }
}
