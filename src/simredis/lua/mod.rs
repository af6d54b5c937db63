//! The Lua 5.1 script host: EVAL/EVALSHA semantics of Redis 7.0 on top of `mlua`.
//!
//! One Lua state per engine. Scripts are compiled once and cached by the lowercase sha1 hex
//! of their body (EVAL caches too, as Redis does). While a script runs, the engine's data and
//! the execution context are moved into the Lua state's app data ([`RunState`]) so that
//! `redis.call` — a Rust function — can reach the keyspace; they are moved back afterwards.
//!
//! Why `redis.call` must be a Rust (C) function and not a Lua wrapper: Redis reports the line
//! of the script that called `redis.call` (`... script: <sha>, on @user_script:<line>.`). A Lua
//! wrapper called as `return redis.call(...)` is a tail call in Lua 5.1, which replaces the
//! caller's frame, so the line is lost. A C function called from Lua leaves the caller's frame
//! on the stack, where the error handler finds it one level up.
//!
//! The error machinery mirrors Redis 7.0: errors raised by `redis.call` are "error tables"
//! (`{err='CODE msg'}`); the message handler turns any other error value into
//! `ERR <tostring(value)>` and appends ` script: <sha>, on <source>:<line>.`; Redis's own
//! `pcall` replacement hands a caught error table back as its message string. The global
//! table and the library tables are read-only (`Attempt to modify a readonly table`) and
//! reading an undefined global is an error (`Script attempted to access nonexistent global
//! variable 'x'`), which Redis 7.0 does in a patched Lua; here the script's globals are an
//! empty proxy whose metatable forwards reads and refuses writes.

use super::commands::{self, Ctx, Db, Expiry, MAY_REPLICATE, NOSCRIPT};
use super::engine::Role;
use super::num::{fmt_g14, fmt_g17, lua_number_to_i64};
use super::reply;
use mlua::{ChunkMode, Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue};
use redis::Value;
use std::collections::BTreeMap;
use std::fmt;

mod api;
mod bit;
mod cjson;
mod cmsgpack;
mod convert;
mod errors;
mod library;
mod random;
mod readonly;
mod structlib;
use api::*;
use convert::*;
use errors::*;
pub use library::{valid_name, Registered};
use random::*;

/// Lowercase sha1 hex of a script body: the script's name in the cache.
pub type Sha = [u8; 40];

pub fn sha1hex(body: &[u8]) -> Sha {
    let hex = sha1_smol::Sha1::from(body).digest().to_string();
    let mut out = [0u8; 40];
    out.copy_from_slice(hex.as_bytes());
    out
}

/// What a running script can reach. Lives in the Lua state's app data; the engine swaps its
/// real data in for the duration of one script.
struct RunState {
    db: Db,
    ctx: Ctx,
    role: Role,
    sha: Sha,
    /// Redis's rand48 state behind `math.random`. Measured on 7.0.15: one sequence per
    /// server process, starting from rand48's static initial state and NOT reseeded per
    /// script (effects replication made that unnecessary), so it is kept per engine.
    rand48: u64,
    /// Millions of Lua instructions the current script has executed (see [`INSTRUCTION_BUDGET`]).
    mega_instructions: u32,
    /// The running script declared `#!lua flags=no-writes`.
    no_writes: bool,
    /// The protocol the running script chose with `redis.setresp` (2 at every start): under 3,
    /// a command's null reaches Lua as nil, and a returned boolean replies 1 or 0.
    resp: u8,
    /// The running function's name (FCALL): error texts name it where a script shows its sha.
    function: Option<String>,
    /// Functions registered so far by the library being loaded (FUNCTION LOAD); `None` when
    /// no load is in progress, where `redis.register_function` is refused.
    loading: Option<Vec<Registered>>,
}

/// Which of Redis's two Lua engines a host plays: EVAL's, or the one FUNCTION libraries
/// live in (a separate Lua state in Redis 7.0, with its own globals and `redis` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// EVAL/EVALSHA: KEYS and ARGV globals, `redis.breakpoint`, `redis.debug`.
    Eval,
    /// FCALL: keys and args are the callback's parameters; no KEYS, ARGV or debugger.
    Functions,
}

/// A cached script: the compiled chunk and what its shebang declared.
struct Script {
    function: Function,
    /// Whether the body starts with a `#!lua` shebang (Redis 7 scripts with flags).
    shebang: bool,
    no_writes: bool,
}

