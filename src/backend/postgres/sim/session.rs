//! A session of the simulated PostgreSQL: the thin async layer over the pure [`Engine`].
//!
//! [`SharedPg`] is the server process: the engine, the server's clock (true time in a
//! simulation) and a wake-up signal for statements waiting on an advisory lock. [`PgSession`] is
//! one backend; a waiting statement sleeps (on its node's [`Env`]) until another session frees
//! the lock, its timeout passes or the session is ended. It runs the same way in a madsim node
//! and in a plain tokio test. Latency, partitions and pauses belong to the server node that
//! hosts it (`server.rs`) and to the pooler (`bouncer.rs`).

use crate::backend::postgres::engine::{Engine, SessionId, Settings, Step};
use crate::backend::postgres::seam::{PgClient, PgError, Row};
use crate::env::Env;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;
type Answer = Result<Vec<Row>, PgError>;

struct Server {
    engine: Mutex<Engine>,
    /// Answers of waiting statements the engine finished, until their session collects them.
    finished: Mutex<BTreeMap<SessionId, Answer>>,
    /// Sessions the server ended by itself since the last look (idle timeouts), with why.
    ended: Mutex<Vec<(SessionId, PgError)>>,
    wakeup: Notify,
    clock: Clock,
    /// The server process is stopped (`SIGSTOP`): no wait is granted or times out.
    frozen: AtomicBool,
}

/// The simulated server process, shared by its sessions.
#[derive(Clone)]
pub struct SharedPg {
    server: Arc<Server>,
}

impl SharedPg {
    /// A server with `settings` whose clock is `clock` (ms; true time in a simulation).
    pub fn new(settings: Settings, clock: impl Fn() -> u64 + Send + Sync + 'static) -> SharedPg {
        SharedPg::with_engine_state(Engine::new(settings), Arc::new(clock))
    }

    fn with_engine_state(engine: Engine, clock: Clock) -> SharedPg {
        SharedPg {
            server: Arc::new(Server {
                engine: Mutex::new(engine),
                finished: Mutex::new(BTreeMap::new()),
                ended: Mutex::new(Vec::new()),
                wakeup: Notify::new(),
                clock,
                frozen: AtomicBool::new(false),
            }),
        }
    }

    /// The server a streaming standby becomes when promoted now: this one's sequences as the
    /// WAL has them, and no session and no advisory lock (they are never WAL-logged).
    pub fn promoted_standby(&self) -> SharedPg {
        let engine = self.read(|e| e.promoted_standby());
        SharedPg::with_engine_state(engine, self.server.clock.clone())
    }

    /// The server's clock now.
    pub fn now_ms(&self) -> u64 {
        (self.server.clock)()
    }

    /// Reads the engine without waking anyone.
    pub fn read<R>(&self, f: impl FnOnce(&Engine) -> R) -> R {
        f(&self.server.engine.lock().expect("engine lock"))
    }

    /// Runs `f` on the engine, then lets the engine hand out what `f` may have decided.
    pub fn with_engine<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        let r = f(&mut self.server.engine.lock().expect("engine lock"));
        self.wake();
        r
    }

    /// `SIGSTOP`: no wait is granted or times out until [`SharedPg::thaw`].
    pub fn freeze(&self) {
        self.server.frozen.store(true, Ordering::SeqCst);
    }

    /// `SIGCONT`: timeouts are deadlines on the clock, so a wait whose deadline passed during
    /// the stop fails now.
    pub fn thaw(&self) {
        self.server.frozen.store(false, Ordering::SeqCst);
        self.wake();
    }

    fn frozen(&self) -> bool {
        self.server.frozen.load(Ordering::SeqCst)
    }

    /// Lets the engine do what it can at the current time and signals the waiting sessions.
    pub fn wake(&self) {
        if self.frozen() {
            return;
        }
        let now = self.now_ms();
        let woken = self.server.engine.lock().expect("engine lock").wake(now);
        if !woken.finished.is_empty() {
            self.server
                .finished
                .lock()
                .expect("finished lock")
                .extend(woken.finished);
        }
        if !woken.ended.is_empty() {
            self.server
                .ended
                .lock()
                .expect("ended lock")
                .extend(woken.ended);
        }
        self.server.wakeup.notify_waiters();
    }

    /// The sessions the server ended by itself since the last call, with why.
    pub fn take_ended(&self) -> Vec<(SessionId, PgError)> {
        std::mem::take(&mut *self.server.ended.lock().expect("ended lock"))
    }

    /// Opens a session (a new backend).
    pub fn connect<E: Env>(&self, env: E) -> PgSession<E> {
        let now = self.now_ms();
        let session = self.server.engine.lock().expect("engine lock").connect(now);
        PgSession {
            server: self.clone(),
            session,
            env,
            attached: true,
        }
    }

    /// The server process dies: every session and advisory lock is gone.
    pub fn crash(&self) {
        self.with_engine(|e| e.crash());
    }

    /// Ends a session as the client's closed socket does.
    pub fn disconnect(&self, session: SessionId) {
        self.with_engine(|e| e.disconnect(session));
        self.server
            .finished
            .lock()
            .expect("finished lock")
            .remove(&session);
    }

    /// `pg_terminate_backend` of `session` from outside; `false` when it had ended.
    pub fn terminate(&self, session: SessionId) -> bool {
        self.with_engine(|e| e.terminate(session))
    }

    fn take_finished(&self, session: SessionId) -> Option<Answer> {
        self.server
            .finished
            .lock()
            .expect("finished lock")
            .remove(&session)
    }

    async fn run<E: Env>(&self, env: &E, session: SessionId, sql: &str) -> Answer {
        let step = self.with_engine(|e| e.execute(session, sql, (self.server.clock)()));
        if let Step::Done(r) = step {
            return r;
        }
        loop {
            let notified = self.server.wakeup.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = self.take_finished(session) {
                return r;
            }
            let (deadline, connected) = self.read(|e| (e.next_deadline(), e.is_connected(session)));
            if !connected {
                return Err(PgError::ConnectionLost("session ended".into()));
            }
            if self.frozen() {
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
                self.wake();
            }
        }
    }
}

/// One backend of the simulated server.
pub struct PgSession<E> {
    server: SharedPg,
    session: SessionId,
    env: E,
    /// Whether dropping this session closes it (see [`PgSession::detach`]).
    attached: bool,
}

impl<E> PgSession<E> {
    /// This session's id in the engine.
    pub fn id(&self) -> SessionId {
        self.session
    }

    /// The server this session belongs to.
    pub fn server(&self) -> &SharedPg {
        &self.server
    }

    /// The client goes away without the server hearing of it (its socket closes behind a
    /// partition): the backend lives on until TCP keepalive notices.
    pub fn detach(mut self) {
        self.attached = false;
    }
}

impl<E: Env> PgSession<E> {
    /// Runs one statement.
    pub async fn run(&mut self, sql: &str) -> Answer {
        self.server.run(&self.env, self.session, sql).await
    }
}

impl<E> Drop for PgSession<E> {
    /// A dropped session is a closed socket: the backend exits and its locks go.
    fn drop(&mut self) {
        if self.attached {
            self.server.disconnect(self.session);
        }
    }
}

impl<E: Env> PgClient for PgSession<E> {
    async fn simple_query(&mut self, sql: &str) -> Answer {
        self.run(sql).await
    }
}
