//! The simulated PostgreSQL against a real one: random sequences of advisory-lock statements
//! from three sessions (both key forms, both modes, both scopes, blocking waits that time out,
//! transactions that fail, `DISCARD ALL`, terminations) run on the engine and on the shared
//! spawned primary, statement by statement, and every answer must agree: the same rows, the
//! same SQLSTATE, or the session gone on both.
//!
//! 10^4 sequences by default (`LOCKCHECK_PG_DIFF_CASES=100000` for 10^5); the proptest seed is
//! fixed, so a divergence is the same divergence on every run, shrunk to its shortest sequence.

use crate::{connect, primary};
use lockcheck::backend::postgres::engine::{Engine, Settings, Step};
use lockcheck::backend::postgres::real::RealPgConn;
use lockcheck::backend::postgres::seam::{PgClient, PgError, Row};
use proptest::prelude::*;
use std::time::{Duration, Instant};

/// Sessions per sequence.
const SESSIONS: usize = 3;
/// Every session's `lock_timeout`: a blocked lock fails fast, and both sides agree it fails
/// (in a sequence nobody else moves while one statement waits).
const LOCK_TIMEOUT_MS: u64 = 1;

#[derive(Clone, Debug)]
enum Op {
    /// `pg_[try_]advisory_[xact_]lock[_shared](key)` on session `s`.
    Lock {
        s: usize,
        key: usize,
        shared: bool,
        xact: bool,
        try_only: bool,
    },
    Unlock {
        s: usize,
        key: usize,
        shared: bool,
    },
    UnlockAll(usize),
    Begin(usize),
    Commit(usize),
    Rollback(usize),
    Discard(usize),
    /// An admin session terminates session `s`.
    Terminate(usize),
}

/// The keys drawn from: two bigint keys and a two-int key (a key space of its own).
const KEYS: [&str; 3] = ["1", "2", "0, 1"];

fn op() -> impl Strategy<Value = Op> {
    let s = 0..SESSIONS;
    prop_oneof![
        8 => (s.clone(), 0..KEYS.len(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(s, key, shared, xact, try_only)| Op::Lock { s, key, shared, xact, try_only }
        ),
        5 => (s.clone(), 0..KEYS.len(), any::<bool>()).prop_map(|(s, key, shared)| Op::Unlock { s, key, shared }),
        1 => s.clone().prop_map(Op::UnlockAll),
        2 => s.clone().prop_map(Op::Begin),
        1 => s.clone().prop_map(Op::Commit),
        1 => s.clone().prop_map(Op::Rollback),
        1 => s.clone().prop_map(Op::Discard),
        1 => s.prop_map(Op::Terminate),
    ]
}

fn sql(op: &Op) -> Option<String> {
    Some(match op {
        Op::Lock {
            key,
            shared,
            xact,
            try_only,
            ..
        } => format!(
            "SELECT pg_{}advisory_{}lock{}({})",
            if *try_only { "try_" } else { "" },
            if *xact { "xact_" } else { "" },
            if *shared { "_shared" } else { "" },
            KEYS[*key]
        ),
        Op::Unlock { key, shared, .. } => format!(
            "SELECT pg_advisory_unlock{}({})",
            if *shared { "_shared" } else { "" },
            KEYS[*key]
        ),
        Op::UnlockAll(_) => "SELECT pg_advisory_unlock_all()".into(),
        Op::Begin(_) => "BEGIN".into(),
        Op::Commit(_) => "COMMIT".into(),
        Op::Rollback(_) => "ROLLBACK".into(),
        // `DISCARD ALL` resets `lock_timeout` too: set again at once (in both worlds), so a
        // later wait still times out rather than waits forever.
        Op::Discard(_) => "DISCARD ALL".into(),
        Op::Terminate(_) => return None,
    })
}

fn session(op: &Op) -> usize {
    match op {
        Op::Lock { s, .. } | Op::Unlock { s, .. } => *s,
        Op::UnlockAll(s)
        | Op::Begin(s)
        | Op::Commit(s)
        | Op::Rollback(s)
        | Op::Discard(s)
        | Op::Terminate(s) => *s,
    }
}

/// What both sides must agree on.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Answer {
    Rows(Vec<Row>),
    Error(String),
    /// The session is gone (terminated): a `FATAL` or a closed connection.
    Gone,
    /// The admin's `pg_terminate_backend` answered.
    Terminated(bool),
}

fn answer(r: Result<Vec<Row>, PgError>) -> Answer {
    match r {
        Ok(rows) => Answer::Rows(rows),
        Err(e) if e.session_gone() => Answer::Gone,
        Err(e) => Answer::Error(e.sqlstate().unwrap_or("?").to_string()),
    }
}

/// The engine's side: its sessions and a clock that moves past every lock timeout.
struct Sim {
    engine: Engine,
    sessions: Vec<u64>,
    now: u64,
}

impl Sim {
    fn new() -> Sim {
        let mut engine = Engine::new(Settings::default());
        let sessions = (0..SESSIONS).map(|_| Sim::open(&mut engine)).collect();
        Sim {
            engine,
            sessions,
            now: 0,
        }
    }

    fn open(engine: &mut Engine) -> u64 {
        let s = engine.connect(0);
        let set = format!("SET lock_timeout = {LOCK_TIMEOUT_MS}");
        assert_eq!(engine.execute(s, &set, 0), Step::Done(Ok(Vec::new())));
        s
    }

