//! The false-alarm guard (issue #33, item 9): every correct lock lockcheck ships, under every fault
//! family it claims to survive, searched by explore, must come back empty.
//!
//! A lock *claims* a fault family when a bundled scenario (`scenarios/`, its subfolders included)
//! runs it under faults of that family and expects some check safe there; a scenario with no
//! `[[faults]]` claims the fault-free run (`none`), and one whose `[clocks]` drift claims
//! `clock_drift`. [`GUARD`] lists one search space per claim (and a few claims only the docs
//! make), each safe by construction: its fixture's `about` says which bounds make a violation
//! impossible, so a finding is a false alarm of a checker or a bug in a correct lock, never bad
//! luck. [`EXCLUDED`] lists, with the reason, the claims no search space can hold by construction
//! (the scenario's claim is one ordering that a search would widen into a known failure) or that
//! explore cannot search (a client program runs on real servers only); the bundled scenarios'
//! own seeds (`tests/sim/no_false_alarm.rs`) keep those. `the_guard_is_complete` fails when a
//! lock is registered, or a bundled scenario claims a family, without an entry or an exclusion.
//!
//! Budget: the test default runs [`DEFAULT_CASES`] cases of each entry with search seed 0 (a few
//! thousand in all, under a minute on two cores); `LOCKCHECK_EXPLORE_CASES=100000 cargo test
//! --release --test explore guard` is the benchmark profile, that many cases with each of three
//! search seeds; `LOCKCHECK_GUARD_ONLY=<fixture>,<fixture>` runs only those entries (the profile
//! takes hours; it is run an entry at a time). Each entry prints its cases, seconds and alarms.

use super::{explore, explore_kind, options};
use lockcheck::explore::SearchResult;
use lockcheck::scenario::{Scenario, Space};
use lockcheck::Verdict;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

/// Cases per entry in the test default.
const DEFAULT_CASES: u64 = 200;

/// Search seeds of the benchmark profile: three different sets of cases over the same space.
const PROFILE_SEEDS: [u64; 3] = [0, 1, 2];

/// One correct lock under the fault families one search space draws.
pub struct Entry {
    /// The lock kind, as the registry names it.
    pub lock: &'static str,
    /// The fault families the space draws, exactly its `[explore] faults`.
    pub families: &'static [&'static str],
    /// The fixture in `tests/explore/scenarios/`; its `about` says why the space is safe.
    pub fixture: &'static str,
    /// The check a violation must be of to count (`None`: any check).
    pub check: Option<&'static str>,
    /// Whether the cases must run into distinct histories (a space of many fault times and
    /// lengths); a space of few choices (one failover) repeats histories by design.
    pub varied: bool,
}

