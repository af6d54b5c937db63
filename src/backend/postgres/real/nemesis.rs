//! The fault executor of a real PostgreSQL run: what spawned servers, PgBouncer and the
//! clients' forwarders let the fault families do.
//!
//! - A partition holds the cut clients' forwarders (every byte, both ways). The server's own
//!   socket then goes to the forwarder's host, which still answers TCP keepalive probes: on
//!   real servers a cut client's session lives until the cut heals, as if keepalive never gave
//!   up (the simulation gives up after `idle + interval × count`).
//! - `terminate` runs `pg_terminate_backend` on an admin session of the primary, for the
//!   backend holding the lock's key as `pg_locks` shows it (`client = "holder"`), or for a
//!   client's session by its `application_name` (`lockcheck-client-<c>`).
//! - A crash of `pg-0` or `pg-1` is a `SIGKILL` of the postmaster and its backends and, after
//!   `restart_after_ms`, a start on the same data directory (crash recovery); a `failover`
//!   kills the primary and promotes the standby `failover_detect_ms` later, and the clients'
//!   next connections go to it.
//! - A client's pause closes its gate where it stands (its session stays open and keeps its
//!   locks); its crash aborts its task, so its socket closes and the server ends its session.

use crate::backend::postgres::real::{Postgres, RealPgConn};
use crate::backend::postgres::seam::PgClient;
use crate::backend::postgres::table::{PRIMARY, STANDBY};
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::history::Recorder;
use crate::real::client_tasks::Settle;
use crate::real::nemesis::client_stops::{ClientTasks, Stopping};
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::nemesis::firing::{note, restarts_in_run, start_timed};
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::points::due;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The fault executor of a real PostgreSQL run.
#[derive(Clone)]
pub(crate) struct PgRealNemesis {
    pub(crate) pending: Schedule,
    pub(crate) rec: Recorder,
    /// `servers[0]` is `pg-0`, `servers[1]` the standby `pg-1` when there is one.
    pub(crate) servers: Arc<Vec<Postgres>>,
    /// Which of `servers` is primary now.
    pub(crate) primary: Arc<AtomicUsize>,
    /// `proxies[c][i]`: client `c`'s forwarder to its endpoint `i` (the pooler or `pg-0`, then
    /// `pg-1`).
    pub(crate) proxies: Arc<Vec<Vec<CutProxy>>>,
    pub(crate) clients: ClientTasks,
    /// The advisory key the clients lock.
    pub(crate) key: i64,
    pub(crate) failover_detect_ms: u64,
    /// A crash or a failover is under way.
    pub(crate) busy: Arc<AtomicBool>,
    /// The scenario's `duration_ms`: a crash whose restart falls after it is for good.
    pub(crate) duration_ms: u64,
}

impl PgRealNemesis {
    fn note(&self, what: String) {
        note(&self.rec, what);
    }

    pub(crate) fn start_timed(&self) {
        start_timed(&self.pending, &self.rec, self);
    }

    fn server_index(node: &str) -> Option<usize> {
        match node {
            PRIMARY => Some(0),
            STANDBY => Some(1),
            _ => None,
        }
    }

    /// Terminates the backends `find` selects on the primary, and notes it.
    async fn terminate(&self, find: String, whose: String) {
        let primary = &self.servers[self.primary.load(Ordering::SeqCst)];
        let node = if self.primary.load(Ordering::SeqCst) == 0 {
            PRIMARY
        } else {
            STANDBY
        };
        let admin = RealPgConn::connect(&primary.conninfo(), Duration::from_secs(5)).await;
        let ended = match admin {
            Ok(mut a) => a
                .simple_query(&format!(
                    "SELECT pid, pg_terminate_backend(pid) FROM ({find}) AS victims"
                ))
                .await
                .map(|rows| {
                    rows.into_iter()
                        .filter(|r| r.get(1).cloned().flatten().as_deref() == Some("t"))
                        .filter_map(|r| r.first().cloned().flatten())
                        .collect::<Vec<String>>()
                }),
            Err(e) => Err(e),
        };
        match ended {
            Ok(pids) if !pids.is_empty() => self.note(format!(
                "{node} terminated backend {} of {whose} (pg_terminate_backend): its locks are freed, its client learns it on its next statement",
                pids.join(", ")
            )),
            Ok(_) => self.note(format!(
                "terminate skipped: {whose} has no session on the server now"
            )),
            Err(e) => self.note(format!("terminate of {whose} failed: {e}")),
        }
    }
}

impl Nemesis for PgRealNemesis {
    /// A named client held back from its start (`at_ms = 0`); a pause at a client's point is
    /// [`FaultPoints::reached`]'s.
    fn pause_client(
        &self,
        _at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.clients.start_late(victim, for_ms)
    }

