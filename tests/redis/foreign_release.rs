//! Real-mode `foreign_release` from the servers' truth (`docs/checks.md`, "foreign_release"):
//! a holder paused right before its plain-`DEL` release deletes the next holder's entry, and is
//! caught whether the `MONITOR` witness follows the run (a client program's connections named by
//! their forwarders) or not (the release dated by its `before_release` point, when its request
//! went out); an owner-checked delete that found someone else's entry and removed nothing is not
//! reported as deleting it, even by a program that answers "released" regardless.
//!
//! The witness follows the lock, not one key name: a library that puts its own prefix before the
//! name it is given (`lock:<name>`, as most do) is judged from the servers' word by default, with
//! and without replicas, across a failover too (the promoted replica's stream included).
//!
//! Cost: seven real runs of 2 to 4 s each (two `redis-server`s, or a failover rig), one at a
//! time.

use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A scenario for the test client program `tests/redis/programs/redis_cli_lock.sh` in `mode`
/// (`plain`: `DEL`; `checked`: compare-and-delete, answering "released" whatever it returned).
/// `rest` starts with the `[lock]` table's own keys.
fn program(mode: &str, rest: &str) -> Scenario {
    prefixed_program(mode, "", rest)
}

/// [`program`] for a library that prefixes the name it is given with `prefix`.
fn prefixed_program(mode: &str, prefix: &str, rest: &str) -> Scenario {
    let script = root().join("tests/redis/programs/redis_cli_lock.sh");
    let kind = format!(
        "kind = \"client-program\"\ncommand = [\"sh\", \"{}\", \"{mode}\", \"{prefix}\"]\n",
        script.display()
    );
    inline(&format!("{kind}{rest}"))
}

/// A scenario of `lock_and_rest` (the `[lock]` table's keys, then the other tables) that runs
/// for 4 s.
fn inline(lock_and_rest: &str) -> Scenario {
    let text = format!(
        "name = \"inline\"\nexpect = \"violation\"\nseed = 1\nduration_ms = 4000\n\n[lock]\n\
         {lock_and_rest}"
    );
    Scenario::parse("inline.toml", &text).unwrap()
}

fn run(s: &Scenario, tag: &str) -> Outcome {
    let _serial = crate::common::real_servers_one_at_a_time();
    run_serialised(s, tag)
}

/// [`run`] for a caller that already holds the real servers' turn.
fn run_serialised(s: &Scenario, tag: &str) -> Outcome {
    let mut s = s.clone();
    s.lock.key = format!("foreign-release-test:{}:{tag}", std::process::id());
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{tag} could not run: {e}"));
    Outcome::judge(&s, Mode::Real, 1, history)
}

/// The paused holder's plain `DEL` lands while another client holds the lock: as in the
/// bundled `set-ex-nx-del-foreign-release`, three clients take turns with sections shorter than
/// the lease, so when the paused one wakes (past its 1 s lease) the lock is held.
const PAUSED_PLAIN_DEL: &str = r#"ttl_ms = 1000
wait_ms = 3000
retry_ms = [10, 20]

[workload]
clients = 3
cycles = 4
hold_ms = [300, 400]
think_ms = [0, 20]

[[faults]]
kind = "pause"
client = "holder"
on = "before_release"    # its lease (1 s) runs out while it is stopped
for_ms = 1500
"#;

/// The first foreign release `o` found, asserting the check found one, from the servers' word
/// (`observed`) or from the clients' events.
fn first_foreign_release(o: &Outcome, observed: bool) -> serde_json::Value {
    let fr = &o.checks["foreign_release"];
    assert_eq!(
        fr.verdict,
        Verdict::Violation,
        "{}\n{}",
        fr.summary,
        o.history.render()
    );
    assert_eq!(
        fr.evidence["observed_by_servers"], observed,
        "{}",
        fr.evidence
    );
    fr.evidence["releases"][0].clone()
}

