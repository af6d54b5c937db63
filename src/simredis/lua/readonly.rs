//! The base functions that can see through a read-only table: `rawget`, `rawset`,
//! `setmetatable` and `getmetatable`, as Redis 7.0's patched Lua answers them.
//!
//! Why it exists: Redis marks the global table and the library tables read-only inside its
//! Lua (`lua_enablereadonlytable`), so `rawset(_G, k, v)` and `setmetatable(string, t)` fail
//! with `Attempt to modify a readonly table` (no position: it comes from C), `rawget(_G,
//! 'redis')` finds the library, and `getmetatable(redis)` is nil. The simulator cannot patch Lua;
//! its read-only tables are empty proxies whose metatable forwards reads (`mod.rs`). Without
//! these four replacements a script could write through a proxy with `rawset`, or see its
//! metatable, where Redis refuses — the differential test found exactly that.

use super::bit::argerror_n;
use super::errors::{raise, where_, Raised};
use mlua::{Lua, MultiValue, Table, Value as LuaValue};

fn readonly<T>() -> mlua::Result<T> {
    raise(Raised::Text("Attempt to modify a readonly table".into()))
}

fn table_arg(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<Table> {
    match args.get(i) {
        Some(LuaValue::Table(t)) => Ok(t.clone()),
        other => {
            let got = other.map_or("no value", |v| v.type_name());
            argerror_n(lua, i as i64 + 1, &format!("table expected, got {got}"))
        }
    }
}

fn any_arg(lua: &Lua, args: &MultiValue, i: usize) -> mlua::Result<LuaValue> {
    match args.get(i) {
        Some(v) => Ok(v.clone()),
        None => argerror_n(lua, i as i64 + 1, "value expected"),
    }
}

fn runtime(e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(m) => mlua::Error::external(Raised::Text(m)),
        other => other,
    }
}

/// Replaces the four functions in `g`. `proxies` maps each read-only proxy to the table it
/// stands for; `string_mt` is what `getmetatable` of a string returns (a read-only proxy of
/// the string metatable).
pub(super) fn install(
    lua: &Lua,
    g: &Table,
    proxies: &Table,
    string_mt: &Table,
) -> mlua::Result<()> {
    let p = proxies.clone();
    g.raw_set(
        "rawget",
        lua.create_function(move |lua, args: MultiValue| {
            let t = table_arg(lua, &args, 0)?;
            let k = any_arg(lua, &args, 1)?;
            let target = match p.raw_get::<LuaValue>(&t)? {
                LuaValue::Table(inner) => inner,
                _ => t,
            };
            target.raw_get::<LuaValue>(k)
        })?,
    )?;
    let p = proxies.clone();
    g.raw_set(
        "rawset",
        lua.create_function(move |lua, args: MultiValue| {
            let t = table_arg(lua, &args, 0)?;
            let k = any_arg(lua, &args, 1)?;
            let v = any_arg(lua, &args, 2)?;
            if !p.raw_get::<LuaValue>(&t)?.is_nil() {
                return readonly();
            }
            t.raw_set(k, v).map_err(runtime)?;
            Ok(t)
        })?,
    )?;
    let p = proxies.clone();
    g.raw_set(
        "setmetatable",
        lua.create_function(move |lua, args: MultiValue| {
            let t = table_arg(lua, &args, 0)?;
            let mt = match args.get(1) {
                Some(LuaValue::Nil) => None,
                Some(LuaValue::Table(m)) => Some(m.clone()),
                _ => return argerror_n(lua, 2, "nil or table expected"),
            };
            if !p.raw_get::<LuaValue>(&t)?.is_nil() {
                return readonly();
            }
            let protected = t.metatable().is_some_and(|m| {
                !m.raw_get::<LuaValue>("__metatable")
                    .unwrap_or(LuaValue::Nil)
                    .is_nil()
            });
            if protected {
                return raise(Raised::Text(format!(
                    "{}cannot change a protected metatable",
                    where_(lua, 1)
                )));
            }
            t.set_metatable(mt)?;
            Ok(t)
        })?,
    )?;
    let (p, smt) = (proxies.clone(), string_mt.clone());
    g.raw_set(
        "getmetatable",
        lua.create_function(move |lua, args: MultiValue| {
            let v = any_arg(lua, &args, 0)?;
            Ok(match v {
                LuaValue::String(_) => LuaValue::Table(smt.clone()),
                // A read-only table's own metatable: the globals have one (the
                // nonexistent-variable error), the libraries none (measured on 7.0.15).
                LuaValue::Table(t) if !p.raw_get::<LuaValue>(&t)?.is_nil() => {
                    match p.raw_get::<Table>(&t)?.metatable() {
                        Some(m) => LuaValue::Table(m),
                        None => LuaValue::Nil,
                    }
                }
                LuaValue::Table(t) => match t.metatable() {
                    None => LuaValue::Nil,
                    Some(m) => match m.raw_get::<LuaValue>("__metatable")? {
                        LuaValue::Nil => LuaValue::Table(m),
                        field => field,
                    },
                },
                _ => LuaValue::Nil,
            })
        })?,
    )?;
    Ok(())
}
