//! Real-mode `foreign_release` from the servers' truth (`docs/checks.md`, "foreign_release"):
//! a holder paused right before its plain-`DEL` release deletes the next holder's entry, and is
//! caught whether the `MONITOR` witness follows the run (a client program's connections named by
//! their forwarders) or not (the release dated by its `before_release` point, when its request
//! went out); an owner-checked delete that found someone else's entry and removed nothing is not
//! reported as deleting it, even by a program that answers "released" regardless.
//!
//! Cost: four real runs of 2 to 4 s each (two `redis-server`s, or a failover rig), one at a time.

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
    let script = root().join("tests/redis/programs/redis_cli_lock.sh");
    let kind = format!(
        "kind = \"client-program\"\ncommand = [\"sh\", \"{}\", \"{mode}\"]\n",
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
    let mut s = s.clone();
    s.lock.key = format!("foreign-release-test:{}:{tag}", std::process::id());
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{tag} could not run: {e}"));
    Outcome::judge(&s, Mode::Real, 1, history)
}

/// The paused holder's plain `DEL` lands while another client holds the lock: as in the
/// bundled `set-ex-nx-del-foreign-release`, three clients take turns with sections shorter than
/// the lease, so when the paused one wakes (1.5 s later, past its 1 s lease) the lock is held.
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

#[test]
fn a_paused_plain_del_release_of_a_client_program_is_seen_by_the_servers() {
    // Another client takes the lock while the first holder is stopped; the first wakes and its
    // DEL removes that client's entry. The program answers only "released": that it deleted
    // someone's entry is what redis-server's MONITOR stream shows, from the address of the
    // paused client's forwarder.
    // A real run's timing is the machine's: the paused client's DEL may land in the instant
    // between two holders (one released, the next not yet granted) and remove nothing. That is
    // a run without a foreign release, not a miss; three runs give it three chances.
    let s = program("plain", PAUSED_PLAIN_DEL);
    let mut tries = 0;
    let o = loop {
        let o = run(&s, "plain");
        let removed_a_foreign_entry = o.history.events.iter().any(|e| {
            matches!(&e.kind, EventKind::EntryRemoved { by_client, owner_client, .. }
                if *owner_client != Some(*by_client))
        });
        tries += 1;
        if removed_a_foreign_entry || tries == 3 {
            break o;
        }
    };
    let r = first_foreign_release(&o, true);
    assert_ne!(r["client"], r["owner"], "{r}");
    assert_eq!(r["by_release"], true, "{r}");
}

#[test]
fn a_paused_plain_del_release_is_caught_without_the_witness_from_its_before_release_point() {
    // lockcheck's own `set-ex-nx-del` (plain DEL) on a master with a replica: the witness does
    // not follow a replicated group, so the check infers from the clients' events. Dated from
    // leaving its section, client-0's release would begin before client-1's grant and pass;
    // dated from its `before_release` point (after the pause, when the DEL went out) it follows
    // that grant, and the entry it deleted can only have been client-1's.
    let text = std::fs::read_to_string(root().join("scenarios/set-ex-nx-del-foreign-release.toml"))
        .unwrap()
        .replace("[workload]", "[redis]\nreplicas = 1\n\n[workload]");
    let s = Scenario::parse("inline.toml", &text).unwrap();
    let r = first_foreign_release(&run(&s, "own-lock"), false);
    assert!(
        r["deleting_command_sent_us"].as_u64() > r["owner_granted_us"].as_u64(),
        "dated from when the DEL went out: {r}"
    );
}

/// client-0 takes the lock, the master dies before its replica has the key, the promoted
/// replica grants client-1, and client-0's owner-checked delete then finds client-1's entry
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
hold_ms = [1500, 1500]   # longer than the failover takes, so client-1 holds when it releases
think_ms = [0, 0]

[[faults]]
kind = "failover"
on = "acquired"
after_ms = 0
"#;

/// Whether client-1 was granted the lock before client-0's release went out: the situation in
/// which a "released" read as "deleted" would blame client-0 for client-1's entry.
fn granted_to_the_other_before_the_release(o: &Outcome) -> bool {
    let at = |client: &str, f: &dyn Fn(&EventKind) -> bool| {
        o.history
            .events
            .iter()
            .find(|e| e.node == client && f(&e.kind))
            .map(|e| e.at_us)
    };
    let granted = at("client-1", &|k| matches!(k, EventKind::Acquired { .. }));
    let released = at("client-0", &|k| matches!(k, EventKind::Released { .. }));
    matches!((granted, released), (Some(g), Some(r)) if g < r)
}

#[test]
fn an_owner_checked_delete_under_failover_invents_no_foreign_release() {
    // A client program: its "released" says nothing of what it deleted, and the witness does not
    // follow a failover, so the check does not judge (before, it read "released" as "deleted"
    // and blamed client-0 for client-1's entry).
    let o = run(
        &program("checked", OWNER_CHECKED_FAILOVER),
        "checked-program",
    );
    assert!(
        granted_to_the_other_before_the_release(&o),
        "the failover did not hand client-1 the lock in time:\n{}",
        o.history.render()
    );
    let fr = &o.checks["foreign_release"];
    assert_eq!(fr.verdict, Verdict::NotJudged, "{}", fr.summary);
    assert!(fr.summary.contains("client program"), "{}", fr.summary);
    // lockcheck's own compare-and-delete lock answers from its script's reply (0: not
    // released), so the check judges it from the clients' events, and finds nothing.
    let own = inline(&format!("kind = \"set-nx-px\"\n{OWNER_CHECKED_FAILOVER}"));
    let o = run(&own, "checked-own");
    assert!(
        granted_to_the_other_before_the_release(&o),
        "{}",
        o.history.render()
    );
    let fr = &o.checks["foreign_release"];
    assert_eq!(
        fr.verdict,
        Verdict::Safe,
        "{}\n{}",
        fr.summary,
        o.history.render()
    );
}
