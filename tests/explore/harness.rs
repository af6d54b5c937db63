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
    Harness::new().lock("my-set-nx-px", |config, conns, env| {
        SetNxPx::new(config, conns, env)
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
    let own = own_set_nx_px().lock("my-redisson", |config, conns, env| {
        lockcheck::lock::Redisson::new(config, conns, env)
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
    for kind in lockcheck::lock::LockKind::builtins() {
        assert!(e.message.contains(&format!("`{}`", kind.name())), "{e}");
    }
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
    let h = Harness::new().lock("pointed", |config, conns, env: lockcheck::NodeEnv| {
        Pointed(SetNxPx::new(config, conns, env.clone()), env)
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

/// A fixture of the dimensions the search space gained (renewal, wall-clock jumps, nesting),
/// in `tests/explore/search_space/`: apart from `scenarios/`, which `lockcheck run` runs as a
/// directory, because some name locks only a test's harness registers.
pub fn search_space_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/explore/search_space")
        .join(format!("{name}.toml"))
}

/// A fixture of `tests/explore/search_space/`, copied into a fresh temp dir (a search saves its
/// findings beside the scenario), with `from` replaced by `to` in its text.
fn fixture_with(test: &str, name: &str, from: &str, to: &str) -> PathBuf {
    let dir = temp_dir(test);
    let text = std::fs::read_to_string(search_space_fixture(name)).unwrap();
    assert!(text.contains(from), "{name}: `{from}`");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text.replace(from, to)).unwrap();
    path
}

/// `[lock.params]` of [`LeaseOnClock`].
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ClockParams {
    /// Measure the validity time on the wall clock (`currentTimeMillis`) instead of the
    /// monotonic one.
    wall_clock: bool,
}

/// A user's lease lock that may measure its validity on the wall clock: lockcheck's `set-nx-px`
/// underneath, its guard's times read off the clock `[lock.params] wall_clock` chooses.
struct LeaseOnClock<C, E> {
    inner: SetNxPx<C, E>,
    env: E,
    wall_clock: bool,
}

impl<C, E> lockcheck::Lock for LeaseOnClock<C, E>
where
    C: lockcheck::redis::aio::ConnectionLike + Send + Sync + 'static,
    E: lockcheck::Env,
{
    fn validity_clock(&self) -> lockcheck::env::ClockKind {
        if self.wall_clock {
            lockcheck::env::ClockKind::Wall
        } else {
            lockcheck::env::ClockKind::Monotonic
        }
    }

    async fn acquire(&mut self) -> Result<Option<lockcheck::Guard>, lockcheck::LockError> {
        let Some(mut g) = self.inner.acquire().await? else {
            return Ok(None);
        };
        if self.wall_clock {
            // The same lease, as `currentTimeMillis` readings (the clocks agree until a jump).
            let wall = self.env.now_ms() as i64 - self.env.monotonic_ms() as i64;
            g.acquired_at_ms = (g.acquired_at_ms as i64 + wall) as u64;
            g.valid_until_ms = (g.valid_until_ms as i64 + wall) as u64;
        }
        Ok(Some(g))
    }

    async fn release(&mut self, guard: &lockcheck::Guard) -> Result<bool, lockcheck::LockError> {
        self.inner.release(guard).await
    }
}

fn lease_on_clock() -> Harness {
    Harness::new().lock(
        "lease-on-clock",
        |config: lockcheck::LockConfig<ClockParams>, conns, env: lockcheck::NodeEnv| {
            let wall_clock = config.params.wall_clock;
            LeaseOnClock {
                inner: SetNxPx::new(config.with_params(()), conns, env.clone()),
                env,
                wall_clock,
            }
        },
    )
}

/// From a scenario with no faults, explore adds a wall-clock jump back on the holder's node and
/// finds the lock that measures its validity on the wall clock writing after its lease ran out;
/// the same lock on the monotonic clock survives the same search.
#[test]
fn explore_finds_a_validity_time_on_the_wall_clock_through_wall_clock_jumps() {
    let start = std::time::Instant::now();
    let wall = fixture_with(
        "wall-clock-validity",
        "wall-clock-validity-no-faults",
        "wall_clock = true",
        "wall_clock = true",
    );
    let found = lease_on_clock()
        .explore(&wall)
        .cases(300)
        .run()
        .expect("a wall-clock jump back lets the holder write past its lease");
    assert_eq!(found.check, "mutual_exclusion", "{found}");
    // Backward jumps only, and one of them on a holder's node: even a millisecond back lets a
    // holder that slept until its validity time ran out read a clock that says it has not.
    let mut on_a_client = false;
    for f in &found.scenario.faults {
        let lockcheck::scenario::FaultKind::WallClockJump { node, by_ms } = &f.kind else {
            panic!("only wall-clock jumps were drawn: {found}");
        };
        assert!(*by_ms < 0, "{found}");
        on_a_client |= node.starts_with("client-");
    }
    assert!(on_a_client, "{found}");
    assert!(found.text.contains("kind = \"wall_clock_jump\""), "{found}");
    eprintln!("wall clock: found in {:.2?}", start.elapsed());

    let monotonic = fixture_with(
        "monotonic-validity",
        "wall-clock-validity-no-faults",
        "wall_clock = true",
        "wall_clock = false",
    );
    let none = lease_on_clock().explore(&monotonic).cases(2000).run();
    assert!(none.is_none(), "{}", none.unwrap());
    eprintln!("wall clock, with the control: {:.2?}", start.elapsed());
    let _ = std::fs::remove_dir_all(wall.parent().unwrap());
    let _ = std::fs::remove_dir_all(monotonic.parent().unwrap());
}

/// `[lock.params]` of [`CountedReentrant`].
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CountParams {
    /// Start the hold count at 0 instead of 1.
    off_by_one: bool,
}

/// A user's reentrant lock: `set-nx-px` underneath, holds counted on the client (as Lettuce's
/// article does); the outermost release deletes the entry. With `off_by_one` the first acquire
/// counts 0 holds: without nesting it behaves, with nesting the first inner release deletes the
/// lock under its own holder.
struct CountedReentrant<C, E> {
    inner: SetNxPx<C, E>,
    held: Option<lockcheck::Guard>,
    count: u32,
    off_by_one: bool,
}

impl<C, E> lockcheck::Lock for CountedReentrant<C, E>
where
    C: lockcheck::redis::aio::ConnectionLike + Send + Sync + 'static,
    E: lockcheck::Env,
{
    async fn acquire(&mut self) -> Result<Option<lockcheck::Guard>, lockcheck::LockError> {
        if let Some(g) = &self.held {
            self.count += 1;
            return Ok(Some(g.clone()));
        }
        let g = self.inner.acquire().await?;
        if let Some(g) = &g {
            self.held = Some(g.clone());
            self.count = if self.off_by_one { 0 } else { 1 };
        }
        Ok(g)
    }

    async fn release(&mut self, guard: &lockcheck::Guard) -> Result<bool, lockcheck::LockError> {
        self.count = self.count.saturating_sub(1);
        if self.count > 0 {
            return Ok(false);
        }
        self.held = None;
        self.inner.release(guard).await
    }
}

fn counted_reentrant() -> Harness {
    Harness::new().lock(
        "counted-reentrant",
        |config: lockcheck::LockConfig<CountParams>, conns, env: lockcheck::NodeEnv| {
            let off_by_one = config.params.off_by_one;
            CountedReentrant {
                inner: SetNxPx::new(config.with_params(()), conns, env),
                held: None,
                count: 0,
                off_by_one,
            }
        },
    )
}

/// From a scenario that never nests, explore draws nested acquires and finds the count that is
/// off by one (its first inner release deletes the entry); the correct count survives the search.
#[test]
fn explore_finds_an_off_by_one_reentrant_count_through_nested_acquires() {
    let start = std::time::Instant::now();
    let bad = fixture_with(
        "reentrant-off-by-one",
        "reentrant-count-no-faults",
        "off_by_one = true",
        "off_by_one = true",
    );
    let base = counted_reentrant()
        .registry()
        .load(&bad)
        .expect("the fixture parses");
    assert_eq!(base.workload.nested, 0, "the scenario itself never nests");
    // The inner release frees the lock under its holder, so mutual exclusion breaks too; the
    // check that names the mistake is reentrancy.
    let found = counted_reentrant()
        .explore(&bad)
        .check("reentrancy")
        .cases(300)
        .run()
        .expect("nesting exposes the count");
    assert_eq!(found.check, "reentrancy", "{found}");
    assert!(found.scenario.faults.is_empty(), "{found}");
    assert_eq!(
        found.scenario.workload.nested, 1,
        "shrunk to one nested acquire: {found}"
    );
    assert!(found.text.contains("nested = 1"), "{found}");
    eprintln!("reentrant count: found in {:.2?}", start.elapsed());

    let good = fixture_with(
        "reentrant-correct",
        "reentrant-count-no-faults",
        "off_by_one = true",
        "off_by_one = false",
    );
    // The same cases with the correct count break no check at all.
    let none = counted_reentrant().explore(&good).cases(2000).run();
    assert!(none.is_none(), "{}", none.unwrap());
    eprintln!("reentrant count, with the control: {:.2?}", start.elapsed());
    let _ = std::fs::remove_dir_all(bad.parent().unwrap());
    let _ = std::fs::remove_dir_all(good.parent().unwrap());
}

/// Wall-clock jumps and nesting are drawn only where asked for: `wall_clock_jump` when
/// `[explore] faults` lists it, nesting up to the scenario's own `nested` (0: never) unless
/// `[explore] nested` widens it; a reversed range is refused.
#[test]
fn the_space_draws_wall_clock_jumps_and_nesting_only_when_asked() {
    let base = "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 100\n";
    // A bad `[explore]` table is refused when the scenario is parsed, at file:line:col.
    let space = |extra: &str| {
        let s = lockcheck::Scenario::parse("t.toml", &format!("{base}{extra}"))
            .map_err(|e| e.to_string())?;
        lockcheck::scenario::Space::of(&s).map_err(|e| e.to_string())
    };
    let default = space("").unwrap();
    assert!(!default.faults.contains(&"wall_clock_jump"), "{default:?}");
    assert_eq!(default.nested, [0, 0]);
    assert_eq!(default.wall_clock_jump_ms, [-300, 300]);
    let nesting = space("[workload]\nnested = 2\n").unwrap();
    assert_eq!(nesting.nested, [0, 2]);
    let asked = space(
        "[explore]\nfaults = [\"wall_clock_jump\"]\nwall_clock_jump_ms = [-50, 0]\nnested = [1, 3]\n",
    )
    .unwrap();
    assert_eq!(asked.faults, ["wall_clock_jump"]);
    assert_eq!(asked.wall_clock_jump_ms, [-50, 0]);
    assert_eq!(asked.nested, [1, 3]);
    let e = space("[explore]\nwall_clock_jump_ms = [10, -10]\n").unwrap_err();
    assert!(
        e.starts_with("t.toml:8:") && e.contains("wall_clock_jump_ms") && e.contains("low <= high"),
        "{e}"
    );
    let e = space("[explore]\nnested = [3, 1]\n").unwrap_err();
    assert!(
        e.starts_with("t.toml:8:") && e.contains("nested") && e.contains("low <= high"),
        "{e}"
    );
}

/// `[lock] node_timeout_ms` (a per-node request timeout) reaches a lock of the user's own, as
/// it reaches lockcheck's Redlock; the other Redlock keys stay Redlock's, refused at the key.
#[test]
fn a_registered_lock_takes_node_timeout_ms() {
    let text = "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"my-set-nx-px\"\nttl_ms = 100\nnode_timeout_ms = 40\n";
    let s = own_set_nx_px().registry().parse("t.toml", text).unwrap();
    let config = lockcheck::lock::LockConfig::from_spec(&s.lock);
    assert_eq!(
        config.redlock.node_timeout,
        std::time::Duration::from_millis(40)
    );
    let e = own_set_nx_px()
        .registry()
        .parse(
            "t.toml",
            &text.replace("node_timeout_ms = 40", "drift_ms = 2"),
        )
        .unwrap_err();
    assert_eq!((e.line, e.column), (7, 12), "{e}");
    assert!(
        e.message.contains("`drift_ms` is a Redlock parameter"),
        "{e}"
    );
    // lockcheck's own single-instance lock does not read it: refused there.
    let e =
        lockcheck::scenario::Scenario::parse("t.toml", &text.replace("my-set-nx-px", "set-nx-px"))
            .unwrap_err();
    assert!(
        e.message
            .contains("`node_timeout_ms` is a Redlock parameter"),
        "{e}"
    );
}

/// A saved finding is replayed with today's `[lock]`: once the scenario's lock is a correct one,
/// the finding saved against the racy lock no longer violates (it is reported stale) and the
/// search runs anew (here over no faults, where the correct lock is safe by construction: one
/// `SET NX PX` grants, and no pause or crash can outlast a lease).
#[test]
fn a_saved_finding_replays_with_todays_lock() {
    let dir = temp_dir("harness-regressions-today");
    let scenario = example_scenario(&dir);
    let harness = || {
        check_then_set::harness().lock("my-set-nx-px", |config, conns, env| {
            SetNxPx::new(config, conns, env)
        })
    };
    let first = harness().explore(&scenario).cases(200).run();
    let first = first.expect("the GET-then-SET race is found without any fault");
    assert!(!first.replayed);
    let text = std::fs::read_to_string(&scenario).unwrap();
    let fixed = text
        .replace("kind = \"check-then-set\"", "kind = \"my-set-nx-px\"")
        .replace("[lock.params]\npoll_ms = 2\n", "")
        + "\n[explore]\nmax_faults = 0\n";
    assert_ne!(fixed, text);
    std::fs::write(&scenario, fixed).unwrap();
    let again = harness().explore(&scenario).cases(50).run();
    assert!(again.is_none(), "{}", again.unwrap());
    assert!(
        first.file.exists(),
        "a stale finding is reported, not deleted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
