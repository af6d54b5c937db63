//! Scripts the engine runs without Lua because every lock cycle runs them: each is recognised by
//! its sha1 and replaced by the very command calls its Lua body makes, in the same execution
//! unit, so the reply, the data, the replication effects and the WATCH touches are those of the
//! script. Whenever a case could differ (a replica, where a write from a script fails with
//! Redis's script error text; a key of another type, where `redis.call` raises; a number Lua
//! would read differently), the native path declines, before it changes anything, and the script
//! runs in Lua. `tests/redis_engine/native_scripts.rs` checks both paths agree.
//!
//! The scripts: the locks' compare-and-delete release, and the protected resource's fenced write
//! (the storage node runs one per critical section).

use super::commands;
use super::context::{Ctx, Db};
use super::keyspace::Data;
use super::lua::{sha1hex, Sha};
use redis::Value;
use std::cell::RefCell;
use std::sync::LazyLock;

/// The locks' compare-and-delete release (`src/lock/scripts/compare_and_delete.lua`):
/// `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`.
const COMPARE_AND_DELETE: &[u8] = include_bytes!("../lock/scripts/compare_and_delete.lua");

/// The protected resource's fenced counter write (`src/resource/scripts/fenced_write.lua`).
const FENCED_WRITE: &[u8] = include_bytes!("../resource/scripts/fenced_write.lua");

/// The compare-and-delete release's sha1.
pub static COMPARE_AND_DELETE_SHA: LazyLock<Sha> = LazyLock::new(|| sha1hex(COMPARE_AND_DELETE));

/// The fenced write's sha1.
pub static FENCED_WRITE_SHA: LazyLock<Sha> = LazyLock::new(|| sha1hex(FENCED_WRITE));

/// If `body` is a native script's, its sha1 and the body (kept for a later compilation, should a
/// call need Lua after all). Native bodies are known to compile (`tests/redis_engine/native_scripts.rs`
/// compiles each), so a cache may hold them without a Lua host.
pub(super) fn known(body: &[u8]) -> Option<(Sha, &'static [u8])> {
    [
        (COMPARE_AND_DELETE, &COMPARE_AND_DELETE_SHA),
        (FENCED_WRITE, &FENCED_WRITE_SHA),
    ]
    .into_iter()
    .find(|(known, _)| *known == body)
    .map(|(known, sha)| (**sha, known))
}

/// Runs the script `sha` natively if it is one of the known scripts and this call is a case the
/// native path covers; `None` means "run it in Lua". The caller has checked the script is in the
/// cache (an unknown sha answers NOSCRIPT, natively or not) and that the node is a master.
pub(super) fn run(
    sha: &Sha,
    db: &mut Db,
    ctx: &mut Ctx,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
) -> Option<Value> {
    if sha == &*COMPARE_AND_DELETE_SHA {
        if let ([key], [owner]) = (keys, args) {
            return compare_and_delete(db, ctx, key, owner);
        }
    }
    if sha == &*FENCED_WRITE_SHA {
        if let ([value_key, token_key, seq_key], [value, token]) = (keys, args) {
            return fenced_write(db, ctx, [value_key, token_key, seq_key], value, token);
        }
    }
    None
}

/// `fenced_write.lua`: refuse a token below the highest seen, else record it, set the value and
/// take the next write number. Declines (None) unless the keys are distinct, the token key holds
/// a string or nothing, both numbers are plain decimals (what Lua's `tonumber` and Rust read
/// alike) and the sequence key holds an integer below the maximum or nothing: anything else
/// raises in Lua, with Lua's text.
fn fenced_write(
    db: &mut Db,
    ctx: &mut Ctx,
    [value_key, token_key, seq_key]: [&Vec<u8>; 3],
    value: &[u8],
    token: &[u8],
) -> Option<Value> {
    if value_key == token_key || value_key == seq_key || token_key == seq_key {
        return None;
    }
    match db.keys.get(seq_key) {
        None => {}
        Some(Data::Str(n)) if super::num::parse_i64(n).is_some_and(|n| n < i64::MAX) => {}
        Some(_) => return None,
    }
    if !token.is_empty() {
        // Every reason to decline is known before the first command runs: a stored highest
        // token (even one about to expire) and the token must both be decimals.
        let as_number = match db.keys.get(token_key) {
            None => None,
            Some(Data::Str(highest)) => {
                decimal(highest)?;
                Some(decimal(token)?)
            }
            Some(_) => return None,
        };
        // `local highest = redis.call('get', KEYS[2])`, run whatever it will find.
        let highest = call_command(db, ctx, &[b"get", token_key]);
        if let (Some(t), Value::BulkString(h)) = (as_number, highest) {
            if t < decimal(&h).expect("a stored decimal, checked above") {
                return Some(Value::Int(0));
            }
        }
        call_command(db, ctx, &[b"set", token_key, token]);
    }
    call_command(db, ctx, &[b"set", value_key, value]);
    Some(call_command(db, ctx, &[b"incr", seq_key]))
}

/// A plain decimal integer (`-?[0-9]+`) as the double Lua 5.1's `tonumber` makes of it (strtod,
/// correctly rounded, as Rust's parse is); None for any other text, which the native path leaves
/// to Lua.
fn decimal(s: &[u8]) -> Option<f64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn compare_and_delete(db: &mut Db, ctx: &mut Ctx, key: &[u8], owner: &[u8]) -> Option<Value> {
    // A key of another type makes `redis.call('get')` raise: Lua produces that error reply.
    if !matches!(db.keys.get(key), None | Some(Data::Str(_))) {
        return None;
    }
    match call_command(db, ctx, &[b"get", key]) {
        Value::BulkString(held) if held == owner => Some(call_command(db, ctx, &[b"del", key])),
        // `false ~= ARGV[1]`, or another holder's token.
        Value::BulkString(_) | Value::Nil => Some(Value::Int(0)),
        _ => unreachable!("GET of a string or a missing key answers a bulk string or nil"),
    }
}

thread_local! {
    /// The argument vector `redis.call` builds, kept between calls: a native script runs for
    /// every release and every protected write of every simulated lock cycle, and filling kept
    /// buffers allocates nothing once they are large enough.
    static ARGV: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// What `redis.call(parts...)` does once its checks passed (`script_call`): the command's
/// handler on the unit's data and context.
fn call_command(db: &mut Db, ctx: &mut Ctx, parts: &[&[u8]]) -> Value {
    ARGV.with_borrow_mut(|argv| {
        argv.resize_with(parts.len(), Vec::new);
        for (to, from) in argv.iter_mut().zip(parts) {
            to.clear();
            to.extend_from_slice(from);
        }
        let spec = commands::lookup(&argv[0]).expect("a command of the table");
        (spec.run)(db, ctx, argv)
    })
}
