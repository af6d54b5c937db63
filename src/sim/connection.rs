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

use super::clock::TrueTime;
use super::cluster::{Cluster, Unreachable};
use super::network::Network;
use crate::simredis::ClientId;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::time::Duration;

/// One client's connection to one master group.
#[derive(Clone)]
pub struct SimConnection {
    cluster: Cluster,
    net: Network,
    /// The client's node index.
    node: usize,
    group: usize,
    id: ClientId,
    timeout: Duration,
    time: TrueTime,
    /// The argument vectors of the last command, kept for the next one (see `fill_args`).
    args: Vec<Vec<u8>>,
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
        SimConnection {
            cluster,
            net,
            node,
            group,
            id,
            timeout,
            time: TrueTime::start(),
            args: Vec::new(),
        }
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

    /// One round trip carrying `cmds` (one command, or a whole pipeline: Redis answers a
    /// pipeline in one round trip). Each reply goes to `sink`, in order.
    ///
    /// The client's response timeout bounds the whole round trip. A request still on the wire
    /// when the client gives up is not lost: it arrives and executes later, as a real client's
    /// abandoned request does (only its reply is dropped).
    async fn round_trip(
        &self,
        cmds: &[&[Vec<u8>]],
        mut sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let start = self.time.instant();
        let deadline = start + self.timeout;
        let server = self.cluster.master_of(self.group);
        let there = self.net.latency();
        if start + there > deadline {
            let late = self.clone();
            let cmds: Vec<Vec<Vec<u8>>> = cmds.iter().map(|c| c.to_vec()).collect();
            madsim::task::spawn(async move {
                madsim::time::sleep(there).await;
                for args in &cmds {
                    let _ = late.cluster.execute(late.node, server, late.id, args);
                }
            });
            return self.time_out(deadline, Unreachable::NoReplyInTime).await;
        }
        self.time.sleep(there).await;
        for args in cmds {
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
    let n = fill_args(&mut args, cmd);
    args.truncate(n);
    args
}

/// Copies `cmd`'s arguments into `buf`, reusing its vectors; returns how many there are (the
/// first that many of `buf`). Every simulated command goes through here.
pub(super) fn fill_args(buf: &mut Vec<Vec<u8>>, cmd: &Cmd) -> usize {
    let mut n = 0;
    for a in cmd.args_iter() {
        let bytes: &[u8] = match a {
            redis::Arg::Simple(b) => b,
            // A cursor argument (SCAN family); the locks never use one.
            _ => b"0",
        };
        match buf.get_mut(n) {
            Some(to) => {
                to.clear();
                to.extend_from_slice(bytes);
            }
            None => buf.push(bytes.to_vec()),
        }
        n += 1;
    }
    n
}

impl redis::aio::ConnectionLike for SimConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut args = std::mem::take(&mut self.args);
        let n = fill_args(&mut args, cmd);
        Box::pin(async move {
            let mut out = Value::Nil;
            let done = self
                .round_trip(std::slice::from_ref(&&args[..n]), |v| out = v)
                .await;
            self.args = args;
            done.map(|()| out)
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
        Box::pin(async move {
            let mut out = Vec::with_capacity(cmds.len());
            let cmds: Vec<&[Vec<u8>]> = cmds.iter().map(Vec::as_slice).collect();
            self.round_trip(&cmds, |v| out.push(v)).await?;
            Ok(out.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
