//! A stopped database server (`SIGSTOP`, then `SIGCONT`): what a real MariaDB does, and that the
//! simulated server does the same.
//!
//! Observed on a spawned MariaDB (the real test below pins it):
//! - nothing is answered while it is stopped; a client that gives up closes its socket, but a
//!   statement it had sent is still read and run on `SIGCONT` (a `COMMIT` commits);
//! - InnoDB's lock-wait timeout is a deadline on the clock, not a count of running time: a wait
//!   whose deadline passed during the stop ends right at `SIGCONT` (it catches up), with 1205 or,
//!   when a `COMMIT` that also ran at `SIGCONT` freed the row first, with the row (a race between
//!   two server threads; the simulation runs the expired wait first).

use super::locks::real_conn;
use lockcheck::backend::mysql::real::server::{self as mariadb, MariaDb};
use lockcheck::backend::mysql::real::RealSqlConn;
use lockcheck::backend::mysql::sim::SharedEngine;
use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::real::RealEnv;
use lockcheck::scenario::Scenario;
use lockcheck::sql::{SqlConn, SqlError};
use lockcheck::Verdict;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const LOCK_WAIT_S: u64 = 2;
const PAUSE_AT: Duration = Duration::from_millis(500);
const PAUSE_FOR: Duration = Duration::from_millis(4000);

/// What a lock wait and a given-up `COMMIT` across a server pause came to.
#[derive(Debug)]
struct Observed {
    /// The waiter's locking read: its error code (`None`: it got the row) and when it answered,
    /// from the start of its wait.
    waiter_code: Option<u16>,
    waited: Duration,
    /// The value the given-up transaction wrote, read after the pause (1: it committed).
    value_after: i64,
    /// The holder's `COMMIT` as its client saw it.
    commit_failed: bool,
}

