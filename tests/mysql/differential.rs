//! Differential test: random sequences of the statements the locks use, on two or three
//! connections, run on the simulated engine and on a real MariaDB; same results, same error codes,
//! same statements left waiting for a lock.
//!
//! The engine is the oracle for *when* to look: if it says a statement finished, the real one gets
//! up to 5 s to finish; if it says the statement waits, the real connection must show up as
//! `LOCK WAIT` in `information_schema.INNODB_TRX` (polled slowly: InnoDB refreshes that table
//! only when it has not been read for 100 ms) and must not finish. Time only passes in `Wait`
//! steps (longer than `innodb_lock_wait_timeout`), so lock-wait timeouts land inside them on both.
//! Statements the engine refuses (outside its subset) are skipped on both sides.
//!
//! `LOCKCHECK_SQL_CASES` sets the number of cases (default 64).

use super::locks::{block_on, real_conn};
use lockcheck::backend::mysql::engine::{Engine, Step};
use lockcheck::backend::mysql::real::server::{self as mariadb, MariaDb};
use lockcheck::backend::mysql::real::RealSqlConn;
use lockcheck::sql::{Output, SqlConn, SqlError};
use mysql_async::prelude::Queryable;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

const LOCK_WAIT_S: u64 = 2;
const WAIT_MS: u64 = 2300;

#[derive(Clone, Debug)]
enum Op {
    Sql(usize, String),
    /// Time passes beyond the lock wait timeout.
    Wait,
    /// Connection `i` dies and is replaced.
    Reconnect(usize),
}

fn op(conns: usize) -> impl Strategy<Value = Op> {
    let conn = 0..conns;
    let sql = prop_oneof![
        2 => Just("BEGIN".to_string()),
        2 => Just("COMMIT".to_string()),
        1 => Just("ROLLBACK".to_string()),
        4 => (1..=2i64, prop_oneof![Just(""), Just(" NOWAIT"), Just(" SKIP LOCKED")])
            .prop_map(|(k, m)| format!("SELECT k, v FROM f WHERE k = {k} FOR UPDATE{m}")),
        2 => (1..=2i64, 0..5i64).prop_map(|(k, v)| format!("UPDATE f SET v = {v} WHERE k = {k}")),
        4 => (1..=3i64, prop_oneof![Just("a"), Just("b")], 1..=3i64)
            .prop_map(|(k, o, u)| format!("INSERT INTO t (k, owner, u) VALUES ({k}, '{o}', {u})")),
        2 => (1..=3i64, prop_oneof![Just("a"), Just("b")])
            .prop_map(|(k, o)| format!("DELETE FROM t WHERE k = {k} AND owner = '{o}'")),
        1 => (1..=4i64).prop_map(|u| format!("DELETE FROM t WHERE u < {u}")),
        2 => Just("SELECT k, owner, u FROM t".to_string()),
        1 => Just("SELECT k, v FROM f".to_string()),
    ];
    prop_oneof![
        20 => (conn.clone(), sql).prop_map(|(c, s)| Op::Sql(c, s)),
        1 => Just(Op::Wait),
        1 => conn.prop_map(Op::Reconnect),
    ]
}

const SCHEMA: [&str; 2] = [
    "CREATE TABLE f (k INT PRIMARY KEY, v INT)",
    // No unique secondary key: InnoDB's duplicate check there locks the neighbouring record,
    // which the engine does not model (the locks use the primary key only).
    "CREATE TABLE t (k INT NOT NULL, owner VARCHAR(8), u INT, PRIMARY KEY (k))",
];
const RESET: [&str; 3] = [
    "DELETE FROM t",
    "DELETE FROM f",
    "INSERT INTO f (k, v) VALUES (1, 10), (2, 20)",
];

/// What a statement produced, comparable across the two databases.
fn outcome(r: &Result<Output, SqlError>) -> String {
    match r {
        Ok(Output::Rows(rows)) => format!("rows {rows:?}"),
        Ok(Output::Affected(n)) => format!("affected {n}"),
        Err(e) => match e.code() {
            Some(c) => format!("error {c}"),
            None => format!("error {e}"),
        },
    }
}

type Running = JoinHandle<(RealSqlConn, Result<Output, SqlError>)>;

struct RealSide {
    conns: Vec<Option<RealSqlConn>>,
    ids: Vec<u32>,
    running: Vec<Option<Running>>,
    control: mysql_async::Conn,
}

fn run_real(mut conn: RealSqlConn, sql: String) -> Running {
    tokio::spawn(async move {
        let r = if sql.starts_with("SELECT") {
            conn.query(&sql).await.map(Output::Rows)
        } else {
            conn.execute(&sql).await.map(Output::Affected)
        };
        (conn, r)
    })
}

