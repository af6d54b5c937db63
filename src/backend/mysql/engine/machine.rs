//! A simulated InnoDB subset as a pure, deterministic state machine.
//!
//! Time is passed in (`now_ms`); nothing here sleeps, spawns or reads a clock, so a simulated
//! server node (or a test) drives it and the same inputs always give the same outputs. A statement
//! that must wait for a row lock returns [`Step::Blocked`]; the session is parked with its
//! statement, and [`Engine::wake`] later hands out its result: the statement re-run once the lock
//! was released, or error 1205 once `innodb_lock_wait_timeout` has passed.
//!
//! What is modelled (REPEATABLE READ, the InnoDB default):
//! - tables with a single-column primary key and single-column unique keys;
//! - autocommit statements and explicit transactions (`BEGIN`/`COMMIT`/`ROLLBACK`), with an undo
//!   log so a rollback, a dropped connection or a `wait_timeout` kill restores the rows;
//! - exclusive row locks taken by `SELECT … FOR UPDATE [NOWAIT | SKIP LOCKED]`, `INSERT`, `UPDATE`
//!   and `DELETE`, held to the end of the transaction; waits in FIFO order, error 1205 after the
//!   timeout (the statement fails, the transaction stays open, as with
//!   `innodb_rollback_on_timeout = OFF`); deadlock detection on the wait-for graph (error 1213,
//!   the requesting transaction is the victim and is rolled back);
//! - duplicate primary or unique keys (error 1062), waiting first when the conflicting row belongs
//!   to an open transaction (it may still roll back);
//! - plain `SELECT` outside a transaction reads committed rows;
//! - an autocommit `UPDATE` or `DELETE` without a primary-key equality scans the whole table and
//!   waits for every row another transaction has locked, including a row that transaction deleted
//!   and has not committed (InnoDB keeps it, delete-marked, until the commit).
//!
//! What is refused ([`SqlError::Unsupported`]), because InnoDB would take gap or next-key locks or
//! read a snapshot, which this subset does not model: consistent reads inside a transaction,
//! locking statements inside a transaction that are not a primary-key equality on an existing row,
//! and an `INSERT` inside a transaction that hits a duplicate key (InnoDB keeps a next-key lock).
//! Not modelled either: the locks InnoDB's duplicate check takes on the neighbouring record of a
//! unique *secondary* key (an `INSERT` there can wait where the engine does not; the differential
//! test covers primary keys, which is what the locks use).
//! A statement takes all its row locks at once or none, so partial progress before a wait (which
//! only changes which transaction InnoDB picks as a deadlock victim) is not modelled either.

mod execute;

use crate::backend::mysql::engine::parse::{parse, LockMode, Stmt, TableDef};
use crate::sql::error::{SqlError, ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT};
use crate::sql::value::{Output, Value};
use execute::{arrange, pk_equality};
use std::collections::{BTreeMap, BTreeSet};

/// A client session (one connection) of the simulated server.
pub type SessionId = u64;

/// InnoDB's default `innodb_lock_wait_timeout`, in seconds.
pub const DEFAULT_LOCK_WAIT_TIMEOUT_S: u64 = 50;

/// What happened to a statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// It finished, with rows, a count or an error.
    Done(Result<Output, SqlError>),
    /// It waits for a row lock; [`Engine::wake`] will report its result.
    Blocked,
}

/// A row lock's name: table and primary-key value.
type RowId = (String, Value);

struct Table {
    def: TableDef,
    rows: BTreeMap<Value, Vec<Value>>,
}

/// Before-image of a row a transaction changed: `None` when the row did not exist.
struct Undo {
    row: RowId,
    before: Option<Vec<Value>>,
}

struct Waiting {
    stmt: Stmt,
    on: RowId,
    /// Order of arrival, so waiters are served first come, first served.
    seq: u64,
    deadline_ms: u64,
}

struct Session {
    in_tx: bool,
    lock_wait_timeout_s: u64,
    undo: Vec<Undo>,
    held: BTreeSet<RowId>,
    waiting: Option<Waiting>,
    last_active_ms: u64,
}

/// The simulated server's state: tables, sessions, row locks.
#[derive(Default)]
pub struct Engine {
    tables: BTreeMap<String, Table>,
    sessions: BTreeMap<SessionId, Session>,
    locks: BTreeMap<RowId, SessionId>,
    next_session: SessionId,
    next_seq: u64,
}

