//! A connection to the simulated database: the thin async layer over the pure [`Engine`].
//!
//! [`SharedEngine`] is the server: the engine, the server's clock (true time in a simulation),
//! and a wake-up signal for statements parked on a row lock. [`SimSqlConn`] is one client session;
//! a parked statement sleeps (on its node's [`Env`]) until another session releases a lock or its
//! lock wait times out. It runs the same way in a madsim node and in a plain tokio test. Network
//! latency, partitions and server pauses belong to the simulated server node that hosts the
//! engine (see the scenario integration); this layer is the in-process core of it.

use crate::backend::mysql::engine::{Engine, SessionId, Step};
use crate::env::Env;
use crate::sql::error::SqlError;
use crate::sql::value::{Output, Value};
use crate::sql::SqlConn;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Server {
    engine: Mutex<Engine>,
    /// Results of parked statements the engine finished, until their session collects them.
    finished: Mutex<BTreeMap<SessionId, Result<Output, SqlError>>>,
    wakeup: Notify,
    clock: Clock,
    /// The server process is stopped (`SIGSTOP`): no lock wait is granted or times out.
    frozen: AtomicBool,
}

/// The simulated server, shared by its client sessions.
#[derive(Clone)]
pub struct SharedEngine {
    server: Arc<Server>,
}

impl SharedEngine {
    /// A server whose clock is `clock` (unix ms; true time in a simulation).
    pub fn new(clock: impl Fn() -> u64 + Send + Sync + 'static) -> SharedEngine {
        SharedEngine {
            server: Arc::new(Server {
                engine: Mutex::new(Engine::new()),
                finished: Mutex::new(BTreeMap::new()),
                wakeup: Notify::new(),
                clock: Arc::new(clock),
                frozen: AtomicBool::new(false),
            }),
        }
    }

    /// The server's clock now.
    pub fn now_ms(&self) -> u64 {
        (self.server.clock)()
    }