impl RealSide {
    async fn lock_waiting(&mut self, i: usize) -> bool {
        let ids: Vec<u64> = self
            .control
            .query("SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
            .await
            .unwrap();
        ids.contains(&(self.ids[i] as u64))
    }

    /// Waits for connection `i`'s statement to finish (up to 5 s).
    async fn finish(&mut self, i: usize) -> String {
        let handle = self.running[i].take().expect("running");
        let (conn, r) = tokio::time::timeout(Duration::from_secs(5), handle)
            .await
            .unwrap_or_else(|_| panic!("real connection {i} did not finish"))
            .unwrap();
        self.conns[i] = Some(conn);
        outcome(&r)
    }

    /// Checks that connection `i`'s statement waits for a lock (and has not finished).
    async fn check_waiting(&mut self, i: usize) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if self.running[i].as_ref().unwrap().is_finished() {
                let got = self.finish(i).await;
                return Err(format!(
                    "connection {i}: engine waits, MariaDB answered {got}"
                ));
            }
            if self.lock_waiting(i).await {
                return Ok(());
            }
            if start.elapsed() > Duration::from_secs(5) {
                return Err(format!("connection {i}: neither finished nor in LOCK WAIT"));
            }
            // InnoDB refreshes INNODB_TRX only when it has not been read for 100 ms: polling
            // faster would keep reading a stale snapshot.
            tokio::time::sleep(Duration::from_millis(120)).await;
        }
    }
}

async fn run_case(port: u16, ops: Vec<Op>, conns: usize) -> Result<(), String> {
    let mut engine = Engine::new();
    let mut now = 0u64;
    let setup = engine.connect(now);
    for sql in SCHEMA.iter().chain(&RESET[2..]) {
        assert!(matches!(engine.execute(setup, sql, now), Step::Done(Ok(_))));
    }
    let mut control = mysql_async::Conn::new(
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some(mariadb::USER))
            .db_name(Some(mariadb::DATABASE)),
    )
    .await
    .unwrap();
    for sql in RESET {
        control.query_drop(sql).await.unwrap();
    }
    let timeout_sql = format!("SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}");
    let mut sessions = Vec::new();
    let mut real = RealSide {
        conns: Vec::new(),
        ids: Vec::new(),
        running: Vec::new(),
        control,
    };
    let db = FakeDb { port };
    for _ in 0..conns {
        let s = engine.connect(now);
        assert!(matches!(
            engine.execute(s, &timeout_sql, now),
            Step::Done(Ok(_))
        ));
        sessions.push(s);
        let (c, id) = db.open(&timeout_sql).await;
        real.conns.push(Some(c));
        real.ids.push(id);
        real.running.push(None);
    }
    let mut log = Vec::new();
    for op in ops {
        log.push(format!("{op:?}"));
        let done = match op {
            Op::Sql(i, sql) => {
                if engine.is_waiting(sessions[i]) {
                    continue;
                }
                match engine.execute(sessions[i], &sql, now) {
                    Step::Done(Err(SqlError::Unsupported(_))) => continue,
                    Step::Done(r) => {
                        let conn = real.conns[i].take().unwrap();
                        real.running[i] = Some(run_real(conn, sql));
                        let got = real.finish(i).await;
                        if got != outcome(&r) {
                            return Err(format!("{log:?}: engine {}, MariaDB {got}", outcome(&r)));
                        }
                    }
                    Step::Blocked => {
                        let conn = real.conns[i].take().unwrap();
                        real.running[i] = Some(run_real(conn, sql));
                        real.check_waiting(i)
                            .await
                            .map_err(|e| format!("{log:?}: {e}"))?;
                    }
                }
                engine.wake(now)
            }
            Op::Wait => {
                tokio::time::sleep(Duration::from_millis(WAIT_MS)).await;
                now += WAIT_MS;
                engine.wake(now)
            }
            Op::Reconnect(i) => {
                if let Some(h) = real.running[i].take() {
                    h.abort();
                }
                real.conns[i] = None;
                engine.disconnect(sessions[i]);
                let s = engine.connect(now);
                assert!(matches!(
                    engine.execute(s, &timeout_sql, now),
                    Step::Done(Ok(_))
                ));
                sessions[i] = s;
                let (c, id) = db.open(&timeout_sql).await;
                real.conns[i] = Some(c);
                real.ids[i] = id;
                // The server notices the closed socket asynchronously; wait until it rolled back.
                tokio::time::sleep(Duration::from_millis(100)).await;
                engine.wake(now)
            }
        };
        for (s, r) in done {
            let i = sessions.iter().position(|x| *x == s).unwrap();
            if let Err(SqlError::Unsupported(_)) = r {
                // A statement that waited left the subset when it re-ran (its row vanished, so
                // InnoDB took a gap lock): the states may differ from here on, so the case ends.
                for h in real.running.iter_mut().filter_map(Option::take) {
                    h.abort();
                }
                return Ok(());
            }
            let got = real.finish(i).await;
            if got != outcome(&r) {
                return Err(format!(
                    "{log:?}: woken connection {i}: engine {}, MariaDB {got}",
                    outcome(&r)
                ));
            }
        }
        // Still waiting on both sides (checked in INNODB_TRX when the wait began).
        for (i, s) in sessions.iter().enumerate() {
            let finished = real.running[i].as_ref().is_some_and(|h| h.is_finished());
            if engine.is_waiting(*s) && finished {
                let got = real.finish(i).await;
                return Err(format!(
                    "{log:?}: connection {i}: engine waits, MariaDB answered {got}"
                ));
            }
        }
    }
    for h in real.running.iter_mut().filter_map(Option::take) {
        h.abort();
    }
    Ok(())
}