async fn observe(db: &MariaDb) -> Observed {
    let mut admin = real_conn(db).await;
    admin
        .execute("CREATE TABLE p (k INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    admin
        .execute("INSERT INTO p (k, v) VALUES (1, 0)")
        .await
        .unwrap();
    // The holder's client waits at most 1 s for an answer, then hangs up.
    let mut holder = RealSqlConn::connect(
        db.port(),
        mariadb::USER,
        mariadb::DATABASE,
        Duration::from_secs(1),
    )
    .await
    .unwrap();
    holder.begin().await.unwrap();
    holder
        .query("SELECT k FROM p WHERE k = 1 FOR UPDATE")
        .await
        .unwrap();
    holder
        .execute("UPDATE p SET v = 1 WHERE k = 1")
        .await
        .unwrap();
    let mut waiter = real_conn(db).await;
    waiter
        .execute(&format!(
            "SET SESSION innodb_lock_wait_timeout = {LOCK_WAIT_S}"
        ))
        .await
        .unwrap();
    waiter.begin().await.unwrap();
    let start = Instant::now();
    let waiting = tokio::spawn(async move {
        let r = waiter.query("SELECT k FROM p WHERE k = 1 FOR UPDATE").await;
        (r, start.elapsed())
    });
    tokio::time::sleep(PAUSE_AT).await;
    db.pause().unwrap();
    let commit_failed = holder.commit().await.is_err();
    drop(holder);
    tokio::time::sleep((PAUSE_AT + PAUSE_FOR).saturating_sub(start.elapsed())).await;
    db.resume().unwrap();
    let (r, waited) = waiting.await.unwrap();
    let waiter_code = match r {
        Ok(_) => None,
        Err(SqlError::Server { code, .. }) => Some(code),
        Err(e) => panic!("the waiter lost its connection: {e}"),
    };
    // Give the server a moment to read the holder's hang-up after its COMMIT.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rows = admin.query("SELECT v FROM p WHERE k = 1").await.unwrap();
    let value_after = match rows[0][0] {
        lockcheck::sql::Value::Int(v) => v,
        ref other => panic!("v is {other:?}"),
    };
    Observed {
        waiter_code,
        waited,
        value_after,
        commit_failed,
    }
}

#[test]
fn a_stopped_mariadb_runs_what_it_was_sent_and_its_lock_waits_catch_up() {
    let _turn = crate::mariadb_turn();
    let db = MariaDb::spawn().unwrap();
    let o = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(observe(&db));
    assert!(o.commit_failed, "{o:?}");
    assert_eq!(
        o.value_after, 1,
        "the COMMIT sent into the pause commits at SIGCONT: {o:?}"
    );
    // At SIGCONT two things are due at once: the waiter's deadline (2 s) passed during the stop,
    // and the holder's COMMIT, read from its socket, frees the row. Which one InnoDB handles first
    // is a race between two server threads: the waiter gets 1205 or the row (seen both ways on
    // this machine). Either way its wait ends right at SIGCONT (4.5 s), not 2 s of running time
    // later (6.5 s): the deadline did not stop with the server.
    assert!(
        matches!(o.waiter_code, None | Some(1205)),
        "the waiter ends with the row or 1205: {o:?}"
    );
    let resumed_at = PAUSE_AT + PAUSE_FOR;
    assert!(
        o.waited >= resumed_at && o.waited < resumed_at + Duration::from_millis(1000),
        "{o:?}"
    );
}

/// The simulated engine's side of the same observation: frozen, a lock wait neither ends nor
/// times out; thawed after its deadline, it fails with 1205 at once.
#[test]
fn a_frozen_simulated_engine_holds_its_lock_waits_and_they_catch_up_on_thaw() {
    let db = SharedEngine::new(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    });
    super::locks::block_on(async {
        let mut holder = db.connect(RealEnv::default());
        holder
            .execute("CREATE TABLE p (k INT PRIMARY KEY, v INT)")
            .await
            .unwrap();
        holder
            .execute("INSERT INTO p (k, v) VALUES (1, 0)")
            .await
            .unwrap();
        holder.begin().await.unwrap();
        holder
            .query("SELECT k FROM p WHERE k = 1 FOR UPDATE")
            .await
            .unwrap();
        let mut waiter = db.connect(RealEnv::default());
        waiter
            .execute("SET SESSION innodb_lock_wait_timeout = 1")
            .await
            .unwrap();
        waiter.begin().await.unwrap();
        let start = Instant::now();
        let waiting = tokio::spawn(async move {
            let r = waiter.query("SELECT k FROM p WHERE k = 1 FOR UPDATE").await;
            (r, start.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        db.freeze();
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(!waiting.is_finished(), "a frozen server failed a lock wait");
        db.thaw();
        let (r, waited) = waiting.await.unwrap();
        assert_eq!(r.unwrap_err().code(), Some(1205));
        // 1 s of lock wait from 0 s: the deadline passed during the freeze; 1205 comes at the
        // thaw (2.2 s), not after 1 s of unfrozen time (3.0 s).
        assert!(
            waited >= Duration::from_millis(2200) && waited < Duration::from_millis(2700),
            "{waited:?}"
        );
    });
}

fn bundled() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/mysql-insert-unique-server-pause.toml");
    Scenario::load(&path).unwrap()
}

/// The history of the bundled server-pause scenario, in either world: the pause and the resume
/// are recorded, no acquire succeeds in between or after (the INSERT given up on ran at
/// `SIGCONT` and its row blocks every retry), and the client's second acquire fails.
fn assert_stuck_by_its_own_insert(o: &Outcome) {
    let history = o.history.render();
    let faults: Vec<String> = o
        .history
        .events
        .iter()
        .filter(|e| e.node == "nemesis")
        .map(|e| format!("{:?}", e.kind))
        .collect();
    let paused = o
        .history
        .events
        .iter()
        .position(|e| format!("{:?}", e.kind).contains("mysql-0 paused for 2000 ms"))
        .unwrap_or_else(|| panic!("no pause in {faults:?}"));
    assert!(
        faults.iter().any(|f| f.contains("mysql-0 resumed")),
        "{faults:?}"
    );
    let acquired_after = o.history.events[paused..]
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Acquired { .. }))
        .count();
    assert_eq!(acquired_after, 0, "{history}");
    assert!(
        o.history.events[paused..]
            .iter()
            .any(|e| matches!(e.kind, EventKind::AcquireFailed { .. })),
        "{history}"
    );
    assert_eq!(
        o.checks["liveness"].verdict,
        Verdict::Violation,
        "{history}"
    );
    assert_eq!(o.verdict(), Verdict::Safe, "{history}");
}

#[test]
fn a_server_pause_leaves_the_insert_lock_stuck_in_simulation() {
    let s = bundled();
    for seed in 1..=5 {
        let o = Outcome::judge(
            &s,
            Mode::Sim,
            seed,
            lockcheck::Registry::new().run_sim(&s, seed).history,
        );
        assert_stuck_by_its_own_insert(&o);
    }
}