    fn run(&mut self, op: &Op) -> Answer {
        let s = session(op);
        self.now += 10;
        let Some(sql) = sql(op) else {
            let pid = self.engine.pid(self.sessions[s]);
            let done = pid.is_some() && self.engine.terminate(self.sessions[s]);
            self.engine.wake(self.now);
            return Answer::Terminated(done);
        };
        let out = match self.engine.execute(self.sessions[s], &sql, self.now) {
            Step::Done(r) => answer(r),
            Step::Blocked => {
                self.now += LOCK_TIMEOUT_MS;
                let w = self.engine.wake(self.now);
                let (_, r) = w
                    .finished
                    .clone()
                    .into_iter()
                    .find(|(id, _)| *id == self.sessions[s])
                    .unwrap_or_else(|| panic!("a blocked statement times out: {sql} {w:?}"));
                answer(r)
            }
        };
        self.engine.wake(self.now);
        if out == Answer::Gone {
            self.sessions[s] = Sim::open(&mut self.engine);
        }
        if matches!(op, Op::Discard(_)) && out == Answer::Rows(Vec::new()) {
            let set = format!("SET lock_timeout = {LOCK_TIMEOUT_MS}");
            let again = self.engine.execute(self.sessions[s], &set, self.now);
            assert_eq!(again, Step::Done(Ok(Vec::new())));
        }
        out
    }
}

/// The real side: three sessions on the shared primary, and an admin session.
struct Real {
    sessions: Vec<RealPgConn>,
    pids: Vec<String>,
    admin: RealPgConn,
}

async fn open() -> (RealPgConn, String) {
    let mut c = connect(&primary().conninfo()).await;
    c.simple_query(&format!("SET lock_timeout = {LOCK_TIMEOUT_MS}"))
        .await
        .unwrap();
    let pid = c.backend_pid().await.unwrap().to_string();
    (c, pid)
}

impl Real {
    async fn new() -> Real {
        let mut sessions = Vec::new();
        let mut pids = Vec::new();
        for _ in 0..SESSIONS {
            let (c, pid) = open().await;
            sessions.push(c);
            pids.push(pid);
        }
        Real {
            sessions,
            pids,
            admin: connect(&primary().conninfo()).await,
        }
    }

    /// Leaves every session as a fresh one: no transaction, no advisory lock.
    async fn reset(&mut self) {
        for s in 0..SESSIONS {
            let c = &mut self.sessions[s];
            let clean = match c.simple_query("ROLLBACK").await {
                Ok(_) => c.simple_query("SELECT pg_advisory_unlock_all()").await,
                Err(e) => Err(e),
            };
            match clean {
                Ok(_) => {}
                // Terminated at the end of the last sequence: a new session.
                Err(e) if e.session_gone() => {
                    let (c, pid) = open().await;
                    self.sessions[s] = c;
                    self.pids[s] = pid;
                }
                Err(e) => panic!("resetting session {s}: {e}"),
            }
        }
    }

    async fn run(&mut self, op: &Op) -> Answer {
        let s = session(op);
        let Some(sql) = sql(op) else {
            let pid = &self.pids[s];
            let rows = self
                .admin
                .simple_query(&format!("SELECT pg_terminate_backend({pid})"))
                .await
                .unwrap();
            let done = rows[0][0].as_deref() == Some("t");
            // The backend exits a moment after the signal; its locks go when it has.
            let gone = format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {pid}");
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.admin.simple_query(&gone).await.unwrap()[0][0].as_deref() != Some("0") {
                assert!(Instant::now() < deadline, "backend {pid} never exited");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            return Answer::Terminated(done);
        };
        let out = answer(self.sessions[s].simple_query(&sql).await);
        if matches!(out, Answer::Error(_)) {
            // PostgreSQL flushes an error to the client before it aborts the transaction
            // (`PostgresMain` reports, then `AbortCurrentTransaction` releases the locks), so
            // the answer can reach us while the aborted block still holds its
            // transaction-level locks, and another session's next statement races the
            // release. An empty query on the same session is answered only after the backend
            // is back at its main loop: the release is done, and nothing else changes.
            self.sessions[s].simple_query("").await.unwrap();
        }
        if out == Answer::Gone {
            let (c, pid) = open().await;
            self.sessions[s] = c;
            self.pids[s] = pid;
        }
        if matches!(op, Op::Discard(_)) && out == Answer::Rows(Vec::new()) {
            let set = format!("SET lock_timeout = {LOCK_TIMEOUT_MS}");
            self.sessions[s].simple_query(&set).await.unwrap();
        }
        out
    }
}

#[test]
fn the_simulated_server_answers_advisory_locks_as_a_real_one_does() {
    let _turn = crate::real_turn();
    let cases: u32 = std::env::var("LOCKCHECK_PG_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let real = std::cell::RefCell::new(rt.block_on(Real::new()));
    let started = Instant::now();
    let statements = std::cell::Cell::new(0u64);
    let mut runner =
        proptest::test_runner::TestRunner::new(crate::common::fixed_seed_config(cases));
    runner
        .run(&prop::collection::vec(op(), 1..12), |ops| {
            let mut real = real.borrow_mut();
            rt.block_on(real.reset());
            let mut sim = Sim::new();
            for (i, op) in ops.iter().enumerate() {
                let want = sim.run(op);
                let got = rt.block_on(real.run(op));
                statements.set(statements.get() + 1);
                prop_assert_eq!(&got, &want, "step {} {:?} of {:?}", i, op, ops);
            }
            Ok(())
        })
        .unwrap();
    eprintln!(
        "postgres differential: {cases} sequences, {} statements, 0 divergences, in {:.1} s",
        statements.get(),
        started.elapsed().as_secs_f64()
    );
}
