//! lockcheck's simulated Redis connection: a [`redis::aio::ConnectionLike`], so lock code written
//! with `redis::cmd(..).query_async` and `redis::Script::invoke_async` runs on the simulator
//! unchanged.
//!
//! A request travels for the link's latency, executes atomically on the server the client is
//! routed to (the current master of its group, as Sentinel would say), and the reply travels back;
//! a pipeline makes one such round trip. A round trip longer than `request_timeout` fails with a
//! timeout, although the request still executes when it arrives.
//! A dead server or a cut link means no reply: the request fails with a timeout after
//! `request_timeout`, as a real client's response timeout would.
//!
//! A request on the wire is the network's, not the client's: if the client is paused while its
//! request travels (a GC pause, `SIGSTOP`), the nemesis claims the request from the network and it
//! runs on the server at its arrival time, as it would on a real server; the client reads the
//! reply when it goes on. Without this, a pause froze the request inside the client's task and a
//! `SET NX` sent just before a pause ran only after it.

mod cluster_client;

pub use cluster_client::ClusterClient;

use super::cluster::{Cluster, Unreachable};
use crate::sim::clock::TrueTime;
use crate::sim::network::{self, Network, OnTheWire};
use crate::sim::wire::{Arrive, Delivery};
use crate::simredis::ClientId;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one connection has on the wire, shared with the network (see the module docs).
struct Flight {
    state: Arc<Mutex<FlightState>>,
    cluster: Cluster,
    node: usize,
    id: ClientId,
}

#[derive(Default)]
struct FlightState {
    /// The request's commands: one command's arguments (the first `n` of `args`, a buffer kept
    /// from one request to the next), or a pipeline.
    args: Vec<Vec<u8>>,
    n: usize,
    pipeline: Option<Vec<Vec<Vec<u8>>>>,
    /// Sent and not yet run: its arrival time and the server it goes to.
    on_wire: Option<(madsim::time::Instant, usize)>,
    /// Claimed by the network for a paused client, not yet delivered.
    claimed: bool,
    /// The replies of a request the network ran while its client was paused.
    delivered: Option<Result<Vec<Value>, Unreachable>>,
    /// Requests sent on the wire so far (`sim::wire`): names the one an answer belongs to, so
    /// the late answer of a request the client gave up on is not taken for the next one's.
    sent: u64,
    /// The answer of request `.0`, written when it ran on the server: its replies are in
    /// `replies`, or it never got there.
    answered: Option<(u64, Result<(), Unreachable>)>,
    /// The replies of the answered request, in order (a buffer kept from one request to the next).
    replies: Vec<Value>,
}

impl FlightState {
    /// The request's commands, as slices (no allocation: every simulated request asks).
    fn cmds(&self) -> impl Iterator<Item = &[Vec<u8>]> {
        let single = self.pipeline.is_none().then(|| &self.args[..self.n]);
        self.pipeline
            .iter()
            .flatten()
            .map(Vec::as_slice)
            .chain(single)
    }

    /// The request's commands, copied (for a request that runs after its buffer is reused).
    fn cmds_owned(&self) -> Vec<Vec<Vec<u8>>> {
        self.cmds().map(<[Vec<u8>]>::to_vec).collect()
    }
}

/// What became of a request when it arrived.
enum Arrived {
    /// The network ran it while the client was paused: its replies.
    Delivered(Result<Vec<Value>, Unreachable>),
    /// It holds a command the server blocks on: run it outside the lock.
    Blocking(Vec<Vec<Vec<u8>>>),
    /// Run now; replies went to the sink.
    Ran(Result<(), Unreachable>),
}

/// Whether `args` is a command the server holds (it waits server-side: WAIT, BLPOP).
fn blocks(args: &[Vec<u8>]) -> bool {
    args.first()
        .is_some_and(|a| a.eq_ignore_ascii_case(b"WAIT") || a.eq_ignore_ascii_case(b"BLPOP"))
}

impl Flight {
    /// A new connection's flight, attached to the network.
    fn attached(cluster: &Cluster, net: &Network, node: usize, id: ClientId) -> Arc<Flight> {
        let flight = Arc::new(Flight {
            state: Arc::default(),
            cluster: cluster.clone(),
            node,
            id,
        });
        let on_wire: Arc<dyn OnTheWire> = flight.clone();
        net.attach(node, &on_wire);
        flight
    }
}