/// The guard: one search space per claim, safe by construction.
pub const GUARD: &[Entry] = &[
    Entry {
        lock: "set-nx-px",
        families: &["pause"],
        fixture: "set-nx-px-short-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "set-nx-px",
        families: &["client_crash", "pause"],
        fixture: "set-nx-px-holder-crash",
        check: None,
        varied: true,
    },
    Entry {
        lock: "set-nx-px",
        families: &["client_crash", "pause"],
        fixture: "set-nx-px-crash-long-pauses",
        check: Some("liveness"),
        varied: true,
    },
    Entry {
        lock: "set-nx-px",
        families: &["failover"],
        fixture: "failover-wait-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "set-ex-nx-del",
        families: &["pause"],
        fixture: "set-ex-nx-del-short-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "naive-setnx-expire",
        families: &["client_crash"],
        fixture: "naive-crash-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "lettuce-reentrant",
        families: &["failover"],
        fixture: "lettuce-failover-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "redisson",
        families: &["pause"],
        fixture: "redisson-short-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "fenced",
        families: &["failover"],
        fixture: "fenced-failover",
        check: Some("resource"),
        varied: false,
    },
    Entry {
        lock: "fenced",
        families: &["pause"],
        fixture: "fenced-long-pause",
        check: Some("resource"),
        varied: true,
    },
    Entry {
        lock: "redlock",
        families: &["clock_drift"],
        fixture: "redlock-drift-safe",
        check: None,
        varied: true,
    },
    Entry {
        lock: "redlock",
        families: &["partition"],
        fixture: "redlock-lost-replies",
        check: Some("release"),
        varied: false,
    },
    Entry {
        lock: "redlock",
        families: &["crash", "partition"],
        fixture: "redlock-delayed-restart-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "redlock",
        families: &["pause"],
        fixture: "redlock-short-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "mysql-for-update",
        families: &["pause"],
        fixture: "mysql-for-update-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "mysql-insert-unique",
        families: &["client_crash", "server_pause"],
        fixture: "mysql-insert-unique-crash-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "mysql-insert-unique",
        families: &["pause"],
        fixture: "mysql-insert-unique-fenced-long-pause",
        check: Some("resource"),
        varied: true,
    },
    Entry {
        lock: "pg-advisory-lock",
        families: &["pause", "client_crash"],
        fixture: "pg-advisory-session-pooler-pauses-crashes",
        check: None,
        varied: true,
    },
    Entry {
        lock: "pg-advisory-lock",
        families: &["partition"],
        fixture: "pg-advisory-partitions",
        check: Some("mutual_exclusion"),
        varied: true,
    },
    Entry {
        lock: "pg-advisory-xact-lock",
        families: &["pause"],
        fixture: "pg-xact-lock-pooler-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "pg-try-advisory-lock",
        families: &["pause"],
        fixture: "pg-try-lock-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "pg-advisory-lock-fenced",
        families: &["pause"],
        fixture: "pg-fenced-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "etcd-lock-lease-check",
        families: &["pause"],
        fixture: "etcd-lease-check-short-pauses",
        check: None,
        varied: true,
    },
    Entry {
        lock: "etcd-lock-fenced",
        families: &["pause"],
        fixture: "etcd-fenced-long-pause",
        check: Some("resource"),
        varied: true,
    },
    Entry {
        lock: "zk-recipe",
        families: &["failover"],
        fixture: "zk-failover-safe",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "zk-recipe-listener",
        families: &["partition"],
        fixture: "zk-listener-partitions",
        check: Some("mutual_exclusion"),
        varied: false,
    },
    Entry {
        lock: "zk-recipe-fenced",
        families: &["pause"],
        fixture: "zk-fenced-long-pause",
        check: Some("resource"),
        varied: true,
    },
];

/// A claim the guard does not search, and why.
pub struct Exclusion {
    /// The lock kind.
    pub lock: &'static str,
    /// The family excluded (`None`: the lock as a whole).
    pub family: Option<&'static str>,
    /// Why no search space holds it by construction, or why explore cannot search it, and what
    /// keeps the claim instead.
    pub why: &'static str,
}

/// The claims the guard leaves to the bundled scenarios' own seeds.
pub const EXCLUDED: &[Exclusion] = &[
    Exclusion {
        lock: "pg-advisory-lock-fenced",
        family: Some("terminate"),
        why: "a fencing token refuses a terminated holder's write only when it comes after the \
              next holder's; one that writes first is accepted and the next holder's write \
              (read before it) then loses its update, so no space of terminations is safe for \
              the resource by construction. pg-fenced-terminate is the ordering the claim is \
              about (the terminated holder stalls 500 ms), kept by its own seeds \
              (tests/postgres/scenarios.rs)",
    },
    Exclusion {
        lock: "set-nx-px",
        family: Some("cluster_failover"),
        why: "explore draws faults, and `CLUSTER FAILOVER` is an operator's command, not one: no \
              space draws it. cluster-manual-failover-safe's claim (the coordinated form waits \
              until the replica has every write, so a grant is never lost) is kept by its own \
              20 seeds in simulation and its real run (tests/redis/cluster_scenarios.rs)",
    },
    Exclusion {
        lock: "set-nx-px",
        family: Some("migrate_slot"),
        why: "explore draws faults, and resharding is an operator's command, not one: no space \
              draws it. cluster-slot-migration's claim (a slot's migration alone never lets two \
              nodes grant one key) is kept by its own 20 seeds in simulation, a test that each \
              migration moved the held key, and its real run (tests/redis/cluster_scenarios.rs)",
    },
    Exclusion {
        lock: "set-nx-px",
        family: Some("crash"),
        why: "no space of crashes is safe by construction for set-nx-px, `wait_replicas` or not: \
              a master that restarts empty within the node timeout serves its slots empty and \
              grants again (cluster-restart-empty-master; without a cluster, failover-lock-loss's \
              family). cluster-failover-wait's claim is one ordering (the master dies after its \
              replica acknowledged the grant and stays down), kept by its own 20 seeds in \
              simulation and its real run (tests/redis/cluster_scenarios.rs)",
    },
    Exclusion {
        lock: "redisson",
        family: Some("crash"),
        why: "no space of crashes is safe by construction for Redisson, `wait_replicas` or not: \
              a master that restarts empty within the node timeout serves its slots empty and \
              grants again (cluster-restart-empty-master's failure, for any lock on one master). \
              cluster-redisson-unsynced-undone's claim is one ordering (the master dies after its \
              replica acknowledged the grant, and the holder unlocks after the promotion), kept \
              by its own 20 seeds in simulation, a test that no unlock there leaves the hash \
              behind, and its real run (tests/redis/cluster_scenarios.rs)",
    },
    Exclusion {
        lock: "client-program",
        family: None,
        why: "a client program runs on spawned servers only, and explore searches in simulation; \
              its bundled scenarios (scenarios/clients) run on real servers in tests/client_programs",
    },
    Exclusion {
        lock: "etcd-lock",
        family: None,
        why: "not safe by construction under member crashes: the 100,000-case profile of a \
              three-member space of crashes found, at case 9,474, two overlapping crashes \
              (etcd-0 down 13-3,215 ms, etcd-2 down 1,979-2,649 ms) under which a waiter's lease \
              expired while it waited (its keep-alives went to the dead member) and it then \
              returned a lock whose key was gone: Jepsen's waiter bug, reached by crashes instead \
              of a pause (12 of 50 seeds of that schedule). Its bundled claims (no faults; one \
              leader crash while a client holds, etcd-lock-leader-failover) are one ordering, \
              kept by their own seeds (tests/sim/no_false_alarm.rs)",
    },
];