/// A statement's plan: the rows it must lock before it may run.
enum Need {
    Go,
    Wait(RowId),
}

impl Engine {
    /// An empty server: no tables, no sessions (the lock's table is created by its set-up).
    pub fn new() -> Engine {
        Engine::default()
    }

    /// Opens a session (a new connection).
    pub fn connect(&mut self, now_ms: u64) -> SessionId {
        self.next_session += 1;
        self.sessions.insert(
            self.next_session,
            Session {
                in_tx: false,
                lock_wait_timeout_s: DEFAULT_LOCK_WAIT_TIMEOUT_S,
                undo: Vec::new(),
                held: BTreeSet::new(),
                waiting: None,
                last_active_ms: now_ms,
            },
        );
        self.next_session
    }

    /// The connection is gone (client crash, `KILL`, `wait_timeout`): the server rolls back its
    /// transaction and releases its locks. Call [`Engine::wake`] afterwards.
    pub fn disconnect(&mut self, s: SessionId) {
        if self.sessions.contains_key(&s) {
            self.rollback(s);
            self.sessions.remove(&s);
        }
    }

    /// Every connected session, in id order.
    pub fn session_ids(&self) -> Vec<SessionId> {
        self.sessions.keys().copied().collect()
    }

    /// Whether the session is still connected.
    pub fn is_connected(&self, s: SessionId) -> bool {
        self.sessions.contains_key(&s)
    }