impl Clone for SimConnection {
    fn clone(&self) -> Self {
        SimConnection {
            cluster: self.cluster.clone(),
            net: self.net.clone(),
            node: self.node,
            group: self.group,
            id: self.id,
            timeout: self.timeout,
            time: self.time.clone(),
            flight: Flight::attached(&self.cluster, &self.net, self.node, self.id),
            cluster_client: self.cluster_client.clone(),
            placed: self.placed.clone(),
        }
    }
}

impl Flight {
    /// Runs request `seq` on `server` at its arrival (`sim::wire`): from `gone`, the copy a
    /// request the client gave up on took, else from the connection's buffer.
    fn run_on_arrival(&self, server: usize, seq: u64, gone: Option<Vec<Vec<Vec<u8>>>>) {
        let mut st = self.state.lock().unwrap();
        let st = &mut *st;
        let mut replies = std::mem::take(&mut st.replies);
        replies.clear();
        let mut answer = Ok(());
        let mut run =
            |args: &[Vec<u8>]| match self.cluster.execute(self.node, server, self.id, args) {
                Ok(v) => {
                    replies.push(v);
                    true
                }
                Err(why) => {
                    answer = Err(why);
                    false
                }
            };
        match &gone {
            Some(cmds) => {
                for args in cmds {
                    if !run(args) {
                        break;
                    }
                }
            }
            None => {
                for args in st.cmds() {
                    if !run(args) {
                        break;
                    }
                }
            }
        }
        st.replies = replies;
        st.answered = Some((seq, answer));
    }
}

impl Arrive for Flight {
    fn arrive(&self, server: usize, seq: u64) {
        self.run_on_arrival(server, seq, None);
    }
}

impl OnTheWire for Flight {
    fn claim(&self) -> Option<(madsim::time::Instant, network::Delivery)> {
        let mut st = self.state.lock().unwrap();
        let (arrival, server) = st.on_wire.take()?;
        st.claimed = true;
        let cmds: Vec<Vec<Vec<u8>>> = st.cmds_owned();
        drop(st);
        let (cluster, node, id) = (self.cluster.clone(), self.node, self.id);
        let state = self.state.clone();
        Some((
            arrival,
            Box::new(move || {
                let mut st = state.lock().unwrap();
                if !std::mem::take(&mut st.claimed) {
                    return; // the client went on first and ran it itself
                }
                // A server-side wait (WAIT, BLPOP) is answered as it stands at arrival.
                let replies: Result<Vec<Value>, Unreachable> = cmds
                    .iter()
                    .map(|args| cluster.execute(node, server, id, args))
                    .collect();
                st.delivered = Some(replies);
            }),
        ))
    }
}

/// One client's connection to one master group. A clone is another connection of the same
/// client (its own requests on the wire), as a watchdog's connection is.
pub struct SimConnection {
    cluster: Cluster,
    net: Network,
    /// The client's node index.
    node: usize,
    group: usize,
    id: ClientId,
    timeout: Duration,
    time: TrueTime,
    /// The request on the wire (and the argument buffer kept from one command to the next),
    /// shared with the network.
    flight: Arc<Flight>,
    /// In a Redis Cluster: where the client believes each slot is, and its retry policy.
    cluster_client: Option<ClusterClient>,
    /// Every argument equal to the first is sent as the second ([`SimConnection::placing_key`]).
    placed: Option<Arc<(Vec<u8>, Vec<u8>)>>,
}

impl SimConnection {
    /// Client `id`'s connection from node `node` to master group `group`: it follows the
    /// group's current master (a failover reroutes it) and fails a request after `timeout`.
    pub fn new(
        cluster: Cluster,
        net: Network,
        node: usize,
        group: usize,
        id: ClientId,
        timeout: Duration,
    ) -> Self {
        let flight = Flight::attached(&cluster, &net, node, id);
        SimConnection {
            cluster,
            net,
            node,
            group,
            id,
            timeout,
            time: TrueTime::start(),
            flight,
            cluster_client: None,
            placed: None,
        }
    }