    /// Runs `f` on the engine, then wakes parked statements whose locks `f` may have released.
    pub fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        let r = f(&mut self.server.engine.lock().expect("engine lock"));
        self.wake();
        r
    }

    /// The server process stops (`SIGSTOP`): its threads stand still, so no parked statement is
    /// granted its lock or failed by its lock-wait timeout until [`SharedEngine::thaw`].
    pub fn freeze(&self) {
        self.server.frozen.store(true, Ordering::SeqCst);
    }

    /// The server process goes on (`SIGCONT`). InnoDB's lock-wait timeout is a deadline on the
    /// clock, not an amount of running time, so a wait whose deadline passed during the stop
    /// fails with 1205 now, before the statements queued during the stop run (a real MariaDB
    /// ends such a wait at `SIGCONT` too, with 1205 or, racing a queued `COMMIT`, with the row:
    /// `tests/mysql/server_pause.rs`).
    pub fn thaw(&self) {
        self.server.frozen.store(false, Ordering::SeqCst);
        self.wake();
    }

    fn frozen(&self) -> bool {
        self.server.frozen.load(Ordering::SeqCst)
    }

    /// Lets the engine finish what it can at the current time and signals the waiting sessions
    /// (nothing while the server is frozen: [`SharedEngine::thaw`] does it).
    pub fn wake(&self) {
        if self.frozen() {
            return;
        }
        let now = self.now_ms();
        let done = self.server.engine.lock().expect("engine lock").wake(now);
        if !done.is_empty() {
            let mut finished = self.server.finished.lock().expect("finished lock");
            finished.extend(done);
        }
        self.server.wakeup.notify_waiters();
    }

    /// Opens a client session.
    pub fn connect<E: Env>(&self, env: E) -> SimSqlConn<E> {
        let now = self.now_ms();
        let session = self.server.engine.lock().expect("engine lock").connect(now);
        SimSqlConn {
            server: self.clone(),
            session,
            env,
            attached: true,
        }
    }

    /// A server crash: every session is gone and rolled back (committed rows stay, as InnoDB's
    /// crash recovery keeps them).
    pub fn crash(&self) {
        let sessions = self.with_engine(|e| e.session_ids());
        for s in sessions {
            self.kill(s);
        }
    }

    /// The server closes sessions idle for `wait_timeout_ms`; returns how many it closed.
    pub fn reap_idle(&self, wait_timeout_ms: u64) -> usize {
        let now = self.now_ms();
        self.with_engine(|e| e.reap_idle(now, wait_timeout_ms))
            .len()
    }

    /// Disconnects a session as a dead client would (the server rolls it back).
    pub fn kill(&self, session: SessionId) {
        self.with_engine(|e| e.disconnect(session));
        self.server
            .finished
            .lock()
            .expect("finished lock")
            .remove(&session);
    }

    fn take_finished(&self, session: SessionId) -> Option<Result<Output, SqlError>> {
        self.server
            .finished
            .lock()
            .expect("finished lock")
            .remove(&session)
    }

    async fn run<E: Env>(
        &self,
        env: &E,
        session: SessionId,
        sql: &str,
    ) -> Result<Output, SqlError> {
        let step = self.with_engine(|e| e.execute(session, sql, (self.server.clock)()));
        if let Step::Done(r) = step {
            // `with_engine` may already have finished this statement's own follow-ups; a
            // finished result for this session can only come from a parked statement.
            return r;
        }
        loop {
            let notified = self.server.wakeup.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.take_finished(session) {
                return r;
            }
            let (deadline, connected) = {
                let engine = self.server.engine.lock().expect("engine lock");
                (engine.next_deadline(), engine.is_connected(session))
            };
            if !connected {
                return Err(SqlError::ConnectionLost("session killed".into()));
            }
            if self.frozen() {
                // Stopped: no timer of the server runs; `thaw` notifies.
                notified.await;
                continue;
            }
            let nap = deadline
                .map(|d| d.saturating_sub(self.now_ms()).max(1))
                .unwrap_or(1000);
            let timer = Box::pin(env.sleep(Duration::from_millis(nap)));
            if let futures::future::Either::Right(_) =
                futures::future::select(notified, timer).await
            {
                // A lock wait may have timed out: let the engine fail it with 1205.
                self.wake();
            }
        }
    }
}

/// One client session of the simulated database.
pub struct SimSqlConn<E> {
    server: SharedEngine,
    session: SessionId,
    env: E,
    /// Whether dropping this connection closes the session (see [`SimSqlConn::detach`]).
    attached: bool,
}

impl<E> SimSqlConn<E> {
    /// This connection's session id (to kill it from a nemesis).
    pub fn session(&self) -> SessionId {
        self.session
    }

    /// The client goes away without the server hearing of it (its socket closes behind a
    /// partition): the session lives on, idle, until `wait_timeout` closes it.
    pub fn detach(mut self) {
        self.attached = false;
    }
}

impl<E: Env> SimSqlConn<E> {
    /// Runs a statement and returns its raw output.
    pub async fn run(&mut self, sql: &str) -> Result<Output, SqlError> {
        self.server.run(&self.env, self.session, sql).await
    }
}

impl<E> Drop for SimSqlConn<E> {
    /// A dropped connection is a closed socket: the server rolls back and releases its locks.
    fn drop(&mut self) {
        if self.attached {
            self.server.kill(self.session);
        }
    }
}

impl<E: Env> SqlConn for SimSqlConn<E> {
    async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Value>>, SqlError> {
        match self.server.run(&self.env, self.session, sql).await? {
            Output::Rows(rows) => Ok(rows),
            Output::Affected(_) => Ok(Vec::new()),
        }
    }

    async fn execute(&mut self, sql: &str) -> Result<u64, SqlError> {
        match self.server.run(&self.env, self.session, sql).await? {
            Output::Rows(_) => Ok(0),
            Output::Affected(n) => Ok(n),
        }
    }
}