    /// Sessions idle (not running or waiting) for longer than `wait_timeout_ms` at `now_ms`: the
    /// server would close them. They are disconnected here and returned.
    pub fn reap_idle(&mut self, now_ms: u64, wait_timeout_ms: u64) -> Vec<SessionId> {
        let idle: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, x)| x.waiting.is_none() && now_ms >= x.last_active_ms + wait_timeout_ms)
            .map(|(id, _)| *id)
            .collect();
        for s in &idle {
            self.disconnect(*s);
        }
        idle
    }

    /// Runs `sql` for session `s` at `now_ms`.
    pub fn execute(&mut self, s: SessionId, sql: &str, now_ms: u64) -> Step {
        let Some(session) = self.sessions.get_mut(&s) else {
            return Step::Done(Err(SqlError::ConnectionLost("session closed".into())));
        };
        session.last_active_ms = now_ms;
        if session.waiting.is_some() {
            return Step::Done(Err(SqlError::ConnectionLost(
                "the previous statement of this session is still waiting for a lock".into(),
            )));
        }
        let stmt = match parse(sql) {
            Ok(stmt) => stmt,
            Err(e) => return Step::Done(Err(e)),
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.attempt(s, stmt, seq, now_ms)
    }

    /// The earliest time a parked statement times out, for the driver's timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.sessions
            .values()
            .filter_map(|x| x.waiting.as_ref().map(|w| w.deadline_ms))
            .min()
    }

    /// Whether session `s` has a statement parked on a lock.
    pub fn is_waiting(&self, s: SessionId) -> bool {
        self.sessions.get(&s).is_some_and(|x| x.waiting.is_some())
    }

    /// Re-runs parked statements whose lock is free and fails those past their deadline with
    /// error 1205. Returns the finished statements' results, in the order they finished.
    pub fn wake(&mut self, now_ms: u64) -> Vec<(SessionId, Result<Output, SqlError>)> {
        let mut done = Vec::new();
        loop {
            let mut parked: Vec<(u64, SessionId)> = self
                .sessions
                .iter()
                .filter_map(|(id, x)| x.waiting.as_ref().map(|w| (w.seq, *id)))
                .collect();
            parked.sort();
            let mut progressed = false;
            for (_, s) in parked {
                let session = self.sessions.get_mut(&s).expect("parked session exists");
                let w = session.waiting.take().expect("parked");
                let free = self.blockers(&w.on, s).is_empty();
                if free {
                    if let Step::Done(r) = self.attempt(s, w.stmt.clone(), w.seq, now_ms) {
                        self.touch(s, now_ms);
                        done.push((s, r));
                        progressed = true;
                        continue;
                    }
                    // Blocked again (on another row): `attempt` parked it with a new deadline;
                    // keep the original one.
                    let again = self.sessions.get_mut(&s).and_then(|x| x.waiting.as_mut());
                    if let Some(again) = again {
                        again.deadline_ms = w.deadline_ms;
                        again.seq = w.seq;
                    }
                } else if now_ms >= w.deadline_ms {
                    self.touch(s, now_ms);
                    done.push((s, Err(lock_wait_timeout())));
                    progressed = true;
                } else {
                    self.sessions.get_mut(&s).expect("exists").waiting = Some(w);
                }
            }
            if !progressed {
                return done;
            }
        }
    }

    fn touch(&mut self, s: SessionId, now_ms: u64) {
        if let Some(x) = self.sessions.get_mut(&s) {
            x.last_active_ms = now_ms;
        }
    }

    /// Runs a statement or parks it.
    fn attempt(&mut self, s: SessionId, stmt: Stmt, seq: u64, now_ms: u64) -> Step {
        let in_tx = self.sessions[&s].in_tx;
        match self.needs(s, &stmt, in_tx) {
            Err(e) => Step::Done(Err(e)),
            Ok(Need::Wait(row)) => {
                if let Some(LockMode::Nowait) = lock_mode(&stmt) {
                    return Step::Done(Err(lock_wait_timeout()));
                }
                if self.closes_cycle(s, &row) {
                    self.rollback(s);
                    return Step::Done(Err(SqlError::server(
                        ER_LOCK_DEADLOCK,
                        "Deadlock found when trying to get lock; try restarting transaction",
                    )));
                }
                let session = self.sessions.get_mut(&s).expect("exists");
                let deadline_ms = now_ms + session.lock_wait_timeout_s * 1000;
                session.waiting = Some(Waiting {
                    stmt,
                    on: row,
                    seq,
                    deadline_ms,
                });
                Step::Blocked
            }
            Ok(Need::Go) => {
                let result = self.run(s, stmt);
                if !self.sessions.get(&s).is_some_and(|x| x.in_tx) {
                    self.commit(s);
                }
                Step::Done(result)
            }
        }
    }

    /// The other sessions whose lock on `row` keeps `s` from locking it exclusively.
    fn blockers(&self, row: &RowId, s: SessionId) -> Vec<SessionId> {
        let mut out: Vec<SessionId> = self.locks.get(row).copied().into_iter().collect();
        out.retain(|h| *h != s);
        out
    }

    /// Whether `s` waiting for `row` closes a cycle in the wait-for graph.
    fn closes_cycle(&self, s: SessionId, row: &RowId) -> bool {
        let mut seen = BTreeSet::new();
        let mut todo = self.blockers(row, s);
        while let Some(h) = todo.pop() {
            if h == s {
                return true;
            }
            if !seen.insert(h) {
                continue;
            }
            if let Some(w) = self.sessions.get(&h).and_then(|x| x.waiting.as_ref()) {
                todo.extend(self.blockers(&w.on, h));
                if self.blockers(&w.on, h).is_empty() {
                    continue;
                }
            }
        }
        false
    }

    fn table(&self, name: &str) -> Result<&Table, SqlError> {
        self.tables
            .get(name)
            .ok_or_else(|| SqlError::server(1146, format!("Table '{name}' doesn't exist")))
    }

    /// The rows a statement must lock, and whether one of them is held by another session.
    fn needs(&self, s: SessionId, stmt: &Stmt, in_tx: bool) -> Result<Need, SqlError> {
        let busy = |row: &RowId| !self.blockers(row, s).is_empty();
        let rows: Vec<RowId> = match stmt {
            Stmt::Select { lock: None, .. } if in_tx => {
                return Err(SqlError::Unsupported(
                    "a consistent (non-locking) read inside a transaction (MVCC snapshots)".into(),
                ))
            }
            Stmt::Select {
                table,
                filter,
                lock: Some(mode),
                ..
            } => {
                let t = self.table(table)?;
                let pk = pk_equality(t, filter).ok_or_else(|| {
                    SqlError::Unsupported(format!(
                        "FOR UPDATE on {table} without a primary-key equality (next-key locks)"
                    ))
                })?;
                if in_tx && !t.rows.contains_key(&pk) && !busy(&(table.clone(), pk.clone())) {
                    return Err(SqlError::Unsupported(format!(
                        "FOR UPDATE of an absent row of {table} (gap locks)"
                    )));
                }
                if *mode == LockMode::SkipLocked {
                    return Ok(Need::Go);
                }
                vec![(table.clone(), pk)]
            }
            Stmt::Insert {
                table,
                columns,
                rows,
            } => {
                let t = self.table(table)?;
                let mut out = Vec::new();
                for r in rows {
                    let full = arrange(t, columns, r)?;
                    let pk = full[t.def.primary_key].clone();
                    out.push((table.clone(), pk.clone()));
                    for u in &t.def.unique {
                        let clash = t.rows.iter().find(|(k, v)| {
                            **k != pk && v[*u] == full[*u] && full[*u] != Value::Null
                        });
                        if let Some((k, _)) = clash {
                            out.push((table.clone(), k.clone()));
                        }
                    }
                }
                out
            }
            Stmt::Update { table, filter, .. } | Stmt::Delete { table, filter } => {
                let t = self.table(table)?;
                match pk_equality(t, filter) {
                    Some(pk) => {
                        if in_tx && !t.rows.contains_key(&pk) {
                            return Err(SqlError::Unsupported(format!(
                                "UPDATE/DELETE of an absent row of {table} in a transaction (gap locks)"
                            )));
                        }
                        vec![(table.clone(), pk)]
                    }
                    None if in_tx => {
                        return Err(SqlError::Unsupported(format!(
                            "UPDATE/DELETE on {table} without a primary-key equality in a transaction (next-key locks)"
                        )))
                    }
                    // A full scan locks every record it reads, in primary-key order. That
                    // includes a row another open transaction deleted: InnoDB keeps the record,
                    // delete-marked, under that transaction's lock until it commits, so the scan
                    // waits for it (the differential test found this: the engine used to answer
                    // at once where MariaDB waited and failed with 1205).
                    None => {
                        let mut pks: BTreeSet<&Value> = t.rows.keys().collect();
                        pks.extend(
                            self.locks
                                .keys()
                                .filter(|(locked, _)| locked == table)
                                .map(|(_, pk)| pk),
                        );
                        pks.into_iter().map(|k| (table.clone(), k.clone())).collect()
                    }
                }
            }
            _ => Vec::new(),
        };
        Ok(match rows.into_iter().find(|r| busy(r)) {
            Some(r) => Need::Wait(r),
            None => Need::Go,
        })
    }

    fn lock(&mut self, s: SessionId, row: RowId) {
        self.locks.insert(row.clone(), s);
        self.sessions.get_mut(&s).expect("exists").held.insert(row);
    }

    /// Changes a row under `s`'s lock, remembering the before-image.
    fn write(&mut self, s: SessionId, row: RowId, new: Option<Vec<Value>>) {
        self.lock(s, row.clone());
        let rows = &mut self.tables.get_mut(&row.0).expect("table exists").rows;
        let before = match new {
            Some(new) => rows.insert(row.1.clone(), new),
            None => rows.remove(&row.1),
        };
        self.sessions
            .get_mut(&s)
            .expect("exists")
            .undo
            .push(Undo { row, before });
    }

    fn release(&mut self, s: SessionId) {
        let session = self.sessions.get_mut(&s).expect("exists");
        session.in_tx = false;
        session.undo.clear();
        for row in std::mem::take(&mut session.held) {
            self.locks.remove(&row);
        }
    }

    fn commit(&mut self, s: SessionId) {
        self.release(s);
    }

    fn rollback(&mut self, s: SessionId) {
        let undo = std::mem::take(&mut self.sessions.get_mut(&s).expect("exists").undo);
        for u in undo.into_iter().rev() {
            let rows = &mut self.tables.get_mut(&u.row.0).expect("table exists").rows;
            match u.before {
                Some(before) => rows.insert(u.row.1, before),
                None => rows.remove(&u.row.1),
            };
        }
        self.sessions.get_mut(&s).expect("exists").waiting = None;
        self.release(s);
    }
}

fn lock_mode(stmt: &Stmt) -> Option<LockMode> {
    match stmt {
        Stmt::Select { lock, .. } => *lock,
        _ => None,
    }
}

fn lock_wait_timeout() -> SqlError {
    SqlError::server(
        ER_LOCK_WAIT_TIMEOUT,
        "Lock wait timeout exceeded; try restarting transaction",
    )
}
