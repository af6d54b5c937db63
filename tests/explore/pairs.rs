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
use lockcheck::lock::SetNxPx;
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
