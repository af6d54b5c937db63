//! Differential tests: the same commands and scripts go to a real `redis-server` (7.0, spawned
//! here on a free port) and to the simulated [`Engine`]; the `redis::Value` replies must be
//! equal. Only genuinely time-dependent replies (PTTL/TTL) are compared with a tolerance.
//!
//! Requires `redis-server` on PATH; without it these tests fail with a message saying so
//! (a silently skipped differential test would let the simulator drift from Redis).
//!
//! To cover another script, add a row to [`SCRIPTS`].

use lockcheck::simredis::{Engine, Role};
use redis::aio::ConnectionLike;
use redis::Value;
use std::time::{SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------
// A spawned redis-server that is killed when dropped (also when a test panics).

/// Servers for the comparison: lockcheck's own spawner (a free port, a verified pid, killed and
/// cleaned up on drop), so this harness shares its guarantees instead of repeating them.
mod server {
    pub use lockcheck::real::RedisServer;
    use lockcheck::real::ServerOptions;

    /// Starts `redis-server` with persistence off and waits until it answers.
    pub fn spawn() -> RedisServer {
        spawn_with(&[])
    }

    /// [`spawn`] with extra server arguments.
    pub fn spawn_with(extra: &[&str]) -> RedisServer {
        RedisServer::spawn(ServerOptions {
            extra_args: extra.iter().map(|a| a.to_string()).collect(),
            ..ServerOptions::default()
        })
        .unwrap_or_else(|e| panic!("the differential tests need a real Redis 7.0: {e}"))
    }
}

// ---------------------------------------------------------------------------------------
// The harness: one real server, one engine, the same commands to both.

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// A real error reply can arrive as `Err`; bring it back to `Value::ServerError`.
fn as_value(r: redis::RedisResult<Value>) -> Value {
    match r {
        Ok(v) => v,
        Err(e) => match redis::ServerError::try_from(e) {
            Ok(se) => Value::ServerError(se),
            Err(e) => panic!("transport error talking to redis-server: {e}"),
        },
    }
}

mod collections;
mod functions;
mod random;

struct Diff {
    rt: tokio::runtime::Runtime,
    conn: redis::aio::MultiplexedConnection,
    engine: Engine,
    mismatches: Vec<String>,
    /// Every replication effect the engine produced, in order.
    effects: Vec<Vec<Vec<u8>>>,
    _server: server::RedisServer,
}

impl Diff {
    fn new() -> Self {
        Self::with_server(server::spawn())
    }

    fn with_server(server: server::RedisServer) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/", server.port())).expect("client");
        let conn = rt
            .block_on(client.get_multiplexed_async_connection())
            .expect("connect to redis-server");
        Diff {
            rt,
            conn,
            engine: Engine::new(Role::Master),
            mismatches: Vec::new(),
            effects: Vec::new(),
            _server: server,
        }
    }

    fn real(&mut self, args: &[Vec<u8>]) -> Value {
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(a.as_slice());
        }
        let conn = &mut self.conn;
        as_value(self.rt.block_on(conn.req_packed_command(&cmd)))
    }

    fn both(&mut self, args: &[Vec<u8>]) -> (Value, Value) {
        let mut real = self.real(args);
        let out = self.engine.execute(now_ms(), 1, args);
        self.effects.extend(out.effects);
        let mut sim = out.reply;
        // HELLO's `id` (also inside an EXEC reply) is the connection's number, which the two
        // servers assign differently.
        if args[0].eq_ignore_ascii_case(b"hello") || args[0].eq_ignore_ascii_case(b"exec") {
            mask_hello_id(&mut real);
            mask_hello_id(&mut sim);
        }
        (real, sim)
    }

    /// Sends a command to both; the replies must be equal.
    fn same(&mut self, args: &[&str]) -> Value {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let (real, sim) = self.both(&args);
        if real != sim {
            self.mismatches.push(format!(
                "{:?}\n    real: {real:?}\n    sim:  {sim:?}",
                args.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            ));
        }
        real
    }

    /// Sends a command whose integer reply depends on elapsed time (PTTL, TTL): the replies
    /// may differ by at most `tolerance`, and must agree on the special values.
    fn close(&mut self, args: &[&str], tolerance: i64) {
        let argv: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let (real, sim) = self.both(&argv);
        let ok = match (&real, &sim) {
            (Value::Int(r), Value::Int(s)) if *r < 0 || *s < 0 => r == s,
            (Value::Int(r), Value::Int(s)) => (r - s).abs() <= tolerance,
            _ => real == sim,
        };
        if !ok {
            self.mismatches.push(format!(
                "{args:?} (tolerance {tolerance})\n    real: {real:?}\n    sim:  {sim:?}"
            ));
        }
    }

    fn eval(&mut self, script: &str, keys: &[&str], args: &[&str]) -> Value {
        let n = keys.len().to_string();
        let mut parts = vec!["EVAL", script, n.as_str()];
        parts.extend_from_slice(keys);
        parts.extend_from_slice(args);
        self.same(&parts)
    }

    fn finish(self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatch(es) between redis-server and the engine:\n  {}",
            self.mismatches.len(),
            self.mismatches.join("\n  ")
        );
    }
}

