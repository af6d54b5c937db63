//! The planted-bug classes of issue #33 (`tests/sim/mutants.rs`, `CLASSES`) on spawned
//! `redis-server`s, one run of each side: the correct lock is not flagged, the broken one is
//! caught by the check that names its mistake. Real mode has no planted lock, so each pair is two
//! shipped locks that differ in that one mistake: `set-nx-px` (lease, compare-and-delete) against
//! `naive-setnx-expire` (an entry whose expiry a crash can leave unset) and `set-ex-nx-del` (plain
//! `DEL`).
//!
//! The third class, a release whose reply is lost, has no real recipe: real mode cuts a client's
//! requests (the black hole) but cannot drop the reply to a request that landed (a reply-only cut
//! needs a proxy: `real/nemesis/plan.rs`), nor cut a link at a named point, and says so before
//! spawning anything; `a_lost_reply_has_no_real_recipe` keeps that visible, so the class
//! gets its real run when the recipe exists.
//!
//! Cost: four real runs of 4 to 6 s, one at a time.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;

fn run(text: &str, tag: &str) -> Outcome {
    let _serial = crate::common::real_servers_one_at_a_time();
    let mut s = Scenario::parse(&format!("{tag}.toml"), text).unwrap();
    s.lock.key = format!("planted-classes-test:{}:{tag}", std::process::id());
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{tag} could not run: {e}"));
    Outcome::judge(&s, Mode::Real, 1, history)
}

/// Asserts `check`'s verdict on `o`, printing its summary (and the history when it differs).
fn assert_verdict(o: &Outcome, check: &str, want: Verdict) {
    let c = &o.checks[check];
    eprintln!("{check}: {:?}: {}", c.verdict, c.summary);
    assert_eq!(
        c.verdict,
        want,
        "{check}: {}\n{}",
        c.summary,
        o.history.render()
    );
}

/// A scenario of `lock` that runs `duration_ms`: its lease and wait, then the workload's and
/// the faults' tables (`rest`), one entry a line.
fn scenario(lock: &str, duration_ms: u64, ttl_ms: u64, rest: &[&str]) -> String {
    format!(
        "name = \"planted-class\"\nexpect = \"safe\"\nseed = 1\nduration_ms = {duration_ms}\n\
         [lock]\nkind = \"{lock}\"\nttl_ms = {ttl_ms}\nwait_ms = 4000\n{}\n",
        rest.join("\n")
    )
}

/// Liveness with the crash before the pause: client-1 starts 20 ms late, so client-0 is granted
/// first; it dies at `crash_on`; client-1 is refused, then stopped from 100 ms for 3 s while the
/// 500 ms lease runs out. `lock` and `crash_on` pick the side.
fn crash_before_pause(lock: &str, crash_on: &str) -> String {
    let crash = format!("[[faults]]\nkind = \"crash\"\nnode = \"client-0\"\non = \"{crash_on}\"");
    scenario(
        lock,
        5500,
        500,
        &[
            "[workload]\nclients = 2\ncycles = 2\nhold_ms = [10, 20]",
            "[[faults]]\nkind = \"pause\"\nclient = 1\nat_ms = 0\nfor_ms = 20",
            &crash,
            "[[faults]]\nkind = \"pause\"\nclient = 1\nat_ms = 100\nfor_ms = 3000",
        ],
    )
}

/// `set-nx-px`'s waiter asked for under 100 ms before its pause and one retry after it (the
/// dead holder's entry expired 2.5 s before it woke): live. `naive-setnx-expire`'s holder dies
/// between its `SETNX` and its `EXPIRE`, so the entry never expires and the waiter asks from
/// 3.1 s to the run's end, past the 1.5 s bound (three leases).
#[test]
fn a_crash_before_the_waiters_pause_is_live_for_a_lease_and_not_without_one() {
    let correct = run(&crash_before_pause("set-nx-px", "acquired"), "live");
    assert_verdict(&correct, "liveness", Verdict::Safe);
    let stuck = run(
        &crash_before_pause("naive-setnx-expire", "after_setnx"),
        "stuck",
    );
    assert_verdict(&stuck, "liveness", Verdict::Violation);
}

/// A paused release: the holder stops 800 ms before its release, past its 1 s lease, and wakes
/// while the next holder works (as `tests/sim/reported_cases.rs` times it). `lock` picks the
/// side.
fn paused_release(lock: &str) -> String {
    scenario(
        lock,
        4000,
        1000,
        &[
            "[workload]\nclients = 2\ncycles = 3\nhold_ms = [300, 400]",
            "[[faults]]\nkind = \"pause\"\nclient = \"holder\"\non = \"before_release\"\nfor_ms = 800",
        ],
    )
}

/// The `MONITOR` witness follows the one master: `set-nx-px`'s compare-and-delete finds the next
/// holder's value and removes nothing; `set-ex-nx-del`'s `DEL` removes the next holder's entry,
/// and the servers say whose command did.
#[test]
fn a_paused_release_is_foreign_only_without_the_owner_check() {
    let correct = run(&paused_release("set-nx-px"), "checked");
    assert_verdict(&correct, "foreign_release", Verdict::Safe);
    assert_verdict(&correct, "release", Verdict::Safe);
    let plain = run(&paused_release("set-ex-nx-del"), "plain");
    assert_verdict(&plain, "foreign_release", Verdict::Violation);
    assert_eq!(
        plain.checks["foreign_release"].evidence["observed_by_servers"],
        true
    );
}

/// Real mode refuses the lost-reply class up front (nothing is spawned), naming why.
#[test]
fn a_lost_reply_has_no_real_recipe() {
    let text = scenario(
        "set-nx-px",
        3000,
        1000,
        &[
            "[workload]\nclients = 2\ncycles = 2",
            "[[faults]]\nkind = \"partition\"\nnodes = [\"client-0\"]\nfrom = [\"redis-0\"]\n\
             direction = \"inbound\"\nclient = 0\non = \"before_release\"\nfor_ms = 300",
        ],
    );
    let s = Scenario::parse("lost-reply.toml", &text).unwrap();
    let err = lockcheck::Registry::new()
        .run_real(&s, 1)
        .expect_err("real mode cannot lose only a reply");
    assert!(err.to_string().contains("no real-mode recipe"), "{err}");
}
