//! Real mode: the scenario's lock and workload on `redis-server` processes lockcheck spawns.
//!
//! The lock code, the workload and the checkers are the ones the simulator uses; only the two
//! seams change (a [`RoutedConnection`] and [`RealEnv`]). Faults use the deterministic recipes of
//! DESIGN.md rather than luck:
//! - `failover`: replication to the replica is held back from the start (SIGSTOP of the replica
//!   and `CLIENT KILL TYPE replica` on the master), so the promoted replica is certain not to have
//!   the lock; on the trigger the master is SIGKILLed and, `failover_detect_ms` later, the replica
//!   is resumed, promoted with `REPLICAOF NO ONE`, and clients are routed to it.
//! - `pause`: the holder stalls at the "acquired" point for `for_ms` (what a GC pause does to it).
//!
//! Every process is killed when this returns, on error, on panic and on Ctrl-C.

use super::connection::{ConnectionTimeouts, Route, RoutedConnection};
use super::failover::FailoverRig;
use super::process::{RedisServer, ServerOptions};
use super::RealError;
use crate::env::RealEnv;
use crate::history::{EventKind, History, Recorder};
use crate::lock::{AnyLock, LockConfig};
use crate::scenario::{ClientRef, Fault, FaultKind, Scenario, Trigger};
use crate::workload::{run_client, ClientPlan, Counter, FaultPoints};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One master group on real processes.
enum Group {
    Single(RedisServer),
    Replicated(Box<FailoverRig>),
}

impl Group {
    fn route(&self) -> Arc<Route> {
        match self {
            Group::Single(s) => Route::new(s.url()),
            Group::Replicated(r) => r.route(),
        }
    }
}

/// Why a scenario cannot run on real processes (exit code 2, with the reason).
fn unsupported(what: String) -> RealError {
    RealError::Unsupported(what)
}

/// Checks that every fault of the scenario has a real-mode recipe.
fn check_supported(s: &Scenario) -> Result<(), RealError> {
    if s.redis.replicas > 1 {
        return Err(unsupported(format!(
            "real mode runs at most 1 replica per master; `{}` asks for {}",
            s.name, s.redis.replicas
        )));
    }
    for f in &s.faults {
        match (&f.kind, &f.trigger) {
            (FaultKind::Failover { .. }, _) => {}
            (FaultKind::Pause { .. }, Trigger::Acquired { .. }) => {}
            (kind, trigger) => {
                return Err(unsupported(format!(
                    "fault {kind:?} with trigger {trigger:?} has no real-mode recipe yet; run it in simulation (without --real)"
                )))
            }
        }
    }
    Ok(())
}

