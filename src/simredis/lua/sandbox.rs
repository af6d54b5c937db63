//! The environment scripts see: which of Redis's two Lua engines a host plays ([`Flavor`]),
//! and the globals built for it ([`install`]).
//!
//! What is built, as Redis 7.0.15 has it (measured): the base functions it leaves to scripts
//! (no `print`, `require`, `os`, `io`, `debug`...); read-only proxies of the global table and
//! the library tables (`Attempt to modify a readonly table`), with the four raw functions that
//! see through them (`readonly.rs`); the bundled libraries (`bit`, `cjson`, `cmsgpack`,
//! `struct`) and Redis's rand48 behind `math.random`; Redis's `pcall`, which hands a caught
//! error table back as its message; the `redis` table (`api.rs`); an error for reading an
//! undefined global; and, for the FUNCTION engine, the load-time API (`library.rs`) and the
//! wrapper FCALL calls a function through.
//!
//! Why a file of its own: building the environment uses every library file, while running
//! scripts (`host.rs`) only needs the handles built here ([`Sandbox`]).

use super::api::redis_table;
use super::errors::{find_raised, lua_tostring, message_handler, raise, where_, Raised};
use super::random::{math_random, math_randomseed};
use super::{bit, cjson, cmsgpack, library, readonly, structlib};
use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};

/// Which of Redis's two Lua engines a host plays: EVAL's, or the one FUNCTION libraries
/// live in (a separate Lua state in Redis 7.0, with its own globals and `redis` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// EVAL/EVALSHA: KEYS and ARGV globals, `redis.breakpoint`, `redis.debug`.
    Eval,
    /// FCALL: keys and args are the callback's parameters; no KEYS, ARGV or debugger.
    Functions,
}

/// The handles the host keeps from building the environment.
pub(super) struct Sandbox {
    /// The real global table (KEYS and ARGV are written here); scripts see a read-only proxy.
    pub(super) globals: Table,
    pub(super) xpcall: Function,
    /// The message handler scripts run under (`errors.rs`).
    pub(super) handler: Function,
    /// The metatable of the globals proxy scripts see: FUNCTION LOAD points its `__index` at
    /// the library API for the duration of the load, as Redis does.
    pub(super) env_mt: Table,
    /// Lua's own `pcall`, for running a library body (Redis loads it without a handler).
    pub(super) opcall: Function,
    /// What a library body sees while it loads (Functions flavour only).
    pub(super) load_api: Option<Table>,
    /// `xpcall(function() return f(keys, args) end, handler)`: Lua 5.1's xpcall passes no
    /// arguments, and FCALL must hand a function its keys and args.
    pub(super) call_with: Function,
}

