//! The simulated storage node: the protected resource's own server, apart from the lock's Redis.
//!
//! It runs a simulated Redis [`Engine`] (the storage's fenced writes are Lua scripts, the same text
//! the real-mode storage `redis-server` runs) and is reached over the simulated network with the
//! scenario's latency. No fault touches it: the question is what the lock lets through to it.
//!
//! The counter's fenced write is the one storage command every lock cycle makes, so the node runs
//! it natively ([`fenced_write`]: the script's steps as plain commands on the same engine) instead
//! of through Lua; `tests/sim/fenced_write_native.rs` checks it against the script, reply and state.

use super::network::Network;
use crate::simredis::{Engine, Role};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::{Arc, Mutex};

/// The storage node (shared by every client's connection).
#[derive(Clone)]
pub struct Storage {
    node: Arc<Mutex<Node>>,
    net: Network,
    time: super::clock::TrueTime,
}

/// The storage server's state.
struct Node {
    engine: Engine,
    /// Whether a client has loaded `fenced_write.lua` (`EVAL` or `SCRIPT LOAD`): until then an
    /// `EVALSHA` of it must answer `NOSCRIPT` as Redis does, so the client's round trips, and the
    /// history's timing, stay those of the script path.
    fenced_loaded: bool,
}

impl Storage {
    /// The protected resource's storage node, reached over `net` like a Redis server. Call
    /// inside a madsim runtime.
    pub fn new(net: Network) -> Storage {
        Storage {
            node: Arc::new(Mutex::new(Node {
                engine: {
                    // No replica: only replies matter.
                    let mut e = Engine::new(Role::Master);
                    e.set_effects_wanted(false);
                    e
                },
                fenced_loaded: false,
            })),
            net,
            time: super::clock::TrueTime::start(),
        }
    }

    /// A connection for client `id`.
    pub fn connect(&self, id: u64) -> StorageConnection {
        StorageConnection {
            storage: self.clone(),
            id,
            args: Arc::default(),
        }
    }

    fn execute(&self, id: u64, args: &[Vec<u8>]) -> Value {
        super::wire::settle();
        let mut node = self.node.lock().unwrap();
        let Node {
            engine,
            fenced_loaded,
        } = &mut *node;
        if *fenced_loaded && is_fenced_write(args) {
            return fenced_write(engine, id, &args[3..6], &args[6], &args[7]);
        }
        // The storage keeps no expiring keys: its clock never matters.
        let reply = engine.execute(super::clock::EPOCH_MS, id, args).reply;
        if !*fenced_loaded
            && (args[0].eq_ignore_ascii_case(b"EVAL") || args[0].eq_ignore_ascii_case(b"SCRIPT"))
        {
            let sha = crate::resource::FENCED_WRITE.get_hash().as_bytes().to_vec();
            let exists = [b"SCRIPT".to_vec(), b"EXISTS".to_vec(), sha];
            *fenced_loaded = engine.execute(super::clock::EPOCH_MS, id, &exists).reply
                == Value::Array(vec![Value::Int(1)]);
        }
        reply
    }
}

/// Whether `args` is `EVALSHA <fenced_write.lua> 3 k1 k2 k3 value token`.
fn is_fenced_write(args: &[Vec<u8>]) -> bool {
    args.len() == 8
        && args[0].eq_ignore_ascii_case(b"EVALSHA")
        && args[1].eq_ignore_ascii_case(crate::resource::FENCED_WRITE.get_hash().as_bytes())
        && args[2] == b"3"
}

/// `resource/scripts/fenced_write.lua`, step for step, as plain commands on `engine`: why it
/// exists is speed (Lua was a sixth of a simulated lock cycle). `keys` = value, highest-token and
/// sequence keys; `token` empty for a write without one. Returns the script's reply: the write's
/// sequence number, or 0 if the token is older than the highest seen (compared as Lua numbers).
pub fn fenced_write(
    engine: &mut Engine,
    id: u64,
    keys: &[Vec<u8>],
    value: &[u8],
    token: &[u8],
) -> Value {
    let now = super::clock::EPOCH_MS;
    // One argument buffer for every step, refilled in place (no allocation after the first).
    let mut buf: Vec<Vec<u8>> = Vec::with_capacity(3);
    let mut run = |args: &[&[u8]]| {
        buf.resize_with(args.len(), Vec::new);
        for (to, from) in buf.iter_mut().zip(args) {
            to.clear();
            to.extend_from_slice(from);
        }
        engine.execute(now, id, &buf).reply
    };
    if !token.is_empty() {
        if let Value::BulkString(highest) = run(&[b"GET", &keys[1]]) {
            if lua_number(token) < lua_number(&highest) {
                return Value::Int(0);
            }
        }
        run(&[b"SET", &keys[1], token]);
    }
    run(&[b"SET", &keys[0], value]);
    run(&[b"INCR", &keys[2]])
}

/// Lua 5.1's `tonumber` on a decimal string (a double; NaN, which compares false, if not a number).
fn lua_number(s: &[u8]) -> f64 {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(f64::NAN)
}

/// A client's connection to the storage node.
pub struct StorageConnection {
    storage: Storage,
    id: u64,
    /// The request on the wire: the argument vectors of the last command (kept for the next
    /// one, as `SimConnection` does), then its reply.
    args: Arc<Mutex<Request>>,
}

impl Clone for StorageConnection {
    /// Another connection of the same client (its own request buffer).
    fn clone(&self) -> Self {
        StorageConnection {
            storage: self.storage.clone(),
            id: self.id,
            args: Arc::default(),
        }
    }
}

/// One request to the storage node: its arguments (the first `n` of `args`) and its reply.
#[derive(Default)]
struct Request {
    args: Vec<Vec<u8>>,
    n: usize,
    reply: Option<Value>,
}

impl StorageConnection {
    /// One round trip: the request goes on the wire and runs at its arrival (`sim::wire`); the
    /// client sleeps once, until the reply is due. The storage never fails a request.
    async fn request(&self) -> redis::RedisResult<Value> {
        let time = &self.storage.time;
        let arrival = time.instant() + self.storage.net.latency();
        let reply_at = arrival + self.storage.net.latency();
        let (storage, id, req) = (self.storage.clone(), self.id, self.args.clone());
        super::wire::send(
            arrival,
            Box::new(move || {
                let mut r = req.lock().unwrap();
                let reply = storage.execute(id, &r.args[..r.n]);
                r.reply = Some(reply);
            }),
        );
        time.sleep_until(reply_at).await;
        super::wire::settle();
        let reply = self.args.lock().unwrap().reply.take();
        Ok(reply.expect("a storage request runs at its arrival, before its reply is due"))
    }

    /// Puts `cmd`'s arguments in the request buffer.
    fn fill(&self, cmd: &Cmd) {
        let mut r = self.args.lock().unwrap();
        let r = &mut *r;
        r.n = super::connection::fill_args(&mut r.args, cmd);
    }
}

impl redis::aio::ConnectionLike for StorageConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.fill(cmd);
        Box::pin(self.request())
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let cmds: Vec<&Cmd> = pipeline.cmd_iter().collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(cmds.len());
            for cmd in cmds {
                self.fill(cmd);
                out.push(self.request().await?);
            }
            Ok(out.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
