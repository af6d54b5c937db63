//! `CLIENT ID`, `CLIENT SETNAME`, `CLIENT GETNAME`, `HELLO`: connection identity.
//!
//! Why it exists: lock clients name their connections (Redisson sends `CLIENT SETNAME`) and
//! some read their connection id; a simulator that refused these commands would fail the lock
//! before it ever took a lease. The id is the node layer's [`ClientId`], so it is deterministic.

use super::num::parse_i64;
use super::reply::{self, bulk};
use super::role::{ClientId, Role};
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
        if let Some(refused) = Self::refuse(args) {
            return refused;
        }
        match args[1].to_ascii_lowercase().as_slice() {
            b"id" => Value::Int(client as i64),
            b"getname" => self.names.get(&client).map_or(Value::Nil, |n| bulk(n)),
            _ => {
                if let Err(e) = self.set_name(client, &args[2]) {
                    return e;
                }
                Value::Okay
            }
        }
    }

    /// What processCommand refuses before CLIENT runs (also when MULTI would queue it).
    pub fn refuse(args: &[Vec<u8>]) -> Option<Value> {
        let (arity, full) = match args[1].to_ascii_lowercase().as_slice() {
            b"id" => (2, "client|id"),
            b"setname" => (3, "client|setname"),
            b"getname" => (2, "client|getname"),
            _ => return Some(reply::unknown_subcommand(&args[0], &args[1])),
        };
        (args.len() != arity).then(|| reply::arity(full))
    }

    fn set_name(&mut self, client: ClientId, name: &[u8]) -> Result<(), Value> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(reply::error(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            ));
        }
        if name.is_empty() {
            self.names.remove(&client);
        } else {
            self.names.insert(client, name.to_vec());
        }
        Ok(())
    }

    /// `HELLO [protover [AUTH user pass] [SETNAME name]]`, as Redis 7.0.15's helloCommand
    /// parses it, answering with the RESP2 server-information fields.
    ///
    /// Why `HELLO 3` is refused with `NOPROTO`: the simulated server speaks RESP2 only (every
    /// command builds RESP2-shaped replies). Agreeing to RESP3 and then answering in RESP2
    /// shapes would let a RESP3 client pass in simulation and break on a real server;
    /// refusing is what a server without RESP3 (Redis 5) answers, so such a client learns at
    /// its handshake that this server cannot serve it. The only user is `default` without a
    /// password, as on a fresh redis-server: `AUTH default <anything>` succeeds.
    pub fn hello(&mut self, client: ClientId, args: &[Vec<u8>], role: Role) -> Value {
        if let Some(v) = args.get(1) {
            match parse_i64(v) {
                None => {
                    return reply::error("ERR Protocol version is not an integer or out of range")
                }
                Some(2) => {}
                Some(_) => return reply::error("NOPROTO unsupported protocol version"),
            }
        }
        let (mut auth, mut name) = (None, None);
        let mut j = 2;
        while j < args.len() {
            let more = args.len() - 1 - j;
            if args[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                auth = Some(&args[j + 1]);
                j += 2;
            } else if args[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                name = Some(&args[j + 1]);
                j += 1;
            } else {
                return reply::error(&format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(&args[j])
                ));
            }
            j += 1;
        }
        if auth.is_some_and(|user| user.as_slice() != b"default") {
            return reply::error("WRONGPASS invalid username-password pair or user is disabled.");
        }
        if let Some(n) = name {
            if let Err(e) = self.set_name(client, n) {
                return e;
            }
        }
        let role = match role {
            Role::Master => "master",
            Role::Replica => "replica",
        };
        Value::Array(vec![
            bulk(b"server"),
            bulk(b"redis"),
            bulk(b"version"),
            bulk(b"7.0.15"),
            bulk(b"proto"),
            Value::Int(2),
            bulk(b"id"),
            Value::Int(client as i64),
            bulk(b"mode"),
            bulk(b"standalone"),
            bulk(b"role"),
            bulk(role.as_bytes()),
            bulk(b"modules"),
            Value::Array(Vec::new()),
        ])
    }

    /// The connection closed.
    pub fn forget(&mut self, client: ClientId) {
        self.names.remove(&client);
    }
}
