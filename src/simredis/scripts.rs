//! EVAL, EVALSHA, their `_RO` forms and SCRIPT: the script cache and how a script call is run.
//!
//! Why it is apart from the engine: a script call is parsed (numkeys, the sha), found in the
//! script cache, and then run either natively (`native.rs`, the scripts every lock cycle runs)
//! or in Lua; none of that needs the engine's transactions, watches or subscriptions, only the
//! data and the unit's context, which the engine lends.
//!
//! Why the Lua host is built lazily: building one (a Lua state, Redis's sandbox, its `bit`,
//! `cjson`, `cmsgpack` and `struct` libraries) and dropping it again was 36 % of an explore case
//! on `set-nx-px`, whose every script runs natively. A native script's body is known to compile,
//! so loading it only records it; the host is built, and the body compiled into it, the first
//! time a script must run in Lua (any other script, or a case the native path declines).

use super::context::{Ctx, Db};
use super::lua::{LuaHost, Sha};
use super::native;
use super::num::parse_i64;
use super::reply::{self, bulk};
use super::role::Role;
use redis::Value;
use std::collections::BTreeMap;

/// The EVAL engine's state: the script cache (the Lua host's, and the native scripts loaded
/// without it), and the native path.
#[derive(Debug)]
pub struct Scripts {
    /// The Lua host, once a script had to be compiled or run in Lua.
    lua: Option<LuaHost>,
    /// Cached scripts the host has not compiled: native scripts' bodies, by sha.
    uncompiled: BTreeMap<Sha, &'static [u8]>,
    /// Whether known scripts run natively ([`super::native`]); off only to compare with Lua.
    native: bool,
    /// Script calls the native path answered (so tests can see it was taken).
    native_runs: u64,
}

impl Default for Scripts {
    fn default() -> Self {
        Scripts {
            lua: None,
            uncompiled: BTreeMap::new(),
            native: true,
            native_runs: 0,
        }
    }
}

impl Scripts {
    /// Turns the native path for known scripts off or on.
    pub fn set_native(&mut self, on: bool) {
        self.native = on;
    }

    /// How many script calls ran natively so far.
    pub fn native_runs(&self) -> u64 {
        self.native_runs
    }

    /// Whether the Lua host has been built.
    pub fn lua_host_built(&self) -> bool {
        self.lua.is_some()
    }

    /// Whether a script with this sha1 is cached.
    pub fn exists(&self, sha: &[u8]) -> bool {
        // Redis compares SHAs case-insensitively (its dict lower-cases them on lookup).
        let uncompiled = <Sha>::try_from(sha).is_ok_and(|mut s| {
            s.make_ascii_lowercase();
            self.uncompiled.contains_key(&s)
        });
        uncompiled || self.lua.as_ref().is_some_and(|l| l.exists(sha))
    }

    /// The Lua host, built on first use.
    fn host(&mut self) -> &mut LuaHost {
        self.lua.get_or_insert_with(LuaHost::new)
    }

    /// Caches a script (SCRIPT LOAD, and EVAL of a body): a native script's body is recorded
    /// as it is (it compiles: a test holds it), any other is compiled by the host, which
    /// answers a syntax error. Err is the error reply.
    fn load(&mut self, body: &[u8]) -> Result<Sha, Value> {
        if self.native {
            if let Some((sha, body)) = native::known(body) {
                if !self.exists(&sha) {
                    self.uncompiled.insert(sha, body);
                }
                return Ok(sha);
            }
        }
        self.host().load(body)
    }

    /// Runs a cached script in Lua, compiling it first if it was cached uncompiled. None if no
    /// script has that sha.
    fn run_in_lua(
        &mut self,
        sha: &Sha,
        db: &mut Db,
        ctx: &mut Ctx,
        role: Role,
        read_only: bool,
        keys_and_args: (&[Vec<u8>], &[Vec<u8>]),
    ) -> Option<Value> {
        if let Some(body) = self.uncompiled.remove(sha) {
            if let Err(e) = self.host().load(body) {
                unreachable!("a native script's body compiles: {e:?}");
            }
        }
        let lua = self.lua.as_ref()?;
        lua.run(sha, db, ctx, role, read_only, keys_and_args)
    }

