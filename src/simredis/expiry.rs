//! Expiry commands: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (with NX/XX/GT/LT),
//! `PERSIST`, `TTL`, `PTTL`.
//!
//! Why they are apart: a lease is a key with an expiry, so these are the commands whose
//! replication rewrite matters most (a relative expiry replicates as `PEXPIREAT`, one already
//! in the past as `DEL`).

use super::context::{eq_ic, Ctx, Db};
use super::num::parse_i64;
use super::reply;
use redis::Value;

const EXP_NX: u8 = 1;
const EXP_XX: u8 = 2;
const EXP_GT: u8 = 4;
const EXP_LT: u8 = 8;

/// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT (Redis's expireGenericCommand). `base` is added
/// to the argument (now for the relative forms, 0 for the absolute ones).
fn expire_generic(
    db: &mut Db,
    ctx: &mut Ctx,
    a: &[Vec<u8>],
    base: i64,
    seconds: bool,
    name: &str,
) -> Value {
    let mut flags = 0u8;
    for opt in &a[3..] {
        flags |= if eq_ic(opt, "nx") {
            EXP_NX
        } else if eq_ic(opt, "xx") {
            EXP_XX
        } else if eq_ic(opt, "gt") {
            EXP_GT
        } else if eq_ic(opt, "lt") {
            EXP_LT
        } else {
            return reply::error(&format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            ));
        };
    }
    if flags & EXP_NX != 0 && flags & (EXP_XX | EXP_GT | EXP_LT) != 0 {
        return reply::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if flags & EXP_GT != 0 && flags & EXP_LT != 0 {
        return reply::error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(mut when) = parse_i64(&a[2]) else {
        return reply::not_integer();
    };
    if seconds {
        if !(i64::MIN / 1000..=i64::MAX / 1000).contains(&when) {
            return reply::invalid_expire(name);
        }
        when *= 1000;
    }
    if when > i64::MAX - base {
        return reply::invalid_expire(name);
    }
    when = when.wrapping_add(base);

    let key = &a[1];
    if ctx.lookup(&mut db.keys, key).is_none() {
        return Value::Int(0);
    }
    if flags != 0 {
        let current = db.keys.expire_at(key);
        let refused = (flags & EXP_NX != 0 && current.is_some())
            || (flags & EXP_XX != 0 && current.is_none())
            // GT treats "no expiry" as infinite, so nothing is greater; LT sets it.
            || (flags & EXP_GT != 0 && current.is_none_or(|c| when <= c))
            || (flags & EXP_LT != 0 && current.is_some_and(|c| when >= c));
        if refused {
            return Value::Int(0);
        }
    }
    if ctx.already_expired(when) {
        db.keys.remove(key);
        ctx.propagate(|| vec![b"DEL".to_vec(), key.clone()]);
        return Value::Int(1);
    }
    db.keys.set_expire(key, when);
    let mut eff = a.to_vec();
    if name != "pexpireat" {
        eff[0] = b"PEXPIREAT".to_vec();
        eff[2] = when.to_string().into_bytes();
    }
    ctx.propagate(|| eff);
    Value::Int(1)
}

pub fn expire(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let now = ctx.now;
    expire_generic(db, ctx, a, now, true, "expire")
}

pub fn pexpire(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let now = ctx.now;
    expire_generic(db, ctx, a, now, false, "pexpire")
}

pub fn expireat(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    expire_generic(db, ctx, a, 0, true, "expireat")
}

pub fn pexpireat(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    expire_generic(db, ctx, a, 0, false, "pexpireat")
}

pub fn persist(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if ctx.lookup(&mut db.keys, &a[1]).is_none() {
        return Value::Int(0);
    }
    if db.keys.persist(&a[1]) {
        ctx.propagate_args(a);
        Value::Int(1)
    } else {
        Value::Int(0)
    }
}

fn ttl_generic(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>], ms: bool) -> Value {
    if ctx.lookup(&mut db.keys, &a[1]).is_none() {
        return Value::Int(-2);
    }
    match db.keys.expire_at(&a[1]) {
        None => Value::Int(-1),
        Some(t) => {
            let left = t.saturating_sub(ctx.now).max(0);
            Value::Int(if ms { left } else { (left + 500) / 1000 })
        }
    }
}

pub fn ttl(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    ttl_generic(db, ctx, a, false)
}

pub fn pttl(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    ttl_generic(db, ctx, a, true)
}
