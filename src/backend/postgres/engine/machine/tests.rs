//! The simulated server's rules, one behaviour per test (each also checked against a real
//! server by `tests/postgres/differential.rs`).

use super::*;

fn done(step: Step) -> Result<Vec<Row>, PgError> {
    match step {
        Step::Done(r) => r,
        Step::Blocked => panic!("blocked"),
    }
}

fn text(step: Step) -> String {
    done(step).unwrap()[0][0].clone().unwrap()
}

#[test]
fn an_unlock_of_a_lock_not_held_answers_f_and_the_session_keeps_the_rest() {
    let mut e = Engine::new(Settings::default());
    let (a, b) = (e.connect(0), e.connect(0));
    assert_eq!(text(e.execute(a, "SELECT pg_advisory_lock(5)", 0)), "");
    assert_eq!(text(e.execute(a, "SELECT pg_advisory_lock(5)", 0)), "");
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(5)", 0)), "f");
    assert_eq!(text(e.execute(b, "SELECT pg_advisory_unlock(5)", 0)), "f");
    assert_eq!(text(e.execute(a, "SELECT pg_advisory_unlock(5)", 0)), "t");
    // Two locks, one unlock: still held (wolverine#2691).
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(5)", 0)), "f");
    assert_eq!(text(e.execute(a, "SELECT pg_advisory_unlock_all()", 0)), "");
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(5)", 0)), "t");
}

#[test]
fn a_waiter_is_granted_when_the_holder_unlocks_or_times_out() {
    let mut e = Engine::new(Settings::default());
    let (a, b, c) = (e.connect(0), e.connect(0), e.connect(0));
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    assert_eq!(e.execute(b, "SELECT pg_advisory_lock(1)", 0), Step::Blocked);
    done(e.execute(c, "SET lock_timeout = 100", 0)).unwrap();
    assert_eq!(e.execute(c, "SELECT pg_advisory_lock(1)", 0), Step::Blocked);
    assert_eq!(e.next_deadline(), Some(100));
    let w = e.wake(100);
    assert_eq!(w.finished.len(), 1);
    assert_eq!(w.finished[0].0, c);
    assert_eq!(
        w.finished[0].1.as_ref().unwrap_err().sqlstate(),
        Some(LOCK_NOT_AVAILABLE)
    );
    e.execute(a, "SELECT pg_advisory_unlock(1)", 150);
    let w = e.wake(150);
    assert_eq!(w.finished, vec![(b, Ok(one("")))]);
}

#[test]
fn a_terminated_session_frees_its_locks_and_its_client_hears_it_next() {
    let mut e = Engine::new(Settings::default());
    let (a, b) = (e.connect(0), e.connect(0));
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    let pid = text(e.execute(a, "SELECT pg_backend_pid()", 0));
    assert_eq!(e.execute(b, "SELECT pg_advisory_lock(1)", 0), Step::Blocked);
    assert_eq!(
        text(e.execute(b, "SELECT pg_terminate_backend(999999)", 0)),
        "f"
    );
    let other = e.connect(0);
    assert_eq!(
        text(e.execute(other, &format!("SELECT pg_terminate_backend({pid})"), 1)),
        "t"
    );
    assert_eq!(e.wake(1).finished, vec![(b, Ok(one("")))]);
    let next = done(e.execute(a, "SELECT pg_advisory_unlock(1)", 2)).unwrap_err();
    assert!(next.session_gone(), "{next}");
    // A waiting victim hears the FATAL as its statement's answer.
    assert_eq!(
        e.execute(a, "SELECT 1", 3),
        Step::Done(Err(PgError::ConnectionLost("no such session".into())))
    );
    assert_eq!(
        e.execute(other, "SELECT pg_advisory_lock(1)", 3),
        Step::Blocked
    );
    e.terminate(other);
    let w = e.wake(3);
    assert_eq!(w.finished[0].0, other);
    assert_eq!(
        w.finished[0].1.as_ref().unwrap_err().sqlstate(),
        Some(ADMIN_SHUTDOWN)
    );
}

#[test]
fn transaction_locks_end_with_the_transaction_and_session_locks_survive_a_rollback() {
    let mut e = Engine::new(Settings::default());
    let (a, b) = (e.connect(0), e.connect(0));
    done(e.execute(a, "BEGIN", 0)).unwrap();
    e.execute(a, "SELECT pg_advisory_xact_lock(1)", 0);
    e.execute(a, "SELECT pg_advisory_lock(2)", 0);
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(1)", 0)), "f");
    // An xact lock cannot be unlocked.
    assert_eq!(text(e.execute(a, "SELECT pg_advisory_unlock(1)", 0)), "f");
    done(e.execute(a, "ROLLBACK", 0)).unwrap();
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(1)", 0)), "t");
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(2)", 0)), "f");
    // In autocommit an xact lock ends with its statement.
    e.execute(a, "SELECT pg_advisory_xact_lock(3)", 0);
    assert_eq!(text(e.execute(b, "SELECT pg_try_advisory_lock(3)", 0)), "t");
}

