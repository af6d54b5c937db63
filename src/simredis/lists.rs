//! List commands: `LPUSH`, `RPUSH`, `LPOP`, `RPOP`, `LLEN`, `LRANGE`, `LINDEX`, `LREM`, `BLPOP`.
//!
//! Why they exist: lock libraries keep waiter queues in lists (and wake a waiter with a push
//! that another client's `BLPOP` takes). Replies and errors follow redis-server 7.0.15: a pop
//! with a count answers a null array for a missing key and an empty array for a count of 0;
//! popping the last element deletes the key. `BLPOP` here never blocks: it pops or answers a
//! null array, which is what it does inside `MULTI` and scripts; the connection layer
//! (`sim::connection`) retries it until its timeout to model the blocking wait.

use super::context::{Ctx, Db};
use super::keyspace::Data;
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;
use std::collections::VecDeque;

/// The live list at `key`: Ok(None) if missing, Err(WRONGTYPE) if another type.
fn list<'a>(
    db: &'a mut Db,
    ctx: &mut Ctx,
    key: &[u8],
) -> Result<Option<&'a mut VecDeque<Vec<u8>>>, Value> {
    match ctx.lookup(&mut db.keys, key) {
        None => Ok(None),
        Some(Data::List(l)) => Ok(Some(l)),
        Some(_) => Err(reply::wrongtype()),
    }
}

fn push(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], head: bool) -> Value {
    let l = match list(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(Some(l)) => l,
        Ok(None) => {
            db.keys.set(&a[1], Data::List(VecDeque::new()), false);
            match db.keys.get_mut(&a[1]) {
                Some(Data::List(l)) => l,
                _ => unreachable!("just created"),
            }
        }
    };
    for v in &a[2..] {
        if head {
            l.push_front(v.clone());
        } else {
            l.push_back(v.clone());
        }
    }
    let len = l.len() as i64;
    ctx.propagate_args(a);
    Value::Int(len)
}

pub fn lpush(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    push(db, ctx, a, true)
}

pub fn rpush(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    push(db, ctx, a, false)
}

/// Takes up to `n` elements from one end, deleting the key when it empties.
fn take(db: &mut Db, key: &[u8], n: usize, head: bool) -> Vec<Vec<u8>> {
    let Some(Data::List(l)) = db.keys.get_mut(key) else {
        return Vec::new();
    };
    let n = n.min(l.len());
    let out: Vec<Vec<u8>> = if head {
        l.drain(..n).collect()
    } else {
        (0..n).filter_map(|_| l.pop_back()).collect()
    };
    if l.is_empty() {
        db.keys.remove(key);
    }
    out
}

fn pop(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], head: bool) -> Value {
    let count = match a.get(2) {
        None => None,
        // Redis's getPositiveLongFromObjectOrReply: one message for both failures.
        Some(c) => match parse_i64(c) {
            Some(c) if c >= 0 => Some(c as usize),
            _ => return reply::error("ERR value is out of range, must be positive"),
        },
    };
    match list(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Nil,
        Ok(Some(_)) if count == Some(0) => return Value::Array(Vec::new()),
        Ok(Some(_)) => {}
    }
    let got = take(db, &a[1], count.unwrap_or(1), head);
    ctx.propagate_args(a);
    match count {
        None => got.first().map_or(Value::Nil, |v| bulk(v)),
        Some(_) => Value::Array(got.iter().map(|v| bulk(v)).collect()),
    }
}

pub fn lpop(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    pop(db, ctx, a, true)
}

pub fn rpop(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    pop(db, ctx, a, false)
}

pub fn llen(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match list(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(l) => Value::Int(l.map_or(0, |l| l.len() as i64)),
    }
}

pub fn lrange(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let (Some(start), Some(stop)) = (parse_i64(&a[2]), parse_i64(&a[3])) else {
        return reply::not_integer();
    };
    let l = match list(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Array(Vec::new()),
        Ok(Some(l)) => l,
    };
    let len = l.len() as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        return Value::Array(Vec::new());
    }
    Value::Array(
        l.range(start as usize..=stop as usize)
            .map(|v| bulk(v))
            .collect(),
    )
}

pub fn lrem(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let Some(count) = parse_i64(&a[2]) else {
        return reply::not_integer();
    };
    let l = match list(db, ctx, &a[1]) {
        Err(e) => return e,
        Ok(None) => return Value::Int(0),
        Ok(Some(l)) => l,
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    let mut keep = VecDeque::with_capacity(l.len());
    let items: Vec<Vec<u8>> = if count < 0 {
        l.drain(..).rev().collect()
    } else {
        l.drain(..).collect()
    };
    for v in items {
        if removed < limit && v == a[3] {
            removed += 1;
        } else if count < 0 {
            keep.push_front(v);
        } else {
            keep.push_back(v);
        }
    }
    *l = keep;
    if l.is_empty() {
        db.keys.remove(&a[1]);
    }
    if removed > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(removed as i64)
}

/// `BLPOP key... timeout`, without blocking: the first non-empty list's head as
/// `[key, element]` (replicated as `LPOP key`), or a null array.
pub fn blpop(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let timeout = std::str::from_utf8(&a[a.len() - 1])
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|t| t.is_finite());
    match timeout {
        None => return reply::error("ERR timeout is not a float or out of range"),
        Some(t) if t < 0.0 => return reply::error("ERR timeout is negative"),
        Some(_) => {}
    }
    for key in &a[1..a.len() - 1] {
        match list(db, ctx, key) {
            Err(e) => return e,
            Ok(None) => continue,
            Ok(Some(_)) => {}
        }
        let got = take(db, key, 1, true);
        ctx.propagate(|| vec![b"LPOP".to_vec(), key.clone()]);
        return Value::Array(vec![bulk(key), bulk(&got[0])]);
    }
    Value::Nil
}

pub fn lindex(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let Some(i) = parse_i64(&a[2]) else {
        return reply::not_integer();
    };
    match list(db, ctx, &a[1]) {
        Err(e) => e,
        Ok(None) => Value::Nil,
        Ok(Some(l)) => {
            let i = if i < 0 { i + l.len() as i64 } else { i };
            usize::try_from(i)
                .ok()
                .and_then(|i| l.get(i))
                .map_or(Value::Nil, |v| bulk(v))
        }
    }
}
