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

/// A script is stopped after this many million Lua instructions. Real Redis would keep
/// running it (answering BUSY to everyone else) until SCRIPT KILL; in a simulation an endless
/// script would freeze simulated time for every node, so it is cut off with an error instead.
/// Lock scripts run a few hundred instructions.
pub const INSTRUCTION_BUDGET: u32 = 200;

/// An error raised from Rust into a running script.
#[derive(Debug, Clone)]
enum Raised {
    /// A Redis error table's message, `CODE msg` (from `redis.call` and friends).
    Reply(String),
    /// A plain Lua error string (e.g. `user_script:1: Attempt to modify a readonly table`).
    Text(String),
}

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Raised::Reply(s) | Raised::Text(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for Raised {}

fn find_raised(e: &mlua::Error) -> Option<&Raised> {
    match e {
        mlua::Error::ExternalError(ext) => ext.downcast_ref::<Raised>(),
        mlua::Error::CallbackError { cause, .. } => find_raised(cause),
        mlua::Error::WithContext { cause, .. } => find_raised(cause),
        _ => None,
    }
}

fn raise<T>(r: Raised) -> mlua::Result<T> {
    Err(mlua::Error::external(r))
}

/// Redis's `luaPushErrorBuff`: the message of an error table. `-CODE msg` keeps its code
/// (a `-WORD` without a space becomes `ERR WORD`), a bare message gets `ERR`.
fn error_table_text(buf: &str) -> String {
    let trim = |m: &str| m.trim_matches(['\r', '\n']).to_string();
    match buf.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {}", trim(msg)),
            None => format!("ERR {}", trim(rest)),
        },
        None => format!("ERR {}", trim(buf)),
    }
}

/// The error-table message for an error reply of a command.
fn reply_error_table_text(reply_text: &str) -> String {
    error_table_text(&format!("-{reply_text}"))
}

fn err_table(lua: &Lua, text: &str) -> mlua::Result<LuaValue> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", text)?;
    Ok(LuaValue::Table(t))
}

fn ok_table(lua: &Lua, text: &[u8]) -> mlua::Result<LuaValue> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("ok", lua.create_string(text)?)?;
    Ok(LuaValue::Table(t))
}

/// `luaL_where(L, level)`: `source:line: ` of a Lua function at that stack level, or "".
fn where_(lua: &Lua, level: usize) -> String {
    lua.inspect_stack(level, |d| {
        let src = d.source();
        match (src.what, src.short_src, d.current_line()) {
            ("C", _, _) => String::new(),
            (_, Some(s), Some(l)) => format!("{s}:{l}: "),
            _ => String::new(),
        }
    })
    .unwrap_or_default()
}

/// Lua's `tostring` for the values an error or a global name can be.
fn lua_tostring(v: &LuaValue) -> String {
    match v {
        LuaValue::Nil => "nil".into(),
        LuaValue::Boolean(b) => b.to_string(),
        LuaValue::Integer(i) => fmt_g14(*i as f64),
        LuaValue::Number(n) => fmt_g14(*n),
        LuaValue::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        other => other.type_name().to_string(),
    }
}

/// The script host.
pub struct LuaHost {
    lua: Lua,
    scripts: BTreeMap<Sha, Script>,
    /// The real global table (KEYS and ARGV are written here); scripts see a read-only proxy.
    globals: Table,
    xpcall: Function,
    handler: Function,
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
    pub fn new() -> Self {
        Self::build().expect("building the Lua host cannot fail")
    }

