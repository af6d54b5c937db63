//! Conversions between Redis replies and Lua values, both directions, as Redis 7.0's
//! `redisProtocolToLuaType` and `luaReplyToRedisReply` do them.

use super::*;
use mlua::{Lua, Value as LuaValue};
use redis::Value;

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

/// Lua value → Redis reply (`luaReplyToRedisReply`, RESP2).
pub(super) fn lua_to_redis(v: &LuaValue, depth: usize) -> Value {
    match v {
        LuaValue::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        LuaValue::Boolean(true) => Value::Int(1),
        LuaValue::Boolean(false) => Value::Nil,
        LuaValue::Integer(i) => Value::Int(*i),
        LuaValue::Number(n) => Value::Int(lua_number_to_i64(*n)),
        LuaValue::Table(t) if depth < 100 => {
            if let Ok(LuaValue::String(e)) = t.get::<LuaValue>("err") {
                // The message is sent as `-<msg>` verbatim: no code is added and a leading
                // '-' is kept (measured: {err='-x y'} replies `--x y`).
                let msg = e.to_string_lossy();
                return reply::error(&msg);
            }
            if let Ok(LuaValue::String(ok)) = t.get::<LuaValue>("ok") {
                return reply::status(&ok.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(item) => items.push(lua_to_redis(&item, depth + 1)),
                }
            }
            Value::Array(items)
        }
        _ => Value::Nil,
    }
}