    /// A client program's clock: its libfaketime clock ([`ClientTasks::program_clock`]).
    fn jump_clock(&self, node: &str, by_ms: i64, _wall_only: bool) -> Result<(), Refused> {
        self.clients.program_clock(node, Some(by_ms), 0)
    }

    fn drift_clock(&self, node: &str, ppm: i64) -> Result<(), Refused> {
        self.clients.program_clock(node, None, ppm)
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction: _,
            for_ms,
        } = *cut;
        let servers_cut = nodes.iter().any(|n| !n.starts_with("client-"));
        let clients: Vec<usize> = (0..self.proxies.len())
            .filter(|c| {
                let name = format!("client-{c}");
                if servers_cut {
                    from.is_empty() || from.contains(&name)
                } else {
                    nodes.contains(&name)
                }
            })
            .collect();
        for &c in &clients {
            for p in &self.proxies[c] {
                p.cut(true);
            }
        }
        self.note(format!(
            "{} (forwarders hold every byte)",
            describe_partition(nodes, from, for_ms)
        ));
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            for &c in &clients {
                for p in &me.proxies[c] {
                    p.cut(false);
                }
            }
            me.note("partition healed".into());
        });
        Ok(())
    }

    fn end_session(&self, _at: &Occasion<'_>, victim: &ClientRef) -> Result<(), Refused> {
        let (find, whose) = match victim {
            ClientRef::Holder => {
                let hi = (self.key >> 32) as u32;
                let lo = self.key as u32;
                (
                    format!(
                        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = {hi} AND objid = {lo} AND objsubid = 1"
                    ),
                    "the lock's holder".to_string(),
                )
            }
            ClientRef::Index(c) => (
                format!(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'lockcheck-client-{c}'"
                ),
                format!("client-{c}"),
            ),
        };
        let me = self.clone();
        tokio::spawn(async move { me.terminate(find, whose).await });
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(i) = Self::server_index(node).filter(|&i| i < self.servers.len()) else {
            return Err(Refused::Because(format!(
                "crash of {node}: no such server here"
            )));
        };
        let me = self.clone();
        let node = node.to_string();
        let after = Duration::from_millis(restart_after_ms);
        let restarts = restarts_in_run(&self.rec, restart_after_ms, self.duration_ms);
        if restarts {
            self.busy.store(true, Ordering::SeqCst);
        }
        tokio::spawn(async move {
            let servers = me.servers.clone();
            let pid = servers[i].pid();
            let _ = tokio::task::spawn_blocking(move || servers[i].kill()).await;
            me.note(format!(
                "{node} killed (SIGKILL, pid {pid:?}): every session and advisory lock on it is gone{}",
                if restarts {
                    ""
                } else {
                    "; it stays down (its restart would come after the run's end)"
                }
            ));
            if !restarts {
                return;
            }
            tokio::time::sleep(after).await;
            let servers = me.servers.clone();
            match tokio::task::spawn_blocking(move || servers[i].restart()).await {
                Ok(Ok(())) => me.note(format!(
                    "{node} restarted (crash recovery: no sessions, no advisory locks)"
                )),
                other => me.note(format!("{node} restart failed: {other:?}")),
            }
            me.busy.store(false, Ordering::SeqCst);
        });
        Ok(())
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        if self.servers.len() < 2 || self.primary.load(Ordering::SeqCst) != 0 {
            return Err(Refused::Because(
                "failover skipped: no standby left to promote".into(),
            ));
        }
        let me = self.clone();
        self.busy.store(true, Ordering::SeqCst);
        tokio::spawn(async move {
            let servers = me.servers.clone();
            let pid = servers[0].pid();
            let _ = tokio::task::spawn_blocking(move || servers[0].kill()).await;
            me.note(format!(
                "{PRIMARY} killed (SIGKILL, pid {pid:?}; failover: {STANDBY} is promoted in {} ms)",
                me.failover_detect_ms
            ));
            tokio::time::sleep(Duration::from_millis(me.failover_detect_ms)).await;
            let servers = me.servers.clone();
            match tokio::task::spawn_blocking(move || servers[1].promote()).await {
                Ok(Ok(())) => {
                    me.primary.store(1, Ordering::SeqCst);
                    me.note(format!(
                        "{STANDBY} promoted to master (advisory locks are never WAL-logged: it holds none, while the old holders go on)"
                    ));
                }
                other => me.note(format!("{STANDBY} promotion failed: {other:?}")),
            }
            me.busy.store(false, Ordering::SeqCst);
        });
        Ok(())
    }
}

impl Settle for PgRealNemesis {
    /// Waits for a restart or a promotion under way.
    async fn settle(&self) {
        while self.busy.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl FaultPoints for PgRealNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.pending.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.rec, client, point);
        if !fired.is_empty() {
            let how = Stopping {
                paused: "its session and its locks stay",
                crashed: "task aborted, its connection closes",
                hold: &|_| {},
            };
            self.clients
                .fire_at_client(self, client, point, fired, &how)
                .await;
        }
    }
}
