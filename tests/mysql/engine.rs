//! The simulated InnoDB subset on its own: duplicate keys, lock waits and their timeout, rollback
//! when a connection dies, deadlock detection, and clear refusals outside the subset.

use lockcheck::backend::mysql::engine::{Engine, Step};
use lockcheck::sql::{Output, SqlError, Value};

fn ok(step: Step) -> Output {
    match step {
        Step::Done(Ok(o)) => o,
        other => panic!("expected success, got {other:?}"),
    }
}

fn code(step: Step) -> u16 {
    match step {
        Step::Done(Err(e)) => e.code().unwrap_or_else(|| panic!("no code: {e}")),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A server with `f` (rows 1 and 2, for locking reads) and `t` (empty, with a unique column).
fn server() -> (Engine, u64, u64) {
    let mut e = Engine::new();
    let a = e.connect(0);
    let b = e.connect(0);
    ok(e.execute(a, "CREATE TABLE f (k INT PRIMARY KEY, v INT)", 0));
    ok(e.execute(
        a,
        "CREATE TABLE t (k INT NOT NULL, owner VARCHAR(8), u INT, PRIMARY KEY (k), UNIQUE KEY (u))",
        0,
    ));
    ok(e.execute(a, "INSERT INTO f (k, v) VALUES (1, 10), (2, 20)", 0));
    (e, a, b)
}

#[test]
fn duplicate_primary_and_unique_keys_are_1062() {
    let (mut e, a, b) = server();
    assert_eq!(
        ok(e.execute(a, "INSERT INTO t (k, owner, u) VALUES (1, 'a', 7)", 0)),
        Output::Affected(1)
    );
    assert_eq!(
        code(e.execute(b, "INSERT INTO t (k, owner, u) VALUES (1, 'b', 8)", 0)),
        1062
    );
    assert_eq!(
        code(e.execute(b, "INSERT INTO t (k, owner, u) VALUES (2, 'b', 7)", 0)),
        1062
    );
    assert_eq!(
        ok(e.execute(b, "SELECT k, owner FROM t", 0)),
        Output::Rows(vec![vec![Value::Int(1), Value::Str("a".into())]])
    );
}

#[test]
fn lock_wait_fails_with_1205_exactly_at_the_timeout() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 0));
    ok(e.execute(b, "SET SESSION innodb_lock_wait_timeout = 2", 0));
    ok(e.execute(b, "BEGIN", 0));
    assert_eq!(
        e.execute(b, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 100),
        Step::Blocked
    );
    assert_eq!(e.next_deadline(), Some(2100));
    assert!(e.wake(2099).is_empty());
    let done = e.wake(2100);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].0, b);
    assert_eq!(done[0].1.as_ref().unwrap_err().code(), Some(1205));
    // The other row is free: the transaction survived the timeout.
    assert!(matches!(
        e.execute(b, "SELECT k FROM f WHERE k = 2 FOR UPDATE", 2200),
        Step::Done(Ok(_))
    ));
}

#[test]
fn commit_hands_the_row_to_the_first_waiter() {
    let (mut e, a, b) = server();
    let c = e.connect(0);
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 0));
    ok(e.execute(b, "BEGIN", 0));
    ok(e.execute(c, "BEGIN", 0));
    assert_eq!(
        e.execute(b, "SELECT v FROM f WHERE k = 1 FOR UPDATE", 1),
        Step::Blocked
    );
    assert_eq!(
        e.execute(c, "SELECT v FROM f WHERE k = 1 FOR UPDATE", 2),
        Step::Blocked
    );
    ok(e.execute(a, "UPDATE f SET v = 11 WHERE k = 1", 3));
    ok(e.execute(a, "COMMIT", 4));
    let done = e.wake(5);
    assert_eq!(
        done,
        vec![(b, Ok(Output::Rows(vec![vec![Value::Int(11)]])))]
    );
    assert!(e.is_waiting(c));
}

