//! Where a `zk-session` counterexample is replayed. `lockcheck model` does not write ZooKeeper
//! traces as scenario files ([`crate::scenario::Scenario`] is the Redis-shaped format the other
//! models write, with no `[zookeeper]` table), but scenarios do have that table, and the bundled
//! ZooKeeper scenarios replay each shape of this model's counterexamples. So the note a trace
//! carries names the one that fits and how to run it: it used to end with "scenarios have no
//! ZooKeeper table yet", a dead end that was no longer true.

/// The bundled scenario (a path from the repository's root) that replays a counterexample of
/// the `zk-session` model: a pause or a cut of the holder, with the plain recipe, the listener
/// or fencing. A cut with the listener has no counterexample (the listener closes that window),
/// so it points at the listener's partition scenario, which shows it safe.
pub fn bundled_scenario(paused: bool, listener: bool, fencing: bool) -> &'static str {
    match (paused, listener, fencing) {
        (true, _, true) => "scenarios/zk-recipe-fenced-pause.toml",
        (true, true, false) => "scenarios/zk-recipe-listener-pause.toml",
        (true, false, false) => "scenarios/zk-curator-206-pause.toml",
        (false, true, _) => "scenarios/zk-recipe-listener-partition.toml",
        (false, false, _) => "scenarios/zk-curator-206-partition.toml",
    }
}

/// The note of a counterexample whose holder was `paused` (else cut off): the scenario that
/// replays it and what to do with it.
pub(crate) fn note(paused: bool, listener: bool, fencing: bool) -> String {
    let file = bundled_scenario(paused, listener, fencing);
    format!(
        "`lockcheck model` does not write ZooKeeper traces as scenario files yet; {file} replays \
         this trace's shape (a holder {} past its session timeout, the next waiter holds{}): \
         `lockcheck run {file}` in simulation, add `--real` for real ZooKeeper servers, and copy \
         it to change its [zookeeper] table (session_timeout_ms) or its [[faults]]",
        if paused {
            "paused"
        } else {
            "cut off from ZooKeeper"
        },
        if fencing {
            "; the storage refuses the stale token"
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use crate::test_util::check;
    use crate::Strategy;

    /// The scenarios the notes name exist, so a user who runs the command a note prints gets a
    /// run, not "no such scenario file"; and a trace's note names the one for its fault.
    #[test]
    fn every_scenario_a_counterexample_note_names_is_bundled() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for paused in [false, true] {
            for listener in [false, true] {
                for fencing in [false, true] {
                    let file = super::bundled_scenario(paused, listener, fencing);
                    assert!(root.join(file).is_file(), "{file}");
                }
            }
        }
        let r = check("zk-session", "mutual_exclusion", &[], Strategy::Bfs);
        let note = r.scenario_note.clone().unwrap_or_default();
        assert!(
            note.contains("lockcheck run scenarios/zk-curator-206-pause.toml"),
            "{note}"
        );
        assert!(!note.contains("no ZooKeeper table"), "{note}");
        let cut = [("pauses", "0"), ("partitions", "1")];
        let r = check("zk-session", "mutual_exclusion", &cut, Strategy::Bfs);
        let note = r.scenario_note.clone().unwrap_or_default();
        assert!(note.contains("zk-curator-206-partition.toml"), "{note}");
    }
}
