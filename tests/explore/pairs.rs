//! A planted bug and its correct reference, searched in the same space: the bug is found, the
//! reference is not. A pause between the workload's last look at its lease and its write (its
//! check-to-write window) is one no lease lock survives, so these spaces keep pauses out of it
//! (`[explore] pause_between_check_and_write = false`, the default for a lock of the user's
//! own): what is left to find is the lock's mistake, not the workload's. Each space's fixture
//! says why the reference is safe there by construction; the resource check judges both (a
//! holder paused past its lease is still in its critical section when the next one enters, so
//! mutual exclusion would flag any lease lock here; what a correct lock must keep is the data).

use super::harness::search_space_fixture;
use super::renewal::pexpire_renewal;
use super::temp_dir;
use lockcheck::lock::{Redlock, RedlockBug, SetNxPx};
use lockcheck::scenario::Scenario;
use lockcheck::{Harness, Mode, Outcome, Verdict};
use std::path::{Path, PathBuf};

/// `name`'s fixture in a fresh directory (findings are saved beside it), `edits` applied.
fn fixture(test: &str, name: &str, edits: &[(&str, &str)]) -> PathBuf {
    let dir = temp_dir(test);
    let mut text = std::fs::read_to_string(search_space_fixture(name)).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name}: `{from}`");
        text = text.replace(from, to);
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn cleanup(path: &Path) {
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// The plain-`PEXPIRE` renewal against the owner-checked one, over pauses at every point
/// (`before_write` included, where none is drawn) and at any time. The owner-checked renewal is
/// safe by construction: a renewal succeeds only while the holder's own entry is still there
/// (so nobody else was granted the lock), every stretch of work but the last is followed by one,
/// and the last is shorter than the lease and pause-free (the window).
#[test]
fn a_plain_pexpire_renewal_is_found_and_the_owner_checked_one_is_not_in_the_same_space() {
    let edits = [("points = [\"acquired\", \"after_read\"]\n", "")];
    let bug = fixture("pair-pexpire", "renewal-long-pauses", &edits);
    let found = pexpire_renewal()
        .explore(&bug)
        .check("resource")
        .cases(1000)
        .run()
        .expect("a paused holder's PEXPIRE extends the next holder's key, and it writes");
    assert!(
        found.text.contains("pause_between_check_and_write = false"),
        "the finding replays with the same windows: {found}"
    );
    cleanup(&bug);
    let reference = fixture(
        "pair-owner-checked",
        "renewal-long-pauses",
        &[
            edits[0],
            (
                "kind = \"pexpire-renewal\"",
                "kind = \"owner-checked-renewal\"",
            ),
        ],
    );
    let none = Harness::new()
        .lock("owner-checked-renewal", |config, conns, env| {
            SetNxPx::new(config, conns, env)
        })
        .explore(&reference)
        .check("resource")
        .cases(2000)
        .run();
    assert!(none.is_none(), "{}", none.unwrap());
    cleanup(&reference);
}

/// The mechanism itself, in one run: a holder that neither checks its validity nor renews is
/// paused from 100 ms for 2 s of its 1 s lease. Allowed into its check-to-write window, the
/// pause lets the next holder in and the paused one's write loses an update; kept out, the pause
/// waits until the holder has written.
#[test]
fn a_pause_kept_out_of_the_window_waits_until_the_holder_has_written() {
    let text = |spare: &str| {
        format!(
            "name = \"t\"\nexpect = \"violation\"\nseed = 1\nduration_ms = 5000\n[lock]\nkind = \
             \"set-nx-px\"\nttl_ms = 1000\nwait_ms = 4000\n[workload]\nclients = 2\ncycles = 1\n\
             hold_ms = [500, 500]\nthink_ms = [0, 0]\n[[faults]]\nkind = \"pause\"\nclient = \
             \"holder\"\nat_ms = 100\nfor_ms = 2000\n{spare}"
        )
    };
    let judge = |t: &str| {
        let s = Scenario::parse("t.toml", t).unwrap();
        let run = lockcheck::Registry::new().run_sim(&s, 1);
        Outcome::judge(&s, Mode::Sim, 1, run.history)
    };
    let allowed = judge(&text(""));
    assert_eq!(allowed.checks["resource"].verdict, Verdict::Violation);
    let spared = judge(&text("[explore]\npause_between_check_and_write = false\n"));
    assert_eq!(
        spared.checks["resource"].verdict,
        Verdict::Safe,
        "{}",
        spared.history.render()
    );
    let notes = spared.history.render();
    assert!(notes.contains("deferred until it has written"), "{notes}");
    assert!(
        notes.contains("paused for 2000 ms"),
        "the pause still happens: {notes}"
    );
}

/// Redlock whose validity time is counted from the replies (`RedlockBug::
/// ValidityNotReducedByAcquireTime`) against antirez's, which counts it from before the first
/// SET, over pauses longer than the lease at any time (`redlock-validity-no-faults`; its `about`
/// says why antirez's is safe there by construction). A pause that lands while the SETs are out
/// leaves the bug a whole lease after its keys expired, and it writes over the next holder.
#[test]
fn a_redlock_validity_counted_from_the_replies_is_found_and_antirezs_is_not() {
    let bug = fixture(
        "pair-redlock-validity-bug",
        "redlock-validity-no-faults",
        &[(
            "kind = \"redlock\"",
            "kind = \"redlock-validity-from-replies\"",
        )],
    );
    let found = Harness::new()
        .lock(
            "redlock-validity-from-replies",
            |mut config: lockcheck::LockConfig, conns, env| {
                config.redlock.planted = Some(RedlockBug::ValidityNotReducedByAcquireTime);
                Redlock::new(config, conns, env)
            },
        )
        .explore(&bug)
        .check("resource")
        .cases(3000)
        .run()
        .expect("a pause while the SETs are out leaves the holder a lease it no longer has");
    // The violating pause is the one that stretched an acquisition: timed, not at a point of
    // the section (where the holder's check would catch it).
    assert!(
        found
            .scenario
            .faults
            .iter()
            .any(|f| matches!(f.trigger, lockcheck::scenario::Trigger::At(_))),
        "{found}"
    );
    cleanup(&bug);
    assert_reference_safe(
        Harness::new(),
        "pair-redlock-validity-antirez",
        "redlock-validity-no-faults",
    );
}

/// A user's fenced lock whose token is the holder's wall clock at its grant
/// (`currentTimeMillis()` as the token, a shortcut taken to avoid a counter): `set-nx-px`
/// underneath.
struct WallClockToken<C, E> {
    inner: SetNxPx<C, E>,
    env: E,
}

impl<C, E> lockcheck::Lock for WallClockToken<C, E>
where
    C: lockcheck::redis::aio::ConnectionLike + Send + Sync + 'static,
    E: lockcheck::Env,
{
    async fn acquire(&mut self) -> Result<Option<lockcheck::Guard>, lockcheck::LockError> {
        let Some(mut g) = self.inner.acquire().await? else {
            return Ok(None);
        };
        g.fencing_token = Some(self.env.now_ms());
        Ok(Some(g))
    }

    async fn release(&mut self, guard: &lockcheck::Guard) -> Result<bool, lockcheck::LockError> {
        self.inner.release(guard).await
    }
}

/// A fencing token read off the holder's wall clock against the `fenced` kind's `INCR`, over one
/// pause longer than the lease and backward steps of wall clocks (`wall-clock-token-no-faults`;
/// its `about` says why the `INCR` token is safe there by construction). A step back on the next
/// holder's node gives it a smaller token than the paused holder's, whose late write is then
/// accepted over its successor's.
#[test]
fn a_wall_clock_fencing_token_is_found_and_an_incr_token_is_not() {
    let bug = fixture(
        "pair-wall-clock-token",
        "wall-clock-token-no-faults",
        &[("kind = \"fenced\"", "kind = \"wall-clock-token\"")],
    );
    let found = Harness::new()
        .lock(
            "wall-clock-token",
            |config: lockcheck::LockConfig, conns, env: lockcheck::NodeEnv| WallClockToken {
                inner: SetNxPx::new(config, conns, env.clone()),
                env,
            },
        )
        .explore(&bug)
        .check("resource")
        .cases(3000)
        .run()
        .expect("a wall clock stepped back hands out a token older than the paused holder's");
    assert!(
        found.text.contains("kind = \"wall_clock_jump\""),
        "the finding needs the step back: {found}"
    );
    cleanup(&bug);
    assert_reference_safe(
        Harness::new(),
        "pair-incr-token",
        "wall-clock-token-no-faults",
    );
}

/// A pair's correct reference, searched in the bug's space (the fixture `name` unchanged) for
/// 3,000 cases with the resource check: nothing is found. Each fixture's `about` says why the
/// reference is safe there by construction, so this cannot pass or fail by the seed it draws.
fn assert_reference_safe(harness: Harness, test: &str, name: &str) {
    let reference = fixture(test, name, &[]);
    let none = harness
        .explore(&reference)
        .check("resource")
        .cases(3000)
        .run();
    assert!(none.is_none(), "{}", none.unwrap());
    cleanup(&reference);
}
