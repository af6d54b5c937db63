//! The script host ([`LuaHost`]): one Lua state, its script cache, and running a script or a
//! FUNCTION library's function on the engine's data.
//!
//! Scripts are compiled once and cached by the lowercase sha1 hex of their body (EVAL caches
//! too, as Redis does). While a script runs, the engine's data and the execution context are
//! moved into the Lua state's app data (`state.rs`) so that `redis.call` — a Rust function —
//! can reach the keyspace; they are moved back afterwards. The environment the state is built
//! with is `sandbox.rs`'s; what a script returns becomes a reply through `convert.rs`.

use super::convert::lua_to_redis;
use super::errors::{lua_tostring, raise, Raised, INSTRUCTION_BUDGET};
use super::library::error_message;
use super::random::RAND48_INIT;
use super::registered::Registered;
use super::sandbox::{self, Flavor, Sandbox};
use super::sha::{sha1hex, Sha};
use super::state::RunState;
use crate::simredis::context::{Ctx, Db, Expiry};
use crate::simredis::reply;
use crate::simredis::role::Role;
use mlua::{ChunkMode, Function, Lua, LuaOptions, StdLib, Table, Value as LuaValue};
use redis::Value;
use std::collections::BTreeMap;
use std::fmt;

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
    /// The handles kept from building the environment scripts see.
    env: Sandbox,
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
        let env = sandbox::install(&lua, flavor)?;
        Ok(LuaHost {
            lua,
            scripts: BTreeMap::new(),
            env,
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
        let function = self.compile(&code, "@user_script").map_err(|msg| {
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
            .env
            .xpcall
            .call::<(bool, LuaValue)>((&script.function, &self.env.handler));
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
        self.env.globals.raw_set(name, self.array(items)?)
    }

    /// Compiles a text chunk named `name` (`@user_script`, `@user_function`: the source error
    /// texts show). Err is the compiler's message.
    fn compile(&self, code: &[u8], name: &str) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_name(name)
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })
    }

    /// Runs a library body (`code` starts at the shebang line's newline, as Redis hands it to
    /// the engine, so line numbers are the payload's) and returns what it registered. Err is
    /// the error text without its `ERR ` code.
    pub fn load_library(&self, code: &[u8]) -> Result<Vec<Registered>, String> {
        let function = self
            .compile(code, "@user_function")
            .map_err(|msg| format!("Error compiling function: {msg}"))?;
        let Some(api) = &self.env.load_api else {
            return Err("Engine 'LUA' not found".into());
        };
        {
            let mut st = self.lua.app_data_mut::<RunState>().expect("run state");
            st.loading = Some(Vec::new());
            st.mega_instructions = 0;
        }
        let swap = self.env.env_mt.raw_set("__index", api);
        let result = swap.and_then(|_| self.env.opcall.call::<(bool, LuaValue)>(&function));
        let restored = self.env.env_mt.raw_set("__index", &self.env.globals);
        let registered = {
            let mut st = self.lua.app_data_mut::<RunState>().expect("run state");
            st.loading.take().unwrap_or_default()
        };
        let text = match (result, restored) {
            (Ok((true, _)), Ok(())) => return Ok(registered),
            (Ok((false, v)), _) => error_message(&v),
            (Err(e), _) | (_, Err(e)) => format!("ERR {e}"),
        };
        Err(format!("Error registering functions: {text}"))
    }

    /// FCALL: calls a registered function with `keys` and `args` as its two table parameters.
    /// `no_writes` refuses its writes (a `no-writes` function, or FCALL_RO).
    #[allow(clippy::too_many_arguments)]
    pub fn call_function(
        &self,
        f: &Registered,
        db: &mut Db,
        ctx: &mut Ctx,
        role: Role,
        no_writes: bool,
        (keys, args): (&[Vec<u8>], &[Vec<u8>]),
    ) -> Value {
        let tables = self.array(keys).and_then(|k| Ok((k, self.array(args)?)));
        let (keys, args) = match tables {
            Ok(t) => t,
            Err(e) => return reply::error(&format!("ERR {e}")),
        };
        self.swap_in(db, ctx, role, &[b'0'; 40], no_writes);
        self.lua
            .app_data_mut::<RunState>()
            .expect("run state")
            .function = Some(f.name.clone());
        let result = self.env.call_with.call::<(bool, LuaValue)>((
            &f.callback,
            &self.env.handler,
            keys,
            args,
        ));
        self.finish(result, db, ctx)
    }

    fn array(&self, items: &[Vec<u8>]) -> mlua::Result<Table> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, it) in items.iter().enumerate() {
            t.raw_set(i + 1, self.lua.create_string(it)?)?;
        }
        Ok(t)
    }
}
