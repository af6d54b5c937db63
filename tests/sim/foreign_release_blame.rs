//! The foreign-release check blames the pair the server saw: on the bundled plain-`DEL` scenario
//! every blamed (remover, owner) pair is a removal a server recorded of an entry the owner had
//! been granted, on each of 30 seeds. Without the servers' word the check infers the owner from
//! the order of grants and releases, each release dated from its `before_release` point (when its
//! `DEL` went out, after the pause): on this scenario it blames the same pairs. (Dated from when
//! the holder left its section, as it was before the point was recorded, it blamed a different
//! pair on some seeds.)

use lockcheck::check::{foreign_release::ForeignRelease, Checker};
use lockcheck::history::{EventKind, History};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::collections::BTreeSet;

fn scenario() -> Scenario {
    crate::common::bundled("set-ex-nx-del-foreign-release")
}

/// The (remover, owner) pairs the check blamed.
fn blamed(history: &History) -> BTreeSet<(u64, u64)> {
    let r = ForeignRelease::for_masters(1).check(history);
    assert_eq!(r.verdict, Verdict::Violation, "{}", history.render());
    r.evidence["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["client"].as_u64().unwrap(), f["owner"].as_u64().unwrap()))
        .collect()
}

/// The pairs the servers recorded: a client command removed an entry another client was granted.
fn seen_by_servers(history: &History) -> BTreeSet<(u64, u64)> {
    let mut pairs = BTreeSet::new();
    for e in &history.events {
        let EventKind::EntryRemoved {
            by_client, owner, ..
        } = &e.kind
        else {
            continue;
        };
        // Who was granted that token, by the clients' own reports.
        let granted: Vec<u32> = history
            .events
            .iter()
            .filter(|g| matches!(&g.kind, EventKind::Acquired { owner: o, .. } if o == owner))
            .filter_map(|g| g.client())
            .collect();
        assert_eq!(granted.len(), 1, "token {owner} granted once");
        if granted[0] != *by_client {
            pairs.insert((u64::from(*by_client), u64::from(granted[0])));
        }
    }
    pairs
}

#[test]
fn the_pair_the_server_saw_is_blamed_on_all_30_seeds() {
    let s = scenario();
    let mut inferred_wrong = Vec::new();
    for seed in 1..=30 {
        let history = lockcheck::Registry::new().run_sim(&s, seed).history;
        let truth = seen_by_servers(&history);
        assert!(!truth.is_empty(), "seed {seed}: no foreign removal seen");
        assert_eq!(blamed(&history), truth, "seed {seed}");
        // The same history without the servers' word: the owner is inferred from reply order.
        let mut inferred = history.clone();
        inferred
            .events
            .retain(|e| !matches!(e.kind, EventKind::LockEntriesWatched { .. }));
        if blamed(&inferred) != truth {
            inferred_wrong.push(seed);
        }
    }
    // A release dated from when its DEL went out: inference agrees with the servers.
    assert!(inferred_wrong.is_empty(), "seeds {inferred_wrong:?}");
}

/// On real `redis-server` processes the servers' word comes from their `MONITOR` streams: the
/// witness records which client's entry each `DEL` removed, and the check blames exactly those
/// pairs.
#[test]
fn real_servers_blame_the_pair_their_monitor_saw() {
    let _one_at_a_time = crate::common::real_servers_one_at_a_time();
    let s = scenario();
    for seed in 1..=3 {
        let history = lockcheck::Registry::new()
            .run_real(&s, seed)
            .unwrap_or_else(|e| panic!("seed {seed}: could not run on real processes: {e}"));
        assert!(
            history
                .events
                .iter()
                .any(|e| matches!(e.kind, EventKind::LockEntriesWatched { .. })),
            "seed {seed}: the real servers' witness did not vouch for the run:\n{}",
            history.render()
        );
        let truth = seen_by_servers(&history);
        assert!(
            !truth.is_empty(),
            "seed {seed}: no foreign removal seen:\n{}",
            history.render()
        );
        assert_eq!(blamed(&history), truth, "seed {seed}");
    }
}
