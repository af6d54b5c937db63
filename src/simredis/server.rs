//! Server and connection commands answered from the data alone: `PUBLISH`, `PING`, `ECHO`,
//! `DBSIZE`, `FLUSHALL`, `TIME`, a minimal `INFO`, and `WAIT`.
//!
//! Why they exist: lock clients send them around the lock commands (Redisson publishes an
//! unlock message, clients ping, a fencing design waits for replicas), and the node layer
//! answers the parts that need the network (`WAIT`'s replica count, the full `INFO`). Only
//! `PUBLISH` reaches past this node's data: it records the deliveries to this node's
//! subscribers in the context, and is itself replicated.

use super::context::{eq_ic, Ctx, Db, Expiry};
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;

/// PUBLISH delivers to this node's subscribers and is itself replicated (Redis forces its
/// propagation so that subscribers connected to replicas get the message too).
pub fn publish(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let subs = db.pubsub.subscribers(&a[1]);
    for &c in subs {
        ctx.messages.push((c, a[1].clone(), a[2].clone()));
    }
    let n = subs.len() as i64;
    ctx.propagate_args(a);
    Value::Int(n)
}

pub fn ping(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match a.len() {
        1 => Value::SimpleString("PONG".into()),
        2 => bulk(&a[1]),
        _ => reply::arity("ping"),
    }
}

pub fn echo(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    bulk(&a[1])
}

/// DBSIZE counts stored keys, including expired ones not yet deleted, like Redis.
pub fn dbsize(db: &mut Db, _: &mut Ctx, _: &[Vec<u8>]) -> Value {
    Value::Int(db.keys.len() as i64)
}

pub fn flushall(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match a.len() {
        1 => {}
        2 if eq_ic(&a[1], "sync") || eq_ic(&a[1], "async") => {}
        _ => return reply::syntax(),
    }
    db.keys.clear();
    ctx.propagate_args(a);
    Value::Okay
}

pub fn time(_: &mut Db, ctx: &mut Ctx, _: &[Vec<u8>]) -> Value {
    let secs = ctx.now.div_euclid(1000);
    let micros = ctx.now.rem_euclid(1000) * 1000;
    Value::Array(vec![
        Value::BulkString(secs.to_string().into_bytes()),
        Value::BulkString(micros.to_string().into_bytes()),
    ])
}

/// A minimal INFO (the node layer answers the real one, with replication state). Allowed
/// from scripts, as on a real server.
pub fn info(db: &mut Db, ctx: &mut Ctx, _: &[Vec<u8>]) -> Value {
    let role = if ctx.expiry == Expiry::Hide {
        "slave"
    } else {
        "master"
    };
    Value::BulkString(
        format!(
            "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\r\n# Replication\r\nrole:{role}\r\n\r\n# Keyspace\r\ndb0:keys={}\r\n",
            db.keys.len()
        )
        .into_bytes(),
    )
}

/// The node layer implements WAIT (it knows the replicas); the engine alone has none.
pub fn wait(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if parse_i64(&a[1]).is_none() {
        return reply::not_integer();
    }
    match parse_i64(&a[2]) {
        Some(t) if t < 0 => reply::error("ERR timeout is negative"),
        Some(_) => Value::Int(0),
        None => reply::error("ERR timeout is not an integer or out of range"),
    }
}