    /// The same connection, sending every argument that is `key` as `placed` instead: on a
    /// Redis Cluster, one of Redlock's instances as a key hash-tagged onto one master
    /// (`engine::cluster::placed_on_master`), so the lock's code is unchanged.
    pub fn placing_key(mut self, key: &str, placed: String) -> Self {
        self.placed = Some(Arc::new((key.as_bytes().to_vec(), placed.into_bytes())));
        self
    }

    /// `args` with the placed key put in ([`SimConnection::placing_key`]).
    fn place(&self, args: &mut [Vec<u8>]) {
        if let Some(p) = &self.placed {
            for a in args.iter_mut().filter(|a| **a == p.0) {
                a.clone_from(&p.1);
            }
        }
    }

    /// The same connection as a Redis Cluster client: it routes each request by its key's
    /// slot instead of to its group's master.
    pub fn in_cluster(mut self, client: ClusterClient) -> Self {
        self.cluster_client = Some(client);
        self
    }

    /// Its parts, for a subscriber connection of the same client (`sim::subscription`).
    pub(crate) fn parts(&self) -> (Cluster, Network, usize, usize, ClientId, Duration) {
        (
            self.cluster.clone(),
            self.net.clone(),
            self.node,
            self.group,
            self.id,
            self.timeout,
        )
    }

    /// One round trip carrying the request in `self.flight` (one command, or a whole pipeline:
    /// Redis answers a pipeline in one round trip). Each reply goes to `sink`, in order.
    ///
    /// The client's response timeout bounds the whole round trip. A request still on the wire
    /// when the client gives up is not lost: it arrives and executes later, as a real client's
    /// abandoned request does (only its reply is dropped). A request on the wire when the client
    /// is paused runs at its arrival all the same (the nemesis delivers it, see the module docs).
    async fn round_trip(&self, sink: impl FnMut(Value)) -> redis::RedisResult<()> {
        match &self.cluster_client {
            Some(client) => self.cluster_round_trip(client, sink).await,
            None => {
                let server = self.cluster.master_for(self.node, self.group);
                self.round_trip_to(server, sink).await
            }
        }
    }

    /// One round trip to `server`.
    async fn round_trip_to(
        &self,
        server: usize,
        sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let held = {
            let st = self.flight.state.lock().unwrap();
            let held = st.cmds().any(blocks);
            held
        };
        if held {
            self.held_round_trip(server, sink).await
        } else {
            self.wire_round_trip(server, sink).await
        }
    }

    /// A round trip of a request the server answers at once: the request goes on the wire and
    /// runs at its arrival (`sim::wire`), and the client sleeps once, until the reply is due.
    async fn wire_round_trip(
        &self,
        server: usize,
        mut sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let start = self.time.instant();
        let deadline = start + self.timeout;
        let there = self.net.latency();
        let back = self.net.latency();
        let arrival = start + there;
        let reply_at = arrival + back;
        let seq = {
            let mut st = self.flight.state.lock().unwrap();
            st.sent += 1;
            st.sent
        };
        // A request that arrives after the client gave up must not read the buffer the client's
        // next request fills: it takes its own copy. Otherwise it runs before the client can
        // send again, and reads the buffer in place.
        let gone: Option<Vec<Vec<Vec<u8>>>> = (arrival > deadline).then(|| {
            let st = self.flight.state.lock().unwrap();
            st.cmds_owned()
        });
        let delivery = match gone {
            None => Delivery::Request(self.flight.clone(), server, seq),
            Some(cmds) => {
                let flight = self.flight.clone();
                Delivery::Once(Box::new(move || {
                    flight.run_on_arrival(server, seq, Some(cmds))
                }))
            }
        };
        crate::sim::wire::send(arrival, delivery);
        if reply_at > deadline {
            return self.time_out(deadline, Unreachable::NoReplyInTime).await;
        }
        self.time.sleep_until(reply_at).await;
        crate::sim::wire::settle();
        let answer = {
            let mut st = self.flight.state.lock().unwrap();
            match st.answered.take() {
                Some((s, answer)) if s == seq => {
                    answer.map(|()| st.replies.drain(..).for_each(&mut sink))
                }
                _ => Err(Unreachable::NoReplyInTime),
            }
        };
        if let Err(why) = answer {
            return self.time_out(deadline, why).await;
        }
        if !self.cluster.reachable(server, self.node) {
            return self.time_out(deadline, Unreachable::Partitioned).await;
        }
        Ok(())
    }

