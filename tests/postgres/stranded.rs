//! The stranded session lock behind PgBouncer in transaction mode
//! (`scenarios/pg-pgbouncer-transaction-stranded.toml`) happens for the reason its `about`
//! gives, and its neighbours come out as PgBouncer's rules say, in both worlds:
//!
//! - as written: the dead holder's lock stays on a server connection the application's
//!   transaction is lent, the late client waits on the other one, and never gets the lock;
//! - without the application's transaction, the late client is lent the holding connection
//!   itself and "acquires" at once (session locks stack): the dead holder's lock is inherited,
//!   not stranded;
//! - with a `server_lifetime` shorter than the connection's age when the application gives it
//!   back, PgBouncer closes it, the server ends its session and frees the lock, and the waiter
//!   gets it.
//!
//! Each outcome follows from the file's times (every step 0.2 s or more from the next), not from
//! a race, so it is asserted for every seed tried and for a real run.

use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::path::Path;

fn bundled_text() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/pg-pgbouncer-transaction-stranded.toml"),
    )
    .unwrap()
}

/// The bundled file with `from` replaced by `to` (which must be there).
fn variant(from: &str, to: &str) -> Scenario {
    let text = bundled_text();
    assert!(text.contains(from), "{from}");
    Scenario::parse("stranded-variant.toml", &text.replace(from, to)).unwrap()
}

fn bundled() -> Scenario {
    Scenario::parse("pg-pgbouncer-transaction-stranded.toml", &bundled_text()).unwrap()
}

/// When client-1 first acquired, in ms of true time (`None`: never).
fn first_acquire_of_client_1(o: &Outcome) -> Option<f64> {
    o.history
        .events
        .iter()
        .find(|e| e.node == "client-1" && matches!(e.kind, EventKind::Acquired { .. }))
        .map(|e| e.at_us as f64 / 1000.0)
}

fn in_both_worlds(s: &Scenario, assert: impl Fn(&Outcome)) {
    for seed in 1..=5 {
        let run = lockcheck::Registry::new().run_sim(s, seed);
        assert(&Outcome::judge(s, Mode::Sim, seed, run.history));
    }
    let _turn = crate::real_turn();
    let history = lockcheck::Registry::new()
        .run_real(s, s.seed)
        .unwrap_or_else(|e| panic!("{e}"));
    assert(&Outcome::judge(s, Mode::Real, s.seed, history));
}

#[test]
fn the_late_client_waits_on_the_other_connection_and_never_gets_the_lock() {
    in_both_worlds(&bundled(), |o| {
        let h = o.history.render();
        assert_eq!(first_acquire_of_client_1(o), None, "{h}");
        assert!(h.contains("application transaction 1 began"), "{h}");
        assert!(h.contains("application transaction 1 committed"), "{h}");
        assert_eq!(o.checks["liveness"].verdict, Verdict::Violation, "{h}");
        assert_eq!(o.checks["mutual_exclusion"].verdict, Verdict::Safe, "{h}");
    });
}

#[test]
fn without_the_applications_transaction_the_late_client_inherits_the_lock() {
    let s = variant("app_transactions = [[300, 2000]]", "");
    in_both_worlds(&s, |o| {
        let h = o.history.render();
        let at = first_acquire_of_client_1(o).unwrap_or_else(|| panic!("{h}"));
        // Lent the dead holder's connection at its start (0.6 s): granted at once.
        assert!((600.0..1_100.0).contains(&at), "{at} ms\n{h}");
        assert_eq!(o.checks["liveness"].verdict, Verdict::Safe, "{h}");
    });
}

#[test]
fn a_short_server_lifetime_frees_the_stranded_lock_when_its_connection_comes_back() {
    let s = variant(
        "pool_size = 2\n",
        "pool_size = 2\nserver_lifetime_ms = 1000\n",
    );
    in_both_worlds(&s, |o| {
        let h = o.history.render();
        let at = first_acquire_of_client_1(o).unwrap_or_else(|| panic!("{h}"));
        // The application gives the connection back at 2.3 s, older than 1 s: closed then (or,
        // on real PgBouncer, by its next maintenance pass, within a second or so).
        assert!((2_300.0..3_500.0).contains(&at), "{at} ms\n{h}");
        assert!(
            o.history.events.iter().any(|e| e.node == "client-1"
                && matches!(e.kind, EventKind::AcquireStart)
                && e.at_us < 1_000_000),
            "{h}"
        );
    });
}
