//! The harness for a lock of the user's own: its search from a `#[test]` (the finding back, saved
//! and replayed first next time), its scenarios (`[lock] kind`, `[lock.params]`), and that it
//! runs a lock exactly as lockcheck runs its own.

use super::temp_dir;
use lockcheck::lock::SetNxPx;
use lockcheck::{Harness, Mode, Outcome, Verdict};
use std::path::{Path, PathBuf};

/// `examples/check_then_set.rs`: the GET-then-SET lock as a user writes it, through the harness.
#[path = "../../examples/check_then_set.rs"]
mod check_then_set;

/// The example's fault-free scenario, copied into `dir` (findings are saved beside it).
fn example_scenario(dir: &Path) -> PathBuf {
    let to = dir.join("check_then_set.toml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/check_then_set.toml"),
        &to,
    )
    .unwrap();
    to
}

/// lockcheck's `set-nx-px` lock, registered as a lock of the user's own would be.
fn own_set_nx_px() -> Harness {
    Harness::new().lock("my-set-nx-px", |config, mut conns, env| {
        SetNxPx::new(conns.remove(0), env, config)
    })
}

#[test]
fn a_test_search_finds_the_race_saves_it_and_replays_it_first_next_time() {
    let dir = temp_dir("harness-regressions");
    let scenario = example_scenario(&dir);
    let first = check_then_set::harness()
        .explore(&scenario)
        .cases(200)
        .run()
        .expect("the GET-then-SET race is found without any fault");
    assert!(!first.replayed);
    assert_eq!(first.check, "mutual_exclusion");
    assert_eq!(first.outcome.verdict(), Verdict::Violation);
    assert!(first.scenario.faults.is_empty(), "{first}");
    assert!(first.scenario.workload.clients <= 2, "shrunk: {first}");
    assert_eq!(
        first.file.parent().unwrap(),
        dir.join(lockcheck::harness::regressions::REGRESSIONS_DIR)
    );
    assert_eq!(
        first.file.file_name().unwrap().to_string_lossy(),
        format!("check_then_set.{}.toml", first.outcome.trace_hash)
    );
    assert_eq!(std::fs::read_to_string(&first.file).unwrap(), first.text);
    assert!(first.to_string().contains("replay: "), "{first}");

    // The next run replays the saved file first, and gets the same run back without searching.
    let again = check_then_set::harness()
        .explore(&scenario)
        .cases(200)
        .run()
        .expect("the saved finding still violates");
    assert!(again.replayed);
    assert_eq!(again.file, first.file);
    assert_eq!(again.outcome.trace_hash, first.outcome.trace_hash);
    let saved = std::fs::read_dir(first.file.parent().unwrap())
        .unwrap()
        .count();
    assert_eq!(saved, 1, "nothing new saved");

    // Only a check the saved finding violates replays it: asking for another searches anew.
    let liveness = check_then_set::harness()
        .explore(&scenario)
        .cases(20)
        .check("liveness")
        .run();
    assert!(liveness.is_none(), "{}", liveness.unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_test_search_of_a_correct_lock_finds_nothing_and_saves_nothing() {
    let dir = temp_dir("harness-safe");
    let scenario = dir.join("set-nx-px.toml");
    std::fs::write(
        &scenario,
        r#"
name = "my-set-nx-px"
expect = "safe"
duration_ms = 5000
[lock]
kind = "my-set-nx-px"
ttl_ms = 2000
[workload]
clients = 3
cycles = 5
hold_ms = [5, 20]
[explore]
max_faults = 0
"#,
    )
    .unwrap();
    let found = own_set_nx_px().explore(&scenario).cases(200).run();
    assert!(found.is_none(), "{}", found.unwrap());
    assert!(!dir
        .join(lockcheck::harness::regressions::REGRESSIONS_DIR)
        .exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The connection and environment a registered lock gets (`Conn`, `NodeEnv`) only forward to the
/// simulator's (pub/sub included): lockcheck's own locks, registered as the user's, give the very
/// same histories.
#[test]
fn a_registered_lock_runs_exactly_as_lockcheck_runs_its_own() {
    let own = own_set_nx_px().lock("my-redisson", |config, mut conns, env| {
        lockcheck::lock::Redisson::new(conns.remove(0), env, config)
    });
    for (name, kind) in [
        ("failover-lock-loss", "set-nx-px"),
        ("gc-pause-lease-expiry", "set-nx-px"),
        ("set-nx-px-no-faults", "set-nx-px"),
        ("redisson-fixed-lease-long-hold", "redisson"),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).unwrap();
        let written = format!("kind = \"{kind}\"");
        assert!(text.contains(&written), "{name}");
        let builtin = own.registry().parse(name, &text).unwrap();
        let registered = own
            .registry()
            .parse(
                name,
                &text.replace(&written, &format!("kind = \"my-{kind}\"")),
            )
            .unwrap();
        assert_eq!(registered.lock.kind.name(), format!("my-{kind}"));
        for seed in 1..=3 {
            let a = own.registry().run_sim(&builtin, seed).history;
            let b = own.registry().run_sim(&registered, seed).history;
            assert_eq!(a.trace_hash(), b.trace_hash(), "{name} seed {seed}");
            let o = Outcome::judge(&registered, Mode::Sim, seed, b);
            assert_eq!(o.verdict(), registered.expect, "{name} seed {seed}");
        }
    }
}

#[test]
fn scenarios_name_registered_kinds_and_their_params_at_file_line_col() {
    let h = check_then_set::harness();
    let parse = |lock: &str| {
        h.registry().parse(
            "t.toml",
            &format!("name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\n{lock}\n"),
        )
    };
    let ok = parse("kind = \"check-then-set\"\nttl_ms = 100\n[lock.params]\npoll_ms = 7").unwrap();
    assert_eq!(ok.lock.kind.name(), "check-then-set");
    // The params are optional: every field has a default.
    parse("kind = \"check-then-set\"\nttl_ms = 100").unwrap();

    let e = parse("kind = \"check-then-sett\"\nttl_ms = 100").unwrap_err();
    assert_eq!((e.line, e.column), (5, 8), "{e}");
    assert!(
        e.message.contains("unknown lock kind `check-then-sett`")
            && e.message.contains("`set-nx-px`")
            && e.message.ends_with("`check-then-set`"),
        "{e}"
    );
    let e = parse("kind = \"check-then-set\"\nttl_ms = 100\n[lock.params]\npoll_ms = \"x\"")
        .unwrap_err();
    assert_eq!((e.line, e.column), (8, 11), "{e}");
    assert!(e.message.contains("invalid type: string \"x\""), "{e}");
    let e =
        parse("kind = \"check-then-set\"\nttl_ms = 100\n[lock.params]\npol_ms = 7").unwrap_err();
    assert_eq!(e.line, 8, "{e}");
    assert!(e.message.contains("unknown field `pol_ms`"), "{e}");
    let e = parse("kind = \"set-nx-px\"\nttl_ms = 100\n[lock.params]\npoll_ms = 7").unwrap_err();
    assert!(
        e.message.contains("lock kind `set-nx-px` takes none"),
        "{e}"
    );
    // A lock without parameters (`LockConfig`) takes no table.
    let e = own_set_nx_px()
        .registry()
        .parse(
            "t.toml",
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"my-set-nx-px\"\nttl_ms = 100\n[lock.params]\nx = 1\n",
        )
        .unwrap_err();
    assert!(e.message.contains("takes no parameters"), "{e}");
    // lockcheck alone does not know the kind.
    let e = lockcheck::Scenario::parse(
        "t.toml",
        "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"check-then-set\"\nttl_ms = 100\n",
    )
    .unwrap_err();
    assert!(e.message.ends_with("`mysql-insert-unique`"), "{e}");
}

/// A lock of the user's own that declares a named point: lockcheck's `set-nx-px`, passing
/// `before_set` before each attempt.
struct Pointed<C, E>(SetNxPx<C, E>, E);

impl<C, E> lockcheck::Lock for Pointed<C, E>
where
    C: lockcheck::redis::aio::ConnectionLike + Send + Sync + 'static,
    E: lockcheck::Env,
{
    const POINTS: &'static [lockcheck::env::NamedPoint] = &[lockcheck::env::NamedPoint::new(
        "before_set",
        "about to send the SET NX PX",
    )];

    async fn acquire(&mut self) -> Result<Option<lockcheck::Guard>, lockcheck::LockError> {
        self.1.point("before_set").await;
        self.0.acquire().await
    }

    async fn release(&mut self, guard: &lockcheck::Guard) -> Result<bool, lockcheck::LockError> {
        self.0.release(guard).await
    }
}

#[test]
fn a_registered_locks_named_points_are_accepted_and_explored() {
    let h = Harness::new().lock("pointed", |config, mut conns, env: lockcheck::NodeEnv| {
        Pointed(SetNxPx::new(conns.remove(0), env.clone(), config), env)
    });
    let s = h
        .registry()
        .parse(
            "t.toml",
            "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"pointed\"\nttl_ms = 100\n[[faults]]\nkind = \"pause\"\nclient = 0\non = \"before_set\"\nfor_ms = 10\n",
        )
        .unwrap();
    assert!(s.points().contains(&"before_set"));
    let space = lockcheck::scenario::Space::of(&s).unwrap();
    assert!(space.points.iter().any(|p| p == "before_set"), "{space:?}");
}
