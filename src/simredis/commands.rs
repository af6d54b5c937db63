//! The command table and the data commands.
//!
//! A command runs against a [`Db`] inside a [`Ctx`] (one execution unit: a top-level command,
//! a whole script, or the application of a replication stream). The context carries the
//! clock reading, how expiry is treated, and collects what the unit wrote so it can be
//! replicated.
//!
//! Each command records its own replication effect, because that is what Redis 7.0 does:
//! relative expiries are rewritten to absolute ones (`SET k v PXAT t`, `PEXPIREAT k t`), an
//! expiry already in the past becomes `DEL`, a `SET ... GET` loses its `GET`, and a command
//! that changed nothing (a failed `SET NX`, a `DEL` of nothing) is not replicated at all.
//! All of that was observed on a real 7.0.15 replication stream.

use super::expiry;
use super::hashes;
use super::keyspace::{Data, Keyspace};
use super::lists;
use super::num::parse_i64;
use super::pubsub::PubSub;
use super::reply::{self, bulk};
use super::strings;
use super::ClientId;
use super::{sets, zsets};
use redis::Value;

/// The engine's data: everything a command can touch.
#[derive(Debug, Default)]
pub struct Db {
    pub keys: Keyspace,
    pub pubsub: PubSub,
}

/// How a lookup treats a logically expired key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// A master: the key is deleted on access and a `DEL` is replicated (Redis's lazy expiry).
    Delete,
    /// A replica answering its own clients: the key is reported missing but kept. Why: a
    /// replica must not diverge from its master, so only the master's `DEL` removes keys; but
    /// a replica whose clock says the key is dead does not serve it (Redis >= 3.2).
    Hide,
    /// Applying the master's stream: expiry is the master's business, keys are used as stored.
    Ignore,
}

/// One execution unit in progress.
#[derive(Debug)]
pub struct Ctx {
    /// This node's clock, unix ms. Frozen for the whole unit, as Redis freezes time for a script.
    pub now: i64,
    pub expiry: Expiry,
    /// Effects recorded so far (each a full command).
    pub ops: Vec<Vec<Vec<u8>>>,
    /// Whether writes are recorded in `ops` (scripts may turn this off with `redis.set_repl`).
    pub replicate: bool,
    /// Whether anyone wants the effects themselves (a replica, a `WATCH`): when nobody does,
    /// only their count is kept (`writes`), which spares copying every write's arguments.
    pub record: bool,
    /// How many effects the unit produced, recorded in `ops` or not.
    pub writes: usize,
    pub messages: Vec<(ClientId, Vec<u8>, Vec<u8>)>,
}

impl Ctx {
    pub fn new(now: i64, expiry: Expiry) -> Self {
        Ctx {
            now,
            expiry,
            ops: Vec::new(),
            replicate: true,
            record: true,
            writes: 0,
            messages: Vec::new(),
        }
    }

    /// Records the effect `cmd` builds (built only when someone wants it, see `record`).
    pub(crate) fn propagate(&mut self, cmd: impl FnOnce() -> Vec<Vec<u8>>) {
        if self.replicate && self.expiry != Expiry::Ignore {
            self.effect(cmd);
        }
    }

    pub(crate) fn propagate_args(&mut self, args: &[Vec<u8>]) {
        if self.replicate && self.expiry != Expiry::Ignore {
            self.effect(|| args.to_vec());
        }
    }

    /// Counts one effect, and records it when someone wants it.
    fn effect(&mut self, cmd: impl FnOnce() -> Vec<Vec<u8>>) {
        self.writes += 1;
        if self.record {
            self.ops.push(cmd());
        }
    }

    /// Redis's `expireIfNeeded`: true if the key must be treated as missing.
    pub fn expire_if_needed(&mut self, ks: &mut Keyspace, key: &[u8]) -> bool {
        if !ks.is_expired(key, self.now) {
            return false;
        }
        match self.expiry {
            Expiry::Ignore => false,
            Expiry::Hide => true,
            Expiry::Delete => {
                ks.remove(key);
                // Expiry deletions are always replicated, even under `set_repl(REPL_NONE)`.
                self.effect(|| vec![b"DEL".to_vec(), key.to_vec()]);
                true
            }
        }
    }

