//! `examples/check_then_set.rs`, a user's harness binary: `explore` on its fault-free scenario
//! finds the race (exit 1) and writes a file that `run` replays to the same trace, every time.
//!
//! The example is built with cargo into this test's own target directory and profile: `cargo
//! test` has built it already (examples are built with the tests), so this is a no-op there;
//! after `cargo test --test cli` alone it compiles the example only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The example binary, built (or found up to date) by cargo.
fn example_binary() -> PathBuf {
    // <target>/<profile>/deps/cli-<hash>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let target = profile_dir.parent().unwrap();
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "--example", "check_then_set", "--target-dir"])
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.file_name().unwrap() == "release" {
        build.arg("--release");
    }
    let out = build.output().unwrap();
    assert!(
        out.status.success(),
        "cargo build --example check_then_set:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir.join("examples/check_then_set")
}

fn run(exe: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(exe).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The trace hash of the report's `history: N events, trace <hash>` line.
fn trace(report: &str) -> String {
    report
        .lines()
        .find_map(|l| l.trim().strip_prefix("history: "))
        .and_then(|l| l.rsplit_once("trace "))
        .map(|(_, h)| h.to_string())
        .unwrap_or_else(|| panic!("no trace line in:\n{report}"))
}

#[test]
fn the_example_harness_explores_and_replays_its_finding() {
    let exe = example_binary();
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/check_then_set.toml");
    let found = std::env::temp_dir().join(format!(
        "lockcheck-check-then-set-{}.found.toml",
        std::process::id()
    ));
    let found_arg = found.to_str().unwrap();
    let (code, out, err) = run(
        &exe,
        &["explore", scenario.to_str().unwrap(), "--out", found_arg],
    );
    assert_eq!(code, 1, "explore finds the race:\n{out}{err}");
    assert!(out.starts_with("FOUND mutual_exclusion violation"), "{out}");
    let explored = trace(&out);
    let replay = format!("replay: check_then_set run {found_arg} --seed ");
    assert!(out.contains(&replay), "{out}");
    for _ in 0..2 {
        let (code, out, err) = run(&exe, &["run", found_arg]);
        assert_eq!(code, 0, "the found file expects its violation:\n{out}{err}");
        assert!(out.starts_with("VIOLATION (as expected"), "{out}");
        assert_eq!(trace(&out), explored, "{out}");
    }
    // `lockcheck` itself does not know the kind, and says which it knows, where.
    let (code, _, err) = crate::common::lockcheck(&["run", found_arg]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown lock kind `check-then-set`, expected one of"),
        "{err}"
    );
    let _ = std::fs::remove_file(&found);
}

/// The book's complete example (docs/own-lock.md, "Testing your own lock") is the example's code
/// and scenario, as they are.
#[test]
fn the_docs_show_the_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/own-lock.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/check_then_set.rs")).unwrap();
    let code = &example[example.find("use lockcheck::redis").unwrap()..].replace(
        "#[allow(dead_code)] // the tests that include this file have their own entry point\n",
        "",
    );
    assert!(
        page.contains(code.as_str()),
        "docs/own-lock.md: paste {code}"
    );
    let scenario = std::fs::read_to_string(root.join("examples/check_then_set.toml")).unwrap();
    assert!(
        page.contains(&scenario),
        "docs/own-lock.md: paste {scenario}"
    );
}