#[test]
fn an_error_aborts_the_transaction_until_it_ends() {
    let mut e = Engine::new(Settings::default());
    let (a, b) = (e.connect(0), e.connect(0));
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    done(e.execute(b, "BEGIN", 0)).unwrap();
    done(e.execute(b, "SET lock_timeout = 10", 0)).unwrap();
    assert_eq!(
        e.execute(b, "SELECT pg_advisory_xact_lock(1)", 0),
        Step::Blocked
    );
    e.wake(10);
    let err = done(e.execute(b, "SELECT pg_try_advisory_lock(2)", 11)).unwrap_err();
    assert_eq!(err.sqlstate(), Some(IN_FAILED_TRANSACTION));
    done(e.execute(b, "COMMIT", 12)).unwrap();
    // The rollback restored the timeout set inside the transaction.
    assert_eq!(
        text(e.execute(b, "SELECT pg_try_advisory_lock(2)", 13)),
        "t"
    );
    assert_eq!(
        done(e.execute(b, "BEGIN", 13))
            .and_then(|_| done(e.execute(b, "DISCARD ALL", 13)))
            .unwrap_err()
            .sqlstate(),
        Some(ACTIVE_SQL_TRANSACTION)
    );
}

#[test]
fn idle_sessions_end_after_their_timeouts() {
    let mut e = Engine::new(Settings {
        idle_session_timeout_ms: 100,
        idle_in_transaction_timeout_ms: 50,
        ..Settings::default()
    });
    let (a, b) = (e.connect(0), e.connect(0));
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    done(e.execute(b, "BEGIN", 0)).unwrap();
    assert_eq!(e.next_deadline(), Some(50));
    let w = e.wake(50);
    assert_eq!(w.ended.len(), 1);
    assert_eq!(w.ended[0].1.sqlstate(), Some(IDLE_IN_TRANSACTION_TIMEOUT));
    let w = e.wake(100);
    assert_eq!(w.ended[0].1.sqlstate(), Some(IDLE_SESSION_TIMEOUT));
    assert!(e.holders(Key::Big(1)).is_empty());
}

#[test]
fn a_crash_or_a_promotion_keeps_sequences_ahead_and_no_lock() {
    let mut e = Engine::new(Settings::default());
    let a = e.connect(0);
    done(e.execute(a, "CREATE SEQUENCE IF NOT EXISTS f", 0)).unwrap();
    assert_eq!(text(e.execute(a, "SELECT nextval('f')", 0)), "1");
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    let mut standby = e.promoted_standby();
    let b = standby.connect(0);
    assert_eq!(
        text(standby.execute(b, "SELECT pg_try_advisory_lock(1)", 0)),
        "t"
    );
    assert!(
        text(standby.execute(b, "SELECT nextval('f')", 0))
            .parse::<i64>()
            .unwrap()
            > 1
    );
    e.crash();
    let c = e.connect(0);
    assert!(
        text(e.execute(c, "SELECT nextval('f')", 0))
            .parse::<i64>()
            .unwrap()
            > 2
    );
    assert_eq!(text(e.execute(c, "SELECT pg_try_advisory_lock(1)", 0)), "t");
}

#[test]
fn two_sessions_waiting_on_each_other_get_a_deadlock_error() {
    let mut e = Engine::new(Settings::default());
    let (a, b) = (e.connect(0), e.connect(0));
    e.execute(a, "SELECT pg_advisory_lock(1)", 0);
    e.execute(b, "SELECT pg_advisory_lock(2)", 0);
    assert_eq!(e.execute(a, "SELECT pg_advisory_lock(2)", 0), Step::Blocked);
    assert_eq!(e.execute(b, "SELECT pg_advisory_lock(1)", 0), Step::Blocked);
    let w = e.wake(1000);
    let failed: Vec<_> = w.finished.iter().filter(|(_, r)| r.is_err()).collect();
    assert_eq!(failed.len(), 1, "{w:?}");
    assert_eq!(
        failed[0].1.as_ref().unwrap_err().sqlstate(),
        Some(DEADLOCK_DETECTED)
    );
    // The victim's statement fails, but its session lock stays (an error releases no
    // session lock): the other still waits until it is unlocked.
    let victim = failed[0].0;
    let survivor = if victim == a { b } else { a };
    assert_eq!(w.finished.len(), 1, "{w:?}");
    let held = if victim == a { 1 } else { 2 };
    e.execute(victim, &format!("SELECT pg_advisory_unlock({held})"), 1001);
    assert_eq!(e.wake(1001).finished, vec![(survivor, Ok(one("")))]);
}