/// Runs `s` until the servers saw a client remove another's entry, at most three times: a real
/// run's timing is the machine's, and the paused client's DEL may land in the instant between
/// two holders (one released, the next not yet granted) and remove nothing. That is a run
/// without a foreign release, not a miss; three runs give it three chances.
fn until_a_foreign_entry_is_removed(s: &Scenario, tag: &str) -> Outcome {
    let mut tries = 0;
    loop {
        let o = run(s, tag);
        let removed_a_foreign_entry = o.history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::EntryRemoved { by_client, owner_client, .. }
                if *owner_client != Some(*by_client))
        });
        tries += 1;
        if removed_a_foreign_entry || tries == 3 {
            return o;
        }
    }
}

#[test]
fn a_paused_plain_del_release_of_a_client_program_is_seen_by_the_servers() {
    // Another client takes the lock while the first holder is stopped; the first wakes and its
    // DEL removes that client's entry. The program answers only "released": that it deleted
    // someone's entry is what redis-server's MONITOR stream shows, from the address of the
    // paused client's forwarder.
    let s = program("plain", PAUSED_PLAIN_DEL);
    let o = until_a_foreign_entry_is_removed(&s, "plain");
    let r = first_foreign_release(&o, true);
    assert_ne!(r["client"], r["owner"], "{r}");
    assert_eq!(r["by_release"], true, "{r}");
}

/// Sets `LOCKCHECK_WITNESS` to `off` until dropped. Held only with the real servers' turn, so
/// no other real run of this binary reads it meanwhile.
struct WitnessOff;

impl WitnessOff {
    fn new() -> WitnessOff {
        std::env::set_var("LOCKCHECK_WITNESS", "off");
        WitnessOff
    }
}

impl Drop for WitnessOff {
    fn drop(&mut self) {
        std::env::remove_var("LOCKCHECK_WITNESS");
    }
}

#[test]
fn a_paused_plain_del_release_is_caught_without_the_witness_from_its_before_release_point() {
    // lockcheck's own `set-ex-nx-del` (plain DEL) on a master with a replica, with the witness
    // turned off, so the check infers from the clients' events. Dated from
    // leaving its section, client-0's release would begin before client-1's grant and pass;
    // dated from its `before_release` point (after the pause, when the DEL went out) it follows
    // that grant, and the entry it deleted can only have been client-1's.
    let text = std::fs::read_to_string(root().join("scenarios/set-ex-nx-del-foreign-release.toml"))
        .unwrap()
        .replace("[workload]", "[redis]\nreplicas = 1\n\n[workload]");
    let s = Scenario::parse("inline.toml", &text).unwrap();
    let _serial = crate::common::real_servers_one_at_a_time();
    let _off = WitnessOff::new();
    let r = first_foreign_release(&run_serialised(&s, "own-lock"), false);
    assert!(
        r["deleting_command_sent_us"].as_u64() > r["owner_granted_us"].as_u64(),
        "dated from when the DEL went out: {r}"
    );
}

/// One client takes the lock, the master dies before its replica has the key, the promoted
/// replica grants the other, and the first's owner-checked delete then finds the other's entry
/// and removes nothing.
const OWNER_CHECKED_FAILOVER: &str = r#"ttl_ms = 10000
wait_ms = 3000
retry_ms = [10, 20]

[redis]
masters = 1
replicas = 1
failover_detect_ms = 500

[workload]
clients = 2
cycles = 1
hold_ms = [1500, 1500]   # longer than the failover takes, so the other holds when it releases
think_ms = [0, 0]

[[faults]]
kind = "failover"
on = "acquired"
after_ms = 0
"#;

/// The client granted the lock first: the holder when the failover fired, whose release then
/// meets the other's entry on the promoted replica (either client may be first).
fn first_holder(o: &Outcome) -> u64 {
    let first = o
        .history
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Acquired { .. }));
    match first.map(|e| e.node.as_str()) {
        Some("client-1") => 1,
        _ => 0,
    }
}

/// Whether the second client was granted the lock before the first holder's release went out:
/// the situation in which a "released" read as "deleted" would blame the first holder for the
/// other's entry.
fn granted_to_the_other_before_the_release(o: &Outcome) -> bool {
    let at = |client: &str, f: &dyn Fn(&EventKind) -> bool| {
        o.history
            .events
            .iter()
            .find(|e| e.node == client && f(&e.kind))
            .map(|e| e.at_us)
    };
    let first = first_holder(o);
    let (holder, other) = (format!("client-{first}"), format!("client-{}", 1 - first));
    let granted = at(&other, &|k| matches!(k, EventKind::Acquired { .. }));
    let released = at(&holder, &|k| matches!(k, EventKind::Released { .. }));
    matches!((granted, released), (Some(g), Some(r)) if g < r)
}

