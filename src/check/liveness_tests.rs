//! The liveness checker's unit tests: stretches of wanting without holding, what excuses them
//! (pauses, partitions, servers down), and the checker's verdicts on small histories.

use super::*;
use crate::check::{acquired, ev};

fn failed() -> EventKind {
    EventKind::AcquireFailed {
        reason: "wait bound reached".into(),
    }
}

#[test]
fn a_crashed_setnx_holder_blocks_everyone() {
    // client 0 crashed between SETNX and EXPIRE (it never got its Acquired); client 1 keeps
    // trying for 10 s.
    let h = History {
        events: vec![
            ev(0, "client-0", EventKind::AcquireStart),
            ev(0, "client-1", EventKind::AcquireStart),
            ev(
                2,
                "client-0",
                EventKind::Crashed {
                    point: "after_setnx".into(),
                },
            ),
            ev(5_000_000, "client-1", failed()),
            ev(5_010_000, "client-1", EventKind::AcquireStart),
            ev(10_010_000, "client-1", failed()),
        ],
    };
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    // The 10 ms between its give-up and its next try are asking time too: it tries again.
    assert_eq!(r.evidence["longest_unavailable_us"], 10_010_000);
    assert!(r.summary.contains("never became free"), "{}", r.summary);
}

#[test]
fn a_live_holder_is_not_unavailability() {
    // client 0 holds for 20 s (paused, maybe); client 1 waits all along: that is the lock working.
    let h = History {
        events: vec![
            ev(0, "client-0", EventKind::AcquireStart),
            ev(1, "client-0", acquired(None)),
            ev(2, "client-1", EventKind::AcquireStart),
            ev(20_000_000, "client-1", failed()),
            ev(
                20_000_001,
                "client-0",
                EventKind::Released { deleted: true },
            ),
        ],
    };
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
}

#[test]
fn a_crashed_holders_lease_expiring_in_time_is_safe() {
    // client 0 crashes while holding; its lease (1 s) runs out and client 1 gets the lock.
    let h = History {
        events: vec![
            ev(0, "client-0", EventKind::AcquireStart),
            ev(1, "client-0", acquired(None)),
            ev(2, "client-1", EventKind::AcquireStart),
            ev(
                3,
                "client-0",
                EventKind::Crashed {
                    point: "acquired".into(),
                },
            ),
            ev(1_000_010, "client-1", acquired(None)),
        ],
    };
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    assert_eq!(r.evidence["longest_unavailable_us"], 1_000_007);
    // With a tighter bound the same history is a violation: the bound is what decides.
    let r = Liveness {
        bound_us: 500_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Violation);
}

fn note(at: u64, what: &str) -> crate::history::Event {
    ev(at, "nemesis", EventKind::Fault { what: what.into() })
}

/// A waiter cut off from everyone asks no more than a paused one: client-0 holds from 1 ms
/// and dies at 5 ms; client-1 asks from 2 ms, is cut off from everyone from 10 ms for
/// 4,000 ms (one way), and is granted 3 ms after the cut heals. The lock is free from the
/// crash: client-1 asked 5 ms, then 3 ms. Cut off from one server only, it could still ask
/// the others, and the 4 s count.
#[test]
fn a_waiter_cut_off_from_everyone_is_not_asking() {
    let history = |whats: &[&str]| {
        let mut events = vec![
            ev(0, "client-0", EventKind::AcquireStart),
            ev(1_000, "client-0", acquired(None)),
            ev(
                5_000,
                "client-0",
                EventKind::Crashed {
                    point: "acquired".into(),
                },
            ),
            ev(2_000, "client-1", EventKind::AcquireStart),
            ev(4_013_000, "client-1", acquired(None)),
            ev(4_100_000, "run", EventKind::RunEnd),
        ];
        events.extend(whats.iter().map(|w| note(10_000, w)));
        events.sort_by_key(|e| e.at_us);
        History { events }
    };
    let check = |servers: &[&str], whats: &[&str]| {
        Liveness {
            bound_us: 1_000_000,
            lock_servers: servers.iter().map(|s| s.to_string()).collect(),
        }
        .check(&history(whats))
    };
    for servers in [&[][..], &["redis-0"], &["redis-0", "redis-1"]] {
        let cut = check(
            servers,
            &["partition: client-1 cut off from everyone for 4000 ms (client -> server only)"],
        );
        assert_eq!(cut.verdict, Verdict::Safe, "{}", cut.summary);
        // Free from the crash at 5 ms: asked 5 ms before the cut and 3 ms after it.
        assert_eq!(cut.evidence["longest_unavailable_us"], 8_000);
    }
    // Cut off from the only server, either side named first: it cannot ask.
    for what in [
        "partition: client-1 cut off from redis-0 for 4000 ms",
        "partition: redis-0 cut off from client-1 for 4000 ms (server -> client only)",
    ] {
        let r = check(&["redis-0"], &[what]);
        assert_eq!(r.verdict, Verdict::Safe, "{what}: {}", r.summary);
        assert_eq!(r.evidence["longest_unavailable_us"], 8_000);
        // Unknown servers: only a cut from everyone counts.
        assert_eq!(check(&[], &[what]).verdict, Verdict::Violation);
    }
    // Two servers: cut from one, it still asks the other.
    let one = "partition: client-1 cut off from redis-0 for 4000 ms";
    let partial = check(&["redis-0", "redis-1"], &[one]);
    assert_eq!(partial.verdict, Verdict::Violation, "{}", partial.summary);
    // Two cuts together cut it off from both.
    let two = "partition: redis-1, client-0 cut off from client-1 for 4000 ms";
    let both = check(&["redis-0", "redis-1"], &[one, two]);
    assert_eq!(both.verdict, Verdict::Safe, "{}", both.summary);
    // A cut that leaves it with a server on its own side does not.
    let grouped = "partition: client-1, redis-1 cut off from everyone for 4000 ms";
    let r = check(&["redis-0", "redis-1"], &[grouped]);
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
}

