//! The simulated storage node: the protected resource's own server, apart from the lock's Redis.
//!
//! It runs a simulated Redis [`Engine`] (the storage's fenced writes are Lua scripts, the same text
//! the real-mode storage `redis-server` runs) and is reached over the simulated network with the
//! scenario's latency. No fault touches it: the question is what the lock lets through to it.

use super::network::Network;
use crate::simredis::{Engine, Role};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::{Arc, Mutex};

/// The storage node (shared by every client's connection).
#[derive(Clone)]
pub struct Storage {
    engine: Arc<Mutex<Engine>>,
    net: Network,
}

impl Storage {
    pub fn new(net: Network) -> Storage {
        Storage {
            engine: Arc::new(Mutex::new(Engine::new(Role::Master))),
            net,
        }
    }

    /// A connection for client `id`.
    pub fn connect(&self, id: u64) -> StorageConnection {
        StorageConnection {
            storage: self.clone(),
            id,
        }
    }

    fn execute(&self, id: u64, args: &[Vec<u8>]) -> Value {
        // The storage keeps no expiring keys: its clock never matters.
        self.engine
            .lock()
            .unwrap()
            .execute(super::clock::EPOCH_MS, id, args)
            .reply
    }
}

/// A client's connection to the storage node.
#[derive(Clone)]
pub struct StorageConnection {
    storage: Storage,
    id: u64,
}

impl StorageConnection {
    async fn request(&self, args: Vec<Vec<u8>>) -> redis::RedisResult<Value> {
        madsim::time::sleep(self.storage.net.latency()).await;
        let reply = self.storage.execute(self.id, &args);
        madsim::time::sleep(self.storage.net.latency()).await;
        Ok(reply)
    }
}

fn cmd_args(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => b"0".to_vec(),
        })
        .collect()
}

impl redis::aio::ConnectionLike for StorageConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let args = cmd_args(cmd);
        Box::pin(self.request(args))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let cmds: Vec<Vec<Vec<u8>>> = pipeline.cmd_iter().map(cmd_args).collect();
        Box::pin(async move {
            let mut out = Vec::with_capacity(cmds.len());
            for args in cmds {
                out.push(self.request(args).await?);
            }
            Ok(out.into_iter().skip(offset).take(count).collect())
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
