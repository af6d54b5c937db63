//! Redis Functions (7.0): libraries loaded with `FUNCTION LOAD`, called with `FCALL` and
//! `FCALL_RO`, managed with `FUNCTION DELETE | FLUSH | LIST | STATS | KILL`.
//!
//! Why it exists: a lock library may ship its scripts as a function library instead of EVAL
//! scripts, and a library is *data* that behaves unlike the script cache: `FUNCTION LOAD` is
//! replicated to replicas (so a promoted replica still has it) while a master restarted
//! without persistence has none, which turns every FCALL into `ERR Function not found`.
//! Error texts and reply shapes were measured on redis-server 7.0.15 and are kept equal by
//! the differential test.
//!
//! Functions run in their own Lua state ([`Flavor::Functions`]), as in Redis, built on the
//! first `FUNCTION LOAD` so that engines which never load a library pay nothing for it.
//! Order: Redis lists libraries and functions in hash-table order, which differs between
//! processes; here libraries are listed by name and functions in registration order.

use super::context::{eq_ic, Ctx, Db};
use super::glob;
use super::lua::{valid_name, Flavor, LuaHost, Registered};
use super::num::parse_i64;
use super::reply::{self, bulk};
use super::role::Role;
use redis::Value;
use std::collections::BTreeMap;

/// A loaded library: its full payload (for `WITHCODE`) and the functions it registered.
struct Library {
    code: Vec<u8>,
    functions: Vec<Registered>,
}