/// Runs a failover scenario and asserts the failover handed the other client the lock before the
/// first holder's release went out (else the run shows nothing of what the test asks).
fn failover_run(s: &Scenario, tag: &str) -> Outcome {
    let o = run(s, tag);
    assert!(
        granted_to_the_other_before_the_release(&o),
        "the failover did not hand the other client the lock in time:\n{}",
        o.history.render()
    );
    o
}

#[test]
fn an_owner_checked_delete_under_failover_invents_no_foreign_release() {
    // A client program whose library prefixes its key: its "released" says nothing of what it
    // deleted. The witness follows the master and the replica it promotes, learns `lock:<name>`
    // from the program's `SET … NX`, and sees the first holder's compare-and-delete on the
    // promoted replica find the other's entry and remove nothing: no foreign release (before, with
    // replicas, the check did not judge at all) and a release that said "released" while it
    // removed nothing: a lie, the lie `redis-semaphore`'s release tells.
    let o = failover_run(
        &prefixed_program("checked", "lock:", OWNER_CHECKED_FAILOVER),
        "checked-program",
    );
    let fr = verdict_of(&o, "foreign_release", Verdict::Safe);
    assert_eq!(fr.evidence["observed_by_servers"], true, "{}", fr.evidence);
    let release = verdict_of(&o, "release", Verdict::Violation);
    let lies = release.evidence["mismatches"].as_array().unwrap();
    assert_eq!(lies.len(), 1, "{}", release.evidence);
    assert_eq!(lies[0]["client"], first_holder(&o), "{}", release.evidence);
    // lockcheck's own compare-and-delete lock answers from its script's reply (0: not
    // released): no foreign release and no lie.
    let own = inline(&format!("kind = \"set-nx-px\"\n{OWNER_CHECKED_FAILOVER}"));
    let o = failover_run(&own, "checked-own");
    verdict_of(&o, "foreign_release", Verdict::Safe);
    verdict_of(&o, "release", Verdict::Safe);
}

/// `check`'s result in `o`, asserting its verdict.
fn verdict_of<'a>(o: &'a Outcome, check: &str, verdict: Verdict) -> &'a lockcheck::CheckResult {
    let result = &o.checks[check];
    assert_eq!(
        result.verdict,
        verdict,
        "{check}: {}\n{}",
        result.summary,
        o.history.render()
    );
    result
}

/// A library with its own key prefix, with plain-`DEL` releases, across a failover: the first
/// holder's `DEL` on the promoted replica removes the other's entry, and the servers say so. The witness
/// learns `lock:<name>` from the clients' `SET … NX`, follows the master until it is quiesced and
/// killed, and the promoted replica from the start.
#[test]
fn a_prefixed_librarys_plain_del_across_a_failover_is_seen_by_the_servers() {
    let o = failover_run(
        &prefixed_program("plain", "lock:", OWNER_CHECKED_FAILOVER),
        "plain-prefixed-failover",
    );
    let r = first_foreign_release(&o, true);
    let first = first_holder(&o);
    assert_eq!(r["client"], first, "{r}");
    assert_eq!(r["owner"], 1 - first, "{r}");
}

/// The same library on one master (no replicas) with a paused holder: its plain `DEL` of the
/// next holder's `lock:<name>` is seen by the servers, by default, with no `[lock] key` set.
#[test]
fn a_prefixed_librarys_paused_plain_del_is_seen_by_the_servers() {
    let s = prefixed_program("plain", "mutex:", PAUSED_PLAIN_DEL);
    let o = until_a_foreign_entry_is_removed(&s, "plain-prefixed");
    let r = first_foreign_release(&o, true);
    assert_ne!(r["client"], r["owner"], "{r}");
    let watched = o.history.events.iter().find_map(|e| match &e.kind {
        EventKind::LockEntriesWatched { key, .. } => Some(key.clone()),
        _ => None,
    });
    assert!(
        watched.as_deref().is_some_and(|k| k.contains("mutex:")),
        "{watched:?}"
    );
}
