//! The `redis` table scripts see, and `redis.call`/`redis.pcall` with the checks Redis
//! applies to a command called from a script.

use super::convert::{lua_number, redis_to_lua};
use super::errors::{err_table, error_table_text, ok_table, raise, reply_error_table_text, Raised};
use super::sha::sha1hex;
use super::state::RunState;
use crate::simredis::commands::{self, MAY_REPLICATE, NOSCRIPT};
use crate::simredis::num::{fmt_g14, fmt_g17};
use crate::simredis::reply;
use crate::simredis::role::Role;
use mlua::{Lua, MultiValue, Table, Value as LuaValue};
use redis::Value;

pub(super) fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let r = lua.create_table()?;
    r.raw_set(
        "call",
        lua.create_function(|lua, args: MultiValue| redis_call(lua, args, true))?,
    )?;
    r.raw_set(
        "pcall",
        lua.create_function(|lua, args: MultiValue| redis_call(lua, args, false))?,
    )?;
    r.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| match single_string(&args) {
            Some(s) => {
                let s = if s.starts_with('-') {
                    s
                } else {
                    format!("-{s}")
                };
                err_table(lua, &error_table_text(&s))
            }
            None => err_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    r.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match &args.front() {
            Some(LuaValue::String(s)) if args.len() == 1 => ok_table(lua, &s.as_bytes()),
            _ => err_table(lua, "ERR wrong number or type of arguments"),
        })?,
    )?;
    r.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return raise(Raised::Reply("ERR wrong number of arguments".into()));
            }
            let bytes = match &args[0] {
                LuaValue::String(s) => s.as_bytes().to_vec(),
                LuaValue::Integer(i) => fmt_g14(*i as f64).into_bytes(),
                LuaValue::Number(n) => fmt_g14(*n).into_bytes(),
                _ => Vec::new(),
            };
            lua.create_string(sha1hex(&bytes))
        })?,
    )?;
    r.raw_set(
        "log",
        lua.create_function(|_, args: MultiValue| -> mlua::Result<()> {
            if args.len() < 2 {
                return raise(Raised::Reply(
                    "ERR redis.log() requires two arguments or more.".into(),
                ));
            }
            let Some(level) = lua_number(&args[0]) else {
                return raise(Raised::Reply(
                    "ERR First argument must be a number (log level).".into(),
                ));
            };
            if !(0.0..4.0).contains(&level.trunc()) {
                return raise(Raised::Reply("ERR Invalid debug level.".into()));
            }
            // The log itself goes nowhere: a simulation has no server log.
            Ok(())
        })?,
    )?;
    for (name, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
        ("REDIS_VERSION_NUM", 0x07000f),
    ] {
        r.raw_set(name, v)?;
    }
    r.raw_set("REDIS_VERSION", "7.0.15")?;
    r.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| -> mlua::Result<()> {
            if args.len() != 1 {
                return raise(Raised::Reply(
                    "ERR redis.setresp() requires one argument.".into(),
                ));
            }
            match args.front().and_then(lua_number).map(|n| n as i64) {
                // Under 3, nulls reach Lua as nil and booleans reply 1/0; the RESP3 shapes of
                // maps, sets and doubles from redis.call are not simulated (RESP2 shapes).
                Some(v @ (2 | 3)) => {
                    lua.app_data_mut::<RunState>().expect("run state").resp = v as u8;
                    Ok(())
                }
                _ => raise(Raised::Reply("ERR RESP version must be 2 or 3.".into())),
            }
        })?,
    )?;
    r.raw_set(
        "set_repl",
        lua.create_function(|lua, args: MultiValue| -> mlua::Result<()> {
            if args.len() != 1 {
                return raise(Raised::Reply(
                    "ERR redis.set_repl() requires two arguments.".into(),
                ));
            }
            let flags = args.front().and_then(lua_number).unwrap_or(0.0) as i64;
            if flags & !3 != 0 {
                return raise(Raised::Reply(
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            let mut st = lua.app_data_mut::<RunState>().expect("run state");
            st.ctx.replicate = flags & 2 != 0;
            Ok(())
        })?,
    )?;
    r.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    r.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    r.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    r.raw_set(
        "acl_check_cmd",
        lua.create_function(|_, args: MultiValue| {
            let argv = match lua_args_to_argv(&args) {
                Ok(a) => a,
                Err(m) => return raise(Raised::Reply(error_table_text(&m))),
            };
            match commands::lookup(&argv[0]) {
                Some(_) => Ok(true),
                None => raise(Raised::Reply(
                    "ERR Invalid command passed to redis.acl_check_cmd()".into(),
                )),
            }
        })?,
    )?;
    Ok(r)
}

pub(super) fn single_string(args: &MultiValue) -> Option<String> {
    match args.front() {
        Some(LuaValue::String(s)) if args.len() == 1 => Some(s.to_string_lossy()),
        _ => None,
    }
}

/// `luaArgsToRedisArgv`: strings as they are, numbers with `%.17g`, anything else refused.
pub(super) fn lua_args_to_argv(args: &MultiValue) -> Result<Vec<Vec<u8>>, String> {
    if args.is_empty() {
        return Err("Please specify at least one argument for this redis lib call".into());
    }
    args.iter()
        .map(|a| match a {
            LuaValue::String(s) => Ok(s.as_bytes().to_vec()),
            LuaValue::Integer(i) => Ok(fmt_g17(*i as f64).into_bytes()),
            LuaValue::Number(n) => Ok(fmt_g17(*n).into_bytes()),
            _ => Err("Lua redis lib command arguments must be strings or integers".into()),
        })
        .collect()
}

/// `redis.call` (raise = true) and `redis.pcall` (raise = false).
pub(super) fn redis_call(
    lua: &Lua,
    args: MultiValue,
    raise_errors: bool,
) -> mlua::Result<LuaValue> {
    let fail = |text: String| {
        if raise_errors {
            raise(Raised::Reply(text))
        } else {
            err_table(lua, &text)
        }
    };
    let argv = match lua_args_to_argv(&args) {
        Ok(a) => a,
        Err(m) => return fail(error_table_text(&m)),
    };
    drop(args);
    let result = {
        let mut st = lua.app_data_mut::<RunState>().expect("run state");
        script_call(&mut st, &argv)
    };
    match result {
        Err(m) => fail(error_table_text(&m)),
        Ok(v) => match reply::error_text(&v) {
            Some(text) => fail(reply_error_table_text(&text)),
            None if resp3(lua) => resp3_to_lua(lua, &argv, v),
            None => redis_to_lua(lua, v),
        },
    }
}

/// Redis's `scriptCall`: the checks a command from a script goes through, then the command.
/// Err is the error text for checks that fail before the command runs.
pub(super) fn script_call(st: &mut RunState, argv: &[Vec<u8>]) -> Result<Value, String> {
    let Some(spec) = commands::lookup(&argv[0]) else {
        return Err("Unknown Redis command called from script".into());
    };
    if !spec.arity_ok(argv.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if spec.flags & NOSCRIPT != 0 {
        return Err("This Redis command is not allowed from script".into());
    }
    if st.no_writes && (spec.is_write() || spec.flags & MAY_REPLICATE != 0) {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    if st.role == Role::Replica && spec.is_write() {
        return Err("-READONLY You can't write against a read only replica.".into());
    }
    Ok((spec.run)(&mut st.db, &mut st.ctx, argv))
}

/// Whether the running script switched to RESP3 (`redis.setresp(3)`).
fn resp3(lua: &Lua) -> bool {
    lua.app_data_ref::<RunState>()
        .is_some_and(|st| st.resp == 3)
}

/// A reply as a script under `redis.setresp(3)` receives it: Redis sends the command's RESP3
/// type and `redisProtocolToLuaType` makes a null nil, a map `{map={k=v}}`, a set
/// `{set={m=true}}` and a double `{double=n}`. The engine builds RESP2 replies, so the RESP3
/// type is taken from the command: HGETALL is a map, SMEMBERS a set, ZSCORE, ZINCRBY and
/// ZADD INCR a double, ZRANGE/ZRANGEBYSCORE WITHSCORES pairs of member and double.
fn resp3_to_lua(lua: &Lua, argv: &[Vec<u8>], v: Value) -> mlua::Result<LuaValue> {
    let name = argv
        .first()
        .map(|a| a.to_ascii_lowercase())
        .unwrap_or_default();
    let withscores = argv.iter().any(|a| a.eq_ignore_ascii_case(b"withscores"));
    let double = |b: &[u8]| -> mlua::Result<LuaValue> {
        let t = lua.create_table()?;
        let n = std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(0.0);
        t.raw_set("double", n)?;
        Ok(LuaValue::Table(t))
    };
    let wrap = |field: &str, inner: Table| -> mlua::Result<LuaValue> {
        let t = lua.create_table()?;
        t.raw_set(field, inner)?;
        Ok(LuaValue::Table(t))
    };
    match (name.as_slice(), v) {
        (_, Value::Nil) => Ok(LuaValue::Nil),
        (b"hgetall", Value::Array(items)) => {
            let m = lua.create_table()?;
            for kv in items.chunks(2) {
                if let [k, v] = kv {
                    m.raw_set(
                        resp3_to_lua(lua, &[], k.clone())?,
                        resp3_to_lua(lua, &[], v.clone())?,
                    )?;
                }
            }
            wrap("map", m)
        }
        (b"smembers", Value::Array(items)) => {
            let set = lua.create_table()?;
            for m in items {
                set.raw_set(resp3_to_lua(lua, &[], m)?, true)?;
            }
            wrap("set", set)
        }
        (b"zscore" | b"zincrby" | b"zadd", Value::BulkString(b)) => double(&b),
        (b"zrange" | b"zrangebyscore", Value::Array(items)) if withscores => {
            let t = lua.create_table()?;
            for (i, pair) in items.chunks(2).enumerate() {
                if let [Value::BulkString(m), Value::BulkString(score)] = pair {
                    let p = lua.create_table()?;
                    p.raw_set(1, lua.create_string(m)?)?;
                    p.raw_set(2, double(score)?)?;
                    t.raw_set(i + 1, p)?;
                }
            }
            Ok(LuaValue::Table(t))
        }
        (_, v) => redis_to_lua(lua, v),
    }
}
