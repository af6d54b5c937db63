//! The fault executor of a real etcd run: the capabilities spawned etcd members and the
//! clients' forwarders give the fault families. A partition holds every forwarder of the cut
//! clients (every byte, both ways); a crash of `etcd-<i>` is a `SIGKILL` and, after
//! `restart_after_ms`, a start on the same data directory (the leader's crash makes the others
//! elect a new one); a client's pause closes its gate where it stands (its keep-alive task
//! stops with it), its crash aborts its task. Which faults have a recipe at all is
//! `recipes.rs`'s, decided before anything is spawned.

use std::sync::Arc;
use std::time::Duration;

use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, FaultKind, Nemesis, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::real::mysql_world::CutProxy;
use crate::real::servers::etcd::EtcdCluster;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::mysql::due;

use super::client_stops::{ClientTasks, Stops};

/// The fault executor of a real etcd run.
#[derive(Clone)]
pub(in crate::real) struct EtcdNemesis {
    pub(in crate::real) pending: Schedule,
    pub(in crate::real) cluster: Arc<EtcdCluster>,
    pub(in crate::real) rec: Recorder,
    /// `proxies[c][m]`: client `c`'s forwarder to member `m`.
    pub(in crate::real) proxies: Arc<Vec<Vec<CutProxy>>>,
    /// The clients' gates and tasks.
    pub(in crate::real) clients: ClientTasks,
}

impl EtcdNemesis {
    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    pub(in crate::real) fn start_timed(&self) {
        for (at_ms, kind) in self.pending.take_timed() {
            let me = self.clone();
            tokio::spawn(async move {
                let now = Duration::from_micros(me.rec.now_us());
                tokio::time::sleep(Duration::from_millis(at_ms).saturating_sub(now)).await;
                me.fire(&kind, &me, &Occasion::TIMED);
            });
        }
    }

    /// Waits for a member restart in progress.
    pub(in crate::real) async fn settle(&self) {
        while (0..self.cluster.len()).any(|m| self.cluster.pid(m).is_none()) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn fire<N: Nemesis>(&self, kind: &FaultKind, n: &N, at: &Occasion<'_>) {
        match kind.fire(n, at) {
            Ok(()) => {}
            Err(Refused::Because(why)) => self.note(why),
            Err(Refused::Lacking) => self.note(format!("{kind:?}: no real-mode recipe here")),
        }
    }

    fn member_index(&self, node: &str) -> Option<usize> {
        (0..self.cluster.len()).find(|&m| node == format!("etcd-{m}"))
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
        };
        for kind in due {
            self.fire(&kind, &here, &at);
            self.clients
                .crash_if_asked(
                    here.stops.crashed(),
                    client,
                    point,
                    "task aborted, its keep-alives stop",
                )
                .await;
        }
        let stall = here.stops.stall();
        self.clients.stall_if_asked(stall, client).await;
    }
}

/// What spawned etcd members and the clients' forwarders can do at any time.
impl Nemesis for EtcdNemesis {
    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        let Cut {
            nodes,
            from,
            direction: _,
            for_ms,
        } = *cut;
        let members_cut = nodes.iter().any(|n| self.member_index(n).is_some());
        let clients: Vec<usize> = (0..self.proxies.len())
            .filter(|c| {
                let name = format!("client-{c}");
                if members_cut {
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

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        let Some(m) = self.member_index(node) else {
            return Err(Refused::Because(format!(
                "crash of {node}: only etcd members can crash"
            )));
        };
        let me = self.clone();
        let node = node.to_string();
        let after = Duration::from_millis(restart_after_ms);
        tokio::spawn(async move {
            let cluster = me.cluster.clone();
            let pid = cluster.pid(m);
            let _ = tokio::task::spawn_blocking(move || cluster.kill(m)).await;
            me.note(format!("{node} killed (SIGKILL, pid {pid:?})"));
            tokio::time::sleep(after).await;
            let cluster = me.cluster.clone();
            match tokio::task::spawn_blocking(move || cluster.start_again(m)).await {
                Ok(Ok(())) => me.note(format!("{node} restarted (its data directory kept)")),
                other => me.note(format!("{node} restart failed: {other:?}")),
            }
        });
        Ok(())
    }
}

/// The nemesis as a client that reached a named point sees it: its own pause and crash happen in
/// its task (gathered here, carried out by [`EtcdNemesis::fire_at_client`]); the rest is the
/// nemesis's.
struct AtClient<'a> {
    n: &'a EtcdNemesis,
    stops: Stops,
}

impl Nemesis for AtClient<'_> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.stops
            .pause(&self.n.rec, at, victim, for_ms, "its keep-alives stop too")
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        self.stops.crash();
        Ok(())
    }

    fn cut(&self, cut: &Cut<'_>) -> Result<(), Refused> {
        self.n.cut(cut)
    }

    fn crash_server(&self, node: &str, restart_after_ms: u64) -> Result<(), Refused> {
        self.n.crash_server(node, restart_after_ms)
    }
}

impl FaultPoints for EtcdNemesis {
    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.rec, client, point);
        if !fired.is_empty() {
            self.fire_at_client(client, point, fired).await;
        }
    }
}