/// Runs `scenario` on spawned servers and returns the history. `seed` only seeds the clients'
/// randomness source: real runs are not deterministic.
pub fn run(scenario: &Scenario, seed: u64) -> Result<History, RealError> {
    let _ = seed;
    check_supported(scenario)?;
    super::cleanup::install_cleanup_handlers();
    // Spawn from this (long-lived) thread: the servers' parent-death signal is tied to it.
    let mut groups = Vec::new();
    for _ in 0..scenario.redis.masters {
        groups.push(if scenario.redis.replicas == 1 {
            Group::Replicated(Box::new(FailoverRig::start_with(
                ServerOptions::default(),
                ServerOptions::default(),
            )?))
        } else {
            Group::Single(RedisServer::spawn(ServerOptions::default())?)
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))?;
    let rec = rt.block_on(async { Recorder::real() });
    let groups: Arc<Vec<Mutex<Group>>> = Arc::new(groups.into_iter().map(Mutex::new).collect());
    let nemesis = RealNemesis {
        pending: Arc::new(Mutex::new(scenario.faults.clone())),
        groups: groups.clone(),
        rec: rec.clone(),
        detect: Duration::from_millis(scenario.redis.failover_detect_ms),
    };
    nemesis.hold_back_replication()?;
    let history = rt.block_on(drive(scenario, rec, nemesis, groups.clone()));
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(groups);
    Ok(history)
}

async fn drive(
    scenario: &Scenario,
    rec: Recorder,
    nemesis: RealNemesis,
    groups: Arc<Vec<Mutex<Group>>>,
) -> History {
    let routes: Vec<Arc<Route>> = groups.iter().map(|g| g.lock().unwrap().route()).collect();
    let timeouts = ConnectionTimeouts {
        connect: Duration::from_millis(scenario.redis.request_timeout_ms),
        response: Duration::from_millis(scenario.redis.request_timeout_ms),
    };
    let counter = Counter::default();
    let config = LockConfig::from_spec(&scenario.lock);
    let stop_at_us = scenario.duration_ms * 1000;
    let mut tasks = Vec::new();
    for c in 0..scenario.workload.clients {
        let conns: Vec<RoutedConnection> = routes
            .iter()
            .map(|r| RoutedConnection::new(r.clone(), timeouts))
            .collect();
        let env = RealEnv::default();
        let lock = AnyLock::build(scenario.lock.kind, config.clone(), conns, env.clone());
        let plan = ClientPlan {
            index: c,
            cycles: scenario.workload.cycles,
            hold_ms: scenario.workload.hold_ms,
            think_ms: scenario.workload.think_ms,
            stop_at_us,
            check_validity_before_write: scenario.lock.check_validity_before_write,
        };
        tasks.push(tokio::spawn(run_client(
            plan,
            lock,
            env,
            rec.clone(),
            nemesis.clone(),
            counter.clone(),
        )));
    }
    let grace = scenario.lock.wait_ms
        + scenario.lock.ttl_ms.unwrap_or(30_000)
        + scenario.workload.hold_ms[1]
        + 5_000;
    let all = futures::future::join_all(tasks);
    let _ = tokio::time::timeout(Duration::from_millis(scenario.duration_ms + grace), all).await;
    // Let an in-flight failover finish recording before the history is read.
    nemesis.settle().await;
    rec.snapshot()
}

/// The real-mode fault executor.
#[derive(Clone)]
struct RealNemesis {
    pending: Arc<Mutex<Vec<Fault>>>,
    groups: Arc<Vec<Mutex<Group>>>,
    rec: Recorder,
    detect: Duration,
}

impl RealNemesis {
    fn note(&self, what: String) {
        self.rec.record("nemesis", EventKind::Fault { what });
    }

    /// The first step of the failover recipe, before any client runs: nothing written from now
    /// on reaches the replica that will be promoted.
    fn hold_back_replication(&self) -> Result<(), RealError> {
        let pending = self.pending.lock().unwrap().clone();
        for f in pending {
            if let FaultKind::Failover { master } = f.kind {
                let mut g = self.groups[master as usize].lock().unwrap();
                if let Group::Replicated(rig) = &mut *g {
                    rig.isolate_replica()?;
                    self.note(format!(
                        "replication to redis-{master}-replica-0 held back (SIGSTOP, CLIENT KILL TYPE replica)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Kills master `m`, waits `failover_detect_ms`, promotes its replica and reroutes clients.
    fn fail_over(&self, m: usize) {
        let mut g = self.groups[m].lock().unwrap();
        let Group::Replicated(rig) = &mut *g else {
            self.note(format!("failover of redis-{m}: it has no replica"));
            return;
        };
        rig.original_master().kill();
        self.note(format!("redis-{m} killed (SIGKILL)"));
        std::thread::sleep(self.detect);
        match rig.fail_over() {
            Ok(_) => self.note(format!(
                "redis-{m}-replica-0 promoted to master of group {m}"
            )),
            Err(e) => self.note(format!("failover of redis-{m} failed: {e}")),
        }
    }

    /// Waits until no failover is in progress (each holds its group's lock).
    async fn settle(&self) {
        let groups = self.groups.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for g in groups.iter() {
                drop(g.lock().unwrap());
            }
        })
        .await;
    }
}

impl FaultPoints for RealNemesis {
    async fn acquired(&self, client: u32) {
        let now_ms = self.rec.now_us() / 1000;
        let due: Vec<Fault> = {
            let mut p = self.pending.lock().unwrap();
            let (due, rest): (Vec<Fault>, Vec<Fault>) = p.drain(..).partition(|f| {
                let Trigger::Acquired { after_ms } = f.trigger else {
                    return false;
                };
                let whose = match &f.kind {
                    FaultKind::Pause {
                        client: ClientRef::Index(i),
                        ..
                    } => *i == client,
                    _ => true,
                };
                now_ms >= after_ms && whose
            });
            *p = rest;
            due
        };
        let mut stall = Duration::ZERO;
        for f in due {
            match f.kind {
                FaultKind::Failover { master } => {
                    let me = self.clone();
                    tokio::task::spawn_blocking(move || me.fail_over(master as usize));
                }
                FaultKind::Pause { for_ms, .. } => {
                    self.note(format!(
                        "client-{client} paused for {for_ms} ms (stalled at acquired)"
                    ));
                    stall = stall.max(Duration::from_millis(for_ms));
                }
                _ => {}
            }
        }
        if !stall.is_zero() {
            tokio::time::sleep(stall).await;
            self.note(format!("client-{client} resumed"));
        }
    }
}