/// Redis 7.0's `#!lua [flags=a,b]` first line. Returns (no_writes, the body to compile) or
/// the error reply text. The shebang line is turned into a Lua comment so line numbers in
/// error messages stay those of the original body, as on a real server.
fn parse_shebang(body: &[u8]) -> Result<(bool, Vec<u8>), String> {
    let Some(nl) = body.iter().position(|&c| c == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..nl]);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or_default();
    if engine != "#!lua" {
        return Err(format!("ERR Unexpected engine in script shebang: {engine}"));
    }
    let mut no_writes = false;
    for part in parts {
        let Some(flags) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in flags.split(',').filter(|f| !f.is_empty()) {
            match flag {
                "no-writes" => no_writes = true,
                "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys" => {}
                other => return Err(format!("ERR Unexpected flag in script shebang: {other}")),
            }
        }
    }
    let mut code = body.to_vec();
    code[..2].copy_from_slice(b"--");
    Ok((no_writes, code))
}

/// The script host.
pub struct LuaHost {
    lua: Lua,
    scripts: BTreeMap<Sha, Script>,
    /// The real global table (KEYS and ARGV are written here); scripts see a read-only proxy.
    globals: Table,
    xpcall: Function,
    handler: Function,
    /// The metatable of the globals proxy scripts see: FUNCTION LOAD points its `__index` at
    /// the library API for the duration of the load, as Redis does.
    env_mt: Table,
    /// Lua's own `pcall`, for running a library body (Redis loads it without a handler).
    opcall: Function,
    /// What a library body sees while it loads (Functions flavour only).
    load_api: Option<Table>,
    /// `xpcall(function() return f(keys, args) end, handler)`: Lua 5.1's xpcall passes no
    /// arguments, and FCALL must hand a function its keys and args.
    call_with: Function,
}

impl std::fmt::Debug for LuaHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuaHost")
            .field("scripts", &self.scripts.len())
            .finish()
    }
}

impl Default for LuaHost {
    fn default() -> Self {
        Self::new()
    }
}

impl LuaHost {
    /// The EVAL engine.
    pub fn new() -> Self {
        Self::with_flavor(Flavor::Eval)
    }

    /// A host of the given flavour (the FUNCTION engine is built only when a library loads).
    pub fn with_flavor(flavor: Flavor) -> Self {
        Self::build(flavor).expect("building the Lua host cannot fail")
    }