    /// The live value of a key, after lazy expiry.
    pub(crate) fn lookup<'a>(&mut self, ks: &'a mut Keyspace, key: &[u8]) -> Option<&'a mut Data> {
        if self.expire_if_needed(ks, key) {
            return None;
        }
        ks.get_mut(key)
    }

    /// [`Ctx::lookup`] for reading only (it leaves the keyspace's version alone unless the key
    /// expired and was deleted).
    pub(crate) fn lookup_ref<'a>(&mut self, ks: &'a mut Keyspace, key: &[u8]) -> Option<&'a Data> {
        if self.expire_if_needed(ks, key) {
            return None;
        }
        ks.get(key)
    }

    /// Whether an absolute expiry is already in the past (Redis's `checkAlreadyExpired`).
    /// Never on a replica applying its master's stream: there the key must stay until the
    /// master's `DEL` arrives.
    pub(crate) fn already_expired(&self, when: i64) -> bool {
        when <= self.now && self.expiry != Expiry::Ignore
    }
}

pub const WRITE: u8 = 1;
/// Not callable from scripts (`ERR This Redis command is not allowed from script`).
pub const NOSCRIPT: u8 = 2;
/// Handled by the engine itself (needs the Lua host or per-connection state).
pub const ENGINE: u8 = 4;
/// Not a write but replicated (PUBLISH): refused in `#!lua flags=no-writes` scripts.
pub const MAY_REPLICATE: u8 = 8;

pub type Handler = fn(&mut Db, &mut Ctx, &[Vec<u8>]) -> Value;

/// A command table entry. `arity` follows Redis: positive = exact argc (including the name),
/// negative = at least that many.
pub struct Spec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: u8,
    pub run: Handler,
}

impl Spec {
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags & WRITE != 0
    }
}

fn engine_only(_: &mut Db, _: &mut Ctx, _: &[Vec<u8>]) -> Value {
    reply::error("ERR command handled by the engine")
}

macro_rules! table {
    ($($name:literal $arity:literal $flags:expr => $run:expr;)*) => {
        static TABLE: &[Spec] = &[
            $(Spec { name: $name, arity: $arity, flags: $flags, run: $run },)*
        ];
    };
}