/// Replaces the value after `id` in a HELLO reply (also inside an EXEC reply) with 0.
fn mask_hello_id(v: &mut Value) {
    if let Value::Array(items) = v {
        let id = items
            .iter()
            .position(|i| *i == Value::BulkString(b"id".to_vec()));
        match id {
            Some(i) if i + 1 < items.len() => items[i + 1] = Value::Int(0),
            _ => items.iter_mut().for_each(mask_hello_id),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Scripts. Add rows here to cover more lock scripts.

/// A script run with EVAL and then EVALSHA on both servers after `setup`.
struct ScriptCase {
    name: &'static str,
    setup: &'static [&'static [&'static str]],
    body: &'static str,
    keys: &'static [&'static str],
    args: &'static [&'static str],
}

/// The `set-nx-px` lock's own release script, as shipped.
const CAS_DELETE: &str = include_str!("../../src/lock/scripts/compare_and_delete.lua");

const SCRIPTS: &[ScriptCase] = &[
    ScriptCase {
        name: "compare-and-delete, owner",
        setup: &[&["SET", "lock", "me", "NX", "PX", "10000"]],
        body: CAS_DELETE,
        keys: &["lock"],
        args: &["me"],
    },
    ScriptCase {
        name: "compare-and-delete, not owner",
        setup: &[&["SET", "lock", "me", "NX", "PX", "10000"]],
        body: CAS_DELETE,
        keys: &["lock"],
        args: &["you"],
    },
    ScriptCase {
        name: "compare-and-delete, wrong type",
        setup: &[&["HSET", "lock", "f", "1"]],
        body: CAS_DELETE,
        keys: &["lock"],
        args: &["me"],
    },
    ScriptCase {
        name: "setnx + pexpire, returns pttl on contention (the Lettuce article)",
        setup: &[&["SET", "lock", "other", "PX", "5000"]],
        body: "if redis.call('setnx', KEYS[1], ARGV[1]) == 1 then redis.call('pexpire', KEYS[1], ARGV[2]) return nil end return redis.call('pttl', KEYS[1]) > 0",
        keys: &["lock"],
        args: &["me", "30000"],
    },
    ScriptCase {
        name: "redisson-style acquire on a free hash lock (the Redisson article)",
        setup: &[],
        body: "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return -1;",
        keys: &["rlock"],
        args: &["30000", "uuid:1"],
    },
    ScriptCase {
        name: "redisson-style renew (hexists)",
        setup: &[&["HSET", "rlock", "uuid:1", "1"]],
        body: "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('pexpire', KEYS[1], ARGV[1]); return 1; end; return 0;",
        keys: &["rlock"],
        args: &["30000", "uuid:1"],
    },
    ScriptCase {
        name: "redisson-style release with publish",
        setup: &[&["HSET", "rlock", "uuid:1", "2"]],
        body: "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; return nil;",
        keys: &["rlock", "redisson_lock__channel:{rlock}"],
        args: &["0", "30000", "uuid:1"],
    },
    ScriptCase {
        name: "conversions",
        setup: &[],
        body: "return {1,'a',{2,3.9},false,true,5, -3.7, {ok='s'}, {err='e'}}",
        keys: &[],
        args: &[],
    },
    ScriptCase {
        name: "error on line 3",
        setup: &[&["SET", "s", "v"]],
        body: "local a = 1\nlocal b = 2\nreturn redis.call('hget', KEYS[1], 'f')",
        keys: &["s"],
        args: &[],
    },
    ScriptCase {
        name: "pcall returns the error table",
        setup: &[&["SET", "s", "v"]],
        body: "local r = redis.pcall('hget', KEYS[1], 'f'); return {type(r), r['err']}",
        keys: &["s"],
        args: &[],
    },
    ScriptCase {
        name: "runtime error in a nested function",
        setup: &[],
        body: "local function f(t)\n  return t.x.y\nend\nreturn f({})",
        keys: &[],
        args: &[],
    },
    ScriptCase {
        name: "number arguments",
        setup: &[],
        body: "redis.call('set', KEYS[1], 0.1); redis.call('set', KEYS[2], 1e20); return {redis.call('get', KEYS[1]), redis.call('get', KEYS[2]), redis.call('incrby', KEYS[3], 7)}",
        keys: &["a", "b", "c"],
        args: &[],
    },
];

// ---------------------------------------------------------------------------------------

#[test]
fn semantics_table_rows() {
    let mut d = Diff::new();
    for body in [
        "return nil",
        "return false",
        "return true",
        "return 3.7",
        "return -3.7",
        "return {1,2,nil,4}",
        "return {1,'a',{2,3.9},false,true,5}",
        "return {ok='x'}",
        "return redis.status_reply('x')",
        "return {err='x'}",
        "return {err='-x y'}",
        "return redis.error_reply('x')",
        "return redis.error_reply('-x')",
        "return redis.error_reply('My Error here')",
        "return redis.call('GET', KEYS[1])",
        "return type(redis.call('GET', KEYS[1]))",
        "return redis.call('SET', KEYS[1], 'v')",
        "return redis.call('SET', KEYS[1], 'v', 'NX')",
        "return redis.call('nosuchcmd', 'a')",
        "\nreturn redis.call('incr', 'b', 'c')",
        "return redis.pcall('incr', 'b', 'c')",
        "return redis.pcall('hget', KEYS[1], 'f')",
        "redis.call('set', 'n', 3.5); return redis.call('get', 'n')",
        "redis.call('set', 'n', 1e20); return redis.call('get', 'n')",
        "redis.call('set', 'n', 0.1); return redis.call('get', 'n')",
        "redis.call('set', 'n', 1/3); return redis.call('get', 'n')",
        "y = 1",
        "return y",
        "\n\nreturn undefined_global",
        "redis.call = nil",
        "return 1 +",
        "error('boom')",
        "error({err='boom'})",
        "error()",
        "return 1e300",
        "return {ok='OK'}",
        "return redis.call('ping')",
        "return redis.call('wait', '0', '0')",
        "return redis.call('subscribe', 'c')",
        "return redis.call('eval', 'return 1', '0')",
        "local ok, e = pcall(redis.call, 'bad'); return {tostring(ok), e}",
        "return redis.sha1hex('abc')",
        "return redis.sha1hex(5)",
        "return redis.log(1)",
        "return redis.call('publish', 'c', 'm')",
        "#!lua\nreturn redis.call('nosuch')",
        "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], '1')",
        "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
        "#!lua flags=no-writes,allow-oom\nreturn redis.call('publish', 'c', 'm')",
        "#!lua flags=bad\nreturn 1",
        "#!python\nreturn 1",
        "#!lua x=y\nreturn 1",
        "#!lua",
        "#!lua\nerror('x')",
    ] {
        d.eval(body, &["k"], &[]);
    }
    d.same(&["SCRIPT", "LOAD", "return 'loaded'"]);
    d.same(&["EVAL", "return 'evaled'", "0"]);
    for body in ["return 'loaded'", "return 'evaled'", "return 'never'"] {
        let sha = sha1_smol::Sha1::from(body).digest().to_string();
        d.same(&["SCRIPT", "EXISTS", &sha]);
        d.same(&["EVALSHA", &sha, "0"]);
    }
    d.same(&["EVALSHA", "nope", "0"]);

    d.same(&["DEL", "k"]);
    d.same(&["PTTL", "k"]);
    d.same(&["SET", "k", "v"]);
    d.same(&["PTTL", "k"]);
    d.same(&["SET", "lock", "a", "NX", "PX", "10000"]);
    d.same(&["SET", "lock", "b", "NX", "PX", "10000"]);
    d.close(&["PTTL", "lock"], 50);
    d.same(&["SET", "lock", "b", "NX", "PX", "0"]);
    d.same(&["SET", "lock", "b", "NX", "PX", "-1"]);
    d.same(&["HINCRBY", "h", "f", "5"]);
    d.same(&["HINCRBY", "lock", "f", "5"]);
    d.same(&["HEXISTS", "h", "f"]);
    d.same(&["HEXISTS", "h", "g"]);
    d.same(&["HEXISTS", "missing", "g"]);
    d.same(&["PEXPIRE", "missing", "100"]);
    d.same(&["PEXPIRE", "h", "100000"]);
    d.close(&["PTTL", "h"], 50);
    d.same(&["PEXPIRE", "h", "200000", "NX"]);
    d.same(&["PEXPIRE", "h", "200000", "XX"]);
    d.same(&["PEXPIRE", "h", "100", "GT"]);
    d.same(&["PEXPIRE", "h", "100", "LT"]);
    d.same(&["PEXPIRE", "h", "0"]);
    d.same(&["EXISTS", "h"]);
    d.finish();
}

#[test]
fn commands_and_errors() {
    let mut d = Diff::new();
    let cmds: &[&[&str]] = &[
        &["foo", "a", "b"],
        &["foo"],
        &["GeT"],
        &["get", "a", "b"],
        &["set", "k", "v", "px", "abc"],
        &["set", "k", "v", "ex", "0"],
        &["set", "k", "v", "exat", "0"],
        &["set", "k", "v", "pxat", "-1"],
        &["set", "k", "v", "nx", "xx"],
        &["set", "k", "v", "px", "10", "ex", "10"],
        &["set", "k", "v", "foo"],
        &["set", "k", "v", "px"],
        &["set", "k", "v", "keepttl", "px", "100"],
        &["set", "k", "v", "ex", "9999999999999999"],
        &["set", "k", "v", "px", "9223372036854775807"],
        &["set", "k", "v", "nx", "nx"],
        &["set", "k", "v2", "get"],
        &["set", "k", "v3", "get", "nx"],
        &["set", "k", "v3", "xx", "keepttl"],
        &["set", "k", "v3", "ex", "100"],
        &["get", "k"],
        &["incr", "k"],
        &["hset", "h", "f", "1"],
        &["get", "h"],
        &["incr", "h"],
        &["hget", "k", "f"],
        &["hset", "h", "f"],
        &["hset", "h", "f", "1", "g"],
        &["hset", "h", "a", "1", "b", "2", "a", "3"],
        &["hgetall", "h"],
        &["hlen", "h"],
        &["hincrby", "h", "f", "x"],
        &["hincrby", "h", "f", "9223372036854775807"],
        &["hset", "h", "s", "abc"],
        &["hincrby", "h", "s", "1"],
        &["hdel", "h", "a", "zz"],
        &["hdel", "k", "a"],
        &["hgetall", "k"],
        &["hlen", "k"],
        &["hexists", "k", "a"],
        &["set", "n", "9223372036854775807"],
        &["incr", "n"],
        &["incrby", "n", "x"],
        &["incrby", "n", "-1"],
        &["decr", "nosuch"],
        &["incrby", "a", "1.5"],
        &["incrby", "a", " 1"],
        &["incrby", "a", "+1"],
        &["incrby", "a", "01"],
        &["incrby", "a", "-0"],
        &["decrby", "a", "-9223372036854775808"],
        &["expire", "k", "x"],
        &["pexpire", "k", "100", "foo"],
        &["pexpire", "k", "x", "foo"],
        &["pexpire", "nosuchkey", "x"],
        &["pexpire", "k", "100", "nx", "xx"],
        &["pexpire", "k", "100", "gt", "lt"],
        &["pexpire", "k", "100", "nx", "gt"],
        &["pexpire", "k", "9223372036854775807"],
        &["expire", "k", "9223372036854775807"],
        &["expireat", "k", "9223372036854775807"],
        &["pexpireat", "k", "9223372036854775807"],
        &["persist", "k"],
        &["persist", "k"],
        &["persist", "nosuch"],
        &["ttl", "nosuch"],
        &["pttl", "h"],
        &["ttl", "h"],
        &["type", "k"],
        &["type", "h"],
        &["type", "zz"],
        &["exists", "k", "h", "zz", "k"],
        &["setnx", "sn", "1"],
        &["setnx", "sn", "2"],
        &["getdel", "sn"],
        &["del", "k", "h", "zz"],
        &["ping"],
        &["ping", "x"],
        &["ping", "x", "y"],
        &["echo"],
        &["echo", "hi"],
        &["dbsize"],
        &["dbsize", "x"],
        &["time", "x"],
        &["eval"],
        &["eval", "return 1"],
        &["eval", "return 1", "x"],
        &["eval", "return 1", "-1"],
        &["eval", "return 1", "2", "a"],
        &["eval", "return 1", "99999999999999999999"],
        &["evalsha", "abc", "0"],
        &["evalsha", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "0"],
        &["script"],
        &["script", "foo"],
        &["script", "load"],
        &["script", "exists"],
        &["script", "flush", "bad"],
        &["script", "kill"],
        &["script", "help"],
        &["script", "load", "return 1 +"],
        &["script", "flush"],
        &["publish", "ch"],
        &["publish", "ch", "m"],
        &["flushall", "bad"],
        &["multi"],
        &["set", "t", "1"],
        &["incr", "t"],
        &["exec"],
        &["exec"],
        &["discard"],
        &["multi"],
        &["get"],
        &["exec"],
        &["flushall"],
        &["dbsize"],
    ];
    for c in cmds {
        d.same(c);
    }
    d.finish();
}

#[test]
fn scripts_table() {
    let mut d = Diff::new();
    for case in SCRIPTS {
        for via_sha in [false, true] {
            d.same(&["FLUSHALL"]);
            for s in case.setup {
                d.same(s);
            }
            let before = d.mismatches.len();
            if via_sha {
                let sha = sha1_smol::Sha1::from(case.body).digest().to_string();
                let n = case.keys.len().to_string();
                let mut parts = vec!["EVALSHA", sha.as_str(), n.as_str()];
                parts.extend_from_slice(case.keys);
                parts.extend_from_slice(case.args);
                d.same(&parts);
            } else {
                d.eval(case.body, case.keys, case.args);
            }
            // What the script left behind must agree too.
            for k in case.keys {
                d.same(&["TYPE", k]);
                d.close(&["PTTL", k], 50);
            }
            for m in &mut d.mismatches[before..] {
                *m = format!(
                    "[{} / {}] {m}",
                    case.name,
                    if via_sha { "EVALSHA" } else { "EVAL" }
                );
            }
        }
    }
    d.finish();
}

#[test]
fn math_random_sequence() {
    // A fresh server and a fresh engine share rand48's initial state and advance it on every
    // call, across scripts.
    let mut d = Diff::new();
    d.eval(
        "return {math.random(10), math.random(), math.random(100)}",
        &[],
        &[],
    );
    d.eval("return {math.random(1, 6), math.random(1000)}", &[], &[]);
    d.eval(
        "math.randomseed(42); return {math.random(1000), math.random(1000)}",
        &[],
        &[],
    );
    d.finish();
}

// ---------------------------------------------------------------------------------------
// The NOSCRIPT path through `redis::Script::invoke_async`: the crate sends EVALSHA, gets
// NOSCRIPT, sends SCRIPT LOAD, then EVALSHA again. A tiny ConnectionLike over the engine.

struct EngineConn {
    engine: Engine,
    log: Vec<String>,
}

impl ConnectionLike for EngineConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b.to_vec()),
                _ => None,
            })
            .collect();
        self.log
            .push(String::from_utf8_lossy(&args[0]).to_uppercase());
        let reply = self.engine.execute(now_ms(), 1, &args).reply;
        Box::pin(async move { Ok(reply) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a redis::Pipeline,
        _offset: usize,
        _count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(async { unimplemented!("pipelines are not used by this test") })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[test]
fn script_invoke_async_falls_back_on_noscript() {
    let mut d = Diff::new();
    let script = redis::Script::new(CAS_DELETE);
    d.same(&["SET", "lock", "me", "PX", "10000"]);
    let mut sim = EngineConn {
        engine: Engine::new(Role::Master),
        log: Vec::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let _ = rt.block_on(sim.req_packed_command(redis::cmd("SET").arg("lock").arg("me")));
    sim.log.clear();

    let real: i64 =
        d.rt.block_on(script.key("lock").arg("me").invoke_async(&mut d.conn))
            .expect("real invoke");
    let simulated: i64 = rt
        .block_on(script.key("lock").arg("me").invoke_async(&mut sim))
        .expect("simulated invoke");
    assert_eq!((real, simulated), (1, 1));
    assert_eq!(sim.log, ["EVALSHA", "SCRIPT", "EVALSHA"]);

    // Second time the script is cached: one EVALSHA.
    sim.log.clear();
    let simulated: i64 = rt
        .block_on(script.key("lock").arg("me").invoke_async(&mut sim))
        .expect("simulated invoke");
    assert_eq!(simulated, 0);
    assert_eq!(sim.log, ["EVALSHA"]);
    d.finish();
}

#[test]
fn harness_detects_differences() {
    // Guard against a vacuous comparison: INFO is answered minimally by the engine.
    let mut d = Diff::new();
    d.same(&["INFO", "server"]);
    d.same(&["GET", "nothing"]);
    assert_eq!(d.mismatches.len(), 1, "{:?}", d.mismatches);
    match d.real(&[b"NOSUCH".to_vec()]) {
        Value::ServerError(e) => assert_eq!(e.code(), "ERR"),
        other => panic!("expected a server error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Replication effects against the real replication stream.

mod replstream {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    /// A connection that asked the master for SYNC: after the snapshot, it receives every
    /// command the master propagates to its replicas.
    pub struct ReplStream {
        r: BufReader<TcpStream>,
    }

    fn line(r: &mut BufReader<TcpStream>) -> Vec<u8> {
        let mut l = Vec::new();
        r.read_until(b'\n', &mut l)
            .expect("read from the replication stream");
        assert!(!l.is_empty(), "replication stream closed");
        l
    }

    fn int(l: &[u8]) -> usize {
        std::str::from_utf8(&l[1..l.len() - 2])
            .expect("utf8")
            .parse()
            .expect("length")
    }

    impl ReplStream {
        /// Attaches as an old-style replica (plain SYNC, so the snapshot comes as one sized
        /// bulk) and skips the snapshot.
        pub fn attach(port: u16) -> Self {
            let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            (&s).write_all(b"*1\r\n$4\r\nSYNC\r\n").expect("send SYNC");
            let mut r = BufReader::new(s);
            loop {
                let l = line(&mut r);
                if l == b"\n" {
                    continue; // keep-alives while the master writes the snapshot
                }
                assert_eq!(
                    l[0],
                    b'$',
                    "unexpected SYNC reply {:?}",
                    String::from_utf8_lossy(&l)
                );
                let mut rdb = vec![0; int(&l)];
                r.read_exact(&mut rdb).expect("snapshot");
                return ReplStream { r };
            }
        }

        /// The next propagated command, PING and SELECT skipped.
        pub fn next(&mut self) -> Vec<Vec<u8>> {
            loop {
                let l = line(&mut self.r);
                assert_eq!(l[0], b'*', "unexpected {:?}", String::from_utf8_lossy(&l));
                let n = int(&l);
                let mut cmd = Vec::with_capacity(n);
                for _ in 0..n {
                    let l = line(&mut self.r);
                    let mut arg = vec![0; int(&l) + 2];
                    self.r.read_exact(&mut arg).expect("arg");
                    arg.truncate(arg.len() - 2);
                    cmd.push(arg);
                }
                let name = cmd[0].to_ascii_lowercase();
                if name != b"ping" && name != b"select" {
                    return cmd;
                }
            }
        }
    }
}

/// Whether two replicated commands are the same, allowing absolute millisecond timestamps
/// (computed from two different clock readings) to differ a little.
fn same_effect(real: &[Vec<u8>], sim: &[Vec<u8>]) -> bool {
    real.len() == sim.len()
        && real.iter().zip(sim).all(|(r, s)| {
            if r == s {
                return true;
            }
            let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<i64>().ok();
            match (num(r), num(s)) {
                (Some(r), Some(s)) => r > 1_000_000_000_000 && (r - s).abs() <= 2_000,
                _ => false,
            }
        })
}

enum Step {
    Cmd(&'static [&'static str]),
    SleepMs(u64),
}

#[test]
fn replication_effects_match_the_real_stream() {
    use Step::{Cmd, SleepMs};
    /// The server's snapshot directory, removed however the test ends.
    struct TempDir(std::path::PathBuf);
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let tmp = TempDir(
        std::env::temp_dir().join(format!("lockcheck-differential-{}", std::process::id())),
    );
    let dir = &tmp.0;
    std::fs::create_dir_all(dir).expect("temp dir");
    let server = server::spawn_with(&[
        "--dir",
        dir.to_str().expect("utf8 path"),
        "--repl-diskless-sync",
        "no",
        "--enable-debug-command",
        "yes",
    ]);
    let port = server.port();
    let mut d = Diff::with_server(server);
    // Only lazy expiry: the real server's background sweep runs at times the engine cannot
    // know, so it is switched off (the engine's sweep is tested on its own).
    d.real(&[
        b"DEBUG".to_vec(),
        b"SET-ACTIVE-EXPIRE".to_vec(),
        b"0".to_vec(),
    ]);
    let mut stream = replstream::ReplStream::attach(port);

    let steps: &[Step] = &[
        Cmd(&["set", "a", "1"]),
        Cmd(&["set", "a", "1", "nx"]),
        Cmd(&["SET", "b", "1", "NX", "PX", "10000"]),
        Cmd(&["set", "c", "1", "ex", "100", "get"]),
        Cmd(&["set", "c", "2", "get"]),
        Cmd(&["set", "c", "3", "keepttl"]),
        Cmd(&["set", "d", "1", "pxat", "1"]),
        Cmd(&["get", "d"]),
        Cmd(&["setnx", "e", "1"]),
        Cmd(&["setnx", "e", "1"]),
        Cmd(&["expire", "e", "100"]),
        Cmd(&["pexpire", "e", "100", "nx"]),
        Cmd(&["pexpire", "e", "200000", "gt"]),
        Cmd(&["expireat", "e", "99999999999"]),
        Cmd(&["pexpire", "e", "-1"]),
        Cmd(&["set", "f", "1"]),
        Cmd(&["incr", "f"]),
        Cmd(&["incrby", "f", "5"]),
        Cmd(&["decr", "f"]),
        Cmd(&["getdel", "f"]),
        Cmd(&["hset", "h", "a", "1"]),
        Cmd(&["hincrby", "h", "a", "2"]),
        Cmd(&["hdel", "h", "zz"]),
        Cmd(&["hdel", "h", "a"]),
        Cmd(&["persist", "c"]),
        Cmd(&["sadd", "st", "a", "b"]),
        Cmd(&["sadd", "st", "a"]),
        Cmd(&["srem", "st", "zz"]),
        Cmd(&["srem", "st", "a", "b"]),
        Cmd(&["zadd", "zs", "1", "a", "2", "b"]),
        Cmd(&["zadd", "zs", "nx", "5", "a"]),
        Cmd(&["zadd", "zs", "incr", "0.5", "a"]),
        Cmd(&["zadd", "zs", "gt", "ch", "9", "b"]),
        Cmd(&["zrem", "zs", "zz"]),
        Cmd(&["zremrangebyscore", "zs", "9", "+inf"]),
        Cmd(&["zremrangebyscore", "zs", "100", "+inf"]),
        Cmd(&["zrem", "zs", "a"]),
        Cmd(&["zadd", "zs", "1", "a"]),
        Cmd(&["pexpire", "zs", "100000"]),
        Cmd(&["set", "g", "1", "px", "50"]),
        SleepMs(150),
        Cmd(&["exists", "g"]),
        Cmd(&["set", "z", "1", "pxat", "1"]),
        Cmd(&["set", "z", "2", "nx"]),
        Cmd(&["eval", "return redis.call('set', KEYS[1], 'v', 'px', 5000)", "1", "s1"]),
        Cmd(&[
            "eval",
            "redis.call('hincrby', KEYS[1], 'f', 1); redis.call('pexpire', KEYS[1], 30000); return 1",
            "1",
            "s2",
        ]),
        Cmd(&[
            "eval",
            "redis.call('set', KEYS[1], '1'); return redis.call('publish', 'chan', 'msg')",
            "1",
            "s3",
        ]),
        Cmd(&["eval", "redis.call('set', 's4', '1'); redis.call('set', 's5', '1'); error('x')", "0"]),
        Cmd(&["eval", "return redis.call('get', 's4')", "0"]),
        Cmd(&["set", "y", "1", "pxat", "1"]),
        Cmd(&["eval", "redis.call('get', 'y'); return redis.call('set', 'w', '1')", "0"]),
        Cmd(&["eval", "redis.call('set', 'w2', '1'); return redis.call('pexpire', 'w2', 0)", "0"]),
        Cmd(&[
            "eval",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "1",
            "b",
            "1",
        ]),
        Cmd(&["pexpire", "w", "100000", "lt"]),
        Cmd(&["del", "zz"]),
        Cmd(&["del", "s4", "zz"]),
        Cmd(&["publish", "chan", "hello"]),
        Cmd(&["multi"]),
        Cmd(&["set", "t", "1"]),
        Cmd(&["incr", "t"]),
        Cmd(&["exec"]),
        Cmd(&["multi"]),
        Cmd(&["incr", "t"]),
        Cmd(&["exec"]),
        Cmd(&["flushall"]),
    ];
    for step in steps {
        match step {
            Cmd(c) => {
                d.same(c);
            }
            SleepMs(ms) => std::thread::sleep(std::time::Duration::from_millis(*ms)),
        }
    }
    // A marker the engine does not see, to know where the real stream ends.
    d.real(&[b"SET".to_vec(), b"__end__".to_vec(), b"1".to_vec()]);
    let mut real = Vec::new();
    loop {
        let cmd = stream.next();
        if cmd.get(1).map(Vec::as_slice) == Some(b"__end__") {
            break;
        }
        real.push(cmd);
    }
    let show = |cmds: &[Vec<Vec<u8>>]| {
        cmds.iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
    };
    assert!(
        real.len() > 30,
        "too few replicated commands: {}",
        real.len()
    );
    let equal = real.len() == d.effects.len()
        && real.iter().zip(&d.effects).all(|(r, s)| same_effect(r, s));
    assert!(
        equal,
        "replication streams differ\n  real: {:#?}\n  sim:  {:#?}",
        show(&real),
        show(&d.effects)
    );
    d.finish();
}

// ---------------------------------------------------------------------------------------
// A real master/replica pair against an engine pair fed with the engine master's effects.

#[test]
fn replica_reads_writes_and_expired_keys() {
    let master = server::spawn_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ]);
    let mport = master.port().to_string();
    let replica = server::spawn_with(&["--replicaof", "127.0.0.1", &mport]);
    let mut m = Diff::with_server(master);
    let mut r = Diff::with_server(replica);
    r.engine = Engine::new(Role::Replica);
    m.real(&[
        b"DEBUG".to_vec(),
        b"SET-ACTIVE-EXPIRE".to_vec(),
        b"0".to_vec(),
    ]);
    // Wait for the link to come up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let info = r.real(&[b"INFO".to_vec(), b"replication".to_vec()]);
        if let Value::BulkString(b) = info {
            if String::from_utf8_lossy(&b).contains("master_link_status:up") {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "replica did not sync");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let on_master = |m: &mut Diff, r: &mut Diff, cmd: &[&str]| {
        let before = m.effects.len();
        m.same(cmd);
        let effects = m.effects[before..].to_vec();
        r.engine.apply_replicated(now_ms(), &effects);
        // Let the real replica catch up before anyone reads from it. Each WAIT stays under the
        // client's response timeout; a replica that reports its link up may not be counted by
        // the master yet, so ask again until it acknowledges (bounded).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while m.real(&[b"WAIT".to_vec(), b"1".to_vec(), b"200".to_vec()]) != Value::Int(1) {
            assert!(
                std::time::Instant::now() < deadline,
                "the replica never acknowledged"
            );
        }
    };
    on_master(&mut m, &mut r, &["SET", "k", "v"]);
    on_master(&mut m, &mut r, &["SET", "short", "v", "PX", "100"]);
    on_master(&mut m, &mut r, &["HSET", "h", "f", "1"]);
    on_master(&mut m, &mut r, &[
        "EVAL",
        "redis.call('hincrby', KEYS[1], 'f', 1); redis.call('pexpire', KEYS[1], 60000); return 1",
        "1",
        "h",
    ]);
    for cmd in [
        &["GET", "k"][..],
        &["HGET", "h", "f"],
        &["HGETALL", "h"],
        &["EXISTS", "short"],
        &["SET", "k", "w"],
        &["SET", "k"],
        &["DEL", "k"],
        &["HINCRBY", "h", "f", "1"],
        &["PEXPIRE", "k", "100"],
        &["FLUSHALL"],
        &["PUBLISH", "c", "m"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
        &["EVAL", "return redis.call('set', KEYS[1], 'x')", "1", "k"],
        &["EVAL", "return redis.pcall('del', KEYS[1])", "1", "k"],
        &[
            "EVAL",
            "return redis.call('hexists', KEYS[1], 'f')",
            "1",
            "h",
        ],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
            "1",
            "k",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 1)",
            "1",
            "k",
        ],
    ] {
        r.same(cmd);
    }
    r.close(&["PTTL", "h"], 100);
    // The replica's clock passes the expiry; the master (no sweep, no access) sends no DEL:
    // the key is hidden from reads on the replica but still stored.
    std::thread::sleep(std::time::Duration::from_millis(200));
    for cmd in [
        &["GET", "short"][..],
        &["EXISTS", "short"],
        &["PTTL", "short"],
        &["TYPE", "short"],
        &["DBSIZE"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "short"],
    ] {
        r.same(cmd);
    }
    // The master's lazy expiry sends DEL; afterwards the replica no longer stores it.
    on_master(&mut m, &mut r, &["GET", "short"]);
    r.same(&["DBSIZE"]);
    m.finish();
    r.finish();
}

/// Issue #10: optimistic transactions, the string commands lock libraries send, and the SHA
/// spellings Redis accepts. One connection, so a watch is touched by its own write (which Redis
/// counts as a touch too).
#[test]
fn transactions_strings_and_sha_spelling() {
    let mut d = Diff::new();
    let sha = sha1_smol::Sha1::from("return 1").digest().to_string();
    let upper = sha.to_ascii_uppercase();
    let cmds: &[&[&str]] = &[
        &["SCRIPT", "LOAD", "return 1"],
        &["SCRIPT", "EXISTS", &upper, &sha, "abc"],
        &["EVALSHA", &upper, "0"],
        &["EVALSHA", "abc", "0"],
        // A watched key written before EXEC: EXEC answers nil and runs nothing.
        &["WATCH", "w"],
        &["SET", "w", "1"],
        &["MULTI"],
        &["SET", "w", "2"],
        &["EXEC"],
        &["GET", "w"],
        // Untouched: it runs.
        &["WATCH", "w", "other"],
        &["MULTI"],
        &["INCR", "w"],
        &["EXEC"],
        // UNWATCH forgets the touch.
        &["WATCH", "w"],
        &["SET", "w", "5"],
        &["UNWATCH"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        // WATCH inside MULTI is refused without aborting the transaction.
        &["MULTI"],
        &["WATCH", "w"],
        &["GET", "w"],
        &["EXEC"],
        &["WATCH"],
        &["UNWATCH", "x"],
        // DISCARD ends the watch.
        &["WATCH", "w"],
        &["SET", "w", "6"],
        &["MULTI"],
        &["DISCARD"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        // FLUSHALL touches every watch.
        &["WATCH", "w"],
        &["FLUSHALL"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        // SETEX / PSETEX / MGET / MSET.
        &["SETEX", "s", "100", "v"],
        &["SETEX", "s", "0", "v"],
        &["SETEX", "s", "-1", "v"],
        &["SETEX", "s", "x", "v"],
        &["SETEX", "s", "10"],
        &["PSETEX", "p", "100000", "v"],
        &["PSETEX", "p", "0", "v"],
        &["GET", "s"],
        &["HSET", "h", "f", "v"],
        &["MSET", "a", "1", "b", "2"],
        &["MSET", "a", "1", "b"],
        &["MSET", "a"],
        &["MGET", "a", "h", "nope", "b"],
        &["MGET"],
        &["CLIENT", "SETNAME", "a b"],
        &["CLIENT", "SETNAME", "lk"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", ""],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "foo"],
        &["CLIENT"],
        &["CLIENT", "ID", "x"],
        &["SET", "g", "v"],
        &["GETEX", "g", "px", "100000"],
        &["GETEX", "g", "persist"],
        &["PTTL", "g"],
        &["GETEX", "g", "ex", "0"],
        &["GETEX", "g", "ex", "x"],
        &["GETEX", "g", "foo"],
        &["GETEX", "g", "ex", "10", "px", "10"],
        &["GETEX", "nope", "ex", "10"],
        &["GETEX", "g", "persist", "ex", "10"],
        &["GETEX", "g", "pxat", "1"],
        &["EXISTS", "g"],
        &["GETEX", "h"],
        // Lists.
        &["LPOP", "l"],
        &["LPOP", "l", "2"],
        &["RPUSH", "l", "a", "b", "c", "a", "d", "a"],
        &["LPUSH", "l", "z"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "-3", "100"],
        &["LRANGE", "l", "5", "2"],
        &["LRANGE", "l", "x", "2"],
        &["LRANGE", "nope", "0", "-1"],
        &["LPOP", "l", "0"],
        &["LPOP", "l", "-1"],
        &["LPOP", "l", "x"],
        &["LREM", "l", "-1", "a"],
        &["LRANGE", "l", "0", "-1"],
        &["LREM", "l", "0", "a"],
        &["LREM", "l", "x", "a"],
        &["LLEN", "l"],
        &["RPOP", "l"],
        &["LPOP", "l", "5"],
        &["EXISTS", "l"],
        &["LPOP", "nope", "2"],
        &["LPUSH", "s", "a"],
        &["LLEN", "s"],
        &["RPUSH", "q", "x"],
        &["BLPOP", "nope", "q", "0.1"],
        &["BLPOP", "nope", "-1"],
        &["BLPOP", "nope", "x"],
        &["BLPOP", "s", "1"],
        &["MULTI"],
        &["BLPOP", "q", "1"],
        &["EXEC"],
        &["EVAL", "return redis.call('blpop', 'q', 0)", "0"],
    ];
    for c in cmds {
        d.same(c);
    }
    d.close(&["PTTL", "s"], 50);
    d.close(&["PTTL", "p"], 50);
    d.finish();
}

/// EVALSHA with a SHA of the wrong length answers NOSCRIPT before it parses anything else;
/// EVAL_RO / EVALSHA_RO run scripts that may not write.
#[test]
fn short_shas_and_read_only_scripts() {
    let mut d = Diff::new();
    let read = "return redis.call('get', KEYS[1])";
    let sha = sha1_smol::Sha1::from(read).digest().to_string();
    let cmds: &[&[&str]] = &[
        &["EVALSHA", "abc", "x"],
        &["EVALSHA", "abc", "5"],
        &["EVALSHA", "abc", "-1"],
        &["EVALSHA_RO", "abc", "x"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "x"],
        &["SET", "k", "v"],
        &["EVAL_RO", read, "1", "k"],
        &[
            "EVAL_RO",
            "return redis.call('set', KEYS[1], 'w')",
            "1",
            "k",
        ],
        &["EVAL_RO", "return redis.call('publish', 'c', 'm')", "0"],
        &["EVAL_RO", "#!lua\nreturn 1", "0"],
        &[
            "EVAL_RO",
            "#!lua flags=no-writes\nreturn redis.call('get', 'k')",
            "0",
        ],
        &["EVALSHA_RO", &sha, "1", "k"],
        &["EVAL_RO", "return 1"],
        &["GET", "k"],
    ];
    for c in cmds {
        d.same(c);
    }
    d.finish();
}
