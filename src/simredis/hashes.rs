//! Hash commands: `HSET`, `HGET`, `HDEL`, `HEXISTS`, `HINCRBY`, `HGETALL`, `HLEN`.
//!
//! Why they exist: reentrant locks (the Redisson article) keep the holder and its hold count
//! in a hash; these are the commands its scripts call.

use super::context::{Ctx, Db};
use super::keyspace::{Data, Hash};
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;

/// The hash at `key` for reading: Ok(None) if missing, Err(WRONGTYPE) if not a hash.
fn read_hash<'a>(db: &'a mut Db, ctx: &mut Ctx, key: &[u8]) -> Result<Option<&'a Hash>, Value> {
    match ctx.lookup(&mut db.keys, key) {
        None => Ok(None),
        Some(Data::Hash(h)) => Ok(Some(h)),
        Some(_) => Err(reply::wrongtype()),
    }
}

/// The hash at `key` for writing, created if missing.
fn write_hash<'a>(db: &'a mut Db, ctx: &mut Ctx, key: &[u8]) -> Result<&'a mut Hash, Value> {
    match ctx.lookup(&mut db.keys, key) {
        None => {}
        Some(Data::Hash(_)) => {}
        Some(_) => return Err(reply::wrongtype()),
    }
    if !db.keys.contains(key) {
        db.keys.set(key, Data::Hash(Hash::default()), false);
    }
    match db.keys.get_mut(key) {
        Some(Data::Hash(h)) => Ok(h),
        _ => unreachable!("just created"),
    }
}

pub fn hset(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if a.len() % 2 == 1 {
        return reply::arity("hset");
    }
    let h = match write_hash(db, ctx, &a[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let mut created = 0;
    for pair in a[2..].chunks(2) {
        if h.set(&pair[0], pair[1].clone()) {
            created += 1;
        }
    }
    ctx.propagate_args(a);
    Value::Int(created)
}

pub fn hget(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match read_hash(db, ctx, &a[1]) {
        Ok(Some(h)) => h.get(&a[2]).map_or(Value::Nil, bulk),
        Ok(None) => Value::Nil,
        Err(e) => e,
    }
}

pub fn hdel(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let (n, empty) = match ctx.lookup(&mut db.keys, &a[1]) {
        None => return Value::Int(0),
        Some(Data::Hash(h)) => {
            let n = a[2..].iter().filter(|f| h.remove(f)).count();
            (n, h.is_empty())
        }
        Some(_) => return reply::wrongtype(),
    };
    if empty {
        db.keys.remove(&a[1]);
    }
    if n > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(n as i64)
}

pub fn hexists(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match read_hash(db, ctx, &a[1]) {
        Ok(Some(h)) => Value::Int(i64::from(h.get(&a[2]).is_some())),
        Ok(None) => Value::Int(0),
        Err(e) => e,
    }
}

pub fn hincrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let Some(by) = parse_i64(&a[3]) else {
        return reply::not_integer();
    };
    let h = match write_hash(db, ctx, &a[1]) {
        Ok(h) => h,
        Err(e) => return e,
    };
    let cur = match h.get(&a[2]) {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(v) => v,
            None => return reply::hash_not_integer(),
        },
    };
    let Some(new) = cur.checked_add(by) else {
        return reply::overflow();
    };
    h.set(&a[2], new.to_string().into_bytes());
    ctx.propagate_args(a);
    Value::Int(new)
}

pub fn hgetall(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match read_hash(db, ctx, &a[1]) {
        Ok(Some(h)) => Value::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect()),
        Ok(None) => Value::Array(Vec::new()),
        Err(e) => e,
    }
}

pub fn hlen(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match read_hash(db, ctx, &a[1]) {
        Ok(Some(h)) => Value::Int(h.len() as i64),
        Ok(None) => Value::Int(0),
        Err(e) => e,
    }
}