    /// A round trip of a request with a command the server holds (`WAIT`, `BLPOP`): the client
    /// drives it, a sleep each way and the server-side wait in between.
    async fn held_round_trip(
        &self,
        server: usize,
        mut sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let start = self.time.instant();
        let deadline = start + self.timeout;
        let there = self.net.latency();
        if start + there > deadline {
            let (cluster, node, id) = (self.cluster.clone(), self.node, self.id);
            let cmds: Vec<Vec<Vec<u8>>> = {
                let st = self.flight.state.lock().unwrap();
                st.cmds_owned()
            };
            madsim::task::spawn(async move {
                madsim::time::sleep(there).await;
                for args in &cmds {
                    let _ = cluster.execute(node, server, id, args);
                }
            });
            return self.time_out(deadline, Unreachable::NoReplyInTime).await;
        }
        let arrival = start + there;
        self.flight.state.lock().unwrap().on_wire = Some((arrival, server));
        self.time.sleep(there).await;
        let (blocking, delivered) = match self.arrive(server, &mut sink) {
            Arrived::Delivered(replies) => (None, Some(replies)),
            Arrived::Blocking(cmds) => (Some(cmds), None),
            Arrived::Ran(Ok(())) => (None, None),
            Arrived::Ran(Err(why)) => return self.time_out(deadline, why).await,
        };
        if let Some(replies) = delivered {
            // Run by the network while this client was paused; its reply waits to be read.
            match replies {
                Ok(values) => values.into_iter().for_each(&mut sink),
                Err(why) => return self.time_out(deadline, why).await,
            }
            let back = self.net.latency();
            let reply_at = arrival + back;
            if reply_at > deadline {
                return self.time_out(deadline, Unreachable::NoReplyInTime).await;
            }
            let now = self.time.instant();
            if reply_at > now {
                self.time.sleep(reply_at - now).await;
            }
            if !self.cluster.reachable(server, self.node) {
                return self.time_out(deadline, Unreachable::Partitioned).await;
            }
            return Ok(());
        }
        if let Some(cmds) = blocking {
            for args in &cmds {
                let is_wait = args
                    .first()
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"WAIT"));
                let mut reply = if is_wait {
                    self.wait(server, args, deadline).await
                } else {
                    self.cluster.execute(self.node, server, self.id, args)
                };
                if matches!(reply, Ok(Value::Nil))
                    && args
                        .first()
                        .is_some_and(|a| a.eq_ignore_ascii_case(b"BLPOP"))
                {
                    reply = self.block_pop(server, args, deadline).await;
                }
                match reply {
                    Ok(v) => sink(v),
                    Err(why) => return self.time_out(deadline, why).await,
                }
            }
        }
        let back = self.net.latency();
        if self.time.instant() + back > deadline {
            // Executed, but the reply would arrive after the client stopped waiting.
            return self.time_out(deadline, Unreachable::NoReplyInTime).await;
        }
        self.time.sleep(back).await;
        if !self.cluster.reachable(server, self.node) {
            return self.time_out(deadline, Unreachable::Partitioned).await;
        }
        Ok(())
    }

    /// The request has arrived at `server`: takes the replies the network delivered while the
    /// client was paused, or runs it now (a request with a command the server holds is handed
    /// back, to run outside the lock).
    fn arrive(&self, server: usize, sink: &mut impl FnMut(Value)) -> Arrived {
        let mut st = self.flight.state.lock().unwrap();
        st.on_wire = None;
        st.claimed = false;
        if let Some(replies) = st.delivered.take() {
            return Arrived::Delivered(replies);
        }
        if st.cmds().any(blocks) {
            return Arrived::Blocking(st.cmds_owned());
        }
        for args in st.cmds() {
            match self.cluster.execute(self.node, server, self.id, args) {
                Ok(v) => sink(v),
                Err(why) => return Arrived::Ran(Err(why)),
            }
        }
        Arrived::Ran(Ok(()))
    }

    /// `WAIT numreplicas timeout`: blocks (server side) until enough replicas acknowledged this
    /// connection's last write, or the timeout passes; answers how many did.
    async fn wait(
        &self,
        server: usize,
        args: &[Vec<u8>],
        deadline: madsim::time::Instant,
    ) -> Result<Value, Unreachable> {
        let parse = |i: usize| {
            args.get(i)
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|s| s.parse::<i64>().ok())
        };
        let (Some(want), Some(ms), 3) = (parse(1), parse(2), args.len()) else {
            // Let the engine produce Redis's exact error for a malformed WAIT.
            return self.cluster.execute(self.node, server, self.id, args);
        };
        // Reachability is checked on arrival, like any command.
        self.cluster
            .execute(self.node, server, self.id, &[b"PING".to_vec()])?;
        let until =
            (ms > 0).then(|| madsim::time::Instant::now() + Duration::from_millis(ms as u64));
        loop {
            let acked = self.cluster.acked_replicas(server, self.id);
            let now = madsim::time::Instant::now();
            if acked >= want || until.is_some_and(|u| now >= u) {
                return Ok(Value::Int(acked));
            }
            if now >= deadline {
                // The client's response timeout fires before the server answers.
                return Err(Unreachable::NoReplyInTime);
            }
            self.time.sleep(Duration::from_millis(1)).await;
        }
    }

    /// `BLPOP` found every list empty: the server holds the request until a push makes one
    /// non-empty (retrying the pop each millisecond) or its timeout passes (a null array;
    /// `0` waits forever), unless the client's response timeout fires first.
    async fn block_pop(
        &self,
        server: usize,
        args: &[Vec<u8>],
        deadline: madsim::time::Instant,
    ) -> Result<Value, Unreachable> {
        let secs = args
            .last()
            .and_then(|a| std::str::from_utf8(a).ok())
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
        let until = (secs > 0.0)
            .then(|| madsim::time::Instant::now() + Duration::from_secs_f64(secs.min(1e9)));
        loop {
            let now = madsim::time::Instant::now();
            if until.is_some_and(|u| now >= u) {
                return Ok(Value::Nil);
            }
            if now >= deadline {
                return Err(Unreachable::NoReplyInTime);
            }
            self.time.sleep(Duration::from_millis(1)).await;
            let reply = self.cluster.execute(self.node, server, self.id, args)?;
            if reply != Value::Nil {
                return Ok(reply);
            }
        }
    }

    async fn time_out<T>(
        &self,
        deadline: madsim::time::Instant,
        why: Unreachable,
    ) -> redis::RedisResult<T> {
        self.time.sleep_until(deadline).await;
        let what = match why {
            Unreachable::Dead => "server is down",
            Unreachable::Partitioned => "network partition",
            Unreachable::NoReplyInTime => "no reply within the response timeout",
        };
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("simulated request timed out ({what})"),
        )
        .into())
    }
}

