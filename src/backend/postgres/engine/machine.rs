//! A simulated PostgreSQL server, for what advisory locks depend on, as a pure deterministic
//! state machine.
//!
//! Time is passed in (`now_ms`); nothing here sleeps or reads a clock, so a simulated server
//! node (or a test) drives it and the same inputs give the same outputs. A statement that must
//! wait for an advisory lock returns [`Step::Blocked`]; [`Engine::wake`] later hands out its
//! result: the lock once it is free, or an error once `lock_timeout`/`statement_timeout` passed
//! or the deadlock check found a cycle.
//!
//! What is modelled:
//! - sessions (backends) with a pid, their transaction state (idle, in a transaction, in a
//!   failed transaction: `25P02` until it ends) and their two timeouts, reverted by a rollback;
//! - the advisory lock table ([`LockTable`]): both key forms, both modes, both scopes,
//!   stacked holds, `pg_advisory_unlock` answering `f` when nothing is held, `unlock_all`,
//!   transaction-level holds dropped at commit or rollback or when an error aborts the
//!   transaction (at once in autocommit; the real server sends the error a moment before it
//!   releases, which the engine does not model: it only delays another client's grant), session
//!   holds kept through a rollback (the manual: they "do not honor transaction semantics");
//! - `DISCARD ALL` (refused inside a transaction block), `pg_terminate_backend`,
//!   `pg_backend_pid`, sequences with `nextval` (never rolled back; the value is WAL-logged 32
//!   ahead, so a crash or a promotion skips values but never repeats one);
//! - sessions the server ends: `pg_terminate_backend`, `idle_session_timeout`,
//!   `idle_in_transaction_session_timeout`, a crash. Their locks go at once; a waiting statement
//!   gets the `FATAL` as its answer, an idle client learns of it only on its next statement
//!   (the connection is closed), which is the window in which it believes it holds a lock the
//!   server has given to another;
//! - the deadlock check, once per wait after `deadlock_timeout` (1 s).
//!
//! Not modelled: tables and row locks (the protected resource is lockcheck's own, as for every
//! backend), other lock types, savepoints, `SET LOCAL`, and the order PostgreSQL wakes waiters
//! in beyond first come first served.

use crate::backend::postgres::engine::advisory::{Key, LockTable, Request, Scope, SessionId};
use crate::backend::postgres::engine::parse::{parse, Stmt};
use crate::backend::postgres::seam::{
    PgError, Row, ADMIN_SHUTDOWN, DEADLOCK_DETECTED, IDLE_IN_TRANSACTION_TIMEOUT,
    IDLE_SESSION_TIMEOUT, IN_FAILED_TRANSACTION, LOCK_NOT_AVAILABLE, QUERY_CANCELED,
};
use std::collections::BTreeMap;

/// How many values `nextval` logs ahead (PostgreSQL's `SEQ_LOG_VALS`).
const SEQ_LOG_VALS: i64 = 32;
/// SQLSTATE `25001` active_sql_transaction.
const ACTIVE_SQL_TRANSACTION: &str = "25001";
/// SQLSTATE `42P01` undefined_table.
const UNDEFINED_TABLE: &str = "42P01";
/// The first backend pid the simulated server hands out.
const FIRST_PID: i64 = 1000;

/// The server settings that decide when it ends a session by itself (0: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `idle_session_timeout` (PostgreSQL 14+): an idle session outside a transaction ends.
    pub idle_session_timeout_ms: u64,
    /// `idle_in_transaction_session_timeout`: a session idle inside a transaction ends.
    pub idle_in_transaction_timeout_ms: u64,
    /// `deadlock_timeout`: how long a wait lasts before the deadlock check runs.
    pub deadlock_timeout_ms: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            idle_session_timeout_ms: 0,
            idle_in_transaction_timeout_ms: 0,
            deadlock_timeout_ms: 1000,
        }
    }
}

/// What happened to a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// It finished, with rows or an error.
    Done(Result<Vec<Row>, PgError>),
    /// It waits for an advisory lock; [`Engine::wake`] will report its result.
    Blocked,
}