    fn build(flavor: Flavor) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        lua.set_app_data(RunState {
            db: Db::default(),
            ctx: Ctx::new(0, Expiry::Delete),
            role: Role::Master,
            sha: [b'0'; 40],
            rand48: RAND48_INIT,
            mega_instructions: 0,
            no_writes: false,
            resp: 2,
            function: None,
            loading: None,
        });
        lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(1_000_000),
            |lua, _| {
                let mut st = lua.app_data_mut::<RunState>().expect("run state");
                st.mega_instructions += 1;
                if st.mega_instructions > INSTRUCTION_BUDGET {
                    drop(st);
                    return raise(Raised::Reply(format!(
                        "ERR Script killed by lockcheck after {INSTRUCTION_BUDGET} million instructions (an endless script would stall the simulation)"
                    )));
                }
                Ok(mlua::VmState::Continue)
            },
        )?;
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
        readonly::install(&lua, &g, &proxies, &proxy(&string_mt)?)?;
        // The libraries Redis bundles, read-only like the standard ones.
        g.raw_set("bit", proxy(&bit::bit_table(&lua)?)?)?;
        g.raw_set("cjson", proxy(&cjson::cjson_table(&lua)?)?)?;
        g.raw_set("cmsgpack", proxy(&cmsgpack::cmsgpack_table(&lua)?)?)?;
        g.raw_set("struct", proxy(&structlib::struct_table(&lua)?)?)?;
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

        let redis = redis_table(&lua)?;
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
            Flavor::Functions => Some(library::load_api(&lua, &proxy, &nonexistent)?),
        };
        let call_with: Function = lua
            .load("local xpcall = ...\nreturn function(f, h, k, a) return xpcall(function() return f(k, a) end, h) end")
            .set_name("=fcall")
            .call(&xpcall)?;
        Ok(LuaHost {
            call_with,
            lua,
            scripts: BTreeMap::new(),
            globals: g,
            xpcall,
            handler,
            env_mt,
            opcall,
            load_api,
        })
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        // Redis compares SHAs case-insensitively (its dict lower-cases them on lookup).
        <Sha>::try_from(sha).is_ok_and(|mut s| {
            s.make_ascii_lowercase();
            self.scripts.contains_key(&s)
        })
    }

    /// Compiles and caches a script (SCRIPT LOAD, and EVAL of an unseen body).
    /// Err is the error reply.
    pub fn load(&mut self, body: &[u8]) -> Result<Sha, Value> {
        let sha = sha1hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let shebang = body.starts_with(b"#!");
        let (no_writes, code) = if shebang {
            parse_shebang(body).map_err(|e| reply::error(&e))?
        } else {
            (false, body.to_vec())
        };
        let function = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                let msg = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                reply::error(&format!("ERR Error compiling script (new function): {msg}"))
            })?;
        self.scripts.insert(
            sha,
            Script {
                function,
                shebang,
                no_writes,
            },
        );
        Ok(sha)
    }

    /// SCRIPT FLUSH.
    pub fn flush(&mut self) {
        self.scripts.clear();
    }

    /// Runs a cached script on `(KEYS, ARGV)`; `read_only` (EVAL_RO) refuses its writes. `db`
    /// and `ctx` are lent to the script and handed back.
    /// None if no script has that sha.
    pub fn run(
        &self,
        sha: &Sha,
        db: &mut Db,
        ctx: &mut Ctx,
        role: Role,
        read_only: bool,
        (keys, args): (&[Vec<u8>], &[Vec<u8>]),
    ) -> Option<Value> {
        let script = self.scripts.get(sha)?;
        // EVAL_RO / EVALSHA_RO: a script that declares it writes is refused; any other runs
        // with writes refused (measured on 7.0.15).
        if read_only && script.shebang && !script.no_writes {
            return Some(reply::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        // A script with a shebang and without no-writes may write: a read-only replica
        // refuses it before it runs (measured on 7.0.15).
        if script.shebang && !script.no_writes && role == Role::Replica {
            return Some(reply::readonly());
        }
        if let Err(e) = self
            .set_array("KEYS", keys)
            .and(self.set_array("ARGV", args))
        {
            return Some(reply::error(&format!("ERR {e}")));
        }
        self.swap_in(db, ctx, role, sha, script.no_writes || read_only);
        let result = self
            .xpcall
            .call::<(bool, LuaValue)>((&script.function, &self.handler));
        Some(self.finish(result, db, ctx))
    }

    /// Turns a script's outcome into its reply and hands `db` and `ctx` back.
    fn finish(&self, result: mlua::Result<(bool, LuaValue)>, db: &mut Db, ctx: &mut Ctx) -> Value {
        // Convert while the run state is in place: a returned table's metamethods may still
        // run script code.
        let reply = match result {
            Ok((true, v)) => {
                let resp = self.lua.app_data_ref::<RunState>().map_or(2, |st| st.resp);
                lua_to_redis(&v, 0, resp)
            }
            Ok((false, LuaValue::String(msg))) => reply::error(&msg.to_string_lossy()),
            Ok((false, other)) => reply::error(&format!(
                "ERR Error running script {}",
                lua_tostring(&other)
            )),
            Err(e) => reply::error(&format!("ERR Error running script: {e}")),
        };
        let mut st = self.lua.app_data_mut::<RunState>().expect("run state");
        std::mem::swap(&mut st.db, db);
        std::mem::swap(&mut st.ctx, ctx);
        reply
    }

    fn swap_in(&self, db: &mut Db, ctx: &mut Ctx, role: Role, sha: &Sha, no_writes: bool) {
        let mut st = self.lua.app_data_mut::<RunState>().expect("run state");
        std::mem::swap(&mut st.db, db);
        std::mem::swap(&mut st.ctx, ctx);
        st.role = role;
        st.sha = *sha;
        st.mega_instructions = 0;
        st.no_writes = no_writes;
        st.function = None;
        st.resp = 2;
    }

    fn set_array(&self, name: &str, items: &[Vec<u8>]) -> mlua::Result<()> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(it)?)?;
        }
        self.globals.raw_set(name, t)
    }
}
