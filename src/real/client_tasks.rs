//! The clients of a real run as tokio tasks: who they are (locks in this process, or client
//! programs: [`Clients`]), waiting for them, in every real world, and the whole client side of a
//! run for the etcd and ZooKeeper worlds ([`TaskWorld`], [`run_task_clients`]).
//!
//! A real client is a tokio task. A crashed one never finishes (its gate is dead and it waits
//! forever, as a dead process would), so "every client has finished" is the wrong end: a run is
//! over once every client that is still alive has finished.

use super::client_programs::client_program::Programs;
use super::client_programs::client_program_launch::{Launch, LaunchedPrograms};
use super::nemesis::client_stops::ClientTasks;
use super::run_end::settle_by;
pub use super::run_end::wait_for_live_clients;
use super::{ClientProgramLock, ConnectionTimeouts, RealEnv, RealError, Route, RoutedConnection};
use crate::env::PointHook;
use crate::history::Recorder;
use crate::lock::{Lock, LockConfig};
use crate::resource::Store;
use crate::scenario::Scenario;
use crate::workload::FaultPoints;
use crate::world::{self, ClientRun, World};
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Who a real world's clients are: locks built in this process (`F`, the world's `make_lock`), or
/// the scenario's client programs (`kind = "client-program"`), one per client.
pub(crate) enum Clients<F> {
    InProcess(F),
    Programs,
}

/// The lock builder type of [`Clients::Programs`], which builds no lock of its own (its clients'
/// locks are their programs), for a world whose connections are `C`.
pub(crate) type NoBuilder<C> = fn(LockConfig, C, RealEnv) -> ClientProgramLock<RealEnv>;

/// A world's clients, ready to run: the programs started ([`Clients::launch`]).
pub(crate) enum Ready<F> {
    InProcess(F),
    Programs(LaunchedPrograms),
}

impl<F> Clients<F> {
    /// Starts the client programs, if the clients are programs, each as `launches` says (what the
    /// world gives it: where its forwarders are), and waits for their `hello`. Call before the
    /// run's recorder exists: its true time 0 is when every program can act. Blocks a runtime
    /// thread (`block_in_place`) meanwhile.
    pub(crate) fn launch(
        self,
        s: &Scenario,
        launches: impl FnOnce() -> Vec<Launch>,
    ) -> Result<Ready<F>, RealError> {
        match self {
            Clients::InProcess(make_lock) => Ok(Ready::InProcess(make_lock)),
            Clients::Programs => {
                let launches = launches();
                tokio::task::block_in_place(|| LaunchedPrograms::start(s, launches))
                    .map(Ready::Programs)
            }
        }
    }
}

impl<F> Ready<F> {
    /// The programs the nemesis pauses and kills with their clients (none for in-process ones).
    pub(crate) fn programs(&self) -> Programs {
        match self {
            Ready::InProcess(_) => Programs::default(),
            Ready::Programs(p) => p.programs.clone(),
        }
    }
}

/// A nemesis whose faults may still be under way when the clients are done (a server restart,
/// an election): the run waits for them before it reads the final state.
pub(crate) trait Settle {
    /// Returns once no fault is under way.
    fn settle(&self) -> impl Future<Output = ()>;
}

/// A real world ([`World`]) whose clients are tokio tasks behind gates, each with the
/// connections `connect` makes, faulted by nemesis `N`; the protected resource lives on a
/// spawned `redis-server`. The etcd and ZooKeeper worlds are this, with their own connections
/// and nemesis.
pub(crate) struct TaskWorld<N, C, F> {
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
    pub(crate) fn new(
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

    /// A client's run is a task its crash can abort. A client held back from its start (a
    /// late start: [`ClientTasks::hold_back_late_starters`]) waits behind its closed gate
    /// before its first step; a running task's gate stops it only where it looks at it.
    fn spawn_client(&mut self, c: u32, run: ClientRun) {
        let gate = self.clients.gates[c as usize].clone();
        let task = tokio::spawn(async move {
            gate.wait_open().await;
            run.await
        });
        self.clients.tasks.lock().unwrap().push(task.abort_handle());
        self.tasks.push(task);
    }

    /// Crashed clients never finish: stop waiting once every live one has; then stop the rest.
    async fn wait_clients(&mut self, end: Duration) {
        wait_for_live_clients(&self.rec, &self.tasks, &self.clients.gates, end).await;
    }

    /// Lets a server restart or election in progress finish before the history is read, by the
    /// run's end.
    async fn settle(&self, end: Duration) {
        let what = "the nemesis's server faults (a restart, a pause, an election)";
        settle_by(&self.rec, end, self.nemesis.settle(), what).await;
    }
}

/// Runs a task world's clients until the scenario is over (`grace`: how long a stuck client is
/// waited for): locks built by the world's `make_lock` on `connect`'s connections, or the
/// programs already started, which are killed when the run is over. `rec`, `nemesis`, `tasks`
/// and `storage_url` are the world's ([`TaskWorld::new`]).
pub(crate) async fn run_task_clients<N, C, L, Connect, F>(
    (rec, nemesis, tasks, storage_url): (Recorder, N, ClientTasks, String),
    scenario: &Scenario,
    grace: Duration,
    clients: Ready<F>,
    connect: Connect,
) where
    N: FaultPoints + Settle,
    L: Lock + 'static,
    Connect: FnMut(u32, &RealEnv) -> C,
    F: Fn(LockConfig, C, RealEnv) -> L,
{
    match clients {
        Ready::Programs(mut programs) => {
            let all = programs.programs.clone();
            // A program makes its own connections, through the forwarders it was given.
            let none = |_: u32, _: &RealEnv| ();
            let mut world = TaskWorld::new(rec.clone(), nemesis, tasks, storage_url, none);
            world::run_clients(&mut world, scenario, grace, |c, config, (), env| {
                programs.lock(c, config, env, rec.clone())
            })
            .await;
            LaunchedPrograms::kill_all(&all);
        }
        Ready::InProcess(make_lock) => {
            let mut world = TaskWorld::new(rec, nemesis, tasks, storage_url, connect);
            world::run_clients(&mut world, scenario, grace, |_, config, conn, env| {
                make_lock(config, conn, env)
            })
            .await;
        }
    }
}

/// Runs `drive` on the two-thread tokio runtime a real run's clients, forwarders and nemesis
/// share, then gives what is left of them (a forwarder held for good) 2 s to stop.
pub(crate) fn block_on_runtime<T>(
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
