//! The fault executor of a real etcd run: the capabilities spawned etcd members and the
//! clients' forwarders give the fault families. A partition holds every forwarder of the cut
//! clients (every byte, both ways); a crash of `etcd-<i>` is a `SIGKILL` and, after
//! `restart_after_ms`, a start on the same data directory (the leader's crash makes the others
//! elect a new one; a restart due after the scenario's `duration_ms` is not carried out: the
//! crash is for good); a client's pause closes its gate where it stands (its keep-alive task
//! stops with it), its crash aborts its task. Which faults have a recipe at all is
//! `recipes.rs`'s, decided before anything is spawned.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::etcd::real::server::EtcdCluster;
use crate::fault::partition::describe_partition;
use crate::fault::{ClientRef, Cut, Nemesis, Occasion, Refused};
use crate::history::Recorder;
use crate::real::client_tasks::Settle;
use crate::real::nemesis::cut_proxy::CutProxy;
use crate::schedule::Schedule;
use crate::workload::FaultPoints;
use crate::world::points::due;

use crate::real::nemesis::client_stops::{ClientTasks, Stopping};
use crate::real::nemesis::firing::{note, restarts_in_run, start_timed};

/// The fault executor of a real etcd run.
#[derive(Clone)]
pub(crate) struct EtcdNemesis {
    pub(crate) pending: Schedule,
    pub(crate) cluster: Arc<EtcdCluster>,
    pub(crate) rec: Recorder,
    /// `proxies[c][m]`: client `c`'s forwarder to member `m`.
    pub(crate) proxies: Arc<Vec<Vec<CutProxy>>>,
    /// The clients' gates and tasks.
    pub(crate) clients: ClientTasks,
    /// The scenario's `duration_ms`: a restart due after it is not carried out.
    pub(crate) duration_ms: u64,
    /// `down_for_good[m]`: member `m` was killed and will not restart in this run, so nothing
    /// waits for it ([`Settle`]).
    pub(crate) down_for_good: Arc<Vec<AtomicBool>>,
}

impl EtcdNemesis {
    fn note(&self, what: String) {
        note(&self.rec, what);
    }

    pub(crate) fn start_timed(&self) {
        start_timed(&self.pending, &self.rec, self);
    }

    fn member_index(&self, node: &str) -> Option<usize> {
        (0..self.cluster.len()).find(|&m| node == format!("etcd-{m}"))
    }

    /// Watches, until the killed leader `killed`'s restart is due (`within` after
    /// `killed_at`), for the running members to agree on a new leader, and notes it.
    async fn watch_election(&self, killed: usize, killed_at: Instant, within: Duration) {
        while killed_at.elapsed() < within {
            let cluster = self.cluster.clone();
            let agreed = tokio::task::spawn_blocking(move || {
                let seen: Vec<Option<usize>> = (0..cluster.len())
                    .filter(|&i| cluster.pid(i).is_some())
                    .map(|i| cluster.leader_seen_by(i))
                    .collect();
                let first = *seen.first()?;
                seen.iter().all(|&s| s == first).then_some(first?)
            })
            .await
            .ok()
            .flatten();
            if let Some(new) = agreed.filter(|&l| l != killed) {
                self.note(format!(
                    "etcd-{new} elected leader (seen {} ms after the kill)",
                    killed_at.elapsed().as_millis()
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// What spawned etcd members and the clients' forwarders can do at any time.
impl Nemesis for EtcdNemesis {
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
        let restarts = restarts_in_run(&self.rec, restart_after_ms, self.duration_ms);
        if !restarts {
            self.down_for_good[m].store(true, Ordering::SeqCst);
        }
        tokio::spawn(async move {
            let cluster = me.cluster.clone();
            let pid = cluster.pid(m);
            // Whether it leads, asked just before the kill: then the history notes who the
            // others elect, as the simulation does (the report's lanes follow the notes).
            let led = tokio::task::spawn_blocking(move || {
                let led = cluster.leader_seen_by(m) == Some(m);
                cluster.kill(m);
                led
            })
            .await
            .unwrap_or(false);
            let killed_at = Instant::now();
            me.note(format!(
                "{node} killed (SIGKILL, pid {pid:?}){}",
                if restarts {
                    ""
                } else {
                    "; it stays down (its restart would come after the run's end)"
                }
            ));
            if led {
                // Until its restart, or for the rest of the run if it stays down.
                let run_left = Duration::from_millis(me.duration_ms)
                    .saturating_sub(Duration::from_micros(me.rec.now_us()));
                let within = if restarts { after } else { run_left };
                me.watch_election(m, killed_at, within).await;
            }
            if !restarts {
                return;
            }
            tokio::time::sleep(after.saturating_sub(killed_at.elapsed())).await;
            let cluster = me.cluster.clone();
            match tokio::task::spawn_blocking(move || cluster.start_again(m)).await {
                Ok(Ok(())) => me.note(format!("{node} restarted (its data directory kept)")),
                other => me.note(format!("{node} restart failed: {other:?}")),
            }
        });
        Ok(())
    }
}

impl Settle for EtcdNemesis {
    /// Waits for a member restart in progress (not for a member down for good).
    async fn settle(&self) {
        while (0..self.cluster.len())
            .any(|m| self.cluster.pid(m).is_none() && !self.down_for_good[m].load(Ordering::SeqCst))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl FaultPoints for EtcdNemesis {
    fn never_fired(&self) -> Vec<crate::fault::Fault> {
        self.pending.pending()
    }

    async fn reached(&self, client: u32, point: &'static str) {
        let fired = due(&self.pending, &self.rec, client, point);
        if !fired.is_empty() {
            let how = Stopping {
                paused: "its keep-alives stop too",
                crashed: "task aborted, its keep-alives stop",
                hold: &|_| {},
            };
            self.clients
                .fire_at_client(self, client, point, fired, &how)
                .await;
        }
    }
}
