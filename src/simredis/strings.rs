//! String commands: `GET`, `SET` (NX/XX/GET/KEEPTTL and the four expiry options), `SETNX`,
//! `GETDEL`, `INCR`/`DECR`/`INCRBY`/`DECRBY`, and the ones lock libraries use beyond
//! `SET`/`GET`: `SETEX`, `PSETEX`, `MGET`, `MSET`, `GETEX`.
//!
//! Why they are together: a lease is a string key, so these are the commands every lock cycle
//! sends, and most are `SET` in another form (`SETEX` and `PSETEX` run it, `GETEX` shares its
//! expiry rules). Lock clients written against older Redis versions (and Redisson's batch
//! paths) send the older forms, and the simulator must answer them as redis-server 7.0.15
//! does: `SETEX` rejects a non-positive expiry with its own command name in the error, and
//! replicates, like `SET ... EX`, as `SET key value PXAT <absolute ms>`.

use super::context::{eq_ic, Ctx, Db};
use super::keyspace::Data;
use super::num::parse_i64;
use super::reply::{self, bulk};
use redis::Value;

pub fn get(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match ctx.lookup_ref(&mut db.keys, &a[1]) {
        None => Value::Nil,
        Some(Data::Str(s)) => bulk(s),
        Some(_) => reply::wrongtype(),
    }
}

pub fn getdel(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let v = match ctx.lookup(&mut db.keys, &a[1]) {
        None => return Value::Nil,
        Some(Data::Str(s)) => bulk(s),
        Some(_) => return reply::wrongtype(),
    };
    db.keys.remove(&a[1]);
    ctx.propagate(|| vec![b"DEL".to_vec(), a[1].clone()]);
    v
}

const SET_NX: u8 = 1;
const SET_XX: u8 = 2;
const SET_GET: u8 = 4;
const SET_KEEPTTL: u8 = 8;

#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireOpt {
    Ex,
    Px,
    ExAt,
    PxAt,
}

pub fn set(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    // Option parsing follows Redis's parseExtendedStringArgumentsOrReply: repeated NX or GET
    // are fine, EX twice takes the last, NX with XX or two different expiries is a syntax
    // error.
    let mut flags = 0u8;
    let mut expire: Option<(ExpireOpt, &[u8])> = None;
    let mut j = 3;
    while j < a.len() {
        let opt = &a[j];
        let next = a.get(j + 1);
        let same_or_none = |want: ExpireOpt| expire.is_none_or(|(e, _)| e == want);
        if eq_ic(opt, "nx") && flags & SET_XX == 0 {
            flags |= SET_NX;
        } else if eq_ic(opt, "xx") && flags & SET_NX == 0 {
            flags |= SET_XX;
        } else if eq_ic(opt, "get") {
            flags |= SET_GET;
        } else if eq_ic(opt, "keepttl") && expire.is_none() {
            flags |= SET_KEEPTTL;
        } else if let Some(kind) = [
            ("ex", ExpireOpt::Ex),
            ("px", ExpireOpt::Px),
            ("exat", ExpireOpt::ExAt),
            ("pxat", ExpireOpt::PxAt),
        ]
        .iter()
        .find(|(n, _)| eq_ic(opt, n))
        .map(|&(_, k)| k)
        .filter(|&k| flags & SET_KEEPTTL == 0 && same_or_none(k) && next.is_some())
        {
            expire = Some((kind, next.expect("checked")));
            j += 1;
        } else {
            return reply::syntax();
        }
        j += 1;
    }

    // The absolute expiry, with Redis's checks: non-positive or overflowing is invalid.
    let mut when: Option<i64> = None;
    if let Some((kind, arg)) = expire {
        let Some(mut ms) = parse_i64(arg) else {
            return reply::not_integer();
        };
        let seconds = matches!(kind, ExpireOpt::Ex | ExpireOpt::ExAt);
        if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
            return reply::invalid_expire("set");
        }
        if seconds {
            ms *= 1000;
        }
        if matches!(kind, ExpireOpt::Ex | ExpireOpt::Px) {
            ms = ms.wrapping_add(ctx.now);
        }
        if ms <= 0 {
            return reply::invalid_expire("set");
        }
        when = Some(ms);
    }

    let key = &a[1];
    let mut old = Value::Nil;
    let found = match ctx.lookup_ref(&mut db.keys, key) {
        Some(Data::Str(s)) => {
            if flags & SET_GET != 0 {
                old = bulk(s);
            }
            true
        }
        Some(_) if flags & SET_GET != 0 => return reply::wrongtype(),
        Some(_) => true,
        None => false,
    };
    if (flags & SET_NX != 0 && found) || (flags & SET_XX != 0 && !found) {
        return old;
    }
    match when {
        Some(t) => db.keys.set_with_expire(key, Data::Str(a[2].clone()), t),
        None => db
            .keys
            .set(key, Data::Str(a[2].clone()), flags & SET_KEEPTTL != 0),
    }
    match when {
        Some(t) => {
            ctx.propagate(|| {
                vec![
                    b"SET".to_vec(),
                    key.clone(),
                    a[2].clone(),
                    b"PXAT".to_vec(),
                    t.to_string().into_bytes(),
                ]
            });
        }
        None if flags & SET_GET != 0 => {
            let kept: Vec<Vec<u8>> = a
                .iter()
                .enumerate()
                .filter(|(i, x)| *i < 3 || !eq_ic(x, "get"))
                .map(|(_, x)| x.clone())
                .collect();
            ctx.propagate(|| kept);
        }
        None => ctx.propagate_args(a),
    }
    if flags & SET_GET != 0 {
        old
    } else {
        Value::Okay
    }
}

pub fn setnx(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if ctx.lookup(&mut db.keys, &a[1]).is_some() {
        return Value::Int(0);
    }
    db.keys.set(&a[1], Data::Str(a[2].clone()), false);
    ctx.propagate_args(a);
    Value::Int(1)
}

fn incr_by(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], by: i64) -> Value {
    let cur = match ctx.lookup(&mut db.keys, &a[1]) {
        None => 0,
        Some(Data::Str(s)) => match parse_i64(s) {
            Some(v) => v,
            None => return reply::not_integer(),
        },
        Some(_) => return reply::wrongtype(),
    };
    let Some(new) = cur.checked_add(by) else {
        return reply::overflow();
    };
    // INCR keeps the key's TTL (Redis replaces the value in place).
    db.keys
        .set(&a[1], Data::Str(new.to_string().into_bytes()), true);
    ctx.propagate_args(a);
    Value::Int(new)
}

pub fn incr(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    incr_by(db, ctx, a, 1)
}

pub fn decr(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    incr_by(db, ctx, a, -1)
}

pub fn incrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match parse_i64(&a[2]) {
        Some(by) => incr_by(db, ctx, a, by),
        None => reply::not_integer(),
    }
}

pub fn decrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match parse_i64(&a[2]) {
        Some(i64::MIN) => reply::error("ERR decrement would overflow"),
        Some(by) => incr_by(db, ctx, a, -by),
        None => reply::not_integer(),
    }
}

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