#[test]
fn a_server_pause_leaves_the_insert_lock_stuck_on_real_mariadb() {
    let _turn = crate::mariadb_turn();
    let s = bundled();
    let history = lockcheck::Registry::new().run_real(&s, s.seed).unwrap();
    let o = Outcome::judge(&s, Mode::Real, s.seed, history);
    assert!(
        o.history
            .events
            .iter()
            .any(|e| format!("{:?}", e.kind).contains("SIGSTOP")),
        "{}",
        o.history.render()
    );
    assert_stuck_by_its_own_insert(&o);
}

/// `node` on a pause names a server; only the MySQL server has a model of being stopped.
#[test]
fn a_server_pause_names_the_mysql_server_only() {
    let mysql = |fault: &str| {
        Scenario::parse(
            "pause.toml",
            &format!(
                "name = \"p\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"mysql-for-update\"\n\
                 [workload]\nclients = 2\n[[faults]]\nkind = \"pause\"\nat_ms = 10\nfor_ms = 100\n{fault}\n"
            ),
        )
    };
    let ok = mysql("node = \"mysql-0\"").unwrap();
    assert_eq!(
        ok.faults[0].kind,
        lockcheck::scenario::FaultKind::ServerPause {
            node: "mysql-0".into(),
            for_ms: 100
        }
    );
    let client = mysql("node = \"client-1\"").unwrap_err().to_string();
    assert!(
        client.contains("a client is paused with `client = 1`"),
        "{client}"
    );
    let both = mysql("node = \"mysql-0\"\nclient = 0")
        .unwrap_err()
        .to_string();
    assert!(both.contains("either `client`"), "{both}");
    let redis = Scenario::parse(
        "pause.toml",
        "name = \"p\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"set-nx-px\"\n\
         ttl_ms = 100\n[workload]\nclients = 2\n[[faults]]\nkind = \"pause\"\nnode = \"redis-0\"\n\
         at_ms = 10\nfor_ms = 100\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        redis.contains("a server pause is not modelled on Redis"),
        "{redis}"
    );
}

/// A for-update holder whose `COMMIT` goes into a 3 s server pause, with a 1 s response timeout.
fn commit_into_a_pause() -> Scenario {
    Scenario::parse(
        "commit-into-pause.toml",
        r#"
name = "mysql-for-update-commit-into-pause"
expect = "safe"
seed = 1
duration_ms = 6000

[lock]
kind = "mysql-for-update"
lock_wait_timeout_s = 1
wait_ms = 4000

[database]
request_timeout_ms = 1000

[workload]
clients = 1
cycles = 1
hold_ms = [100, 100]
think_ms = [0, 0]

[[faults]]
kind = "pause"
node = "mysql-0"
on = "before_release"
for_ms = 3000
"#,
    )
    .unwrap()
}

/// The `COMMIT` got no answer: it may still run when the server goes on (and does, as
/// `a_stopped_mariadb_runs_what_it_was_sent…` measured), so the release's outcome is unknown. It
/// must not be reported as "the lock was already lost" (`Released { deleted: false }`), which is
/// what a connection the server closed means.
fn assert_release_outcome_unknown(o: &Outcome) {
    let history = o.history.render();
    let released: Vec<&EventKind> = o
        .history
        .events
        .iter()
        .map(|e| &e.kind)
        .filter(|k| {
            matches!(
                k,
                EventKind::Released { .. } | EventKind::ReleaseFailed { .. }
            )
        })
        .collect();
    assert_eq!(released.len(), 1, "{history}");
    assert!(
        matches!(released[0], EventKind::ReleaseFailed { error } if error.contains("no answer")),
        "{history}"
    );
}

#[test]
fn a_commit_without_an_answer_is_an_unknown_release_in_simulation() {
    let s = commit_into_a_pause();
    let run = lockcheck::Registry::new().run_sim(&s, 1);
    assert_release_outcome_unknown(&Outcome::judge(&s, Mode::Sim, 1, run.history));
}

#[test]
fn a_commit_without_an_answer_is_an_unknown_release_on_real_mariadb() {
    let _turn = crate::mariadb_turn();
    let s = commit_into_a_pause();
    let history = lockcheck::Registry::new().run_real(&s, 1).unwrap();
    assert_release_outcome_unknown(&Outcome::judge(&s, Mode::Real, 1, history));
}
