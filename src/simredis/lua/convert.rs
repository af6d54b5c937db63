//! Conversions between Redis replies and Lua values, both directions, as Redis 7.0's
//! `redisProtocolToLuaType` and `luaReplyToRedisReply` do them, and Lua's own `tonumber` of a
//! value ([`lua_number`]), which `redis.call`'s arguments and the bundled libraries' argument
//! checks share.

use super::errors::{err_table, ok_table, reply_error_table_text};
use crate::simredis::num::{fmt_g17, lua_number_to_i64};
use crate::simredis::reply;
use mlua::{Lua, Value as LuaValue};
use redis::Value;

/// Lua's `lua_isnumber`/`lua_tonumber`: numbers and numeric strings.
pub(super) fn lua_number(v: &LuaValue) -> Option<f64> {
    match v {
        LuaValue::Integer(i) => Some(*i as f64),
        LuaValue::Number(n) => Some(*n),
        LuaValue::String(s) => s.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// Redis reply → Lua value (`redisProtocolToLuaType`).
pub(super) fn redis_to_lua(lua: &Lua, v: Value) -> mlua::Result<LuaValue> {
    Ok(match v {
        Value::Nil => LuaValue::Boolean(false),
        Value::Int(i) => LuaValue::Number(i as f64),
        Value::BulkString(b) => LuaValue::String(lua.create_string(b)?),
        Value::Okay => ok_table(lua, b"OK")?,
        Value::SimpleString(s) => ok_table(lua, s.as_bytes())?,
        Value::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.into_iter().enumerate() {
                t.raw_set(i + 1, redis_to_lua(lua, it)?)?;
            }
            LuaValue::Table(t)
        }
        e @ Value::ServerError(_) => {
            let text = reply::error_text(&e).unwrap_or_default();
            err_table(lua, &reply_error_table_text(&text))?
        }
        _ => LuaValue::Nil,
    })
}

/// Lua value → Redis reply (`luaReplyToRedisReply` for a RESP2 client). `resp` is the
/// protocol the script chose with `redis.setresp` (it decides how booleans reply).
///
/// Fields are read raw, as 7.0 does (`lua_rawget`): a returned table's metatable is never
/// consulted. The RESP3-only shapes a script may build reply as Redis sends them to a RESP2
/// client (measured on 7.0.15): `{double=n}` a bulk string of `%.17g`, `{big_number=s}` and
/// `{verbatim_string={format=, string=}}` a bulk string, `{map=t}` a flat array of keys and
/// values and `{set=t}` an array of keys, both in `next` order.
pub(super) fn lua_to_redis(v: &LuaValue, depth: usize, resp: u8) -> Value {
    match v {
        LuaValue::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        LuaValue::Boolean(true) => Value::Int(1),
        LuaValue::Boolean(false) if resp == 3 => Value::Int(0),
        LuaValue::Boolean(false) => Value::Nil,
        LuaValue::Integer(i) => Value::Int(*i),
        LuaValue::Number(n) => Value::Int(lua_number_to_i64(*n)),
        LuaValue::Table(t) if depth < 100 => table_reply(t, depth, resp),
        _ => Value::Nil,
    }
}

fn table_reply(t: &mlua::Table, depth: usize, resp: u8) -> Value {
    let field = |name: &str| t.raw_get::<LuaValue>(name).unwrap_or(LuaValue::Nil);
    if let LuaValue::String(e) = field("err") {
        // The message is sent as `-<msg>` verbatim: no code is added and a leading
        // '-' is kept (measured: {err='-x y'} replies `--x y`).
        return reply::error(&e.to_string_lossy());
    }
    if let LuaValue::String(ok) = field("ok") {
        return reply::status(&ok.to_string_lossy());
    }
    match field("double") {
        LuaValue::Number(n) => return Value::BulkString(double_text(n).into_bytes()),
        LuaValue::Integer(i) => return Value::BulkString(double_text(i as f64).into_bytes()),
        _ => {}
    }
    if let LuaValue::String(s) = field("big_number") {
        let text: Vec<u8> = s
            .as_bytes()
            .iter()
            .map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c })
            .collect();
        return Value::BulkString(text);
    }
    if let LuaValue::Table(vt) = field("verbatim_string") {
        let format = vt.raw_get::<LuaValue>("format").ok();
        let string = vt.raw_get::<LuaValue>("string").ok();
        if let (Some(LuaValue::String(_)), Some(LuaValue::String(s))) = (format, string) {
            return Value::BulkString(s.as_bytes().to_vec());
        }
    }
    if let LuaValue::Table(m) = field("map") {
        let mut items = Vec::new();
        for (k, v) in m.pairs::<LuaValue, LuaValue>().flatten() {
            items.push(lua_to_redis(&k, depth + 1, resp));
            items.push(lua_to_redis(&v, depth + 1, resp));
        }
        return Value::Array(items);
    }
    if let LuaValue::Table(set) = field("set") {
        let items = set
            .pairs::<LuaValue, LuaValue>()
            .flatten()
            .map(|(k, _)| lua_to_redis(&k, depth + 1, resp))
            .collect();
        return Value::Array(items);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<LuaValue>(i) {
            Ok(LuaValue::Nil) | Err(_) => break,
            Ok(item) => items.push(lua_to_redis(&item, depth + 1, resp)),
        }
    }
    Value::Array(items)
}

/// addReplyDouble for a RESP2 client: `%.17g`, infinities as `inf` and `-inf`.
fn double_text(n: f64) -> String {
    if n.is_infinite() {
        if n > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        fmt_g17(n)
    }
}
