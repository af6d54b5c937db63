//! The simulated storage node: the protected resource's own server, apart from the lock's Redis.
//!
//! It runs a simulated Redis [`Engine`] (the storage's fenced writes are Lua scripts, the same text
//! the real-mode storage `redis-server` runs) and is reached over the simulated network with the
//! scenario's latency. No fault touches it: the question is what the lock lets through to it.
//!
//! The counter's fenced write is the one storage command every lock cycle makes, so the engine
//! runs it natively (`simredis::native`: the script's steps as plain commands) instead of through
//! Lua; `tests/sim/fenced_write_native.rs` checks it against the script, reply and state.

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
            })),
            net,
            time: super::clock::TrueTime::start(),
        }
    }

    /// A connection for client `id`.
    pub fn connect(&self, id: u64) -> StorageConnection {
        StorageConnection {
            shared: Arc::new(Shared {
                storage: self.clone(),
                id,
                args: Mutex::default(),
            }),
        }
    }

    fn execute(&self, id: u64, args: &[Vec<u8>]) -> Value {
        super::wire::settle();
        let mut node = self.node.lock().unwrap();
        // The storage keeps no expiring keys: its clock never matters.
        node.engine.execute(super::clock::EPOCH_MS, id, args).reply
    }
}

/// A client's connection to the storage node.
pub struct StorageConnection {
    shared: Arc<Shared>,
}

/// A connection's state, shared with the request it has on the wire (which runs it on arrival:
/// sending it takes a reference count, not an allocation).
struct Shared {
    storage: Storage,
    id: u64,
    /// The request on the wire: the argument vectors of the last command (kept for the next
    /// one, as `SimConnection` does), then its reply.
    args: Mutex<Request>,
}

impl Clone for StorageConnection {
    /// Another connection of the same client (its own request buffer).
    fn clone(&self) -> Self {
        self.shared.storage.connect(self.shared.id)
    }
}

impl super::wire::Arrive for Shared {
    fn arrive(&self, _server: usize, _seq: u64) {
        let mut r = self.args.lock().unwrap();
        let reply = self.storage.execute(self.id, &r.args[..r.n]);
        r.reply = Some(reply);
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
        let storage = &self.shared.storage;
        let time = &storage.time;
        let arrival = time.instant() + storage.net.latency();
        let reply_at = arrival + storage.net.latency();
        // One request at a time per connection: the storage has one node and seq is unused.
        super::wire::send(
            arrival,
            super::wire::Delivery::Request(self.shared.clone(), 0, 0),
        );
        time.sleep_until(reply_at).await;
        super::wire::settle();
        let reply = self.shared.args.lock().unwrap().reply.take();
        Ok(reply.expect("a storage request runs at its arrival, before its reply is due"))
    }

    /// Puts `cmd`'s arguments in the request buffer.
    fn fill(&self, cmd: &Cmd) {
        let mut r = self.shared.args.lock().unwrap();
        let r = &mut *r;
        r.n = crate::sim::wire::fill_args(&mut r.args, cmd);
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
