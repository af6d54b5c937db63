//! Scripts the engine runs without Lua because every lock cycle runs them: each is recognised by
//! its sha1 and replaced by the very command calls its Lua body makes, in the same execution
//! unit, so the reply, the data, the replication effects and the WATCH touches are those of the
//! script. Whenever a case could differ (a replica, where a write from a script fails with
//! Redis's script error text; a key of another type, where `redis.call` raises), the native path
//! declines and the script runs in Lua. `tests/simredis/native_scripts.rs` checks both paths agree.

use super::commands;
use super::context::{Ctx, Db};
use super::keyspace::Data;
use super::lua::{sha1hex, Sha};
use redis::Value;
use std::sync::LazyLock;

/// The locks' compare-and-delete release (`src/lock/scripts/compare_and_delete.lua`):
/// `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`.
pub static COMPARE_AND_DELETE_SHA: LazyLock<Sha> =
    LazyLock::new(|| sha1hex(include_bytes!("../lock/scripts/compare_and_delete.lua")));

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
    None
}

fn compare_and_delete(db: &mut Db, ctx: &mut Ctx, key: &[u8], owner: &[u8]) -> Option<Value> {
    // A key of another type makes `redis.call('get')` raise: Lua produces that error reply.
    if !matches!(db.keys.get(key), None | Some(Data::Str(_))) {
        return None;
    }
    // The argv `redis.call` builds from the script's literals and KEYS[1] (one buffer for both
    // calls: this runs for every release of every simulated lock cycle).
    let mut argv = [b"get".to_vec(), key.to_vec()];
    match call_command(db, ctx, &argv) {
        Value::BulkString(held) if held == owner => {
            argv[0] = b"del".to_vec();
            Some(call_command(db, ctx, &argv))
        }
        // `false ~= ARGV[1]`, or another holder's token.
        Value::BulkString(_) | Value::Nil => Some(Value::Int(0)),
        _ => unreachable!("GET of a string or a missing key answers a bulk string or nil"),
    }
}

/// What `redis.call` does once its checks passed (`script_call`): the command's handler on the
/// unit's data and context.
fn call_command(db: &mut Db, ctx: &mut Ctx, argv: &[Vec<u8>]) -> Value {
    let spec = commands::lookup(&argv[0]).expect("a command of the table");
    (spec.run)(db, ctx, argv)
}
