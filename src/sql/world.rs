//! What the simulated and the real MySQL worlds share: the lock a client runs, the table set-up,
//! and the bookkeeping of which fault a client's step triggers.

use crate::env::Env;
use crate::lock::mysql_for_update::{self, MysqlForUpdate};
use crate::lock::mysql_insert_unique::MysqlInsertUnique;
use crate::lock::mysql_options::MysqlOptions;
use crate::lock::{Guard, Lock, LockConfig, LockError, LockKind};
use crate::scenario::{ClientPoint, ClientRef, Fault, FaultKind, Scenario, Trigger};
use crate::sql::{SqlConn, SqlError};
use std::sync::{Arc, Mutex};

/// One of the two MySQL locks, chosen by the scenario's kind.
pub enum SqlLock<C, E> {
    ForUpdate(MysqlForUpdate<C, E>),
    InsertUnique(MysqlInsertUnique<C, E>),
}

impl<C, E> SqlLock<C, E> {
    /// The lock of `kind` (a MySQL kind) for one client, on its own connection.
    pub fn build(
        kind: LockKind,
        conn: C,
        env: E,
        config: LockConfig,
        options: MysqlOptions,
    ) -> Self {
        match kind {
            LockKind::MysqlForUpdate => {
                SqlLock::ForUpdate(MysqlForUpdate::new(conn, env, config, options))
            }
            _ => SqlLock::InsertUnique(MysqlInsertUnique::new(conn, env, config, options)),
        }
    }
}

impl<C, E> Lock for SqlLock<C, E>
where
    C: SqlConn + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        match self {
            SqlLock::ForUpdate(l) => l.acquire().await,
            SqlLock::InsertUnique(l) => l.acquire().await,
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        match self {
            SqlLock::ForUpdate(l) => l.release(guard).await,
            SqlLock::InsertUnique(l) => l.release(guard).await,
        }
    }
}

/// Creates what the scenario's lock needs before any client runs: its table, and the lock's row
/// (`FOR UPDATE`) or fencing counter row.
pub async fn prepare<C: SqlConn>(conn: &mut C, s: &Scenario) -> Result<(), SqlError> {
    let options = super::spec::options(&s.lock);
    match s.lock.kind {
        LockKind::MysqlForUpdate => mysql_for_update::prepare(conn, &options, &s.lock.key).await,
        _ => options.prepare(conn, &s.lock.key).await,
    }
}

/// The faults still to fire, and which of them a client's step triggers.
#[derive(Clone)]
pub struct Pending(Arc<Mutex<Vec<Fault>>>);

impl Pending {
    pub fn new(faults: Vec<Fault>) -> Pending {
        Pending(Arc::new(Mutex::new(faults)))
    }

    /// Takes the faults with an absolute time, as `(at_ms, kind)`.
    pub fn take_timed(&self) -> Vec<(u64, FaultKind)> {
        let mut p = self.0.lock().unwrap();
        let (timed, rest): (Vec<Fault>, Vec<Fault>) = p
            .drain(..)
            .partition(|f| matches!(f.trigger, Trigger::At(_)));
        *p = rest;
        timed
            .into_iter()
            .filter_map(|f| match f.trigger {
                Trigger::At(at) => Some((at, f.kind)),
                _ => None,
            })
            .collect()
    }

    /// Takes the faults that `client` reaching `point` at `now_ms` triggers.
    pub fn take_at(&self, client: u32, point: &str, now_ms: u64) -> Vec<FaultKind> {
        let mut p = self.0.lock().unwrap();
        let (due, rest): (Vec<Fault>, Vec<Fault>) = p.drain(..).partition(|f| {
            let after = match (&f.trigger, point) {
                (
                    Trigger::Point {
                        point: at,
                        after_ms,
                    },
                    p,
                ) if at == p => *after_ms,
                (t, "acquired") => match t.point_after_ms(ClientPoint::Acquired) {
                    Some(a) => a,
                    None => return false,
                },
                (t, "before_write") => match t.point_after_ms(ClientPoint::BeforeWrite) {
                    Some(a) => a,
                    None => return false,
                },
                _ => return false,
            };
            now_ms >= after
                && match &f.kind {
                    FaultKind::Pause {
                        client: ClientRef::Index(i),
                        ..
                    } => *i == client,
                    FaultKind::ClientCrash { client: c } => *c == client,
                    _ => true,
                }
        });
        *p = rest;
        due.into_iter().map(|f| f.kind).collect()
    }
}

/// The client a pause hits: the named one, the triggering client, or the current holder.
pub fn paused_client(
    client: &ClientRef,
    holder: Option<u32>,
    rec: &crate::history::Recorder,
) -> Option<u32> {
    match (client, holder) {
        (ClientRef::Index(i), _) => Some(*i),
        (ClientRef::Holder, Some(h)) => Some(h),
        (ClientRef::Holder, None) => rec.snapshot().current_holder(),
    }
}