/// client-0 is granted at 1 ms and dies at `crash_at`; client-1 asks from 2 ms, is paused
/// over `paused` and is granted 2 ms after it resumes (the dead holder's lease ran out while
/// it was paused).
fn crash_and_pause(crash_at: u64, paused: (u64, u64)) -> History {
    let crash = EventKind::Crashed {
        point: "acquired".into(),
    };
    let what = format!(
        "client-1 paused for {} ms (GC pause)",
        (paused.1 - paused.0) / 1000
    );
    let mut events = vec![
        ev(0, "client-0", EventKind::AcquireStart),
        ev(1_000, "client-0", acquired(None)),
        ev(crash_at, "client-0", crash),
        ev(2_000, "client-1", EventKind::AcquireStart),
        note(paused.0, &what),
        note(paused.1, "client-1 resumed"),
        ev(paused.1 + 2_000, "client-1", acquired(None)),
        ev(paused.1 + 100_000, "run", EventKind::RunEnd),
    ];
    events.sort_by_key(|e| e.at_us);
    History { events }
}

/// The false alarm a correct lock met: its holder crashes while the only waiter is paused.
/// The lock is free from the lease's end, but nobody can ask for it until the waiter resumes,
/// and then it is granted at once: not unavailable.
#[test]
fn a_free_lock_nobody_can_ask_for_is_not_unavailable() {
    let h = crash_and_pause(5_000, (3_000, 4_493_000));
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
}

/// The reported false alarm: the holder crashes the moment it is granted, before the pause,
/// the only waiter is refused, then paused from 20 ms to 3,520 ms while the lease runs out,
/// and granted at once when it resumes. It asked for 18 ms and for 2 ms: a wait split around
/// a pause is measured by its asking time, not from its first piece to its last.
#[test]
fn a_wait_split_by_a_pause_counts_its_asking_time_only() {
    let h = crash_and_pause(1_000, (20_000, 3_520_000));
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Safe, "{}", r.summary);
    assert_eq!(r.evidence["longest_unavailable_us"], 20_000);
    // The same split wait with a bound under its asking time is still a violation.
    let r = Liveness {
        bound_us: 10_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    assert!(
        r.summary.contains("20.000 ms of asking time"),
        "{}",
        r.summary
    );
}

/// A client stuck in `acquire` after the holder crashed (a lock with no lease) waits until
/// the run ends, not until whatever event came last.
#[test]
fn a_client_stuck_until_the_run_ends_is_never_served() {
    let crash = EventKind::Crashed {
        point: "acquired".into(),
    };
    let h = History {
        events: vec![
            ev(0, "client-0", EventKind::AcquireStart),
            ev(1_000, "client-0", acquired(None)),
            ev(2_000, "client-1", EventKind::AcquireStart),
            ev(11_000, "client-0", crash),
            ev(30_000_000, "run", EventKind::RunEnd),
        ],
    };
    let r = Liveness {
        bound_us: 3_000_000,
        lock_servers: Vec::new(),
    }
    .check(&h);
    assert_eq!(r.verdict, Verdict::Violation, "{}", r.summary);
    assert!(r.summary.contains("never served"), "{}", r.summary);
    assert_eq!(r.evidence["never_served"], serde_json::json!([1]));
}