    fn build() -> mlua::Result<Self> {
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
        let proxy = |inner: &Table| -> mlua::Result<Table> {
            let p = lua.create_table()?;
            let mt = lua.create_table()?;
            mt.raw_set("__index", inner)?;
            mt.raw_set("__newindex", &readonly)?;
            mt.raw_set("__metatable", false)?;
            p.set_metatable(Some(mt))?;
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
            .call((opcall, conv))?;
        g.raw_set("pcall", pcall)?;

        g.raw_set("redis", proxy(&redis_table(&lua)?)?)?;

        // Undefined globals are an error, not nil.
        let g_mt = lua.create_table()?;
        g_mt.raw_set(
            "__index",
            lua.create_function(|lua, (_, name): (LuaValue, LuaValue)| -> mlua::Result<()> {
                raise(Raised::Text(format!(
                    "{}Script attempted to access nonexistent global variable '{}'",
                    where_(lua, 1),
                    lua_tostring(&name)
                )))
            })?,
        )?;
        g.set_metatable(Some(g_mt))?;

        let env = proxy(&g)?;
        g.raw_set("_G", &env)?;
        // Scripts, and chunks they make with loadstring, see the proxy as their globals.
        lua.set_globals(env)?;

        Ok(LuaHost {
            lua,
            scripts: BTreeMap::new(),
            globals: g,
            xpcall,
            handler,
        })
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        <&Sha>::try_from(sha).is_ok_and(|s| self.scripts.contains_key(s))
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

    /// Runs a cached script. `db` and `ctx` are lent to the script and handed back.
    /// None if no script has that sha.
    pub fn run(
        &self,
        sha: &Sha,
        db: &mut Db,
        ctx: &mut Ctx,
        role: Role,
        keys: &[Vec<u8>],
        args: &[Vec<u8>],
    ) -> Option<Value> {
        let script = self.scripts.get(sha)?;
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
        self.swap_in(db, ctx, role, sha, script.no_writes);
        let result = self
            .xpcall
            .call::<(bool, LuaValue)>((&script.function, &self.handler));
        // Convert while the run state is in place: a returned table's metamethods may still
        // run script code.
        let reply = match result {
            Ok((true, v)) => lua_to_redis(&v, 0),
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
        Some(reply)
    }

    fn swap_in(&self, db: &mut Db, ctx: &mut Ctx, role: Role, sha: &Sha, no_writes: bool) {
        let mut st = self.lua.app_data_mut::<RunState>().expect("run state");
        std::mem::swap(&mut st.db, db);
        std::mem::swap(&mut st.ctx, ctx);
        st.role = role;
        st.sha = *sha;
        st.mega_instructions = 0;
        st.no_writes = no_writes;
    }

    fn set_array(&self, name: &str, items: &[Vec<u8>]) -> mlua::Result<()> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(it)?)?;
        }
        self.globals.raw_set(name, t)
    }
}

/// The xpcall message handler (Redis's `__redis__err__handler` plus the formatting of
/// `luaCallFunction`): returns the final error reply text.
fn message_handler(lua: &Lua, err: LuaValue) -> mlua::Result<mlua::String> {
    let msg = match &err {
        LuaValue::Error(e) => match find_raised(e) {
            Some(Raised::Reply(m)) => m.clone(),
            Some(Raised::Text(t)) => format!("ERR {t}"),
            None => format!("ERR {e}"),
        },
        LuaValue::Table(t) => match t.raw_get::<LuaValue>("err")? {
            LuaValue::String(s) => s.to_string_lossy(),
            LuaValue::Number(n) => fmt_g14(n),
            LuaValue::Integer(i) => fmt_g14(i as f64),
            _ => "ERR unknown error".into(),
        },
        other => format!("ERR {}", lua_tostring(other)),
    };
    // Level 0 is this handler, level 1 raised the error; if that is a C function (redis.call,
    // error, a metamethod) the script line is one level further up.
    let frame = |level: usize| {
        lua.inspect_stack(level, |d| {
            let src = d.source();
            (
                src.what,
                src.source.map(|s| s.into_owned()),
                d.current_line().map_or(-1, |l| l as i64),
            )
        })
    };
    let mut info = frame(1);
    if matches!(info, Some(("C", _, _))) {
        info = frame(2);
    }
    let sha = {
        let st = lua.app_data_ref::<RunState>().expect("run state");
        String::from_utf8_lossy(&st.sha).into_owned()
    };
    let text = match info {
        Some((_, Some(source), line)) => format!("{msg} script: {sha}, on {source}:{line}."),
        _ => msg,
    };
    lua.create_string(text)
}