table! {
    "get" 2 0 => get;
    "set" -3 WRITE => set;
    "setnx" 3 WRITE => setnx;
    "setex" 4 WRITE => strings::setex;
    "psetex" 4 WRITE => strings::psetex;
    "mget" -2 0 => strings::mget;
    "mset" -3 WRITE => strings::mset;
    "getex" -2 WRITE => strings::getex;
    "lpush" -3 WRITE => lists::lpush;
    "rpush" -3 WRITE => lists::rpush;
    "lpop" -2 WRITE => lists::lpop;
    "rpop" -2 WRITE => lists::rpop;
    "llen" 2 0 => lists::llen;
    "lrange" 4 0 => lists::lrange;
    "lindex" 3 0 => lists::lindex;
    "lrem" 4 WRITE => lists::lrem;
    "blpop" -3 (WRITE | NOSCRIPT) => lists::blpop;
    "getdel" 2 WRITE => getdel;
    "del" -2 WRITE => del;
    "unlink" -2 WRITE => del;
    "exists" -2 0 => exists;
    "type" 2 0 => type_;
    "incr" 2 WRITE => incr;
    "decr" 2 WRITE => decr;
    "incrby" 3 WRITE => incrby;
    "decrby" 3 WRITE => decrby;
    "expire" -3 WRITE => expiry::expire;
    "pexpire" -3 WRITE => expiry::pexpire;
    "expireat" -3 WRITE => expiry::expireat;
    "pexpireat" -3 WRITE => expiry::pexpireat;
    "persist" 2 WRITE => expiry::persist;
    "ttl" 2 0 => expiry::ttl;
    "pttl" 2 0 => expiry::pttl;
    "hset" -4 WRITE => hashes::hset;
    "hget" 3 0 => hashes::hget;
    "hdel" -3 WRITE => hashes::hdel;
    "hexists" 3 0 => hashes::hexists;
    "hincrby" 4 WRITE => hashes::hincrby;
    "hgetall" 2 0 => hashes::hgetall;
    "hlen" 2 0 => hashes::hlen;
    "sadd" -3 WRITE => sets::sadd;
    "srem" -3 WRITE => sets::srem;
    "sismember" 3 0 => sets::sismember;
    "smembers" 2 0 => sets::smembers;
    "scard" 2 0 => sets::scard;
    "zadd" -4 WRITE => zsets::zadd;
    "zrange" -4 0 => zsets::zrange;
    "zrangebyscore" -4 0 => zsets::zrangebyscore;
    "zincrby" 4 WRITE => zsets::zincrby;
    "zrem" -3 WRITE => zsets::zrem;
    "zremrangebyscore" 4 WRITE => zsets::zremrangebyscore;
    "zscore" 3 0 => zsets::zscore;
    "zcard" 2 0 => zsets::zcard;
    "publish" 3 MAY_REPLICATE => publish;
    "ping" -1 0 => ping;
    "echo" 2 0 => echo;
    "dbsize" 1 0 => dbsize;
    "flushall" -1 WRITE => flushall;
    "time" 1 0 => time;
    "info" -1 0 => info;
    "eval" -3 (NOSCRIPT | ENGINE) => engine_only;
    "evalsha" -3 (NOSCRIPT | ENGINE) => engine_only;
    "eval_ro" -3 (NOSCRIPT | ENGINE) => engine_only;
    "evalsha_ro" -3 (NOSCRIPT | ENGINE) => engine_only;
    "script" -2 (NOSCRIPT | ENGINE) => engine_only;
    "wait" 3 NOSCRIPT => wait;
    "subscribe" -2 (NOSCRIPT | ENGINE) => engine_only;
    "unsubscribe" -1 (NOSCRIPT | ENGINE) => engine_only;
    "multi" 1 (NOSCRIPT | ENGINE) => engine_only;
    "exec" 1 (NOSCRIPT | ENGINE) => engine_only;
    "discard" 1 (NOSCRIPT | ENGINE) => engine_only;
    "watch" -2 (NOSCRIPT | ENGINE) => engine_only;
    "unwatch" 1 (NOSCRIPT | ENGINE) => engine_only;
    "client" -2 (NOSCRIPT | ENGINE) => engine_only;
    "hello" -1 (NOSCRIPT | ENGINE) => engine_only;
    "function" -2 (NOSCRIPT | ENGINE) => engine_only;
    "fcall" -3 (NOSCRIPT | ENGINE) => engine_only;
    "fcall_ro" -3 (NOSCRIPT | ENGINE) => engine_only;
}

/// Finds a command by name, case-insensitively, without allocating.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    if name.len() > 16 {
        return None;
    }
    let mut buf = [0u8; 16];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    BY_NAME.get(&*lower).map(|&i| &TABLE[i])
}

/// The table's index by name: every simulated command is looked up here, and a scan of the
/// whole table was a few per cent of a simulated lock cycle.
static BY_NAME: std::sync::LazyLock<rustc_hash::FxHashMap<&'static [u8], usize>> =
    std::sync::LazyLock::new(|| {
        TABLE
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_bytes(), i))
            .collect()
    });

pub(crate) fn eq_ic(a: &[u8], b: &str) -> bool {
    a.eq_ignore_ascii_case(b.as_bytes())
}

// ---------------------------------------------------------------------------------------
// strings

fn get(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match ctx.lookup_ref(&mut db.keys, &a[1]) {
        None => Value::Nil,
        Some(Data::Str(s)) => bulk(s),
        Some(_) => reply::wrongtype(),
    }
}