/// What [`Engine::wake`] found: statements that finished and sessions the server ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// Waiting statements that finished, with their answers.
    pub finished: Vec<(SessionId, Result<Vec<Row>, PgError>)>,
    /// Sessions the server ended by itself (an idle timeout), with why.
    pub ended: Vec<(SessionId, PgError)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tx {
    Idle,
    Open,
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
struct Timeouts {
    lock_ms: u64,
    statement_ms: u64,
}

#[derive(Clone, Debug)]
struct Waiting {
    /// When and how the wait fails if it is not granted first.
    deadline: Option<(u64, &'static str)>,
    /// When the deadlock check runs (once).
    deadlock_check_ms: Option<u64>,
}

#[derive(Clone, Debug)]
struct Session {
    pid: i64,
    tx: Tx,
    timeouts: Timeouts,
    /// The timeouts at `BEGIN`, restored by a rollback.
    saved: Timeouts,
    waiting: Option<Waiting>,
    last_active_ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sequence {
    last: i64,
    logged: i64,
}

/// The simulated server's state.
#[derive(Clone, Debug, Default)]
pub struct Engine {
    settings: Settings,
    sessions: BTreeMap<SessionId, Session>,
    locks: LockTable,
    /// Sessions the server ended while their client was not waiting: what the client hears on
    /// its next statement.
    ended: BTreeMap<SessionId, PgError>,
    sequences: BTreeMap<String, Sequence>,
    /// Answers of waiting statements decided outside [`Engine::wake`] (a terminated waiter's
    /// `FATAL`), handed out by the next `wake`.
    pending: Vec<(SessionId, Result<Vec<Row>, PgError>)>,
    next_session: SessionId,
    next_pid: i64,
}

fn one(text: impl Into<String>) -> Vec<Row> {
    vec![vec![Some(text.into())]]
}

fn boolean(b: bool) -> Vec<Row> {
    one(if b { "t" } else { "f" })
}

fn terminated() -> PgError {
    PgError::fatal(
        ADMIN_SHUTDOWN,
        "terminating connection due to administrator command",
    )
}

impl Engine {
    /// A fresh server with `settings`: no sessions, no sequences.
    pub fn new(settings: Settings) -> Engine {
        Engine {
            settings,
            next_pid: FIRST_PID,
            ..Engine::default()
        }
    }

    /// Opens a session (a new connection; a new backend process).
    pub fn connect(&mut self, now_ms: u64) -> SessionId {
        self.next_session += 1;
        self.next_pid += 1;
        self.sessions.insert(
            self.next_session,
            Session {
                pid: self.next_pid,
                tx: Tx::Idle,
                timeouts: Timeouts::default(),
                saved: Timeouts::default(),
                waiting: None,
                last_active_ms: now_ms,
            },
        );
        self.next_session
    }

    /// The session's backend pid, while it lives.
    pub fn pid(&self, session: SessionId) -> Option<i64> {
        self.sessions.get(&session).map(|s| s.pid)
    }

    /// Whether the session lives.
    pub fn is_connected(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The live sessions, in id order.
    pub fn session_ids(&self) -> Vec<SessionId> {
        self.sessions.keys().copied().collect()
    }

    /// The sessions holding advisory lock `key`.
    pub fn holders(&self, key: Key) -> Vec<SessionId> {
        self.locks.holders(key)
    }

    /// Whether the session is inside a transaction block (open or failed).
    pub fn in_transaction(&self, session: SessionId) -> bool {
        self.sessions
            .get(&session)
            .is_some_and(|s| s.tx != Tx::Idle)
    }

    /// Runs one statement of `session` at `now_ms`.
    pub fn execute(&mut self, session: SessionId, sql: &str, now_ms: u64) -> Step {
        if let Some(e) = self.ended.remove(&session) {
            return Step::Done(Err(PgError::ConnectionLost(format!(
                "server closed the connection ({e})"
            ))));
        }
        if !self.sessions.contains_key(&session) {
            return Step::Done(Err(PgError::ConnectionLost("no such session".into())));
        }
        let stmt = match parse(sql) {
            Ok(s) => s,
            Err(e) => return Step::Done(self.fail(session, e, now_ms)),
        };
        let s = self.sessions.get_mut(&session).expect("checked above");
        s.last_active_ms = now_ms;
        if s.tx == Tx::Failed && !matches!(stmt, Stmt::Commit | Stmt::Rollback) {
            return Step::Done(Err(PgError::error(
                IN_FAILED_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
            )));
        }
        let step = self.run(session, stmt, now_ms);
        if let Step::Done(Err(e)) = step {
            return Step::Done(self.fail(session, e, now_ms));
        }
        if let Step::Done(Ok(_)) = &step {
            self.end_implicit_transaction(session);
        }
        step
    }

    /// A statement of `session` failed with `e`: a transaction block is aborted; a `FATAL`
    /// has already ended the session.
    fn fail(&mut self, session: SessionId, e: PgError, now_ms: u64) -> Result<Vec<Row>, PgError> {
        if let Some(s) = self.sessions.get_mut(&session) {
            s.last_active_ms = now_ms;
            if s.tx == Tx::Open && !matches!(e, PgError::Unsupported(_)) {
                // The error aborts the transaction now (its locks go with it); the block only
                // waits for the client's ROLLBACK to end.
                s.tx = Tx::Failed;
                self.locks.release_scope(session, Scope::Xact);
            }
        }
        self.end_implicit_transaction(session);
        Err(e)
    }

    /// In autocommit a statement is its own transaction: its transaction-level holds end with it.
    fn end_implicit_transaction(&mut self, session: SessionId) {
        if self
            .sessions
            .get(&session)
            .is_some_and(|s| s.tx == Tx::Idle)
        {
            self.locks.release_scope(session, Scope::Xact);
        }
    }

    fn run(&mut self, session: SessionId, stmt: Stmt, now_ms: u64) -> Step {
        let s = self.sessions.get_mut(&session).expect("a live session");
        let done = |r: Vec<Row>| Step::Done(Ok(r));
        match stmt {
            Stmt::Begin => {
                // A second BEGIN only warns.
                if s.tx == Tx::Idle {
                    s.tx = Tx::Open;
                    s.saved = s.timeouts;
                }
                done(Vec::new())
            }
            Stmt::Commit | Stmt::Rollback => {
                // COMMIT of a failed transaction rolls it back; outside one both only warn.
                if s.tx == Tx::Failed || (s.tx == Tx::Open && stmt == Stmt::Rollback) {
                    s.timeouts = s.saved;
                }
                s.tx = Tx::Idle;
                self.locks.release_scope(session, Scope::Xact);
                done(Vec::new())
            }
            Stmt::SetLockTimeout(ms) => {
                s.timeouts.lock_ms = ms;
                done(Vec::new())
            }
            Stmt::SetStatementTimeout(ms) => {
                s.timeouts.statement_ms = ms;
                done(Vec::new())
            }
            Stmt::DiscardAll => {
                if s.tx != Tx::Idle {
                    return Step::Done(Err(PgError::error(
                        ACTIVE_SQL_TRANSACTION,
                        "DISCARD ALL cannot run inside a transaction block",
                    )));
                }
                s.timeouts = Timeouts::default();
                self.locks.release_scope(session, Scope::Session);
                done(Vec::new())
            }
            Stmt::Lock {
                key,
                mode,
                scope,
                try_only,
            } => {
                if self.locks.try_take(session, key, mode, scope) {
                    return done(if try_only { boolean(true) } else { one("") });
                }
                if try_only {
                    return done(boolean(false));
                }
                let t = s.timeouts;
                let deadline = [
                    (t.lock_ms, LOCK_NOT_AVAILABLE),
                    (t.statement_ms, QUERY_CANCELED),
                ]
                .into_iter()
                .filter(|(ms, _)| *ms > 0)
                .min_by_key(|(ms, _)| *ms)
                .map(|(ms, state)| (now_ms + ms, state));
                let request = Request {
                    session,
                    key,
                    mode,
                    scope,
                };
                s.waiting = Some(Waiting {
                    deadline,
                    deadlock_check_ms: Some(now_ms + self.settings.deadlock_timeout_ms),
                });
                self.locks.enqueue(request);
                Step::Blocked
            }
            Stmt::Unlock { key, mode } => done(boolean(self.locks.unlock(session, key, mode))),
            Stmt::UnlockAll => {
                self.locks.release_scope(session, Scope::Session);
                done(one(""))
            }
            Stmt::BackendPid => done(one(s.pid.to_string())),
            Stmt::Terminate(pid) => {
                let own = s.pid == pid;
                let target = self
                    .sessions
                    .iter()
                    .find(|(_, o)| o.pid == pid)
                    .map(|(id, _)| *id);
                match target {
                    Some(_) if own => {
                        self.end(session, terminated());
                        self.ended.remove(&session);
                        Step::Done(Err(terminated()))
                    }
                    Some(t) => {
                        let answer = self.end(t, terminated());
                        // A waiting victim's answer is its FATAL; `wake` hands it out.
                        if let Some(a) = answer {
                            self.pending.push(a);
                        }
                        done(boolean(true))
                    }
                    // PostgreSQL warns "PID … is not a PostgreSQL backend process".
                    None => done(boolean(false)),
                }
            }
            Stmt::NextVal(name) => match self.sequences.get_mut(&name) {
                Some(seq) => {
                    seq.last += 1;
                    if seq.last > seq.logged {
                        seq.logged = seq.last + SEQ_LOG_VALS;
                    }
                    done(one(seq.last.to_string()))
                }
                None => Step::Done(Err(PgError::error(
                    UNDEFINED_TABLE,
                    format!("relation \"{name}\" does not exist"),
                ))),
            },
            Stmt::CreateSequence(name) => {
                self.sequences
                    .entry(name)
                    .or_insert(Sequence { last: 0, logged: 0 });
                done(Vec::new())
            }
        }
    }

    /// Ends `session` as the server does (a termination, a timeout, a crash): its locks and its
    /// wait go at once. A waiting statement's answer is `why` (returned here); an idle client
    /// hears it on its next statement.
    fn end(
        &mut self,
        session: SessionId,
        why: PgError,
    ) -> Option<(SessionId, Result<Vec<Row>, PgError>)> {
        let s = self.sessions.remove(&session)?;
        self.locks.drop_session(session);
        if s.waiting.is_some() {
            Some((session, Err(why)))
        } else {
            self.ended.insert(session, why);
            None
        }
    }

    /// `pg_terminate_backend` of `session` from outside (an operator, a nemesis); `false` when
    /// it had already ended.
    pub fn terminate(&mut self, session: SessionId) -> bool {
        if !self.sessions.contains_key(&session) {
            return false;
        }
        if let Some(a) = self.end(session, terminated()) {
            self.pending.push(a);
        }
        true
    }

    /// The client closed its connection (or the server noticed it is gone): the session ends
    /// and nobody is told.
    pub fn disconnect(&mut self, session: SessionId) {
        self.sessions.remove(&session);
        self.ended.remove(&session);
        self.locks.drop_session(session);
        self.pending.retain(|(s, _)| *s != session);
    }

    /// The server process dies: every session and every advisory lock is gone (they live in
    /// shared memory, never on disk); sequences come back from the WAL, at the value logged
    /// ahead.
    pub fn crash(&mut self) {
        for session in self.session_ids() {
            let lost = PgError::ConnectionLost("server closed the connection unexpectedly".into());
            if let Some(a) = self.end(session, lost) {
                self.pending.push(a);
            }
        }
        for seq in self.sequences.values_mut() {
            seq.last = seq.logged;
        }
    }

    /// What a streaming standby promoted now starts with: the primary's sequences as the WAL
    /// has them (logged ahead), and no session and no advisory lock, since advisory locks are
    /// not WAL-logged and so never reach a standby.
    pub fn promoted_standby(&self) -> Engine {
        let mut e = Engine::new(self.settings);
        e.next_pid = self.next_pid + 1000;
        e.next_session = self.next_session + 1000;
        e.sequences = self
            .sequences
            .iter()
            .map(|(n, s)| {
                (
                    n.clone(),
                    Sequence {
                        last: s.logged,
                        logged: s.logged,
                    },
                )
            })
            .collect();
        e
    }

    /// Lets time reach `now_ms`: grants what can be granted, fails waits past their deadline or
    /// in a deadlock, and ends sessions idle past their timeout.
    pub fn wake(&mut self, now_ms: u64) -> Woken {
        let mut woken = Woken {
            finished: std::mem::take(&mut self.pending),
            ended: Vec::new(),
        };
        for r in self.locks.grant_waiters() {
            if let Some(s) = self.sessions.get_mut(&r.session) {
                s.waiting = None;
                s.last_active_ms = now_ms;
                woken.finished.push((r.session, Ok(one(""))));
                self.end_implicit_transaction(r.session);
            }
        }
        let waiting: Vec<(SessionId, Waiting)> = self
            .sessions
            .iter()
            .filter_map(|(id, s)| s.waiting.clone().map(|w| (*id, w)))
            .collect();
        for (session, w) in waiting {
            let error = match w.deadline {
                Some((at, LOCK_NOT_AVAILABLE)) if at <= now_ms => Some(PgError::error(
                    LOCK_NOT_AVAILABLE,
                    "canceling statement due to lock timeout",
                )),
                Some((at, _)) if at <= now_ms => Some(PgError::error(
                    QUERY_CANCELED,
                    "canceling statement due to statement timeout",
                )),
                _ => None,
            };
            let error = error.or_else(|| {
                w.deadlock_check_ms.filter(|at| *at <= now_ms)?;
                self.sessions
                    .get_mut(&session)?
                    .waiting
                    .as_mut()?
                    .deadlock_check_ms = None;
                self.locks
                    .in_deadlock(session)
                    .then(|| PgError::error(DEADLOCK_DETECTED, "deadlock detected"))
            });
            if let Some(e) = error {
                self.locks.dequeue(session);
                if let Some(s) = self.sessions.get_mut(&session) {
                    s.waiting = None;
                }
                let answer = self.fail(session, e, now_ms);
                woken.finished.push((session, answer));
            }
        }
        if !woken.finished.is_empty() {
            // A failed wait leaves the queue: those behind it may go now.
            for r in self.locks.grant_waiters() {
                if let Some(s) = self.sessions.get_mut(&r.session) {
                    s.waiting = None;
                    s.last_active_ms = now_ms;
                    woken.finished.push((r.session, Ok(one(""))));
                    self.end_implicit_transaction(r.session);
                }
            }
        }
        let idle: Vec<(SessionId, PgError)> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.waiting.is_none())
            .filter_map(|(id, s)| {
                let (limit, state, what) = if s.tx == Tx::Idle {
                    (
                        self.settings.idle_session_timeout_ms,
                        IDLE_SESSION_TIMEOUT,
                        "idle-session",
                    )
                } else {
                    (
                        self.settings.idle_in_transaction_timeout_ms,
                        IDLE_IN_TRANSACTION_TIMEOUT,
                        "idle-in-transaction",
                    )
                };
                (limit > 0 && s.last_active_ms + limit <= now_ms).then(|| {
                    (
                        *id,
                        PgError::fatal(
                            state,
                            format!("terminating connection due to {what} timeout"),
                        ),
                    )
                })
            })
            .collect();
        for (session, why) in idle {
            self.end(session, why.clone());
            woken.ended.push((session, why));
        }
        woken
    }

    /// The next time [`Engine::wake`] has something to do on its own: a wait's deadline or
    /// deadlock check, or an idle timeout.
    pub fn next_deadline(&self) -> Option<u64> {
        let waits = self.sessions.values().filter_map(|s| {
            let w = s.waiting.as_ref()?;
            [w.deadline.map(|(at, _)| at), w.deadlock_check_ms]
                .into_iter()
                .flatten()
                .min()
        });
        let idle = self.sessions.values().filter_map(|s| {
            if s.waiting.is_some() {
                return None;
            }
            let limit = if s.tx == Tx::Idle {
                self.settings.idle_session_timeout_ms
            } else {
                self.settings.idle_in_transaction_timeout_ms
            };
            (limit > 0).then_some(s.last_active_ms + limit)
        });
        waits.chain(idle).min()
    }
}

#[cfg(test)]
mod tests;