/// The function libraries of one server.
#[derive(Default)]
pub struct Functions {
    host: Option<LuaHost>,
    /// By library name (case-sensitive, as in Redis).
    libraries: BTreeMap<String, Library>,
    /// Lowercase function name → its library (function names are case-insensitive).
    index: BTreeMap<String, String>,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("libraries", &self.libraries.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What a library payload's `#!<engine> name=<lib>` first line said, and the code after it.
struct Metadata<'a> {
    engine: String,
    name: String,
    code: &'a [u8],
}

/// Redis's functionExtractLibMetaData. Err is the error text without `ERR `.
fn metadata(payload: &[u8]) -> Result<Metadata<'_>, String> {
    if !payload.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(nl) = payload.iter().position(|&c| c == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let line = String::from_utf8_lossy(&payload[..nl]);
    let mut parts = line.split_ascii_whitespace();
    let engine = parts.next().unwrap_or("#!")[2..].to_string();
    let mut name = None;
    for part in parts {
        match part.get(..5) {
            Some(p) if p.eq_ignore_ascii_case("name=") => {
                if name.is_some() {
                    return Err(
                        "Invalid metadata value, name argument was given multiple times".into(),
                    );
                }
                name = Some(part[5..].to_string());
            }
            _ => return Err(format!("Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    Ok(Metadata {
        engine,
        name,
        code: &payload[nl..],
    })
}

fn err(text: &str) -> Value {
    reply::error(&format!("ERR {text}"))
}

impl Functions {
    /// `FUNCTION <sub> ...`. `role` refuses the writing subcommands on a replica (the master's
    /// stream applies them with [`Role::Master`]).
    pub fn command(&mut self, ctx: &mut Ctx, args: &[Vec<u8>], role: Role) -> Value {
        if let Some(refused) = Self::refuse(args, role) {
            return refused;
        }
        let sub = args[1].to_ascii_lowercase();
        match sub.as_slice() {
            b"load" => self.load(ctx, args),
            b"delete" => {
                let name = String::from_utf8_lossy(&args[2]);
                match self.libraries.remove(name.as_ref()) {
                    None => err("Library not found"),
                    Some(_) => {
                        self.index.retain(|_, lib| lib != name.as_ref());
                        ctx.propagate_args(args);
                        Value::Okay
                    }
                }
            }
            b"flush" => {
                if args.len() > 3 {
                    return err(&format!(
                        "unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                        String::from_utf8_lossy(&args[1])
                    ));
                }
                if args.len() == 3 && !(eq_ic(&args[2], "sync") || eq_ic(&args[2], "async")) {
                    return err("FUNCTION FLUSH only supports SYNC|ASYNC option");
                }
                self.libraries.clear();
                self.index.clear();
                ctx.propagate_args(args);
                Value::Okay
            }
            b"list" => self.list(args),
            b"stats" => Value::Array(vec![
                bulk(b"running_script"),
                Value::Nil,
                bulk(b"engines"),
                Value::Array(vec![
                    bulk(b"LUA"),
                    Value::Array(vec![
                        bulk(b"libraries_count"),
                        Value::Int(self.libraries.len() as i64),
                        bulk(b"functions_count"),
                        Value::Int(self.index.len() as i64),
                    ]),
                ]),
            ]),
            b"kill" => reply::error("NOTBUSY No scripts in execution right now."),
            _ => Value::Array(
                FUNCTION_HELP
                    .iter()
                    .map(|l| Value::SimpleString((*l).into()))
                    .collect(),
            ),
        }
    }

    /// What Redis's processCommand refuses before FUNCTION runs (also when MULTI would queue
    /// it): an unknown subcommand, its arity, a writing subcommand on a replica.
    pub fn refuse(args: &[Vec<u8>], role: Role) -> Option<Value> {
        let sub = args[1].to_ascii_lowercase();
        let (arity, full, writes): (i32, &str, bool) = match sub.as_slice() {
            b"load" => (-3, "function|load", true),
            b"delete" => (3, "function|delete", true),
            b"flush" => (-2, "function|flush", true),
            b"list" => (-2, "function|list", false),
            b"stats" => (2, "function|stats", false),
            b"kill" => (2, "function|kill", false),
            b"help" => (2, "function|help", false),
            _ => return Some(reply::unknown_subcommand(&args[0], &args[1])),
        };
        let n = args.len() as i32;
        if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
            return Some(reply::arity(full));
        }
        (writes && role == Role::Replica).then(reply::readonly)
    }

    /// FUNCTION LOAD [REPLACE] <payload> (functionsCreateWithLibraryCtx's order of checks).
    fn load(&mut self, ctx: &mut Ctx, args: &[Vec<u8>]) -> Value {
        let mut replace = false;
        let mut pos = 2;
        while pos < args.len() - 1 {
            if !eq_ic(&args[pos], "replace") {
                return err(&format!(
                    "Unknown option given: {}",
                    String::from_utf8_lossy(&args[pos])
                ));
            }
            replace = true;
            pos += 1;
        }
        let payload = &args[pos];
        let md = match metadata(payload) {
            Ok(m) => m,
            Err(e) => return err(&e),
        };
        if !valid_name(md.name.as_bytes()) {
            return err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
        }
        if !md.engine.eq_ignore_ascii_case("lua") {
            return err(&format!("Engine '{}' not found", md.engine));
        }
        if self.libraries.contains_key(&md.name) && !replace {
            return err(&format!("Library '{}' already exists", md.name));
        }
        let host = self
            .host
            .get_or_insert_with(|| LuaHost::with_flavor(Flavor::Functions));
        let functions = match host.load_library(md.code) {
            Ok(f) => f,
            Err(e) => return err(&e),
        };
        if functions.is_empty() {
            return err("No functions registered");
        }
        for f in &functions {
            let owner = self.index.get(&f.name.to_ascii_lowercase());
            if owner.is_some_and(|lib| *lib != md.name) {
                return err(&format!("Function {} already exists", f.name));
            }
        }
        self.index.retain(|_, lib| *lib != md.name);
        for f in &functions {
            self.index
                .insert(f.name.to_ascii_lowercase(), md.name.clone());
        }
        self.libraries.insert(
            md.name.clone(),
            Library {
                code: payload.clone(),
                functions,
            },
        );
        ctx.propagate_args(args);
        bulk(md.name.as_bytes())
    }

    /// FUNCTION LIST [WITHCODE] [LIBRARYNAME <pattern>], in RESP2's flattened-map shape.
    fn list(&self, args: &[Vec<u8>]) -> Value {
        let (mut with_code, mut pattern) = (false, None);
        let mut i = 2;
        while i < args.len() {
            if !with_code && eq_ic(&args[i], "withcode") {
                with_code = true;
            } else if pattern.is_none() && eq_ic(&args[i], "libraryname") {
                if i + 1 >= args.len() {
                    return err("library name argument was not given");
                }
                i += 1;
                pattern = Some(&args[i]);
            } else {
                return err(&format!(
                    "Unknown argument {}",
                    String::from_utf8_lossy(&args[i])
                ));
            }
            i += 1;
        }
        let libraries = self
            .libraries
            .iter()
            .filter(|(name, _)| pattern.is_none_or(|p| glob::matches(p, name.as_bytes(), true)))
            .map(|(name, lib)| {
                let functions = lib
                    .functions
                    .iter()
                    .map(|f| {
                        Value::Array(vec![
                            bulk(b"name"),
                            bulk(f.name.as_bytes()),
                            bulk(b"description"),
                            f.description.as_deref().map_or(Value::Nil, bulk),
                            bulk(b"flags"),
                            Value::Array(
                                f.flags
                                    .names()
                                    .map(|n| Value::SimpleString(n.into()))
                                    .collect(),
                            ),
                        ])
                    })
                    .collect();
                let mut fields = vec![
                    bulk(b"library_name"),
                    bulk(name.as_bytes()),
                    bulk(b"engine"),
                    bulk(b"LUA"),
                    bulk(b"functions"),
                    Value::Array(functions),
                ];
                if with_code {
                    fields.extend([bulk(b"library_code"), bulk(&lib.code)]);
                }
                Value::Array(fields)
            })
            .collect();
        Value::Array(libraries)
    }

    /// FCALL / FCALL_RO (fcallCommandGeneric and scriptPrepareForRun's checks).
    pub fn fcall(
        &mut self,
        db: &mut Db,
        ctx: &mut Ctx,
        args: &[Vec<u8>],
        role: Role,
        read_only: bool,
    ) -> Value {
        let name = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        let Some(f) = self.index.get(&name).and_then(|lib| {
            self.libraries[lib]
                .functions
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(&name))
        }) else {
            return err("Function not found");
        };
        let Some(numkeys) = parse_i64(&args[2]) else {
            return err("Bad number of keys provided");
        };
        if numkeys > (args.len() - 3) as i64 {
            return reply::numkeys_too_big();
        }
        if numkeys < 0 {
            return reply::numkeys_negative();
        }
        let no_writes = f.flags.no_writes();
        if read_only && !no_writes {
            return err("Can not execute a script with write flag using *_ro command.");
        }
        if !no_writes && role == Role::Replica {
            return reply::readonly();
        }
        let host = self.host.as_ref().expect("a loaded library has a host");
        let split = 3 + numkeys as usize;
        host.call_function(
            f,
            db,
            ctx,
            role,
            no_writes || read_only,
            (&args[3..split], &args[split..]),
        )
    }

    /// Whether a function of that name is loaded (case-insensitively).
    pub fn exists(&self, name: &str) -> bool {
        self.index.contains_key(&name.to_ascii_lowercase())
    }
}

/// FUNCTION HELP as printed by 7.0.15.
const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];