/// Builds the globals of `flavor` in `lua` and makes the read-only proxy of them the globals
/// every chunk sees.
pub(super) fn install(lua: &Lua, flavor: Flavor) -> mlua::Result<Sandbox> {
    let real = lua.globals();
    let xpcall: Function = real.raw_get("xpcall")?;
    let handler = lua.create_function(message_handler)?;

    // Read-only proxy: reads go to `inner`, writes raise Redis's error.
    let readonly = lua.create_function(|lua, _: MultiValue| -> mlua::Result<()> {
        raise(Raised::Text(format!(
            "{}Attempt to modify a readonly table",
            where_(lua, 1)
        )))
    })?;
    // Every proxy and the table it stands for, for the functions that see through them
    // (readonly.rs).
    let proxies = lua.create_table()?;
    let proxy = |inner: &Table| -> mlua::Result<Table> {
        let p = lua.create_table()?;
        let mt = lua.create_table()?;
        mt.raw_set("__index", inner)?;
        mt.raw_set("__newindex", &readonly)?;
        mt.raw_set("__metatable", false)?;
        p.set_metatable(Some(mt))?;
        proxies.raw_set(&p, inner)?;
        Ok(p)
    };

    let g = lua.create_table()?;
    // The base functions Redis 7.0.15 leaves to scripts (measured: print, getfenv,
    // setfenv, newproxy, module, require, dofile, loadfile, os, io, debug are absent).
    for name in [
        "assert",
        "error",
        "ipairs",
        "next",
        "pairs",
        "rawequal",
        "rawget",
        "rawset",
        "select",
        "tonumber",
        "tostring",
        "type",
        "unpack",
        "xpcall",
        "loadstring",
        "load",
        "collectgarbage",
        "gcinfo",
        "setmetatable",
        "getmetatable",
        "_VERSION",
    ] {
        let v: LuaValue = real.raw_get(name)?;
        g.raw_set(name, v)?;
    }
    let coroutine: LuaValue = real.raw_get("coroutine")?;
    if let LuaValue::Table(t) = coroutine {
        g.raw_set("coroutine", proxy(&t)?)?;
    }
    for lib in ["string", "table"] {
        let t: Table = real.raw_get(lib)?;
        g.raw_set(lib, proxy(&t)?)?;
    }
    // A string's metatable indexes the `string` scripts see (so that
    // `getmetatable('').__index == string`), and scripts get it read-only.
    let string_mt: Table = lua.load("return getmetatable('')").call(())?;
    string_mt.raw_set("__index", g.raw_get::<Table>("string")?)?;
    readonly::install(lua, &g, &proxies, &proxy(&string_mt)?)?;
    // The libraries Redis bundles, read-only like the standard ones.
    g.raw_set("bit", proxy(&bit::bit_table(lua)?)?)?;
    g.raw_set("cjson", proxy(&cjson::cjson_table(lua)?)?)?;
    g.raw_set("cmsgpack", proxy(&cmsgpack::cmsgpack_table(lua)?)?)?;
    g.raw_set("struct", proxy(&structlib::struct_table(lua)?)?)?;
    let math: Table = real.raw_get("math")?;
    math.raw_set("random", lua.create_function(math_random)?)?;
    math.raw_set("randomseed", lua.create_function(math_randomseed)?)?;
    g.raw_set("math", proxy(&math)?)?;

    // Redis's pcall: a caught error table is returned as its message string.
    let conv = lua.create_function(|lua, mut vals: MultiValue| {
        if vals.len() >= 2 && matches!(vals[0], LuaValue::Boolean(false)) {
            let msg = match &vals[1] {
                LuaValue::Error(e) => match find_raised(e) {
                    Some(r) => Some(r.to_string()),
                    None => Some(e.to_string()),
                },
                LuaValue::Table(t) => match t.raw_get::<LuaValue>("err")? {
                    LuaValue::String(s) => Some(s.to_string_lossy()),
                    _ => None,
                },
                _ => None,
            };
            if let Some(m) = msg {
                vals[1] = LuaValue::String(lua.create_string(m)?);
            }
        }
        Ok(vals)
    })?;
    let opcall: Function = real.raw_get("pcall")?;
    let pcall: Function = lua
        .load("local opcall, conv = ...\nreturn function(...) return conv(opcall(...)) end")
        .set_name("=pcall")
        .call((&opcall, conv))?;
    g.raw_set("pcall", pcall)?;

    let redis = redis_table(lua)?;
    if flavor == Flavor::Functions {
        // Measured on 7.0.15: a function's `redis` has no debugger and no
        // replicate_commands.
        for name in ["breakpoint", "debug", "replicate_commands"] {
            redis.raw_set(name, LuaValue::Nil)?;
        }
    }
    g.raw_set("redis", proxy(&redis)?)?;

    // Undefined globals are an error, not nil.
    let nonexistent =
        lua.create_function(|lua, (_, name): (LuaValue, LuaValue)| -> mlua::Result<()> {
            raise(Raised::Text(format!(
                "{}Script attempted to access nonexistent global variable '{}'",
                where_(lua, 1),
                lua_tostring(&name)
            )))
        })?;
    let g_mt = lua.create_table()?;
    g_mt.raw_set("__index", &nonexistent)?;
    g.set_metatable(Some(g_mt))?;

    let env = proxy(&g)?;
    g.raw_set("_G", &env)?;
    let env_mt = env.metatable().expect("the proxy has one");
    // Scripts, and chunks they make with loadstring, see the proxy as their globals.
    lua.set_globals(env)?;

    let load_api = match flavor {
        Flavor::Eval => None,
        Flavor::Functions => Some(library::load_api(lua, &proxy, &nonexistent)?),
    };
    let call_with: Function = lua
        .load("local xpcall = ...\nreturn function(f, h, k, a) return xpcall(function() return f(k, a) end, h) end")
        .set_name("=fcall")
        .call(&xpcall)?;
    Ok(Sandbox {
        globals: g,
        xpcall,
        handler,
        env_mt,
        opcall,
        load_api,
        call_with,
    })
}
