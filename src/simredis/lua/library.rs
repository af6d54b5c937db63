//! The Lua side of loading a Redis Functions library (FUNCTION LOAD): Redis 7.0's load-time
//! API, `redis.register_function` in both of its forms, and the error text a failed load
//! reports. Running the body and calling a registered function (FCALL) are the host's
//! (`host.rs`).
//!
//! Why a load-time API: Redis 7.0 runs a library body with its globals' `__index` pointed at a
//! table holding only `redis.register_function`, `redis.log`, the `LOG_*` levels and the
//! version (measured: `string`, `error` and `redis.call` are "nonexistent global variable"s
//! while loading); the functions it registers see the ordinary globals when they run.

use super::api::redis_table;
use super::errors::{find_raised, lua_tostring, raise, Raised};
use super::registered::{valid_name, FunctionFlags, Registered, FLAG_NAMES};
use super::state::RunState;
use crate::simredis::num::fmt_g14;
use mlua::{Function, Lua, MultiValue, Table, Value as LuaValue};

/// The table a library body's missing globals are looked up in while it loads.
pub(super) fn load_api(
    lua: &Lua,
    proxy: &impl Fn(&Table) -> mlua::Result<Table>,
    nonexistent: &Function,
) -> mlua::Result<Table> {
    let runtime = redis_table(lua)?;
    let r = lua.create_table()?;
    r.raw_set("register_function", lua.create_function(register_function)?)?;
    for name in [
        "log",
        "LOG_DEBUG",
        "LOG_VERBOSE",
        "LOG_NOTICE",
        "LOG_WARNING",
        "REDIS_VERSION",
        "REDIS_VERSION_NUM",
    ] {
        r.raw_set(name, runtime.raw_get::<LuaValue>(name)?)?;
    }
    let missing = lua.create_table()?;
    missing.raw_set("__index", nonexistent)?;
    r.set_metatable(Some(missing.clone()))?;
    let api = lua.create_table()?;
    api.raw_set("redis", proxy(&r)?)?;
    api.set_metatable(Some(missing))?;
    Ok(api)
}

/// `luaGetStringSds`: a string, or a number as Lua's `tostring` writes it.
fn string_arg(v: &LuaValue) -> Option<Vec<u8>> {
    match v {
        LuaValue::String(s) => Some(s.as_bytes().to_vec()),
        LuaValue::Integer(i) => Some(fmt_g14(*i as f64).into_bytes()),
        LuaValue::Number(n) => Some(fmt_g14(*n).into_bytes()),
        _ => None,
    }
}

type Parsed = (Vec<u8>, Option<Vec<u8>>, FunctionFlags, Function);

/// Redis's luaRegisterFunctionReadArgs, with its error texts.
fn read_args(args: &MultiValue) -> Result<Parsed, &'static str> {
    match args.len() {
        1 => read_named(&args[0]),
        2 => {
            let name = string_arg(&args[0])
                .ok_or("first argument to redis.register_function must be a string")?;
            match &args[1] {
                LuaValue::Function(f) => Ok((name, None, FunctionFlags::default(), f.clone())),
                _ => Err("second argument to redis.register_function must be a function"),
            }
        }
        _ => Err("wrong number of arguments to redis.register_function"),
    }
}

fn read_named(arg: &LuaValue) -> Result<Parsed, &'static str> {
    let LuaValue::Table(t) = arg else {
        return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
    };
    let (mut name, mut description, mut flags, mut callback) = (None, None, 0u8, None);
    // lua_next's order, which is also the order Redis meets (and reports) a bad argument in.
    for pair in t.pairs::<LuaValue, LuaValue>() {
        let (k, v) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
        let key = string_arg(&k)
            .ok_or("named argument key given to redis.register_function is not a string")?;
        let key = String::from_utf8_lossy(&key).to_ascii_lowercase();
        match key.as_str() {
            "function_name" => {
                name = Some(string_arg(&v).ok_or(
                    "function_name argument given to redis.register_function must be a string",
                )?)
            }
            "description" => {
                description = Some(string_arg(&v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?)
            }
            "callback" => match v {
                LuaValue::Function(f) => callback = Some(f),
                _ => {
                    return Err(
                        "callback argument given to redis.register_function must be a function",
                    )
                }
            },
            "flags" => {
                let LuaValue::Table(list) = v else {
                    return Err("flags argument to redis.register_function must be a table representing function flags");
                };
                for item in list.pairs::<LuaValue, LuaValue>() {
                    let (_, f) = item.map_err(|_| "unknown flag given")?;
                    let f = string_arg(&f).ok_or("unknown flag given")?;
                    let bit = FLAG_NAMES
                        .iter()
                        .position(|n| n.as_bytes().eq_ignore_ascii_case(&f))
                        .ok_or("unknown flag given")?;
                    flags |= 1 << bit;
                }
            }
            _ => return Err("unknown argument given to redis.register_function"),
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok((name, description, FunctionFlags(flags), callback))
}

/// `redis.register_function(name, fn)` or `redis.register_function{function_name=, callback=,
/// flags=, description=}`, only while a library loads.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let fail = |m: &str| raise(Raised::Reply(format!("ERR {m}")));
    if lua
        .app_data_ref::<RunState>()
        .expect("run state")
        .loading
        .is_none()
    {
        return fail("redis.register_function can only be called on FUNCTION LOAD command");
    }
    let (name, description, flags, callback) = match read_args(&args) {
        Ok(p) => p,
        Err(m) => return fail(m),
    };
    if !valid_name(&name) {
        return fail("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    let name = String::from_utf8_lossy(&name).into_owned();
    let mut st = lua.app_data_mut::<RunState>().expect("run state");
    let loading = st.loading.as_mut().expect("checked above");
    // Redis 7.0.15 checks this case-sensitively and then crashes on an assertion
    // (functions.c:291) when 'f' and 'F' meet in its case-insensitive function table; the
    // simulator refuses the second name instead.
    if loading.iter().any(|f| f.name.eq_ignore_ascii_case(&name)) {
        drop(st);
        return fail("Function already exists in the library");
    }
    loading.push(Registered {
        name,
        description,
        flags,
        callback,
    });
    Ok(())
}

/// luaExtractErrorInformation's message: a string error gets `ERR `, an error table gives its
/// `err` field as it is.
pub(super) fn error_message(v: &LuaValue) -> String {
    match v {
        LuaValue::Error(e) => match find_raised(e) {
            Some(Raised::Reply(m)) => m.clone(),
            Some(Raised::Text(t)) => format!("ERR {t}"),
            None => format!("ERR {e}"),
        },
        LuaValue::Table(t) => match t.raw_get::<LuaValue>("err") {
            Ok(LuaValue::String(s)) => s.to_string_lossy(),
            _ => "ERR unknown error".into(),
        },
        other => format!("ERR {}", lua_tostring(other)),
    }
}
