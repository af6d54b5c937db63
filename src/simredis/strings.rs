//! The string commands lock libraries use beyond `SET`/`GET`: `SETEX`, `PSETEX`, `MGET`,
//! `MSET`. They exist because lock clients written against older Redis versions (and Redisson's
//! batch paths) send them, and the simulator must answer them as redis-server 7.0.15 does:
//! `SETEX` rejects a non-positive expiry with its own command name in the error, and
//! replicates, like `SET ... EX`, as `SET key value PXAT <absolute ms>`.

use super::commands::{set, Ctx, Db};
use super::keyspace::Data;
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;

/// `SETEX key seconds value` / `PSETEX key milliseconds value`: `SET key value EX|PX n`.
fn set_expiring(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], name: &str, unit: &[u8]) -> Value {
    let Some(n) = parse_i64(&a[2]) else {
        return reply::not_integer();
    };
    if n <= 0 || (unit == b"EX" && n > i64::MAX / 1000) {
        return reply::invalid_expire(name);
    }
    let as_set = [
        b"SET".to_vec(),
        a[1].clone(),
        a[3].clone(),
        unit.to_vec(),
        a[2].clone(),
    ];
    set(db, ctx, &as_set)
}

pub fn setex(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    set_expiring(db, ctx, a, "setex", b"EX")
}

pub fn psetex(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    set_expiring(db, ctx, a, "psetex", b"PX")
}

/// `MGET key...`: nil for a missing key and for a key of another type (no WRONGTYPE).
pub fn mget(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    Value::Array(
        a[1..]
            .iter()
            .map(|k| match ctx.lookup(&mut db.keys, k) {
                Some(Data::Str(s)) => bulk(s),
                _ => Value::Nil,
            })
            .collect(),
    )
}

/// `MSET key value [key value...]`: an odd argument count is an arity error, as in Redis.
pub fn mset(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if a.len().is_multiple_of(2) {
        return reply::arity("mset");
    }
    for pair in a[1..].chunks(2) {
        db.keys.set(&pair[0], Data::Str(pair[1].clone()), false);
    }
    ctx.propagate_args(a);
    Value::Okay
}

/// `GETEX key [EX s | PX ms | EXAT s | PXAT ms | PERSIST]`: `GET` that also sets or clears the
/// expiry (a lease refresh that reads the holder). Replicated as `PEXPIREAT key <abs ms>`,
/// `PERSIST key`, or `DEL key` for an absolute time already past, as 7.0 does.
pub fn getex(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut when: Option<i64> = None;
    let mut persist = false;
    match a.len() {
        2 => {}
        3 if a[2].eq_ignore_ascii_case(b"persist") => persist = true,
        4 => {
            let scale = match a[2].to_ascii_lowercase().as_slice() {
                b"ex" | b"exat" => 1000,
                b"px" | b"pxat" => 1,
                _ => return reply::syntax(),
            };
            // EX and PX are relative; EXAT and PXAT absolute.
            let relative = a[2].len() == 2;
            let Some(n) = parse_i64(&a[3]) else {
                return reply::not_integer();
            };
            if n <= 0 || n > i64::MAX / scale {
                return reply::invalid_expire("getex");
            }
            let ms = n * scale;
            when = Some(if relative {
                match ms.checked_add(ctx.now) {
                    Some(t) => t,
                    None => return reply::invalid_expire("getex"),
                }
            } else {
                ms
            });
        }
        _ => return reply::syntax(),
    }
    let value = match ctx.lookup(&mut db.keys, &a[1]) {
        None => return Value::Nil,
        Some(Data::Str(s)) => bulk(s),
        Some(_) => return reply::wrongtype(),
    };
    if let Some(t) = when {
        if t <= ctx.now {
            db.keys.remove(&a[1]);
            ctx.propagate(|| vec![b"DEL".to_vec(), a[1].clone()]);
        } else {
            db.keys.set_expire(&a[1], t);
            ctx.propagate(|| {
                vec![
                    b"PEXPIREAT".to_vec(),
                    a[1].clone(),
                    t.to_string().into_bytes(),
                ]
            });
        }
    } else if persist && db.keys.persist(&a[1]) {
        ctx.propagate(|| vec![b"PERSIST".to_vec(), a[1].clone()]);
    }
    value
}
