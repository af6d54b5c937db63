//! The lock clients' connection in real mode: a `ConnectionLike` that follows
//! failovers.
//!
//! A lock under test talks to "the Redis master", not to a port. In production a
//! Sentinel-aware client asks Sentinel for the current master and reconnects when
//! it changes; [`Route`] plays Sentinel's part (the failover step switches it) and
//! [`RoutedConnection`] plays the client's. Without this, a client keeps talking
//! to the dead master and the failover scenario cannot show a second holder.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisFuture,
    RedisResult, Value,
};

/// Where clients should send their commands: the current master's URL and a
/// generation number that increases with every switch.
///
/// Shared (`Arc<Route>`) between the failover controller, which switches it, and
/// every [`RoutedConnection`], which reads it before each request.
#[derive(Debug)]
pub struct Route {
    state: Mutex<RouteState>,
}

#[derive(Debug, Clone)]
struct RouteState {
    url: String,
    generation: u64,
}

impl Route {
    /// A route to `url`, at generation 0.
    pub fn new(url: impl Into<String>) -> Arc<Route> {
        Arc::new(Route {
            state: Mutex::new(RouteState {
                url: url.into(),
                generation: 0,
            }),
        })
    }

    /// The current URL and generation.
    pub fn current(&self) -> (String, u64) {
        let state = self.lock();
        (state.url.clone(), state.generation)
    }

    /// The current URL.
    pub fn url(&self) -> String {
        self.lock().url.clone()
    }