/// Cases and search seeds per entry: `LOCKCHECK_EXPLORE_CASES` cases with each of
/// [`PROFILE_SEEDS`], or [`DEFAULT_CASES`] with seed 0.
fn budget() -> (u64, &'static [u64]) {
    match std::env::var("LOCKCHECK_EXPLORE_CASES") {
        Ok(v) => (
            v.parse()
                .unwrap_or_else(|_| panic!("LOCKCHECK_EXPLORE_CASES={v:?} is not a number")),
            &PROFILE_SEEDS,
        ),
        Err(_) => (DEFAULT_CASES, &PROFILE_SEEDS[..1]),
    }
}

/// Explores `fixture` with `cases` cases from each search seed of `seeds` and asserts nothing was
/// found, every case ran and (with `varied`) the cases ran into many different histories.
/// Prints each search's cases, seconds and alarms.
pub fn assert_safe(
    fixture: &str,
    check: Option<&str>,
    varied: bool,
    (cases, seeds): (u64, &[u64]),
) -> Vec<SearchResult> {
    let mut results = Vec::new();
    for &seed in seeds {
        let mut opts = options(cases, check);
        opts.seed = seed;
        let start = Instant::now();
        let (_, result, found) = explore(fixture, &opts);
        eprintln!(
            "guard: {fixture}, search seed {seed}: {} cases in {:.1} s, {} alarms",
            result.tried,
            start.elapsed().as_secs_f64(),
            result.violating
        );
        assert!(
            found.is_none(),
            "false alarm: {fixture}, search seed {seed}: {:?}",
            result.found.map(|f| (f.check, f.scenario.faults))
        );
        assert_eq!(result.tried, cases, "{fixture}");
        assert_eq!(result.violating, 0, "{fixture}");
        if varied {
            assert!(
                result.distinct_traces * 100 > cases * 95,
                "{fixture}: the cases differ: {} distinct traces of {cases}",
                result.distinct_traces
            );
        }
        results.push(result);
    }
    results
}

