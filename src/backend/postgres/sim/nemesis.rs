//! The fault executor of a simulated PostgreSQL run: the client faults every simulated world
//! shares, and PostgreSQL's own: a session terminated, a server's crash (the primary, the
//! standby, PgBouncer) and a failover to the standby.
//!
//! - A paused client keeps its session and so its advisory locks: the server does not care how
//!   long a client thinks (a pause is safe here, unlike with a lease).
//! - A crashed client's socket closes: the server ends its session and frees its locks at once.
//!   Behind a transaction pooler the locks live on the server connections, not with the client,
//!   so a crashed client's lock stays on whichever connection took it.
//! - A terminated session (`pg_terminate_backend` of the holder's pid, as `pg_locks` shows it)
//!   frees its locks at once; its client learns it on its next statement.

use crate::backend::postgres::engine::{Key, SessionId};
use crate::backend::postgres::sim::bouncer::SimBouncer;
use crate::backend::postgres::sim::server::{SimPg, BOUNCER, PRIMARY, STANDBY};
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::sim::service_nemesis::ServiceNemesis;
use std::time::Duration;

/// What PostgreSQL's own faults act on.
#[derive(Clone)]
pub struct PgDeployment {
    /// The servers.
    pub pg: SimPg,
    /// The pooler, when the scenario has one.
    pub bouncer: Option<SimBouncer>,
    /// The advisory lock the clients take: whose holder a `terminate` of the holder ends.
    pub key: Key,
    /// From the primary's death to the standby's promotion.
    pub failover_detect_ms: u64,
}

/// The fault executor of a simulated PostgreSQL run.
pub type PgNemesis = ServiceNemesis<PgDeployment>;

impl ServiceNemesis<PgDeployment> {
    fn terminate(&self, sessions: &[SessionId], whose: &str) -> Result<(), Refused> {
        let server = self.service.pg.server();
        let mut ended = Vec::new();
        for &s in sessions {
            let pid = server.read(|e| e.pid(s));
            if server.terminate(s) {
                self.service.pg.untrack(s);
                ended.push(pid.map_or(s.to_string(), |p| p.to_string()));
            }
        }
        if ended.is_empty() {
            return Err(Refused::Because(format!(
                "terminate skipped: {whose} has no session on the server now"
            )));
        }
        self.note(format!(
            "{PRIMARY} terminated backend {} of {whose} (pg_terminate_backend): its locks are freed, its client learns it on its next statement",
            ended.join(", ")
        ));
        Ok(())
    }
}

impl Nemesis for ServiceNemesis<PgDeployment> {
    fn crash_client(&self, at: &Occasion<'_>, client: u32) -> Result<(), Refused> {
        self.faults
            .crash_client(client, at.point, " (its connection closes)");
        Ok(())
    }

    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.faults
            .pause_client(victim, at.by, for_ms, "its session and its locks stay");
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.faults.partition(cut, "");
        Ok(())
    }

    fn end_session(&self, at: &Occasion<'_>, victim: &ClientRef) -> Result<(), Refused> {
        let pg = &self.service.pg;
        match (victim, at.by) {
            (ClientRef::Index(c), _) => {
                let Some(s) = pg.session_of(*c) else {
                    return Err(Refused::Because(format!(
                        "terminate skipped: client-{c} has no session on the server now"
                    )));
                };
                self.terminate(&[s], &format!("client-{c}"))
            }
            // The client whose step set it off, on the session it runs on; behind a
            // transaction pooler it has none between statements, and the session holding the
            // lock (what `pg_locks` shows an operator) is the one to end.
            (ClientRef::Holder, Some(c)) if pg.session_of(c).is_some() => {
                let s = pg.session_of(c).expect("checked");
                self.terminate(&[s], &format!("client-{c}"))
            }
            (ClientRef::Holder, _) => {
                let holders = pg.holders(self.service.key);
                self.terminate(&holders, "the lock's holder")
            }
        }
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let pg = &self.service.pg;
        let later = Duration::from_millis(restart_after_ms);
        let me = self.clone();
        let name = node.to_string();
        let primary_now = (node == PRIMARY && !pg.promoted()) || (node == STANDBY && pg.promoted());
        if primary_now {
            if !pg.up() {
                return Err(Refused::Because(format!("crash of {node}: it is down")));
            }
            pg.crash();
            self.note(format!(
                "{node} crashed (every session and every advisory lock is gone; they live in shared memory)"
            ));
            self.faults.later(later, async move {
                me.service.pg.restart();
                me.note(format!(
                    "{name} restarted (crash recovery: no sessions, no advisory locks)"
                ));
            });
            return Ok(());
        }
        match node {
            STANDBY => {
                pg.set_standby_up(false);
                self.note(format!(
                    "{node} crashed (the standby: nothing to promote until it restarts)"
                ));
                self.faults.later(later, async move {
                    me.service.pg.set_standby_up(true);
                    me.note(format!(
                        "{name} restarted (it streams the primary's WAL again)"
                    ));
                });
                Ok(())
            }
            BOUNCER => {
                let Some(b) = &self.service.bouncer else {
                    return Err(Refused::Because("crash of pgbouncer: there is none".into()));
                };
                b.crash();
                self.note(format!(
                    "{node} crashed (every client and server connection closes: the server ends those sessions and frees their locks)"
                ));
                self.faults.later(later, async move {
                    if let Some(b) = &me.service.bouncer {
                        b.restart();
                    }
                    me.note(format!("{name} restarted (an empty pool)"));
                });
                Ok(())
            }
            _ => Err(Refused::Because(format!(
                "crash of {node}: it is down for good"
            ))),
        }
    }

    fn fail_over(&self, _master: u32) -> Result<(), Refused> {
        let pg = &self.service.pg;
        if !pg.has_standby() {
            return Err(Refused::Because(
                "failover skipped: no running standby to promote".into(),
            ));
        }
        if !pg.up() {
            return Err(Refused::Because(
                "failover skipped: the primary is down already".into(),
            ));
        }
        pg.crash();
        self.note(format!(
            "{PRIMARY} crashed (failover: {STANDBY} is promoted in {} ms)",
            self.service.failover_detect_ms
        ));
        let me = self.clone();
        self.faults.later(
            Duration::from_millis(self.service.failover_detect_ms),
            async move {
                me.service.pg.promote();
                me.note(format!(
                    "{STANDBY} promoted to master (advisory locks are never WAL-logged: it holds none, while the old holders go on)"
                ));
            },
        );
        Ok(())
    }
}