    /// The current generation (0 until the first switch).
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Points clients at `url` and returns the new generation. Connections switch
    /// on their next request; a request already in flight finishes (or times out)
    /// against the old server, as it would with a real Sentinel client.
    pub fn switch_to(&self, url: impl Into<String>) -> u64 {
        let mut state = self.lock();
        state.url = url.into();
        state.generation += 1;
        state.generation
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RouteState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Timeouts of a [`RoutedConnection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionTimeouts {
    /// Bound on establishing a connection (TCP connect plus the client handshake).
    pub connect: Duration,
    /// Bound on each request's reply.
    pub response: Duration,
}

impl Default for ConnectionTimeouts {
    /// 500 ms each: far above a loopback round trip (tens of µs), far below the
    /// seconds-long leases and pauses the scenarios use, so a paused or dead server
    /// shows up as a prompt error rather than a client that hangs for a whole lease.
    fn default() -> Self {
        ConnectionTimeouts {
            connect: Duration::from_millis(500),
            response: Duration::from_millis(500),
        }
    }
}

/// Who a connection asks where the master is after a request failed on it: a Sentinel-aware
/// client's part (in a Sentinel run, the sentinels: `backend::redis::real::master_finder`).
/// Asking switches the connection's route, or leaves it as it was when nobody answers.
pub(crate) trait FindMaster: Send + Sync {
    /// Asks again; done once the route is switched or nobody answered.
    fn reask(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// An async Redis connection to whatever server a [`Route`] names.
///
/// Connects lazily on the first request, and again whenever the route's
/// generation has changed since. After an I/O error (timeout, reset, refused)
/// it drops its connection and reconnects on the next request: a timed-out
/// request's reply may still arrive later, and a fresh connection is the simplest
/// way to never confuse it with the next request's reply.
///
/// Every request is bounded by [`ConnectionTimeouts::response`], so a request to a
/// `SIGSTOP`ped or killed server fails instead of hanging. `Send`, so it can be
/// moved into tokio tasks; `Clone` shares the route (and, until one of them
/// reconnects, the underlying multiplexed connection).
#[derive(Clone)]
pub struct RoutedConnection {
    route: Arc<Route>,
    timeouts: ConnectionTimeouts,
    current: Option<Connected>,
    /// The name each new connection gives itself (`CLIENT SETNAME`), if any.
    name: Option<String>,
    /// The address its connections are sent from: in a Sentinel run, the client's node address,
    /// by which the link proxies know it (see `network.rs`).
    source: Option<IpAddr>,
    /// In a Sentinel run, who tells it where the master is (asked again after a failed request).
    finder: Option<Arc<dyn FindMaster>>,
    /// The one-way latency a scenario sets (`[redis] latency_ms`), when it sets one.
    latency: Option<Latency>,
    /// In a Redis Cluster run, the cluster-aware connection every request goes through instead
    /// of the route (which then names only where a subscription goes).
    cluster: Option<ClusterLink>,
    /// Every argument equal to the first is sent as the second ([`RoutedConnection::placing_key`]).
    placed: Option<Arc<(Vec<u8>, Vec<u8>)>>,
}

/// A client's retry policy in a Redis Cluster (`[redis.cluster]`), as redis-rs's cluster client
/// takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterPolicy {
    /// How often a request is sent again (a redirect, `TRYAGAIN`, `CLUSTERDOWN`, no answer).
    pub retries: u32,
    /// The wait before a retry, [low, high] ms.
    pub retry_wait_ms: [u64; 2],
}

/// The Redis Cluster client of a run whose nodes include `seeds` (node URLs): `policy`'s retries
/// and waits, each attempt bounded by `timeouts`. Every [`RoutedConnection::cluster`] made from
/// it has connections of its own.
pub fn cluster_client(
    seeds: &[String],
    policy: ClusterPolicy,
    timeouts: ConnectionTimeouts,
) -> RedisResult<ClusterClient> {
    let [lo, hi] = policy.retry_wait_ms;
    // Each attempt has the whole request timeout (redis-rs would otherwise bound all attempts
    // together by it): a request with no answer in time is sent again, as the simulated cluster
    // client does.
    let attempts = policy.retries + 1;
    let overall = (timeouts.connect + timeouts.response) * attempts
        + Duration::from_millis(hi) * policy.retries;
    ClusterClient::builder(seeds.to_vec())
        .retries(policy.retries)
        .min_retry_wait(lo)
        .max_retry_wait(hi)
        .response_timeout(timeouts.response)
        .connection_timeout(timeouts.connect)
        .overall_response_timeout(Some(overall))
        .build()
}

/// redis-rs's async Redis Cluster connection, made on the first request (it follows `MOVED` and
/// `ASK`, refreshes its slot map, and reconnects to the nodes by itself).
#[derive(Clone)]
struct ClusterLink {
    client: ClusterClient,
    conn: Option<ClusterConnection>,
}

/// The connection one request goes through.
enum Conn {
    Plain(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Plain(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Plain(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// A one-way network latency, uniform in `[lo, hi]` ms, put on each request and its reply.
///
/// The delays run in a task of their own, not the client's: they are the network's. A request
/// sent just before its client is paused still lands on time, and its reply arrives on time and
/// waits, unread by the lock, until the client's gate opens, as a reply waits in the socket of a
/// stopped process. Loopback adds tens of microseconds on top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency {
    /// The shortest one-way delay (ms).
    pub lo: u64,
    /// The longest one-way delay (ms).
    pub hi: u64,
}

impl Latency {
    /// One draw of the delay.
    fn draw(&self) -> Duration {
        use rand::Rng;
        Duration::from_millis(rand::thread_rng().gen_range(self.lo..=self.hi.max(self.lo)))
    }

    /// `exchange` sent `sent_at + one draw` and answered one more draw after its reply, on a
    /// task of the network's own. The connection is made before the request leaves, within its
    /// transit time, as a connected client's request would not wait for a handshake.
    async fn carry<T: Send + 'static>(
        &self,
        sent_at: tokio::time::Instant,
        exchange: impl std::future::Future<Output = RedisResult<T>> + Send + 'static,
    ) -> RedisResult<T> {
        let (there, back) = (self.draw(), self.draw());
        let network = tokio::spawn(async move {
            tokio::time::sleep_until(sent_at + there).await;
            let reply = exchange.await;
            tokio::time::sleep(back).await;
            reply
        });
        network
            .await
            .map_err(|e| std::io::Error::other(format!("the network task failed: {e}")).into())
            .and_then(|reply| reply)
    }
}

#[derive(Clone)]
struct Connected {
    generation: u64,
    url: String,
    conn: MultiplexedConnection,
}

impl std::fmt::Debug for RoutedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutedConnection")
            .field("route", &self.route)
            .field("timeouts", &self.timeouts)
            .field("connected_to", &self.connected_to())
            .finish()
    }
}

impl RoutedConnection {
    /// A connection that follows `route`. It connects on its first request.
    pub fn new(route: Arc<Route>, timeouts: ConnectionTimeouts) -> RoutedConnection {
        RoutedConnection {
            route,
            timeouts,
            current: None,
            name: None,
            source: None,
            finder: None,
            latency: None,
            cluster: None,
            placed: None,
        }
    }

    /// A cluster-aware connection made by `client` ([`cluster_client`]): redis-rs's
    /// `cluster_async::ClusterConnection`, its own for this connection, made on the first
    /// request. Its subscriptions go to the node `subscribe_at` names (Redis Cluster delivers a
    /// `PUBLISH` on any node to the subscribers of every node).
    pub fn cluster(
        client: ClusterClient,
        timeouts: ConnectionTimeouts,
        subscribe_at: Arc<Route>,
    ) -> RoutedConnection {
        let mut conn = RoutedConnection::new(subscribe_at, timeouts);
        conn.cluster = Some(ClusterLink { client, conn: None });
        conn
    }

    /// The same connection, sending every argument that is `key` as `placed` instead: on a
    /// Redis Cluster, one of Redlock's instances as a key hash-tagged onto one master, so the
    /// lock's code is unchanged (the simulated connection does the same).
    pub fn placing_key(mut self, key: &str, placed: String) -> RoutedConnection {
        self.placed = Some(Arc::new((key.as_bytes().to_vec(), placed.into_bytes())));
        self
    }

    /// `cmd` with the placed key put in, if it names the key.
    fn placed_cmd(&self, cmd: &Cmd) -> Option<Cmd> {
        let p = self.placed.as_ref()?;
        let mut names = false;
        let mut out = Cmd::new();
        for arg in cmd.args_iter() {
            match arg {
                redis::Arg::Simple(a) if a == p.0.as_slice() => {
                    names = true;
                    out.arg(p.1.as_slice());
                }
                redis::Arg::Simple(a) => {
                    out.arg(a);
                }
                // A cursor (SCAN's): no lock command sends one; leave such a command alone.
                _ => return None,
            }
        }
        names.then_some(out)
    }

    /// `pipeline` with the placed key put in, if a command of it names the key.
    fn placed_pipeline(&self, pipeline: &Pipeline) -> Option<Pipeline> {
        self.placed.as_ref()?;
        let mut out = redis::pipe();
        if pipeline.is_transaction() {
            out.atomic();
        }
        let mut names = false;
        for c in pipeline.cmd_iter() {
            match self.placed_cmd(c) {
                Some(placed) => {
                    names = true;
                    out.add_command(placed);
                }
                None => {
                    out.add_command(c.clone());
                }
            }
        }
        names.then_some(out)
    }

    /// Whether it is a Redis Cluster client ([`RoutedConnection::cluster`]).
    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// Delays each request and its reply by `latency` (one way each), as the network between the
    /// client and the server would.
    pub(crate) fn with_latency(mut self, latency: Latency) -> Self {
        self.latency = Some(latency);
        self
    }

    /// Sends every connection from `source` and asks `finder` where the master is after a
    /// request fails on the connection or with `READONLY` (the master it knew was demoted): a
    /// Sentinel-aware client. `finder` switches this connection's route.
    pub(crate) fn following(mut self, source: IpAddr, finder: Arc<dyn FindMaster>) -> Self {
        self.source = Some(source);
        self.finder = Some(finder);
        self
    }

    /// Names every connection it makes (`CLIENT SETNAME name`), so the servers' `MONITOR`
    /// streams tell which client sent each command (see `real::witness`).
    pub fn named(mut self, name: String) -> RoutedConnection {
        self.name = Some(name);
        self
    }

    /// The route it follows.
    pub fn route(&self) -> &Arc<Route> {
        &self.route
    }

    /// Its timeouts.
    pub fn timeouts(&self) -> ConnectionTimeouts {
        self.timeouts
    }

    /// The URL of the server it is connected to right now, if any.
    pub fn connected_to(&self) -> Option<&str> {
        self.current.as_ref().map(|c| c.url.as_str())
    }

    /// Connects now (to the route's current server) instead of on the first request.
    pub async fn connect(&mut self) -> RedisResult<()> {
        self.connection().await.map(|_| ())
    }

    /// The connection the next request goes through: the cluster connection in a Redis Cluster
    /// run (made on the first request), else the route's.
    async fn conn(&mut self) -> RedisResult<Conn> {
        let Some(link) = &mut self.cluster else {
            return self.connection().await.map(Conn::Plain);
        };
        if let Some(conn) = &link.conn {
            return Ok(Conn::Cluster(conn.clone()));
        }
        let conn = tokio::time::timeout(
            self.timeouts.connect + self.timeouts.response,
            link.client.get_async_connection(),
        )
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting to the cluster timed out",
            )
        })??;
        link.conn = Some(conn.clone());
        Ok(Conn::Cluster(conn))
    }

    /// The multiplexed connection for the route's current generation, connecting
    /// if needed. Returned by value (it is a cheap handle) so a failed request can
    /// clear `self.current` afterwards.
    async fn connection(&mut self) -> RedisResult<MultiplexedConnection> {
        let (url, generation) = self.route.current();
        if let Some(current) = &self.current {
            if current.generation == generation {
                return Ok(current.conn.clone());
            }
        }
        self.current = None;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeouts.connect))
            .set_response_timeout(Some(self.timeouts.response));
        let mut conn = match self.source {
            Some(source) => connect_from(source, &url, self.timeouts).await?,
            None => {
                redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?
            }
        };
        if let Some(name) = &self.name {
            redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(name)
                .query_async::<()>(&mut conn)
                .await?;
        }
        self.current = Some(Connected {
            generation,
            url,
            conn: conn.clone(),
        });
        Ok(conn)
    }

    /// Forgets the connection after an I/O-level failure; server errors
    /// (`WRONGTYPE`, `NOSCRIPT`, ...) leave a perfectly good connection behind. In a Sentinel
    /// run such a failure, or `READONLY` from a demoted master, sends it to the sentinels first.
    async fn after<T>(&mut self, result: RedisResult<T>) -> RedisResult<T> {
        if self.cluster.is_some() {
            // The cluster connection reconnects and refreshes its slot map by itself.
            return result;
        }
        if let Err(err) = &result {
            let read_only =
                err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
            if err.is_io_error() || err.is_unrecoverable_error() || err.is_timeout() || read_only {
                self.current = None;
                if let Some(finder) = &self.finder {
                    finder.reask().await;
                }
            }
        }
        result
    }
}

/// A connection to the server at `url` sent from `source` (a node address of a Sentinel run),
/// bounded by `timeouts` like redis-rs's own.
pub(crate) async fn connect_from(
    source: IpAddr,
    url: &str,
    timeouts: ConnectionTimeouts,
) -> RedisResult<MultiplexedConnection> {
    let info = url.into_connection_info()?;
    let ConnectionAddr::Tcp(host, port) = info.addr() else {
        return Err(std::io::Error::other(format!("{url}: not a TCP address")).into());
    };
    let ip: IpAddr = host
        .parse()
        .map_err(|_| std::io::Error::other(format!("{url}: not an IP address")))?;
    // The whole of it is bounded: over a cut link the handshake (redis-rs's `CLIENT SETINFO`)
    // would wait for the partition to heal.
    let connect = async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        let stream = socket.connect(SocketAddr::new(ip, *port)).await?;
        stream.set_nodelay(true)?;
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(timeouts.response));
        MultiplexedConnection::new_with_config(info.redis_settings(), stream, config).await
    };
    let (conn, driver) = tokio::time::timeout(timeouts.connect, connect)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    tokio::spawn(driver);
    Ok(conn)
}

impl ConnectionLike for RoutedConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let placed = self.placed_cmd(cmd);
            let cmd = placed.as_ref().unwrap_or(cmd);
            let sent_at = tokio::time::Instant::now();
            let result = match (self.conn().await, self.latency) {
                (Ok(mut conn), None) => conn.req_packed_command(cmd).await,
                (Ok(mut conn), Some(latency)) => {
                    let cmd = cmd.clone();
                    let exchange = async move { conn.req_packed_command(&cmd).await };
                    latency.carry(sent_at, exchange).await
                }
                (Err(e), _) => Err(e),
            };
            self.after(result).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let placed = self.placed_pipeline(pipeline);
            let pipeline = placed.as_ref().unwrap_or(pipeline);
            let sent_at = tokio::time::Instant::now();
            let result = match (self.conn().await, self.latency) {
                (Ok(mut conn), None) => conn.req_packed_commands(pipeline, offset, count).await,
                (Ok(mut conn), Some(latency)) => {
                    let pipeline = pipeline.clone();
                    let exchange =
                        async move { conn.req_packed_commands(&pipeline, offset, count).await };
                    latency.carry(sent_at, exchange).await
                }
                (Err(e), _) => Err(e),
            };
            self.after(result).await
        })
    }

    /// Always database 0: lockcheck's servers are private, so there is no reason
    /// to select another.
    fn get_db(&self) -> i64 {
        0
    }
}
