//! `CLIENT ID`, `CLIENT SETNAME`, `CLIENT GETNAME`: connection identity.
//!
//! Why it exists: lock clients name their connections (Redisson sends `CLIENT SETNAME`) and
//! some read their connection id; a simulator that refused these commands would fail the lock
//! before it ever took a lease. The id is the node layer's [`ClientId`], so it is deterministic.

use super::reply::{self, bulk};
use super::ClientId;
use redis::Value;
use std::collections::BTreeMap;

/// The names connections gave themselves.
#[derive(Debug, Default)]
pub struct ClientNames {
    names: BTreeMap<ClientId, Vec<u8>>,
}

impl ClientNames {
    /// `CLIENT <sub> ...`, with Redis 7.0.15's arity and error texts.
    pub fn command(&mut self, client: ClientId, args: &[Vec<u8>]) -> Value {
        let sub = args[1].to_ascii_lowercase();
        let (arity, full) = match sub.as_slice() {
            b"id" => (2, "client|id"),
            b"setname" => (3, "client|setname"),
            b"getname" => (2, "client|getname"),
            _ => return reply::unknown_subcommand(&args[0], &args[1]),
        };
        if args.len() != arity {
            return reply::arity(full);
        }
        match sub.as_slice() {
            b"id" => Value::Int(client as i64),
            b"getname" => self.names.get(&client).map_or(Value::Nil, |n| bulk(n)),
            _ => {
                let name = &args[2];
                if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
                    return reply::error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                if name.is_empty() {
                    self.names.remove(&client);
                } else {
                    self.names.insert(client, name.clone());
                }
                Value::Okay
            }
        }
    }

    /// The connection closed.
    pub fn forget(&mut self, client: ClientId) {
        self.names.remove(&client);
    }
}
