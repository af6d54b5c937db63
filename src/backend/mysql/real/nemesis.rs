//! The fault executor of a real MySQL run: the capabilities a spawned MariaDB and its clients'
//! forwarders give the fault families. A partition holds a client's forwarder (every byte, both
//! ways), a crash of `mysql-0` is a `SIGKILL` and a restart on the same datadir (InnoDB crash
//! recovery), a pause of it `SIGSTOP` then `SIGCONT`; a client's pause closes its gate where it
//! stands (its transaction stays open), its crash aborts its task (the socket closes and MariaDB
//! rolls the transaction back). Which faults have a recipe at all is `recipes.rs`'s, decided
//! before anything is spawned.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::mysql::real::server::MariaDb;
use crate::backend::mysql::real::world::set_wait_timeout;
use crate::backend::mysql::table::SERVER;
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::real::nemesis::firing::restarts_in_run;
use crate::scenario::Scenario;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::points::due;

use crate::real::nemesis::client_stops::{ClientTasks, Stops};

/// The fault executor of a real MySQL run.
#[derive(Clone)]
pub(crate) struct MysqlNemesis {
    pub(crate) pending: Schedule,
    pub(crate) db: Arc<MariaDb>,
    pub(crate) rec: Recorder,
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) proxies: Arc<Vec<CutProxy>>,
    /// The clients' gates and tasks.
    pub(crate) clients: ClientTasks,
    /// The server was crashed with its restart due after the run: it stays down, and settling
    /// does not wait for it.
    pub(crate) down_for_good: Arc<AtomicBool>,
}

impl MysqlNemesis {
    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    pub(crate) fn start_timed(&self) {
        for (at_ms, kind) in self.pending.take_timed() {
            let me = self.clone();
            tokio::spawn(async move {
                let now = Duration::from_micros(me.rec.now_us());
                tokio::time::sleep(Duration::from_millis(at_ms).saturating_sub(now)).await;
                me.fire(&kind, &me, &Occasion::TIMED);
            });
        }
    }

    /// Waits for a server restart in progress (not for a server down for good).
    pub(crate) async fn settle(&self) {
        while self.db.pid().is_none() && !self.down_for_good.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Carries out one fault through `n` (this nemesis, or its view from a client's point); what
    /// has no recipe here, the history says.
    fn fire<N: Nemesis>(&self, kind: &FaultKind, n: &N, at: &Occasion<'_>) {
        match kind.fire(n, at) {
            Ok(()) => {}
            Err(Refused::Because(why)) => self.note(why),
            Err(Refused::Lacking) => self.note(format!("{kind:?}: no real-mode recipe here")),
        }
    }

    /// `SIGSTOP`s the server and returns once it is stopped; `SIGCONT` follows after `for_ms`.
    async fn stop_server(&self, node: String, for_ms: u64) {
        let db = self.db.clone();
        let pid = db.pid();
        match tokio::task::spawn_blocking(move || db.pause()).await {
            Ok(Ok(())) => self.note(format!(
                "{node} paused for {for_ms} ms (SIGSTOP, pid {pid:?})"
            )),
            other => {
                self.note(format!("{node} pause failed: {other:?}"));
                return;
            }
        }
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            let db = me.db.clone();
            match tokio::task::spawn_blocking(move || db.resume()).await {
                Ok(Ok(())) => me.note(format!("{node} resumed (SIGCONT)")),
                other => me.note(format!("{node} resume failed: {other:?}")),
            }
        });
    }

    /// The faults `client` triggered at `point`; returns when it may go on (never, if it crashed).
    async fn fire_at_client(&self, client: u32, point: &str, due: Vec<FaultKind>) {
        let at = Occasion {
            point,
            by: Some(client),
        };
        let here = AtClient {
            n: self,
            stops: Stops::default(),
            server_pause: RefCell::new(None),
        };
        for kind in due {
            self.fire(&kind, &here, &at);
            self.clients
                .crash_if_asked(
                    here.stops.crashed(),
                    client,
                    point,
                    "task aborted, its connection closes",
                )
                .await;
            // The triggering client goes on only once the server is stopped, so what it sends
            // next meets the pause (as the simulated server's pause is immediate).
            let stop = here.server_pause.borrow_mut().take();
            if let Some((node, for_ms)) = stop {
                self.stop_server(node, for_ms).await;
            }
        }
        let stall = here.stops.stall();
        self.clients.stall_if_asked(stall, client).await;
    }
}

/// What a spawned MariaDB and the clients' forwarders can do at any time.
impl Nemesis for MysqlNemesis {
    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction: _,
            for_ms,
        } = *cut;
        let server_cut = nodes.iter().any(|n| n == SERVER);
        let clients: Vec<usize> = (0..self.proxies.len())
            .filter(|c| {
                let name = format!("client-{c}");
                if server_cut {
                    from.is_empty() || from.contains(&name)
                } else {
                    nodes.contains(&name)
                }
            })
            .collect();
        for &c in &clients {
            self.proxies[c].cut(true);
        }
        self.note(format!(
            "{} (forwarders hold every byte)",
            describe_partition(nodes, from, for_ms)
        ));
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            for &c in &clients {
                me.proxies[c].cut(false);
            }
            me.note("partition healed".into());
        });
        Ok(())
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let me = self.clone();
        let node = node.to_string();
        let after = Duration::from_millis(restart_after_ms);
        let restarts = restarts_in_run(&self.rec, restart_after_ms, self.scenario.duration_ms);
        if !restarts {
            self.down_for_good.store(true, Ordering::SeqCst);
        }
        tokio::spawn(async move {
            let db = me.db.clone();
            let pid = db.pid();
            let _ = tokio::task::spawn_blocking(move || db.kill()).await;
            me.note(format!(
                "{node} killed (SIGKILL, pid {pid:?}){}",
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
            let db = me.db.clone();
            match tokio::task::spawn_blocking(move || db.restart()).await {
                Ok(Ok(())) => {
                    let _ = set_wait_timeout(me.db.port(), &me.scenario).await;
                    me.note(format!("{node} restarted (InnoDB crash recovery)"));
                }
                other => me.note(format!("{node} restart failed: {other:?}")),
            }
        });
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        let me = self.clone();
        let node = node.to_string();
        tokio::spawn(async move { me.stop_server(node, for_ms).await });
        Ok(())
    }
}

/// The nemesis as a client that reached a named point sees it: its own pause and crash happen in
/// its task (gathered here, carried out by [`MysqlNemesis::fire_at_client`]), and a server pause
/// holds it until the server is stopped; the rest is the nemesis's.
struct AtClient<'a> {
    n: &'a MysqlNemesis,
    stops: Stops,
    server_pause: RefCell<Option<(String, u64)>>,
}

impl Nemesis for AtClient<'_> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.stops.pause(
            &self.n.rec,
            at,
            victim,
            for_ms,
            "its transaction stays open",
        )
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        self.stops.crash();
        Ok(())
    }

    fn pause_server(&self, node: &str, for_ms: u64) -> Result<(), Refused> {
        *self.server_pause.borrow_mut() = Some((node.to_string(), for_ms));
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.n.cut(cut)
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        self.n.crash_server(node, restart_after_ms)
    }
}

impl FaultPoints for MysqlNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.pending.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let due = due(&self.pending, &self.rec, client, point);
        self.fire_at_client(client, point, due).await;
    }
}
