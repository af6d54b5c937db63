//! Set commands: `SADD`, `SREM`, `SISMEMBER`, `SMEMBERS`, `SCARD`.
//!
//! Why they exist: lock libraries keep holder sets (read locks, semaphores) in sets. Replies,
//! errors and replication follow redis-server 7.0.15: a write is replicated verbatim only if
//! it changed something, and removing the last member deletes the key.
//!
//! One deliberate difference: a real server lists a set of non-integers in its hash table's
//! order, which depends on a hash seed drawn at start-up, so no two servers agree. Here such
//! a set is listed in byte order; a set of at most 512 integers is listed in numeric order,
//! which is exactly what a real server's intset encoding answers.

use super::context::{Ctx, Db};
use super::keyspace::Data;
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;
use std::collections::BTreeSet;

/// Redis's `set-max-intset-entries` default: up to this many integers stay sorted.
const MAX_INTSET_ENTRIES: usize = 512;

/// The live set at `key`: Ok(None) if missing, Err(WRONGTYPE) if another type.
fn set_at<'a>(
    db: &'a mut Db,
    ctx: &mut Ctx,
    key: &[u8],
) -> Result<Option<&'a mut BTreeSet<Vec<u8>>>, Value> {
    match ctx.lookup(&mut db.keys, key) {
        None => Ok(None),
        Some(Data::Set(s)) => Ok(Some(s)),
        Some(_) => Err(reply::wrongtype()),
    }
}

pub fn sadd(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let s = match set_at(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(Some(s)) => s,
        Ok(None) => {
            db.keys.set(&a[1], Data::Set(BTreeSet::new()), false);
            match db.keys.get_mut(&a[1]) {
                Some(Data::Set(s)) => s,
                _ => unreachable!("just created"),
            }
        }
    };
    let added = a[2..].iter().filter(|m| s.insert(m.to_vec())).count();
    if added > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(added as i64)
}

pub fn srem(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let (removed, empty) = match set_at(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Int(0),
        Ok(Some(s)) => (a[2..].iter().filter(|m| s.remove(*m)).count(), s.is_empty()),
    };
    if empty {
        db.keys.remove(&a[1]);
    }
    if removed > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(removed as i64)
}

pub fn sismember(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match set_at(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(s) => Value::Int(i64::from(s.is_some_and(|s| s.contains(&a[2])))),
    }
}

pub fn scard(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match set_at(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(s) => Value::Int(s.map_or(0, |s| s.len() as i64)),
    }
}

pub fn smembers(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let s = match set_at(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Array(Vec::new()),
        Ok(Some(s)) => s,
    };
    let ints: Option<Vec<i64>> = if s.len() <= MAX_INTSET_ENTRIES {
        s.iter().map(|m| parse_i64(m)).collect()
    } else {
        None
    };
    match ints {
        Some(mut ints) => {
            ints.sort_unstable();
            Value::Array(
                ints.iter()
                    .map(|i| bulk(i.to_string().as_bytes()))
                    .collect(),
            )
        }
        None => Value::Array(s.iter().map(|m| bulk(m)).collect()),
    }
}
