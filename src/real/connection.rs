//! The lock clients' connection in real mode: a `ConnectionLike` that follows
//! failovers.
//!
//! A lock under test talks to "the Redis master", not to a port. In production a
//! Sentinel-aware client asks Sentinel for the current master and reconnects when
//! it changes; [`Route`] plays Sentinel's part (the failover step switches it) and
//! [`RoutedConnection`] plays the client's. Without this, a client keeps talking
//! to the dead master and the failover scenario cannot show a second holder.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, IntoConnectionInfo, Pipeline, RedisFuture,
    RedisResult, Value,
};

use crate::real::master_finder::MasterFinder;

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
    finder: Option<Arc<MasterFinder>>,
    /// The one-way latency a scenario sets (`[redis] latency_ms`), when it sets one.
    latency: Option<Latency>,
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
        }
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
    pub(crate) fn following(mut self, source: IpAddr, finder: Arc<MasterFinder>) -> Self {
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
            let sent_at = tokio::time::Instant::now();
            let result = match (self.connection().await, self.latency) {
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
            let sent_at = tokio::time::Instant::now();
            let result = match (self.connection().await, self.latency) {
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
