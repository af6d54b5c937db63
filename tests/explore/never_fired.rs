//! A fault that never fires is named in the run's history (`never fired: …`), and a real
//! finding's file says, above each fault that did not fire in some of its runs, why it is still
//! there: the shrink keeps only faults the violation needs at the margin, so one that stayed
//! without firing changed the runs anyway.

use super::options;
use lockcheck::explore::emit::found_scenario_replayed;
use lockcheck::explore::real::ByCheck;
use lockcheck::explore::Rate;
use lockcheck::history::EventKind;
use lockcheck::scenario::Scenario;
use lockcheck::Registry;

/// A pause waiting for an acquire after the clients are done never fires; the history says so, in
/// words, once, after the run's end. One at 0 ms fires and is not named.
#[test]
fn a_fault_whose_point_is_never_reached_is_named_in_the_history() {
    // The fixture's two clients make their three cycles in under 1.5 s of its 10.
    let fixture = std::fs::read_to_string(super::fixture("gc-pause-no-faults")).unwrap();
    let faults = "\n[[faults]]\nkind = \"pause\"\nclient = \"holder\"\non = \"acquired\"\n\
                  after_ms = 9000\nfor_ms = 50\n\n[[faults]]\nkind = \"pause\"\n\
                  client = \"holder\"\non = \"acquired\"\nfor_ms = 50\n";
    let text = format!("{fixture}{faults}");
    let s = Scenario::parse("idle.toml", &text).unwrap();
    let run = Registry::new().run_sim(&s, 1);
    let notes: Vec<&str> = run
        .history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault { what } if what.starts_with("never fired") => Some(what.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        ["never fired: pause on \"acquired\" after 9000 ms"],
        "{}",
        run.history.render()
    );
    assert_eq!(
        lockcheck::world::never_fired(&s.faults[0]),
        notes[0],
        "explore matches the note to the file's fault by this text"
    );
}

/// A finding's fault that never fired in 2 of 5 runs of its file gets a comment saying so and
/// why it stayed; the file still parses, and its other faults get none.
#[test]
fn a_real_findings_idle_fault_is_explained_in_its_file() {
    // Searched here, not through `explore()`, whose found file's path is the fixture's: the
    // minimal-shrink test explores the same fixture at the same time.
    let base = Scenario::load(&super::fixture("gc-pause-no-faults")).unwrap();
    let space = lockcheck::scenario::Space::of(&base).unwrap();
    let result = lockcheck::explore::search(&base, &space, &options(2000, None), &|_, _| {});
    let found = result.found.expect("the fixture's pause violates");
    assert!(!found.scenario.faults.is_empty(), "the finding has a fault");
    let text = std::fs::read_to_string(super::fixture("gc-pause-no-faults")).unwrap();
    let mut by = ByCheck::new();
    by.insert(found.check.clone(), 5);
    by.insert(lockcheck::world::never_fired(&found.scenario.faults[0]), 2);
    let rate = Rate {
        violated: 5,
        runs: 5,
    };
    let mut found = found;
    found.confirmed = Some(rate);
    let out = found_scenario_replayed(&text, &found, Some(rate), None, Some(&by)).unwrap();
    assert!(
        out.contains("# This fault never fired in 2 of the 5 runs of this file"),
        "{out}"
    );
    assert!(
        out.contains("# without it the case violated less often")
            || out.contains("without it the case violated less often"),
        "{out}"
    );
    assert_eq!(out.matches("never fired").count(), 1, "{out}");
    Scenario::parse("found.toml", &out).unwrap_or_else(|e| panic!("{e}\n{out}"));
}