#[test]
fn nowait_and_skip_locked_do_not_wait() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 0));
    ok(e.execute(b, "BEGIN", 0));
    assert_eq!(
        code(e.execute(b, "SELECT k FROM f WHERE k = 1 FOR UPDATE NOWAIT", 0)),
        1205
    );
    assert_eq!(
        ok(e.execute(b, "SELECT k FROM f WHERE k = 1 FOR UPDATE SKIP LOCKED", 0)),
        Output::Rows(vec![])
    );
}

#[test]
fn a_dead_connection_is_rolled_back_and_its_waiter_proceeds() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "INSERT INTO t (k, owner, u) VALUES (5, 'a', 5)", 0));
    // The duplicate check waits for the open transaction: it may still roll back.
    assert_eq!(
        e.execute(b, "INSERT INTO t (k, owner, u) VALUES (5, 'b', 6)", 1),
        Step::Blocked
    );
    e.disconnect(a);
    assert_eq!(e.wake(2), vec![(b, Ok(Output::Affected(1)))]);
    let c = e.connect(3);
    assert_eq!(
        ok(e.execute(c, "SELECT owner FROM t WHERE k = 5", 3)),
        Output::Rows(vec![vec![Value::Str("b".into())]])
    );
}

#[test]
fn a_committed_insert_makes_the_waiter_fail_with_1062() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "INSERT INTO t (k, owner, u) VALUES (5, 'a', 5)", 0));
    assert_eq!(
        e.execute(b, "INSERT INTO t (k, owner, u) VALUES (5, 'b', 6)", 1),
        Step::Blocked
    );
    ok(e.execute(a, "COMMIT", 2));
    let done = e.wake(2);
    assert_eq!(done[0].1.as_ref().unwrap_err().code(), Some(1062));
}

#[test]
fn wait_timeout_kills_an_idle_session_and_releases_its_lock() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(a, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 0));
    ok(e.execute(b, "BEGIN", 10_000));
    assert_eq!(
        e.execute(b, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 10_000),
        Step::Blocked
    );
    assert_eq!(e.reap_idle(19_999, 20_000), Vec::<u64>::new());
    assert_eq!(e.reap_idle(28_000, 20_000), vec![a]);
    assert!(!e.is_connected(a));
    assert!(matches!(e.wake(28_000).as_slice(), [(s, Ok(_))] if *s == b));
}

#[test]
fn a_cycle_of_waits_is_a_deadlock_and_the_requester_is_rolled_back() {
    let (mut e, a, b) = server();
    ok(e.execute(a, "BEGIN", 0));
    ok(e.execute(b, "BEGIN", 0));
    ok(e.execute(a, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 0));
    ok(e.execute(b, "SELECT k FROM f WHERE k = 2 FOR UPDATE", 0));
    assert_eq!(
        e.execute(a, "SELECT k FROM f WHERE k = 2 FOR UPDATE", 1),
        Step::Blocked
    );
    assert_eq!(
        code(e.execute(b, "SELECT k FROM f WHERE k = 1 FOR UPDATE", 2)),
        1213
    );
    // b's transaction is gone, so a gets row 2.
    assert!(matches!(e.wake(3).as_slice(), [(s, Ok(_))] if *s == a));
}

#[test]
fn statements_outside_the_subset_are_refused_by_name() {
    let (mut e, a, _) = server();
    for sql in [
        "SELECT * FROM f JOIN t ON f.k = t.k",
        "SELECT COUNT(*) FROM f",
        "DELETE FROM f WHERE k = 1 OR k = 2",
        "INSERT INTO t (k, u) SELECT k, v FROM f",
    ] {
        match e.execute(a, sql, 0) {
            Step::Done(Err(SqlError::Unsupported(why))) => assert!(why.contains(sql), "{why}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    ok(e.execute(a, "BEGIN", 0));
    assert!(matches!(
        e.execute(a, "SELECT * FROM f", 0),
        Step::Done(Err(SqlError::Unsupported(_)))
    ));
    assert_eq!(code(e.execute(a, "SELEC 1", 0)), 1064);
}