    /// EVAL, EVALSHA and their `_RO` forms (Redis's evalGenericCommand).
    pub fn eval(
        &mut self,
        db: &mut Db,
        ctx: &mut Ctx,
        args: &[Vec<u8>],
        how: Eval,
        role: Role,
    ) -> Value {
        // A SHA of the wrong length cannot match: NOSCRIPT before anything else is parsed.
        if how.by_sha && args[1].len() != 40 {
            return reply::noscript();
        }
        let Some(numkeys) = parse_i64(&args[2]) else {
            return reply::not_integer();
        };
        if numkeys > (args.len() - 3) as i64 {
            return reply::numkeys_too_big();
        }
        if numkeys < 0 {
            return reply::numkeys_negative();
        }
        let split = 3 + numkeys as usize;
        let sha: Sha = if how.by_sha {
            match <[u8; 40]>::try_from(args[1].as_slice()) {
                Ok(mut s) => {
                    s.make_ascii_lowercase();
                    s
                }
                Err(_) => return reply::noscript(),
            }
        } else {
            match self.load(&args[1]) {
                Ok(s) => s,
                Err(e) => return e,
            }
        };
        if self.native && role == Role::Master && self.exists(&sha) {
            let (keys, argv) = (&args[3..split], &args[split..]);
            if let Some(reply) = native::run(&sha, db, ctx, keys, argv) {
                self.native_runs += 1;
                return reply;
            }
        }
        self.run_in_lua(
            &sha,
            db,
            ctx,
            role,
            how.read_only,
            (&args[3..split], &args[split..]),
        )
        .unwrap_or_else(reply::noscript)
    }

    /// SCRIPT LOAD / EXISTS / FLUSH / KILL / HELP.
    pub fn command(&mut self, args: &[Vec<u8>]) -> Value {
        if let Some(refused) = Self::refuse(args) {
            return refused;
        }
        let sub = args[1].to_ascii_lowercase();
        match sub.as_slice() {
            b"load" => match self.load(&args[2]) {
                Ok(sha) => bulk(&sha),
                Err(e) => e,
            },
            b"exists" => Value::Array(
                args[2..]
                    .iter()
                    .map(|s| Value::Int(i64::from(self.exists(s))))
                    .collect(),
            ),
            b"flush" => {
                let ok = args.len() == 2
                    || (args.len() == 3
                        && (args[2].eq_ignore_ascii_case(b"sync")
                            || args[2].eq_ignore_ascii_case(b"async")));
                if !ok {
                    return reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                self.uncompiled.clear();
                if let Some(lua) = &mut self.lua {
                    lua.flush();
                }
                Value::Okay
            }
            b"kill" => reply::error("NOTBUSY No scripts in execution right now."),
            _ => Value::Array(
                SCRIPT_HELP
                    .iter()
                    .map(|l| Value::SimpleString((*l).into()))
                    .collect(),
            ),
        }
    }

    /// What processCommand refuses before SCRIPT runs (also when MULTI would queue it).
    pub fn refuse(args: &[Vec<u8>]) -> Option<Value> {
        let (arity, full): (i32, &str) = match args[1].to_ascii_lowercase().as_slice() {
            b"load" => (3, "script|load"),
            b"exists" => (-3, "script|exists"),
            b"flush" => (-2, "script|flush"),
            b"kill" => (2, "script|kill"),
            b"help" => (2, "script|help"),
            _ => return Some(reply::unknown_subcommand(&args[0], &args[1])),
        };
        let n = args.len() as i32;
        ((arity > 0 && n != arity) || (arity < 0 && n < -arity)).then(|| reply::arity(full))
    }
}

/// How a script is invoked: EVAL or EVALSHA, and whether by a `_RO` form (which may not write).
#[derive(Clone, Copy, Debug, Default)]
pub struct Eval {
    by_sha: bool,
    read_only: bool,
}

impl Eval {
    pub fn by_sha() -> Eval {
        Eval {
            by_sha: true,
            read_only: false,
        }
    }

    pub fn read_only() -> Eval {
        Eval {
            by_sha: false,
            read_only: true,
        }
    }

    pub fn and_read_only(self) -> Eval {
        Eval {
            read_only: true,
            ..self
        }
    }
}

/// SCRIPT HELP as printed by 7.0.15.
const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];