fn getdel(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
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

pub(crate) fn set(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
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

fn setnx(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if ctx.lookup(&mut db.keys, &a[1]).is_some() {
        return Value::Int(0);
    }
    db.keys.set(&a[1], Data::Str(a[2].clone()), false);
    ctx.propagate_args(a);
    Value::Int(1)
}

fn del(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.expire_if_needed(&mut db.keys, k) {
            continue;
        }
        if db.keys.remove(k) {
            n += 1;
        }
    }
    if n > 0 {
        ctx.propagate_args(a);
    }
    Value::Int(n)
}

fn exists(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let mut n = 0;
    for k in &a[1..] {
        if ctx.lookup(&mut db.keys, k).is_some() {
            n += 1;
        }
    }
    Value::Int(n)
}

fn type_(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let name = ctx
        .lookup(&mut db.keys, &a[1])
        .map_or("none", |d| d.type_name());
    Value::SimpleString(name.to_string())
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

fn incr(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    incr_by(db, ctx, a, 1)
}

fn decr(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    incr_by(db, ctx, a, -1)
}

fn incrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match parse_i64(&a[2]) {
        Some(by) => incr_by(db, ctx, a, by),
        None => reply::not_integer(),
    }
}

fn decrby(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match parse_i64(&a[2]) {
        Some(i64::MIN) => reply::error("ERR decrement would overflow"),
        Some(by) => incr_by(db, ctx, a, -by),
        None => reply::not_integer(),
    }
}

// ---------------------------------------------------------------------------------------
// pub/sub and server

/// PUBLISH delivers to this node's subscribers and is itself replicated (Redis forces its
/// propagation so that subscribers connected to replicas get the message too).
fn publish(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    let subs = db.pubsub.subscribers(&a[1]);
    for &c in subs {
        ctx.messages.push((c, a[1].clone(), a[2].clone()));
    }
    let n = subs.len() as i64;
    ctx.propagate_args(a);
    Value::Int(n)
}

fn ping(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match a.len() {
        1 => Value::SimpleString("PONG".into()),
        2 => bulk(&a[1]),
        _ => reply::arity("ping"),
    }
}

fn echo(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    bulk(&a[1])
}

/// DBSIZE counts stored keys, including expired ones not yet deleted, like Redis.
fn dbsize(db: &mut Db, _: &mut Ctx, _: &[Vec<u8>]) -> Value {
    Value::Int(db.keys.len() as i64)
}

fn flushall(db: &mut Db, ctx: &mut Ctx, a: &[Vec<u8>]) -> Value {
    match a.len() {
        1 => {}
        2 if eq_ic(&a[1], "sync") || eq_ic(&a[1], "async") => {}
        _ => return reply::syntax(),
    }
    db.keys.clear();
    ctx.propagate_args(a);
    Value::Okay
}

fn time(_: &mut Db, ctx: &mut Ctx, _: &[Vec<u8>]) -> Value {
    let secs = ctx.now.div_euclid(1000);
    let micros = ctx.now.rem_euclid(1000) * 1000;
    Value::Array(vec![
        Value::BulkString(secs.to_string().into_bytes()),
        Value::BulkString(micros.to_string().into_bytes()),
    ])
}

/// A minimal INFO (the node layer answers the real one, with replication state). Allowed
/// from scripts, as on a real server.
fn info(db: &mut Db, ctx: &mut Ctx, _: &[Vec<u8>]) -> Value {
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
fn wait(_: &mut Db, _: &mut Ctx, a: &[Vec<u8>]) -> Value {
    if parse_i64(&a[1]).is_none() {
        return reply::not_integer();
    }
    match parse_i64(&a[2]) {
        Some(t) if t < 0 => reply::error("ERR timeout is negative"),
        Some(_) => Value::Int(0),
        None => reply::error("ERR timeout is not an integer or out of range"),
    }
}
