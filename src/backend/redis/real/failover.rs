//! The deterministic failover recipe on real `redis-server` processes.
//!
//! The lock-loss scenario: a client acquires a lock on the master, the master dies
//! before its replica has the key, the replica is promoted, and a second client
//! acquires the same lock on it. With asynchronous replication this window is a
//! few hundred microseconds wide, so waiting for it to happen by chance makes a
//! flaky test. The recipe forces it instead, as composable steps:
//!
//! 1. [`FailoverRig::start`]: a master and one replica, replication link up.
//! 2. [`FailoverRig::isolate_replica`]: `SIGSTOP` the replica, then
//!    `CLIENT KILL TYPE replica` on the master. From now on no write reaches the
//!    replica (see [`super::admin::client_kill_replicas`] for why stopping alone is
//!    not enough). The test's client now acquires on the master.
//! 3. [`FailoverRig::fail_over`]: `SIGKILL` the master, `SIGCONT` the replica,
//!    `REPLICAOF NO ONE`, wait for `role:master`, then switch the [`Route`] so
//!    clients follow (Sentinel's job in production).
//!
//! Steps 2+3 take about 20 ms; `redis-sentinel` does the automatic version in about
//! 1.2 s with `down-after-milliseconds 1000`. All steps block; call them from
//! `spawn_blocking` in async code.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::redis::real::admin::{client_kill_replicas, promote, wait_role_master};
pub use crate::real::FailoverPhase;
use crate::real::{RealError, RedisServer, Route, ServerOptions};

/// How long a fresh replica may take to finish its first sync. Diskless sync of an
/// empty dataset takes milliseconds; the bound only catches a broken set-up.
const LINK_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a promoted replica may take to report `role:master`. `REPLICAOF NO ONE`
/// is synchronous, so this normally holds on the first poll.
const PROMOTION_TIMEOUT: Duration = Duration::from_secs(2);

/// Wall-clock durations of the recipe's steps, measured with the monotonic clock.
#[derive(Debug, Clone, Default)]
pub struct FailoverTimings {
    /// Spawning the master until it answered `PING`.
    pub master_spawn: Duration,
    /// Spawning the replica until it answered `PING`.
    pub replica_spawn: Duration,
    /// From the replica answering `PING` to `master_link_status:up`.
    pub link_up: Duration,
    /// [`FailoverRig::isolate_replica`], if it ran.
    pub isolate: Option<Duration>,
    /// [`FailoverRig::fail_over`], if it ran.
    pub fail_over: Option<Duration>,
}

impl FailoverTimings {
    /// The fault itself: isolation plus failover (what a scenario's timeline sees).
    pub fn recipe(&self) -> Option<Duration> {
        Some(self.isolate? + self.fail_over?)
    }
}

/// A master, its replica, and the [`Route`] clients follow.
#[derive(Debug)]
pub struct FailoverRig {
    // Field order is drop order: the replica dies first, so it never logs a burst
    // of reconnect attempts to a master that is already gone.
    replica: RedisServer,
    master: RedisServer,
    route: Arc<Route>,
    phase: FailoverPhase,
    timings: FailoverTimings,
}

impl FailoverRig {
    /// Starts a master and a replica with default options and waits until the
    /// replication link is up.
    pub fn start() -> Result<FailoverRig, RealError> {
        Self::start_with(ServerOptions::default(), ServerOptions::default())
    }

    /// Like [`FailoverRig::start`], with options per server (e.g. a faked clock).
    /// `replica.replica_of` is overwritten with the master's port.
    pub fn start_with(
        master: ServerOptions,
        mut replica: ServerOptions,
    ) -> Result<FailoverRig, RealError> {
        let master = RedisServer::spawn(master)?;
        replica.replica_of = Some(master.port());
        let replica = RedisServer::spawn(replica)?;
        let link_started = Instant::now();
        replica.wait_replication_up(LINK_UP_TIMEOUT)?;
        let timings = FailoverTimings {
            master_spawn: master.startup_time(),
            replica_spawn: replica.startup_time(),
            link_up: link_started.elapsed(),
            isolate: None,
            fail_over: None,
        };
        Ok(FailoverRig {
            route: Route::new(master.url()),
            replica,
            master,
            phase: FailoverPhase::Replicating,
            timings,
        })
    }

    /// The route clients should follow (give it to [`crate::real::RoutedConnection::new`]).
    pub fn route(&self) -> Arc<Route> {
        Arc::clone(&self.route)
    }

    /// The URL of the server that is master now.
    pub fn master_url(&self) -> String {
        self.route.url()
    }

    /// The server that is master now: the original master, or after
    /// [`FailoverRig::fail_over`] the promoted replica.
    pub fn current_master(&self) -> &RedisServer {
        match self.phase {
            FailoverPhase::FailedOver => &self.replica,
            _ => &self.master,
        }
    }

    /// The master the rig started with (dead after [`FailoverRig::fail_over`]).
    pub fn original_master(&self) -> &RedisServer {
        &self.master
    }

    /// The replica the rig started with (the master after [`FailoverRig::fail_over`]).
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// Where the rig is in the recipe.
    pub fn phase(&self) -> FailoverPhase {
        self.phase
    }

    /// How long each step took.
    pub fn timings(&self) -> &FailoverTimings {
        &self.timings
    }

    /// Stops the replica and cuts its link, so nothing written from now on reaches
    /// it. Returns how long that took.
    ///
    /// The replica is stopped *first*: the other order lets it notice the closed
    /// link and reconnect (a fresh partial sync) before the stop lands.
    pub fn isolate_replica(&mut self) -> Result<Duration, RealError> {
        if self.phase != FailoverPhase::Replicating {
            return Err(RealError::InvalidStep {
                step: "isolate_replica",
                phase: self.phase,
            });
        }
        let started = Instant::now();
        self.replica.pause()?;
        client_kill_replicas(&self.master)?;
        let took = started.elapsed();
        self.timings.isolate = Some(took);
        self.phase = FailoverPhase::Isolated;
        Ok(took)
    }

    /// Kills the master, promotes the replica and switches the route to it.
    /// Returns how long that took.
    ///
    /// Also allowed without [`FailoverRig::isolate_replica`]: then whether the
    /// replica has the latest writes depends on replication lag, as in a real
    /// unplanned failover.
    pub fn fail_over(&mut self) -> Result<Duration, RealError> {
        if self.phase == FailoverPhase::FailedOver {
            return Err(RealError::InvalidStep {
                step: "fail_over",
                phase: self.phase,
            });
        }
        let started = Instant::now();
        self.master.kill();
        if self.replica.is_paused() {
            self.replica.resume()?;
        }
        promote(&self.replica)?;
        wait_role_master(&self.replica, PROMOTION_TIMEOUT)?;
        self.route.switch_to(self.replica.url());
        let took = started.elapsed();
        self.timings.fail_over = Some(took);
        self.phase = FailoverPhase::FailedOver;
        Ok(took)
    }
}