fn redis_table(lua: &Lua) -> mlua::Result<Table> {
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
        lua.create_function(|_, args: MultiValue| -> mlua::Result<()> {
            if args.len() != 1 {
                return raise(Raised::Reply(
                    "ERR redis.setresp() requires one argument.".into(),
                ));
            }
            match args.front().and_then(lua_number).map(|n| n as i64) {
                // RESP3 conversions are not simulated; lock scripts do not use them.
                Some(2) | Some(3) => Ok(()),
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

fn single_string(args: &MultiValue) -> Option<String> {
    match args.front() {
        Some(LuaValue::String(s)) if args.len() == 1 => Some(s.to_string_lossy()),
        _ => None,
    }
}

/// Lua's `lua_isnumber`/`lua_tonumber`: numbers and numeric strings.
fn lua_number(v: &LuaValue) -> Option<f64> {
    match v {
        LuaValue::Integer(i) => Some(*i as f64),
        LuaValue::Number(n) => Some(*n),
        LuaValue::String(s) => s.to_str().ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// `luaArgsToRedisArgv`: strings as they are, numbers with `%.17g`, anything else refused.
fn lua_args_to_argv(args: &MultiValue) -> Result<Vec<Vec<u8>>, String> {
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
fn redis_call(lua: &Lua, args: MultiValue, raise_errors: bool) -> mlua::Result<LuaValue> {
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
            None => redis_to_lua(lua, v),
        },
    }
}

/// Redis's `scriptCall`: the checks a command from a script goes through, then the command.
/// Err is the error text for checks that fail before the command runs.
fn script_call(st: &mut RunState, argv: &[Vec<u8>]) -> Result<Value, String> {
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

/// Redis reply → Lua value (`redisProtocolToLuaType`).
fn redis_to_lua(lua: &Lua, v: Value) -> mlua::Result<LuaValue> {
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
fn lua_to_redis(v: &LuaValue, depth: usize) -> Value {
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

// ---------------------------------------------------------------------------------------
// math.random: Redis's rand48, so the same script gives the same numbers everywhere.

const RAND48_MASK: u64 = (1 << 48) - 1;
/// The static initial state of Redis's rand.c (x = {0x330E, 0xABCD, 0x1234}).
const RAND48_INIT: u64 = 0x1234_ABCD_330E;

fn srand48(seed: i32) -> u64 {
    (u64::from(seed as u32) << 16) | 0x330E
}

fn lrand48(state: &mut u64) -> i32 {
    *state = (0x5_DEEC_E66D_u64.wrapping_mul(*state).wrapping_add(0xB)) & RAND48_MASK;
    (*state >> 17) as i32
}

fn check_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<i64> {
    match args.get(i).and_then(lua_number) {
        Some(n) => Ok(n as i64),
        None => {
            let got = args.get(i).map_or("no value", |v| v.type_name());
            raise(Raised::Text(format!(
                "{}bad argument #{} to '{fname}' (number expected, got {got})",
                where_(lua, 1),
                i + 1
            )))
        }
    }
}

fn math_random(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let x = {
        let mut st = lua.app_data_mut::<RunState>().expect("run state");
        lrand48(&mut st.rand48)
    };
    const MAX: i32 = i32::MAX;
    let r = f64::from(x % MAX) / f64::from(MAX);
    let empty = |n: usize| {
        raise(Raised::Text(format!(
            "{}bad argument #{n} to 'random' (interval is empty)",
            where_(lua, 1)
        )))
    };
    match args.len() {
        0 => Ok(r),
        1 => {
            let u = check_int(lua, &args, 0, "random")?;
            if u < 1 {
                return empty(1);
            }
            Ok((r * u as f64).floor() + 1.0)
        }
        2 => {
            let l = check_int(lua, &args, 0, "random")?;
            let u = check_int(lua, &args, 1, "random")?;
            if l > u {
                return empty(2);
            }
            Ok((r * (u - l + 1) as f64).floor() + l as f64)
        }
        _ => raise(Raised::Text(format!(
            "{}wrong number of arguments",
            where_(lua, 1)
        ))),
    }
}

fn math_randomseed(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let seed = check_int(lua, &args, 0, "randomseed")?;
    let mut st = lua.app_data_mut::<RunState>().expect("run state");
    st.rand48 = srand48(seed as i32);
    Ok(())
}