/// Every entry of [`GUARD`] (those `LOCKCHECK_GUARD_ONLY` names, when set) finds nothing.
#[test]
fn every_correct_lock_under_every_fault_family_it_claims_finds_nothing() {
    let only = std::env::var("LOCKCHECK_GUARD_ONLY").ok();
    let only: Option<BTreeSet<&str>> = only.as_deref().map(|v| v.split(',').collect());
    let start = Instant::now();
    let mut ran = 0;
    for e in GUARD {
        if only.as_ref().is_some_and(|o| !o.contains(e.fixture)) {
            continue;
        }
        assert_safe(e.fixture, e.check, e.varied, budget());
        ran += 1;
    }
    assert!(ran > 0, "LOCKCHECK_GUARD_ONLY names no entry: {only:?}");
    eprintln!(
        "guard: {ran} entries in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// The fault families of a bundled scenario's claim: its faults' families as `[explore] faults`
/// names them, `clock_drift` for a `[clocks]` drift, `none` for a fault-free run. (A `[clocks]`
/// offset is a fixed skew, not a fault explore draws: every case of a space keeps the fixture's
/// `[clocks]` table as it is.)
fn claimed_families(s: &Scenario) -> BTreeSet<&'static str> {
    let mut families: BTreeSet<&'static str> =
        s.faults.iter().map(|f| explore_kind(&f.kind)).collect();
    if s.clocks.drift_ppm != [0, 0] {
        families.insert("clock_drift");
    }
    if families.is_empty() {
        families.insert("none");
    }
    families
}

/// Every bundled scenario, from `scenarios/` and its subfolders.
fn bundled_scenarios() -> Vec<Scenario> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "toml") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"),
        &mut files,
    );
    files.sort();
    files
        .iter()
        .map(|p| Scenario::load(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// The guard stays complete: every lock the registry lists has an entry or is excluded; every
/// family a bundled scenario claims for its lock is drawn by an entry of that lock (a fault-free
/// claim by any entry of it, since every space draws fault-free cases too) or is excluded; and
/// every entry is what it says: its fixture runs its lock, draws exactly its families, has no
/// `[[faults]]` of its own and says in its `about` why it is safe by construction.
#[test]
fn the_guard_is_complete() {
    let excluded = |lock: &str, family: &str| {
        EXCLUDED
            .iter()
            .any(|x| x.lock == lock && x.family.is_none_or(|f| f == family))
    };
    let mut missing = Vec::new();
    for kind in lockcheck::LockKind::builtins() {
        let lock = kind.name();
        if !GUARD.iter().any(|e| e.lock == lock) && !excluded(lock, "none") {
            missing.push(format!(
                "{lock}: registered, but has no guard entry and no exclusion"
            ));
        }
    }
    let mut claims = 0;
    for s in bundled_scenarios() {
        let lock = s.lock.kind.name();
        let claims_safe = lockcheck::check::CHECK_NAMES
            .iter()
            .any(|c| s.expected(c) == Some(Verdict::Safe));
        if !claims_safe {
            continue;
        }
        for family in claimed_families(&s) {
            claims += 1;
            let covered = GUARD
                .iter()
                .any(|e| e.lock == lock && (family == "none" || e.families.contains(&family)));
            if !covered && !excluded(lock, family) {
                missing.push(format!(
                    "{lock} under {family}: scenario {} expects a check safe there, but no guard \
                     entry draws {family} for {lock} and no exclusion says why",
                    s.name
                ));
            }
        }
    }
    assert!(claims > 20, "only {claims} claims found in scenarios/");
    for e in GUARD {
        let base = Scenario::load(&super::fixture(e.fixture)).unwrap();
        let space = Space::of(&base).unwrap();
        let drawn: BTreeSet<&str> = space.faults.iter().copied().collect();
        let listed: BTreeSet<&str> = e.families.iter().copied().collect();
        if base.lock.kind.name() != e.lock {
            missing.push(format!(
                "{}: runs {}, the entry says {}",
                e.fixture,
                base.lock.kind.name(),
                e.lock
            ));
        }
        if drawn != listed {
            missing.push(format!(
                "{}: draws {drawn:?}, the entry says {listed:?}",
                e.fixture
            ));
        }
        if !base.faults.is_empty() {
            missing.push(format!("{}: has [[faults]] of its own", e.fixture));
        }
        if !base.about.starts_with("Safe by construction") {
            missing.push(format!(
                "{}: its `about` must say why it is safe by construction",
                e.fixture
            ));
        }
    }
    for x in EXCLUDED {
        assert!(
            lockcheck::LockKind::builtins()
                .iter()
                .any(|k| k.name() == x.lock),
            "exclusion of an unknown lock {}",
            x.lock
        );
        assert!(x.why.len() > 40, "{}: say why", x.lock);
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