struct FakeDb {
    port: u16,
}

impl FakeDb {
    async fn open(&self, timeout_sql: &str) -> (RealSqlConn, u32) {
        let mut c = RealSqlConn::connect(
            self.port,
            mariadb::USER,
            mariadb::DATABASE,
            Duration::from_secs(30),
        )
        .await
        .unwrap();
        c.execute(timeout_sql).await.unwrap();
        let id = c.connection_id().await.unwrap();
        (c, id)
    }
}

#[test]
fn simulated_innodb_matches_mariadb() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        let mut c = real_conn(&db).await;
        for sql in SCHEMA {
            c.execute(sql).await.unwrap();
        }
    });
    let cases = std::env::var("LOCKCHECK_SQL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut runner = TestRunner::new(crate::common::fixed_seed_config(cases));
    let strategy =
        (2usize..=3).prop_flat_map(|n| (Just(n), proptest::collection::vec(op(n), 1..14)));
    let port = db.port();
    let result = runner.run(&strategy, |(n, ops)| {
        block_on(run_case(port, ops, n)).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Sequences that once told the two databases apart, kept as regression cases.
#[test]
fn regression_sequences() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    block_on(async {
        let mut c = real_conn(&db).await;
        for sql in SCHEMA {
            c.execute(sql).await.unwrap();
        }
    });
    let sql = |i, s: &str| Op::Sql(i, s.to_string());
    // Waits that begin after an idle period: INNODB_TRX must be read fresh to see them.
    let idle_then_wait = vec![
        sql(0, "BEGIN"),
        Op::Wait,
        sql(0, "INSERT INTO t (k, owner, u) VALUES (3, 'a', 1)"),
        Op::Wait,
        sql(2, "INSERT INTO t (k, owner, u) VALUES (3, 'b', 2)"),
    ];
    let held_long = vec![
        sql(0, "BEGIN"),
        sql(0, "SELECT k, v FROM f WHERE k = 1 FOR UPDATE"),
        Op::Wait,
        sql(2, "SELECT k, v FROM f"),
        sql(2, "UPDATE f SET v = 3 WHERE k = 1"),
    ];
    let waiter_idle = vec![
        Op::Wait,
        sql(0, "BEGIN"),
        sql(0, "SELECT k, v FROM f WHERE k = 1 FOR UPDATE"),
        sql(2, "UPDATE f SET v = 3 WHERE k = 1"),
    ];
    // A duplicate-key INSERT in a transaction takes next-key locks: refused by the engine, skipped.
    let duplicate_keeps_shared_lock = vec![
        sql(0, "INSERT INTO t (k, owner, u) VALUES (1, 'a', 1)"),
        sql(1, "BEGIN"),
        sql(1, "INSERT INTO t (k, owner, u) VALUES (1, 'a', 1)"),
        sql(0, "DELETE FROM t WHERE k = 1 AND owner = 'a'"),
    ];
    // A full scan meets a row another open transaction deleted: MariaDB waits for that
    // transaction's lock (and fails with 1205), it does not skip the row.
    let scan_meets_uncommitted_delete = vec![
        sql(1, "BEGIN"),
        sql(2, "INSERT INTO t (k, owner, u) VALUES (2, 'a', 1)"),
        sql(1, "DELETE FROM t WHERE k = 2 AND owner = 'a'"),
        sql(0, "DELETE FROM t WHERE u < 1"),
    ];
    for case in [
        idle_then_wait,
        held_long,
        waiter_idle,
        duplicate_keeps_shared_lock,
        scan_meets_uncommitted_delete,
    ] {
        block_on(run_case(db.port(), case, 3)).unwrap();
    }
}
