//! The clients of a real run as tokio tasks: waiting for them, in every real world, and the
//! whole client side of a run for the etcd and ZooKeeper worlds ([`TaskWorld`]).
//!
//! A real client is a tokio task. A crashed one never finishes (its gate is dead and it waits
//! forever, as a dead process would), so "every client has finished" is the wrong end: a run is
//! over once every client that is still alive has finished.

use super::nemesis::client_stops::ClientTasks;
use super::{ConnectionTimeouts, Gate, RealEnv, RealError, Route, RoutedConnection};
use crate::env::PointHook;
use crate::history::Recorder;
use crate::resource::Store;
use crate::workload::FaultPoints;
use crate::world::{ClientRun, World};
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A nemesis whose faults may still be under way when the clients are done (a server restart,
/// an election): the run waits for them before it reads the final state.
pub(in crate::real) trait Settle {
    /// Returns once no fault is under way.
    fn settle(&self) -> impl Future<Output = ()>;
}

/// A real world ([`World`]) whose clients are tokio tasks behind gates, each with the
/// connections `connect` makes, faulted by nemesis `N`; the protected resource lives on a
/// spawned `redis-server`. The etcd and ZooKeeper worlds are this, with their own connections
/// and nemesis.
pub(in crate::real) struct TaskWorld<N, C, F> {
    rec: Recorder,
    nemesis: N,
    /// The clients' gates and tasks, which their faults act on (the nemesis holds a clone).
    clients: ClientTasks,
    storage: Arc<Route>,
    tasks: Vec<JoinHandle<()>>,
    connect: F,
    _conns: PhantomData<fn() -> C>,
}

impl<N, C, F> TaskWorld<N, C, F> {
    /// A world recording to `rec`, whose clients are behind `clients`' gates, store the
    /// resource at `storage_url` and connect with `connect(c, env)`.
    pub(in crate::real) fn new(
        rec: Recorder,
        nemesis: N,
        clients: ClientTasks,
        storage_url: String,
        connect: F,
    ) -> Self {
        TaskWorld {
            rec,
            nemesis,
            clients,
            storage: Route::new(storage_url),
            tasks: Vec::new(),
            connect,
            _conns: PhantomData,
        }
    }
}

impl<N, C, F> World for TaskWorld<N, C, F>
where
    N: FaultPoints + Settle,
    F: FnMut(u32, &RealEnv) -> C,
{
    type Conns = C;
    type Env = RealEnv;
    type StoreConn = RoutedConnection;
    type Nemesis = N;

    fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn nemesis(&self) -> &N {
        &self.nemesis
    }

    fn client_env(&mut self, c: u32, points: PointHook) -> RealEnv {
        RealEnv::default()
            .with_gate(self.clients.gates[c as usize].clone())
            .with_points(points)
    }

    fn connections(&mut self, c: u32, env: &RealEnv) -> C {
        (self.connect)(c, env)
    }

    fn store(&mut self, _id: u64) -> Store<RoutedConnection> {
        let timeouts = ConnectionTimeouts {
            connect: Duration::from_secs(2),
            response: Duration::from_secs(2),
        };
        Store::new(RoutedConnection::new(self.storage.clone(), timeouts))
    }

    /// A client's run is a task its crash can abort.
    fn spawn_client(&mut self, _c: u32, run: ClientRun) {
        let task = tokio::spawn(run);
        self.clients.tasks.lock().unwrap().push(task.abort_handle());
        self.tasks.push(task);
    }

    /// Crashed clients never finish: stop waiting once every live one has; then stop the rest.
    async fn wait_clients(&mut self, limit: Duration) {
        wait_for_live_clients(&self.tasks, &self.clients.gates, limit).await;
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Lets a server restart or election in progress finish before the history is read.
    async fn settle(&self) {
        self.nemesis.settle().await;
    }
}

/// Runs `drive` on the two-thread tokio runtime a real run's clients, forwarders and nemesis
/// share, then gives what is left of them (a forwarder held for good) 2 s to stop.
pub(in crate::real) fn block_on_runtime<T>(
    drive: impl Future<Output = Result<T, RealError>>,
) -> Result<T, RealError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RealError::io("starting the tokio runtime", e))?;
    let out = rt.block_on(drive);
    rt.shutdown_timeout(Duration::from_secs(2));
    out
}

/// Waits, at most `limit`, until every client task has finished or its gate says it crashed.
pub async fn wait_for_live_clients(tasks: &[JoinHandle<()>], gates: &[Gate], limit: Duration) {
    let all = async {
        while !tasks
            .iter()
            .zip(gates)
            .all(|(t, g)| t.is_finished() || g.is_dead())
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(limit, all).await;
}