fn cmd_args(cmd: &Cmd) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    let n = crate::sim::wire::fill_args(&mut args, cmd);
    args.truncate(n);
    args
}

impl redis::aio::ConnectionLike for SimConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        // Every request is a step at which a run can be cut (`explore --time-limit`).
        crate::world::cut::check();
        {
            let mut st = self.flight.state.lock().unwrap();
            let st = &mut *st;
            st.n = crate::sim::wire::fill_args(&mut st.args, cmd);
            st.pipeline = None;
            self.place(&mut st.args[..st.n]);
        }
        Box::pin(async move {
            let mut out = Value::Nil;
            self.round_trip(|v| out = v).await.map(|()| out)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        // A pipeline is sent as one batch and answered in one round trip; the commands
        // execute on arrival, in order, each atomically (a MULTI/EXEC pipeline as one unit).
        // `cmd_iter` leaves out the MULTI/EXEC an atomic pipeline is wrapped in on the wire.
        let atomic = pipeline.is_transaction();
        let cmds: Vec<Vec<Vec<u8>>> = atomic
            .then(|| vec![b"MULTI".to_vec()])
            .into_iter()
            .chain(pipeline.cmd_iter().map(cmd_args))
            .chain(atomic.then(|| vec![b"EXEC".to_vec()]))
            .collect();
        let mut cmds = cmds;
        for c in &mut cmds {
            self.place(c);
        }
        let n = cmds.len();
        self.flight.state.lock().unwrap().pipeline = Some(cmds);
        Box::pin(async move {
            let mut out = Vec::with_capacity(n);
            self.round_trip(|v| out.push(v)).await?;
            Ok(out.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
