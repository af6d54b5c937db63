//! Helpers every test binary shares: loading a bundled scenario, judging a simulated run, and
//! running the `lockcheck` command. Each binary includes this file with
//! `#[path = "../common/mod.rs"] mod common;` and uses only some of it.
#![allow(dead_code)]

use lockcheck::{Mode, Outcome, Scenario};
use std::path::Path;
use std::process::Command;

/// The bundled scenario `scenarios/<name>.toml` (`name` with or without `.toml`).
pub fn bundled(name: &str) -> Scenario {
    let file = if name.ends_with(".toml") {
        name.to_string()
    } else {
        format!("{name}.toml")
    };
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `s` in simulation with `seed` and judges it.
pub fn judge_sim(s: &Scenario, seed: u64) -> Outcome {
    let run = lockcheck::Registry::new().run_sim(s, seed);
    Outcome::judge(s, Mode::Sim, seed, run.history)
}

/// Runs the `lockcheck` binary in the crate's directory: (exit code, stdout, stderr).
pub fn lockcheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run lockcheck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Serializes the tests of one binary that spawn real servers. Real runs are timing-sensitive on
/// a 2-core machine, and a test that counts the process's live children (none may outlive a
/// run) can only do so while no other real run is in flight.
pub fn real_servers_one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A proptest configuration for the random differential tests: `cases` cases drawn from a fixed
/// seed, so a suite that passed once passes again on the same code (CI must not go red by the
/// draw), and no failure persistence file. `PROPTEST_RNG_SEED=<n>` (which `Config::default`
/// reads) draws other cases, to look further.
pub fn fixed_seed_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    if matches!(config.rng_seed, RngSeed::Random) {
        config.rng_seed = RngSeed::Fixed(20261124);
    }
    config
}
