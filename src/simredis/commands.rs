//! The command table: every command's name, arity and flags, and the handler that runs it.
//!
//! Dispatch only: the handlers live with their families (`strings.rs`, `keys.rs`,
//! `expiry.rs`, `hashes.rs`, `lists.rs`, `sets.rs`, `zsets.rs`, `server.rs`), and what they
//! run against is in `context.rs`. The engine, the script host's `redis.call` and the native
//! scripts find a command here by name and call its handler; the commands marked [`ENGINE`]
//! need more than the data (scripts, transactions, connection state) and are run by the
//! engine itself.

use super::context::{Ctx, Db};
use super::reply;
use super::{expiry, hashes, keys, lists, server, sets, strings, zsets};
use redis::Value;

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
    "get" 2 0 => strings::get;
    "set" -3 WRITE => strings::set;
    "setnx" 3 WRITE => strings::setnx;
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
    "getdel" 2 WRITE => strings::getdel;
    "del" -2 WRITE => keys::del;
    "unlink" -2 WRITE => keys::del;
    "exists" -2 0 => keys::exists;
    "type" 2 0 => keys::type_;
    "incr" 2 WRITE => strings::incr;
    "decr" 2 WRITE => strings::decr;
    "incrby" 3 WRITE => strings::incrby;
    "decrby" 3 WRITE => strings::decrby;
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
    "publish" 3 MAY_REPLICATE => server::publish;
    "ping" -1 0 => server::ping;
    "echo" 2 0 => server::echo;
    "dbsize" 1 0 => server::dbsize;
    "flushall" -1 WRITE => server::flushall;
    "time" 1 0 => server::time;
    "info" -1 0 => server::info;
    "eval" -3 (NOSCRIPT | ENGINE) => engine_only;
    "evalsha" -3 (NOSCRIPT | ENGINE) => engine_only;
    "eval_ro" -3 (NOSCRIPT | ENGINE) => engine_only;
    "evalsha_ro" -3 (NOSCRIPT | ENGINE) => engine_only;
    "script" -2 (NOSCRIPT | ENGINE) => engine_only;
    "wait" 3 NOSCRIPT => server::wait;
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

/// Whether Redis treats `args` as a command that may write: a command flagged `write`, or a
/// script or function call that is not read-only (`EVAL`, `EVALSHA`, `FCALL`; Redis 7 treats a
/// script without `no-writes` as one that may write). What `min-replicas-to-write` refuses.
pub fn may_write(args: &[Vec<u8>]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    let lower = name.to_ascii_lowercase();
    lookup(&lower).is_some_and(|s| s.is_write())
        || matches!(lower.as_slice(), b"eval" | b"evalsha" | b"fcall")
}
