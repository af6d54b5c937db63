//! The simulated Redis engine against the semantics table of docs/design.md ("Simulated Redis:
//! what must match real Redis 7.0") and the commands the lock designs use. Every expected
//! reply here was measured on redis-server 7.0.15; `differential.rs` re-checks the
//! clock-independent ones against a live server.

use lockcheck::simredis::{Engine, Executed, Role};
use redis::Value;

const T0: u64 = 1_000;

fn argv(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn exec(e: &mut Engine, now: u64, parts: &[&str]) -> Executed {
    e.execute(now, 1, &argv(parts))
}

fn run(e: &mut Engine, now: u64, parts: &[&str]) -> Value {
    exec(e, now, parts).reply
}

fn err(text: &str) -> Value {
    redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap()
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

fn status(s: &str) -> Value {
    Value::SimpleString(s.into())
}

fn eval(e: &mut Engine, script: &str, keys: &[&str], args: &[&str]) -> Value {
    let n = keys.len().to_string();
    let mut parts = vec!["EVAL", script, &n];
    parts.extend_from_slice(keys);
    parts.extend_from_slice(args);
    run(e, T0, &parts)
}

fn sha1(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

fn master() -> Engine {
    Engine::new(Role::Master)
}

fn effects(parts: &[&[&str]]) -> Vec<Vec<Vec<u8>>> {
    parts.iter().map(|p| argv(p)).collect()
}

// ---------------------------------------------------------------------------------------
// Lua -> Redis conversions (one test per row of the table)

#[test]
fn lua_nil_and_false_are_nil() {
    let mut e = master();
    assert_eq!(eval(&mut e, "return nil", &[], &[]), Value::Nil);
    assert_eq!(eval(&mut e, "return false", &[], &[]), Value::Nil);
    assert_eq!(eval(&mut e, "return", &[], &[]), Value::Nil);
}

#[test]
fn lua_true_is_one() {
    assert_eq!(eval(&mut master(), "return true", &[], &[]), int(1));
}

#[test]
fn lua_numbers_truncate_toward_zero() {
    let mut e = master();
    assert_eq!(eval(&mut e, "return 3.7", &[], &[]), int(3));
    assert_eq!(eval(&mut e, "return -3.7", &[], &[]), int(-3));
    assert_eq!(eval(&mut e, "return 1e300", &[], &[]), int(i64::MIN));
    assert_eq!(eval(&mut e, "return 0/0", &[], &[]), int(i64::MIN));
    assert_eq!(eval(&mut e, "return 2^62", &[], &[]), int(1 << 62));
}

#[test]
fn lua_arrays_stop_at_first_nil() {
    assert_eq!(
        eval(&mut master(), "return {1,2,nil,4}", &[], &[]),
        Value::Array(vec![int(1), int(2)])
    );
}

#[test]
fn lua_nested_tables_convert_recursively() {
    assert_eq!(
        eval(
            &mut master(),
            "return {1,'a',{2,3.9},false,true,5}",
            &[],
            &[]
        ),
        Value::Array(vec![
            int(1),
            bulk("a"),
            Value::Array(vec![int(2), int(3)]),
            Value::Nil,
            int(1),
            int(5)
        ])
    );
    assert_eq!(
        eval(&mut master(), "return {1, x=2}", &[], &[]),
        Value::Array(vec![int(1)])
    );
}

#[test]
fn lua_ok_table_and_status_reply_are_status() {
    let mut e = master();
    assert_eq!(eval(&mut e, "return {ok='x'}", &[], &[]), status("x"));
    assert_eq!(
        eval(&mut e, "return redis.status_reply('x')", &[], &[]),
        status("x")
    );
    assert_eq!(eval(&mut e, "return {ok='OK'}", &[], &[]), Value::Okay);
    assert_eq!(
        eval(&mut e, "return {ok='a\\r\\nb'}", &[], &[]),
        status("a  b")
    );
}

#[test]
fn lua_err_table_and_error_reply_are_errors() {
    let mut e = master();
    assert_eq!(eval(&mut e, "return {err='x'}", &[], &[]), err("x"));
    // Measured: a returned {err=} is sent verbatim, a leading '-' included.
    assert_eq!(eval(&mut e, "return {err='-x y'}", &[], &[]), err("-x y"));
    // redis.error_reply adds the ERR code when the text has no space, and strips a '-'.
    assert_eq!(
        eval(&mut e, "return redis.error_reply('x')", &[], &[]),
        err("ERR x")
    );
    assert_eq!(
        eval(&mut e, "return redis.error_reply('-x')", &[], &[]),
        err("ERR x")
    );
    assert_eq!(
        eval(&mut e, "return redis.error_reply('MY code here')", &[], &[]),
        err("MY code here")
    );
    assert_eq!(
        eval(&mut e, "return {ok='a', err='b'}", &[], &[]),
        err("b"),
        "err wins over ok"
    );
}

// ---------------------------------------------------------------------------------------
// redis.call / redis.pcall

#[test]
fn call_get_of_missing_key_is_false() {
    let mut e = master();
    assert_eq!(
        eval(
            &mut e,
            "return type(redis.call('GET', KEYS[1]))",
            &["missing"],
            &[]
        ),
        bulk("boolean")
    );
    assert_eq!(
        eval(
            &mut e,
            "return redis.call('GET', KEYS[1]) == false",
            &["missing"],
            &[]
        ),
        int(1)
    );
}

#[test]
fn call_set_gives_ok_table_and_failed_nx_gives_false() {
    let mut e = master();
    assert_eq!(
        eval(
            &mut e,
            "return redis.call('SET', KEYS[1], 'v')['ok']",
            &["k"],
            &[]
        ),
        bulk("OK")
    );
    assert_eq!(
        eval(
            &mut e,
            "return redis.call('SET', KEYS[1], 'v', 'NX', 'PX', 1000) == false",
            &["k"],
            &[]
        ),
        int(1)
    );
}

#[test]
fn failing_call_aborts_with_sha_and_line() {
    let mut e = master();
    run(&mut e, T0, &["SET", "s", "v"]);
    let script = "local x = 1\nreturn redis.call('HGET', KEYS[1], 'f')";
    assert_eq!(
        eval(&mut e, script, &["s"], &[]),
        err(&format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: {}, on @user_script:2.",
            sha1(script)
        ))
    );
    let script = "return redis.call('nosuchcmd','a')";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:1.",
            sha1(script)
        ))
    );
    let script = "\nreturn redis.call('incr','b','c')";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR Wrong number of args calling Redis command from script script: {}, on @user_script:2.",
            sha1(script)
        ))
    );
    // In a nested function the line is the call's line inside that function.
    let script = "local function f()\n  return redis.call('nosuch')\nend\nreturn f()";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:2.",
            sha1(script)
        ))
    );
}

#[test]
fn failing_pcall_returns_err_table() {
    let mut e = master();
    run(&mut e, T0, &["SET", "s", "v"]);
    assert_eq!(
        eval(
            &mut e,
            "return redis.pcall('HGET', KEYS[1], 'f')",
            &["s"],
            &[]
        ),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(
        eval(&mut e, "return redis.pcall('nosuchcmd')['err']", &[], &[]),
        bulk("ERR Unknown Redis command called from script")
    );
    // Lua's pcall around redis.call gets the message string (Redis's pcall replacement).
    assert_eq!(
        eval(
            &mut e,
            "local ok, m = pcall(redis.call, 'get', 'a', 'b'); return {tostring(ok), m}",
            &[],
            &[]
        ),
        Value::Array(vec![
            bulk("false"),
            bulk("ERR Wrong number of args calling Redis command from script")
        ])
    );
}

#[test]
fn call_number_args_use_percent_17g() {
    let mut e = master();
    for (lua, stored) in [
        ("3.5", "3.5"),
        ("1e20", "1e+20"),
        ("0.1", "0.10000000000000001"),
        ("100", "100"),
        ("2^53", "9007199254740992"),
        ("-0.0", "-0"),
    ] {
        let script =
            format!("redis.call('SET', KEYS[1], {lua}); return redis.call('GET', KEYS[1])");
        assert_eq!(eval(&mut e, &script, &["n"], &[]), bulk(stored), "{lua}");
    }
    let script = "return redis.call('SET', KEYS[1], true)";
    assert_eq!(
        eval(&mut e, script, &["n"], &[]),
        err(&format!(
            "ERR Lua redis lib command arguments must be strings or integers script: {}, on @user_script:1.",
            sha1(script)
        ))
    );
}

#[test]
fn globals_are_read_only_and_undefined_reads_fail() {
    let mut e = master();
    let script = "y = 1";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
            sha1(script)
        ))
    );
    let script = "\n\nreturn y";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR user_script:3: Script attempted to access nonexistent global variable 'y' script: {}, on @user_script:3.",
            sha1(script)
        ))
    );
    for script in [
        "redis.call = nil",
        "string.x = 1",
        "KEYS = 1",
        "redis = nil",
    ] {
        assert_eq!(
            eval(&mut e, script, &[], &[]),
            err(&format!(
                "ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.",
                sha1(script)
            ))
        );
    }
    assert_eq!(
        eval(&mut e, "local redis = 5; return redis", &[], &[]),
        int(5)
    );
    assert_eq!(
        eval(&mut e, "KEYS[1] = 'x'; return KEYS[1]", &["k"], &[]),
        bulk("x")
    );
}

#[test]
fn lua_errors_carry_position() {
    let mut e = master();
    let cases = [
        ("error('boom')", "ERR user_script:1: boom"),
        ("error({err='boom'})", "boom"),
        ("error(redis.error_reply('ERR boom'))", "ERR boom"),
        ("error()", "ERR nil"),
        (
            "local x = nil; return x.y",
            "ERR user_script:1: attempt to index local 'x' (a nil value)",
        ),
    ];
    for (script, msg) in cases {
        assert_eq!(
            eval(&mut e, script, &[], &[]),
            err(&format!(
                "{msg} script: {}, on @user_script:1.",
                sha1(script)
            )),
            "{script}"
        );
    }
    assert_eq!(
        eval(&mut e, "return 1 +", &[], &[]),
        err("ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'")
    );
}

#[test]
fn keys_and_argv() {
    let mut e = master();
    assert_eq!(
        eval(
            &mut e,
            "return {KEYS[1], ARGV[1], ARGV[2], #ARGV}",
            &["k"],
            &["v", "w"]
        ),
        Value::Array(vec![bulk("k"), bulk("v"), bulk("w"), int(2)])
    );
    assert_eq!(
        run(&mut e, T0, &["EVAL", "return 1", "2", "a"]),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        run(&mut e, T0, &["EVAL", "return 1", "-1"]),
        err("ERR Number of keys can't be negative")
    );
    assert_eq!(
        run(&mut e, T0, &["EVAL", "return 1", "x"]),
        err("ERR value is not an integer or out of range")
    );
}

#[test]
fn redis_helpers() {
    let mut e = master();
    assert_eq!(
        eval(&mut e, "return redis.sha1hex('')", &[], &[]),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(
        eval(
            &mut e,
            "return {redis.LOG_DEBUG,redis.LOG_VERBOSE,redis.LOG_NOTICE,redis.LOG_WARNING}",
            &[],
            &[]
        ),
        Value::Array(vec![int(0), int(1), int(2), int(3)])
    );
    assert_eq!(
        eval(
            &mut e,
            "redis.log(redis.LOG_WARNING, 'hi') return 1",
            &[],
            &[]
        ),
        int(1)
    );
    // Redis's rand48: one sequence per server from its static initial state, not reseeded
    // per script (measured on a fresh 7.0.15).
    assert_eq!(
        eval(
            &mut e,
            "return {math.random(10), math.random(100)}",
            &[],
            &[]
        ),
        Value::Array(vec![int(4), int(85)])
    );
    assert_eq!(eval(&mut e, "return math.random(100)", &[], &[]), int(36));
    assert_eq!(
        eval(
            &mut e,
            "math.randomseed(5); return math.random(1000)",
            &[],
            &[]
        ),
        int(525)
    );
}

#[test]
fn commands_not_allowed_from_scripts() {
    let mut e = master();
    for cmd in [
        "'wait','0','0'",
        "'subscribe','c'",
        "'eval','return 1','0'",
        "'multi'",
    ] {
        let script = format!("return redis.call({cmd})");
        assert_eq!(
            eval(&mut e, &script, &[], &[]),
            err(&format!(
                "ERR This Redis command is not allowed from script script: {}, on @user_script:1.",
                sha1(&script)
            ))
        );
    }
}

// ---------------------------------------------------------------------------------------
// script cache

#[test]
fn script_load_returns_sha_and_eval_caches() {
    let mut e = master();
    let body = "return 1";
    assert_eq!(
        run(&mut e, T0, &["SCRIPT", "LOAD", body]),
        bulk(&sha1(body))
    );
    let other = "return 2";
    assert_eq!(
        run(&mut e, T0, &["SCRIPT", "EXISTS", &sha1(other)]),
        Value::Array(vec![int(0)])
    );
    assert_eq!(run(&mut e, T0, &["EVAL", other, "0"]), int(2));
    assert_eq!(
        run(&mut e, T0, &["SCRIPT", "EXISTS", &sha1(other), &sha1(body)]),
        Value::Array(vec![int(1), int(1)])
    );
    assert_eq!(run(&mut e, T0, &["EVALSHA", &sha1(other), "0"]), int(2));
    assert_eq!(run(&mut e, T0, &["SCRIPT", "FLUSH"]), Value::Okay);
    assert_eq!(
        run(&mut e, T0, &["SCRIPT", "EXISTS", &sha1(other)]),
        Value::Array(vec![int(0)])
    );
}

#[test]
fn evalsha_unknown_is_noscript() {
    let mut e = master();
    let reply = run(&mut e, T0, &["EVALSHA", &sha1("return 7"), "0"]);
    assert_eq!(reply, err("NOSCRIPT No matching script. Please use EVAL."));
    match reply {
        Value::ServerError(se) => assert_eq!(se.kind(), Some(redis::ServerErrorKind::NoScript)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run(&mut e, T0, &["EVALSHA", "abc", "0"]),
        err("NOSCRIPT No matching script. Please use EVAL.")
    );
}

#[test]
fn compare_and_delete_release() {
    let mut e = master();
    let release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    run(&mut e, T0, &["SET", "lock", "me", "NX", "PX", "10000"]);
    assert_eq!(eval(&mut e, release, &["lock"], &["you"]), int(0));
    assert_eq!(run(&mut e, T0, &["GET", "lock"]), bulk("me"));
    let out = exec(&mut e, T0, &["EVAL", release, "1", "lock", "me"]);
    assert_eq!(out.reply, int(1));
    assert_eq!(out.effects, effects(&[&["del", "lock"]]));
    assert_eq!(run(&mut e, T0, &["GET", "lock"]), Value::Nil);
}

// ---------------------------------------------------------------------------------------
// expiry on this node's clock

#[test]
fn px_expiry_follows_the_given_clock() {
    let mut e = master();
    assert_eq!(
        run(&mut e, 1000, &["SET", "k", "v", "PX", "100"]),
        Value::Okay
    );
    assert_eq!(run(&mut e, 1099, &["GET", "k"]), bulk("v"));
    // Redis expires a key when now > expire time: at exactly 1100 it is still there.
    assert_eq!(run(&mut e, 1100, &["PTTL", "k"]), int(0));
    assert_eq!(run(&mut e, 1100, &["GET", "k"]), bulk("v"));
    let out = exec(&mut e, 1101, &["GET", "k"]);
    assert_eq!(out.reply, Value::Nil);
    assert_eq!(
        out.effects,
        effects(&[&["DEL", "k"]]),
        "lazy expiry replicates DEL"
    );
    assert_eq!(e.dbsize(1101), 0);
}

#[test]
fn pttl_and_ttl() {
    let mut e = master();
    assert_eq!(run(&mut e, T0, &["PTTL", "missing"]), int(-2));
    assert_eq!(run(&mut e, T0, &["TTL", "missing"]), int(-2));
    run(&mut e, T0, &["SET", "k", "v"]);
    assert_eq!(run(&mut e, T0, &["PTTL", "k"]), int(-1));
    assert_eq!(run(&mut e, T0, &["TTL", "k"]), int(-1));
    run(&mut e, T0, &["PEXPIRE", "k", "1500"]);
    assert_eq!(run(&mut e, T0, &["PTTL", "k"]), int(1500));
    assert_eq!(
        run(&mut e, T0, &["TTL", "k"]),
        int(2),
        "TTL rounds to nearest"
    );
    assert_eq!(run(&mut e, T0 + 1, &["TTL", "k"]), int(1));
}

#[test]
fn set_nx_px() {
    let mut e = master();
    let out = exec(&mut e, T0, &["SET", "k", "a", "NX", "PX", "10000"]);
    assert_eq!(out.reply, Value::Okay);
    assert_eq!(
        out.effects,
        effects(&[&["SET", "k", "a", "PXAT", "11000"]]),
        "relative expiry replicates as absolute"
    );
    let out = exec(&mut e, T0, &["SET", "k", "b", "NX", "PX", "10000"]);
    assert_eq!(out.reply, Value::Nil);
    assert!(out.effects.is_empty(), "a failed SET NX is not replicated");
    for bad in ["0", "-5"] {
        assert_eq!(
            run(&mut e, T0, &["SET", "k", "v", "PX", bad]),
            err("ERR invalid expire time in 'set' command")
        );
    }
    assert_eq!(
        run(&mut e, T0, &["SET", "k", "v", "PX", "abc"]),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        run(&mut e, T0, &["SET", "k", "v", "NX", "XX"]),
        err("ERR syntax error")
    );
    assert_eq!(
        run(&mut e, T0, &["SET", "k", "v", "KEEPTTL", "PX", "100"]),
        err("ERR syntax error")
    );
    assert_eq!(
        run(&mut e, T0, &["SET", "k", "v", "PX"]),
        err("ERR syntax error")
    );
}

#[test]
fn set_options() {
    let mut e = master();
    run(&mut e, T0, &["SET", "k", "1", "EX", "100"]);
    let out = exec(&mut e, T0, &["SET", "k", "2", "GET"]);
    assert_eq!(out.reply, bulk("1"));
    assert_eq!(
        out.effects,
        effects(&[&["SET", "k", "2"]]),
        "GET is not replicated"
    );
    assert_eq!(
        run(&mut e, T0, &["PTTL", "k"]),
        int(-1),
        "SET clears the TTL"
    );
    run(&mut e, T0, &["PEXPIRE", "k", "500"]);
    run(&mut e, T0, &["SET", "k", "3", "KEEPTTL"]);
    assert_eq!(run(&mut e, T0, &["PTTL", "k"]), int(500));
    assert_eq!(run(&mut e, T0, &["SET", "k", "4", "XX"]), Value::Okay);
    assert_eq!(run(&mut e, T0, &["SET", "new", "4", "XX"]), Value::Nil);
    let out = exec(&mut e, T0, &["SET", "k", "5", "PXAT", "5000"]);
    assert_eq!(out.effects, effects(&[&["SET", "k", "5", "PXAT", "5000"]]));
    let out = exec(&mut e, T0, &["SET", "k", "5", "EXAT", "7"]);
    assert_eq!(out.effects, effects(&[&["SET", "k", "5", "PXAT", "7000"]]));
    assert_eq!(
        run(&mut e, T0, &["SET", "k", "v", "EX", "10", "EX", "20"]),
        Value::Okay
    );
    assert_eq!(run(&mut e, T0, &["TTL", "k"]), int(20));
    run(&mut e, T0, &["HSET", "h", "f", "1"]);
    assert_eq!(
        run(&mut e, T0, &["SET", "h", "v", "GET"]),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(
        run(&mut e, T0, &["SET", "h", "v"]),
        Value::Okay,
        "SET overwrites any type"
    );
    assert_eq!(run(&mut e, T0, &["setnx", "h", "w"]), int(0));
    assert_eq!(run(&mut e, T0, &["setnx", "n", "w"]), int(1));
}

#[test]
fn pexpire_options_and_deletion() {
    let mut e = master();
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "missing", "100"]), int(0));
    run(&mut e, T0, &["SET", "k", "v"]);
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "100", "XX"]), int(0));
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "100", "GT"]), int(0));
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "100", "LT"]), int(1));
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "200", "NX"]), int(0));
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "200", "GT"]), int(1));
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "50", "GT"]), int(0));
    let out = exec(&mut e, T0, &["PEXPIRE", "k", "300", "XX"]);
    assert_eq!(out.reply, int(1));
    assert_eq!(out.effects, effects(&[&["PEXPIREAT", "k", "1300", "XX"]]));
    assert_eq!(
        run(&mut e, T0, &["PEXPIRE", "k", "1", "NX", "XX"]),
        err("ERR NX and XX, GT or LT options at the same time are not compatible")
    );
    assert_eq!(
        run(&mut e, T0, &["PEXPIRE", "k", "1", "GT", "LT"]),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(
        run(&mut e, T0, &["PEXPIRE", "k", "x", "foo"]),
        err("ERR Unsupported option foo")
    );
    assert_eq!(
        run(&mut e, T0, &["EXPIRE", "k", "9223372036854775807"]),
        err("ERR invalid expire time in 'expire' command")
    );
    let out = exec(&mut e, T0, &["PEXPIRE", "k", "0"]);
    assert_eq!(out.reply, int(1));
    assert_eq!(out.effects, effects(&[&["DEL", "k"]]), "PEXPIRE 0 deletes");
    assert_eq!(run(&mut e, T0, &["EXISTS", "k"]), int(0));
    run(&mut e, T0, &["SET", "k", "v"]);
    assert_eq!(run(&mut e, T0, &["PEXPIRE", "k", "-5"]), int(1));
    assert_eq!(run(&mut e, T0, &["EXISTS", "k"]), int(0));
}

#[test]
fn expire_family_and_persist() {
    let mut e = master();
    run(&mut e, T0, &["SET", "k", "v"]);
    let out = exec(&mut e, T0, &["EXPIRE", "k", "10"]);
    assert_eq!(out.effects, effects(&[&["PEXPIREAT", "k", "11000"]]));
    let out = exec(&mut e, T0, &["EXPIREAT", "k", "20"]);
    assert_eq!(out.effects, effects(&[&["PEXPIREAT", "k", "20000"]]));
    let out = exec(&mut e, T0, &["pexpireat", "k", "30000"]);
    assert_eq!(out.effects, effects(&[&["pexpireat", "k", "30000"]]));
    assert_eq!(run(&mut e, T0, &["PERSIST", "k"]), int(1));
    assert_eq!(run(&mut e, T0, &["PERSIST", "k"]), int(0));
    assert_eq!(run(&mut e, T0, &["PERSIST", "missing"]), int(0));
    assert_eq!(run(&mut e, T0, &["PTTL", "k"]), int(-1));
}

// ---------------------------------------------------------------------------------------
// replicas

#[test]
fn replica_hides_but_keeps_expired_keys() {
    let mut m = master();
    let mut r = Engine::new(Role::Replica);
    let out = exec(&mut m, 1000, &["SET", "k", "v", "PX", "100"]);
    r.apply_replicated(1000, &out.effects);
    assert_eq!(run(&mut r, 1100, &["GET", "k"]), bulk("v"));
    // The replica's clock says the key is dead: hidden from reads...
    let out = exec(&mut r, 1200, &["GET", "k"]);
    assert_eq!(out.reply, Value::Nil);
    assert!(out.effects.is_empty());
    assert_eq!(run(&mut r, 1200, &["EXISTS", "k"]), int(0));
    assert_eq!(run(&mut r, 1200, &["PTTL", "k"]), int(-2));
    assert!(
        r.active_expire(1200).is_empty(),
        "replicas never expire on their own"
    );
    // ...but kept until the master's DEL arrives.
    assert_eq!(r.peek(b"k"), Some(&b"v"[..]));
    assert_eq!(r.dbsize(1200), 0);
    assert_eq!(r.dbsize(1000), 1);
    let dels = m.active_expire(1200);
    assert_eq!(dels, effects(&[&["DEL", "k"]]));
    r.apply_replicated(1200, &dels);
    assert_eq!(r.peek(b"k"), None);
}

#[test]
fn replica_applies_past_expiries_without_deleting() {
    let mut r = Engine::new(Role::Replica);
    // The master's clock is ahead: its absolute expiry is already past on this replica.
    r.apply_replicated(
        5000,
        &effects(&[&["SET", "k", "v"], &["PEXPIREAT", "k", "4000"]]),
    );
    assert_eq!(r.peek(b"k"), Some(&b"v"[..]));
    assert_eq!(run(&mut r, 5000, &["GET", "k"]), Value::Nil);
    // A replicated write to a key the replica considers expired uses the stored key.
    r.apply_replicated(5000, &effects(&[&["SET", "k", "w", "KEEPTTL"]]));
    assert_eq!(r.peek(b"k"), Some(&b"w"[..]));
}

#[test]
fn replica_refuses_writes() {
    let mut r = Engine::new(Role::Replica);
    let readonly = err("READONLY You can't write against a read only replica.");
    for cmd in [
        &["SET", "k", "v"][..],
        &["SET", "k", "v", "PX", "0"],
        &["DEL", "k"],
        &["HINCRBY", "h", "f", "1"],
        &["PEXPIRE", "k", "1"],
        &["SETNX", "k", "1"],
        &["FLUSHALL"],
    ] {
        assert_eq!(run(&mut r, T0, cmd), readonly, "{cmd:?}");
    }
    assert_eq!(
        run(&mut r, T0, &["SET", "k"]),
        err("ERR wrong number of arguments for 'set' command"),
        "arity is checked before READONLY"
    );
    assert_eq!(run(&mut r, T0, &["PUBLISH", "c", "m"]), int(0));
    assert_eq!(
        eval(&mut r, "return redis.call('get','k')", &[], &[]),
        Value::Nil
    );
    let script = "return redis.call('set','k','v')";
    assert_eq!(
        eval(&mut r, script, &[], &[]),
        err(&format!(
            "READONLY You can't write against a read only replica. script: {}, on @user_script:1.",
            sha1(script)
        ))
    );
    assert_eq!(
        eval(&mut r, "return redis.pcall('set','k','v')", &[], &[]),
        readonly
    );
}

#[test]
fn promotion_starts_expiring() {
    let mut r = Engine::new(Role::Replica);
    r.apply_replicated(1000, &effects(&[&["SET", "k", "v", "PXAT", "1100"]]));
    assert!(r.active_expire(2000).is_empty());
    r.set_role(Role::Master);
    assert_eq!(r.role(), Role::Master);
    assert_eq!(run(&mut r, 1050, &["GET", "k"]), bulk("v"));
    assert_eq!(r.active_expire(2000), effects(&[&["DEL", "k"]]));
    assert_eq!(run(&mut r, 2000, &["SET", "k", "w"]), Value::Okay);
}

// ---------------------------------------------------------------------------------------
// effects

#[test]
fn script_writing_more_than_once_is_wrapped_in_multi_exec() {
    let mut e = master();
    let acquire = "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil";
    let out = exec(
        &mut e,
        T0,
        &["EVAL", acquire, "1", "lock", "30000", "uuid:1"],
    );
    assert_eq!(out.reply, Value::Nil);
    assert_eq!(
        out.effects,
        effects(&[
            &["MULTI"],
            &["hincrby", "lock", "uuid:1", "1"],
            &["PEXPIREAT", "lock", "31000"],
            &["EXEC"],
        ])
    );
    // One write: no wrapping. No write: no effect.
    let out = exec(
        &mut e,
        T0,
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], 'v', 'px', 5000)",
            "1",
            "s",
        ],
    );
    assert_eq!(out.effects, effects(&[&["SET", "s", "v", "PXAT", "6000"]]));
    let out = exec(
        &mut e,
        T0,
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "s"],
    );
    assert!(out.effects.is_empty());
    // A script that fails after writing keeps (and replicates) its writes: no rollback.
    let out = exec(
        &mut e,
        T0,
        &[
            "EVAL",
            "redis.call('set','a','1'); redis.call('set','b','1'); error('x')",
            "0",
        ],
    );
    assert!(matches!(out.reply, Value::ServerError(_)));
    assert_eq!(
        out.effects,
        effects(&[
            &["MULTI"],
            &["set", "a", "1"],
            &["set", "b", "1"],
            &["EXEC"]
        ])
    );
}

#[test]
fn lazy_expiry_inside_a_unit_joins_its_multi() {
    let mut e = master();
    run(&mut e, T0, &["SET", "z", "1", "PXAT", "1"]);
    let out = exec(&mut e, T0, &["SET", "z", "2", "NX"]);
    assert_eq!(
        out.effects,
        effects(&[
            &["MULTI"],
            &["DEL", "z"],
            &["SET", "z", "2", "NX"],
            &["EXEC"]
        ])
    );
    run(&mut e, T0, &["SET", "y", "1", "PXAT", "1"]);
    let out = exec(&mut e, T0, &["EXISTS", "y"]);
    assert_eq!(out.effects, effects(&[&["DEL", "y"]]));
}

#[test]
fn write_commands_replicate_as_sent() {
    let mut e = master();
    let cases: &[(&[&str], bool)] = &[
        (&["set", "a", "1"], true),
        (&["incr", "a"], true),
        (&["incrby", "a", "5"], true),
        (&["decr", "a"], true),
        (&["hset", "h", "a", "1"], true),
        (&["hset", "h", "a", "1"], true),
        (&["hincrby", "h", "a", "2"], true),
        (&["hdel", "h", "zz"], false),
        (&["hdel", "h", "a"], true),
        (&["del", "zz"], false),
        (&["del", "a", "zz"], true),
        (&["publish", "chan", "m"], true),
        (&["get", "a"], false),
    ];
    for (cmd, replicated) in cases {
        let out = exec(&mut e, T0, cmd);
        let want = if *replicated { effects(&[cmd]) } else { vec![] };
        assert_eq!(out.effects, want, "{cmd:?}");
    }
}

// ---------------------------------------------------------------------------------------
// pub/sub

#[test]
fn publish_delivers_to_subscribers() {
    let mut e = master();
    e.subscribe(7, b"unlock");
    e.subscribe(9, b"unlock");
    e.subscribe(9, b"other");
    let out = exec(&mut e, T0, &["PUBLISH", "unlock", "0"]);
    assert_eq!(out.reply, int(2));
    assert_eq!(
        out.messages,
        vec![
            (7, b"unlock".to_vec(), b"0".to_vec()),
            (9, b"unlock".to_vec(), b"0".to_vec())
        ]
    );
    e.unsubscribe(7, b"unlock");
    let out = exec(
        &mut e,
        T0,
        &[
            "EVAL",
            "return redis.call('publish', KEYS[1], ARGV[1])",
            "1",
            "unlock",
            "x",
        ],
    );
    assert_eq!(out.reply, int(1));
    assert_eq!(out.messages, vec![(9, b"unlock".to_vec(), b"x".to_vec())]);
    e.disconnect(9);
    assert_eq!(run(&mut e, T0, &["PUBLISH", "other", "m"]), int(0));
}

#[test]
fn replicated_publish_reaches_replica_subscribers() {
    let mut r = Engine::new(Role::Replica);
    r.subscribe(3, b"c");
    let msgs = r.apply_replicated_with_messages(T0, &effects(&[&["publish", "c", "m"]]));
    assert_eq!(msgs, vec![(3, b"c".to_vec(), b"m".to_vec())]);
}

// ---------------------------------------------------------------------------------------
// plain commands and errors

#[test]
fn errors_match_redis() {
    let mut e = master();
    assert_eq!(
        run(&mut e, T0, &["foo", "a", "b"]),
        err("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        run(&mut e, T0, &["foo"]),
        err("ERR unknown command 'foo', with args beginning with: ")
    );
    assert_eq!(
        run(&mut e, T0, &["GET"]),
        err("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        run(&mut e, T0, &["hset", "h", "f", "1", "g"]),
        err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(
        run(&mut e, T0, &["script", "load"]),
        err("ERR wrong number of arguments for 'script|load' command")
    );
    assert_eq!(
        run(&mut e, T0, &["script", "foo"]),
        err("ERR unknown subcommand 'foo'. Try SCRIPT HELP.")
    );
    run(&mut e, T0, &["HSET", "h", "f", "1"]);
    for cmd in [&["GET", "h"][..], &["INCR", "h"], &["HGET", "s", "f"]] {
        run(&mut e, T0, &["SET", "s", "x"]);
        assert_eq!(
            run(&mut e, T0, cmd),
            err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
    for bad in ["x", "1.5", " 1", "+1", "01", "-0"] {
        assert_eq!(
            run(&mut e, T0, &["INCRBY", "n", bad]),
            err("ERR value is not an integer or out of range"),
            "{bad}"
        );
    }
    run(&mut e, T0, &["SET", "n", "9223372036854775807"]);
    assert_eq!(
        run(&mut e, T0, &["INCR", "n"]),
        err("ERR increment or decrement would overflow")
    );
}

#[test]
fn hashes() {
    let mut e = master();
    assert_eq!(
        run(&mut e, T0, &["HSET", "h", "a", "1", "b", "2", "a", "3"]),
        int(2)
    );
    assert_eq!(
        run(&mut e, T0, &["HGETALL", "h"]),
        Value::Array(vec![bulk("a"), bulk("3"), bulk("b"), bulk("2")])
    );
    assert_eq!(run(&mut e, T0, &["HGET", "h", "a"]), bulk("3"));
    assert_eq!(run(&mut e, T0, &["HGET", "h", "zz"]), Value::Nil);
    assert_eq!(run(&mut e, T0, &["HEXISTS", "h", "a"]), int(1));
    assert_eq!(run(&mut e, T0, &["HEXISTS", "h", "zz"]), int(0));
    assert_eq!(run(&mut e, T0, &["HEXISTS", "missing", "a"]), int(0));
    assert_eq!(run(&mut e, T0, &["HLEN", "h"]), int(2));
    assert_eq!(run(&mut e, T0, &["HINCRBY", "h", "a", "-5"]), int(-2));
    assert_eq!(run(&mut e, T0, &["HINCRBY", "new", "f", "1"]), int(1));
    run(&mut e, T0, &["HSET", "h", "s", "abc"]);
    assert_eq!(
        run(&mut e, T0, &["HINCRBY", "h", "s", "1"]),
        err("ERR hash value is not an integer")
    );
    run(&mut e, T0, &["SET", "str", "1"]);
    assert_eq!(
        run(&mut e, T0, &["HINCRBY", "str", "f", "1"]),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    assert_eq!(run(&mut e, T0, &["HDEL", "h", "a", "b", "s", "c"]), int(3));
    assert_eq!(
        run(&mut e, T0, &["EXISTS", "h"]),
        int(0),
        "an emptied hash is deleted"
    );
    assert_eq!(run(&mut e, T0, &["HGETALL", "h"]), Value::Array(vec![]));
    assert_eq!(run(&mut e, T0, &["HLEN", "h"]), int(0));
    assert_eq!(run(&mut e, T0, &["TYPE", "new"]), status("hash"));
    assert_eq!(run(&mut e, T0, &["TYPE", "str"]), status("string"));
    assert_eq!(run(&mut e, T0, &["TYPE", "h"]), status("none"));
}

#[test]
fn server_commands() {
    let mut e = master();
    assert_eq!(run(&mut e, T0, &["PING"]), status("PONG"));
    assert_eq!(run(&mut e, T0, &["ping", "x"]), bulk("x"));
    assert_eq!(run(&mut e, T0, &["ECHO", "hi"]), bulk("hi"));
    assert_eq!(
        run(&mut e, 1_795_237_426_738, &["TIME"]),
        Value::Array(vec![bulk("1795237426"), bulk("738000")])
    );
    run(&mut e, T0, &["SET", "a", "1"]);
    run(&mut e, T0, &["SET", "b", "1", "PX", "10"]);
    assert_eq!(run(&mut e, T0, &["DBSIZE"]), int(2));
    assert_eq!(run(&mut e, T0, &["EXISTS", "a", "b", "zz", "a"]), int(3));
    assert_eq!(run(&mut e, T0, &["DEL", "a", "b", "zz"]), int(2));
    run(&mut e, T0, &["SET", "a", "1"]);
    let out = exec(&mut e, T0, &["FLUSHALL"]);
    assert_eq!(out.reply, Value::Okay);
    assert_eq!(out.effects, effects(&[&["FLUSHALL"]]));
    assert_eq!(e.dbsize(T0), 0);
    assert_eq!(
        run(&mut e, T0, &["FLUSHALL", "bad"]),
        err("ERR syntax error")
    );
}

#[test]
fn transactions() {
    let mut e = master();
    assert_eq!(run(&mut e, T0, &["MULTI"]), Value::Okay);
    assert_eq!(run(&mut e, T0, &["SET", "a", "1"]), status("QUEUED"));
    assert_eq!(run(&mut e, T0, &["INCR", "a"]), status("QUEUED"));
    let out = exec(&mut e, T0, &["EXEC"]);
    assert_eq!(out.reply, Value::Array(vec![Value::Okay, int(2)]));
    assert_eq!(
        out.effects,
        effects(&[&["MULTI"], &["SET", "a", "1"], &["INCR", "a"], &["EXEC"]])
    );
    run(&mut e, T0, &["MULTI"]);
    run(&mut e, T0, &["GET"]);
    assert_eq!(
        run(&mut e, T0, &["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(run(&mut e, T0, &["EXEC"]), err("ERR EXEC without MULTI"));
}

#[test]
fn shebang_flags() {
    let mut e = master();
    let script = "#!lua\nreturn redis.call('nosuch')";
    assert_eq!(
        eval(&mut e, script, &[], &[]),
        err(&format!(
            "ERR Unknown Redis command called from script script: {}, on @user_script:2.",
            sha1(script)
        )),
        "the shebang line keeps its line number"
    );
    let script = "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], '1')";
    assert_eq!(
        eval(&mut e, script, &["k"], &[]),
        err(&format!(
            "ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:2.",
            sha1(script)
        ))
    );
    assert_eq!(
        eval(&mut e, "#!lua flags=bad\nreturn 1", &[], &[]),
        err("ERR Unexpected flag in script shebang: bad")
    );
    assert_eq!(
        eval(&mut e, "#!lua", &[], &[]),
        err("ERR Invalid script shebang")
    );
    let mut r = Engine::new(Role::Replica);
    assert_eq!(
        eval(&mut r, "#!lua\nreturn 1", &[], &[]),
        err("READONLY You can't write against a read only replica.")
    );
    assert_eq!(
        eval(&mut r, "#!lua flags=no-writes\nreturn 1", &[], &[]),
        int(1)
    );
}

#[test]
fn endless_script_is_stopped() {
    let mut e = master();
    let script = "local i = 0\nwhile true do i = i + 1 end";
    match eval(&mut e, script, &[], &[]) {
        Value::ServerError(se) => {
            let d = se.details().unwrap_or_default();
            assert!(d.starts_with("Script killed by lockcheck"), "{d}");
            assert!(d.ends_with("on @user_script:2."), "{d}");
        }
        other => panic!("{other:?}"),
    }
    // The engine is usable afterwards.
    assert_eq!(eval(&mut e, "return 1", &[], &[]), int(1));
}

#[test]
fn engine_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
}

#[test]
fn same_calls_give_same_results() {
    let script = "redis.call('hincrby', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], 100); return math.random(1000)";
    let run_all = || {
        let mut e = master();
        let mut log = Vec::new();
        for i in 0..50u64 {
            let key = format!("k{}", i % 7);
            let field = format!("f{}", i % 3);
            log.push(exec(
                &mut e,
                1000 + i * 30,
                &["EVAL", script, "1", &key, &field],
            ));
            log.push(exec(
                &mut e,
                1000 + i * 30,
                &["SET", &key, "x", "NX", "PX", "50"],
            ));
            let swept = e.active_expire(1000 + i * 30);
            log.push(Executed {
                reply: Value::Nil,
                wrote: !swept.is_empty(),
                effects: swept,
                messages: vec![],
            });
        }
        log
    };
    assert_eq!(run_all(), run_all());
}

// --- Issue #10: optimistic transactions across two connections --------------------------

#[test]
fn exec_answers_nil_when_another_client_touched_a_watched_key() {
    let mut e = Engine::new(Role::Master);
    let on = |e: &mut Engine, c: u64, parts: &[&str]| e.execute(T0, c, &argv(parts)).reply;
    assert_eq!(on(&mut e, 1, &["WATCH", "lock"]), Value::Okay);
    assert_eq!(on(&mut e, 2, &["SET", "lock", "other"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["MULTI"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["DEL", "lock"]), status("QUEUED"));
    assert_eq!(on(&mut e, 1, &["EXEC"]), Value::Nil);
    assert_eq!(on(&mut e, 1, &["GET", "lock"]), bulk("other"));
    // A watch on another key is not touched, and EXEC ends every watch.
    assert_eq!(on(&mut e, 1, &["WATCH", "lock"]), Value::Okay);
    assert_eq!(on(&mut e, 2, &["SET", "elsewhere", "x"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["MULTI"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["DEL", "lock"]), status("QUEUED"));
    assert_eq!(on(&mut e, 1, &["EXEC"]), Value::Array(vec![int(1)]));
    assert_eq!(on(&mut e, 2, &["SET", "lock", "y"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["MULTI"]), Value::Okay);
    assert_eq!(on(&mut e, 1, &["GET", "lock"]), status("QUEUED"));
    assert_eq!(on(&mut e, 1, &["EXEC"]), Value::Array(vec![bulk("y")]));
}

#[test]
fn a_watched_key_that_expires_before_exec_aborts_it() {
    let mut e = Engine::new(Role::Master);
    run(&mut e, T0, &["SET", "lock", "me", "PX", "100"]);
    run(&mut e, T0, &["WATCH", "lock"]);
    run(&mut e, T0 + 200, &["MULTI"]);
    run(&mut e, T0 + 200, &["SET", "lock", "me"]);
    assert_eq!(run(&mut e, T0 + 200, &["EXEC"]), Value::Nil);
}

#[test]
fn a_script_write_touches_a_watch() {
    let mut e = Engine::new(Role::Master);
    e.execute(T0, 1, &argv(&["WATCH", "lock"]));
    e.execute(
        T0,
        2,
        &argv(&[
            "EVAL",
            "return redis.call('set', KEYS[1], 'x')",
            "1",
            "lock",
        ]),
    );
    e.execute(T0, 1, &argv(&["MULTI"]));
    e.execute(T0, 1, &argv(&["GET", "lock"]));
    assert_eq!(e.execute(T0, 1, &argv(&["EXEC"])).reply, Value::Nil);
}

#[test]
fn setex_replicates_as_set_pxat() {
    let mut e = Engine::new(Role::Master);
    let out = exec(&mut e, T0, &["SETEX", "lock", "10", "me"]);
    assert_eq!(out.reply, Value::Okay);
    assert_eq!(
        out.effects,
        vec![argv(&["SET", "lock", "me", "PXAT", "11000"])]
    );
    let out = exec(&mut e, T0, &["MSET", "a", "1", "b", "2"]);
    assert_eq!(out.effects, vec![argv(&["MSET", "a", "1", "b", "2"])]);
}

#[test]
fn client_id_and_names() {
    let mut e = Engine::new(Role::Master);
    assert_eq!(e.execute(T0, 7, &argv(&["CLIENT", "ID"])).reply, int(7));
    assert_eq!(run(&mut e, T0, &["CLIENT", "GETNAME"]), Value::Nil);
    assert_eq!(run(&mut e, T0, &["client", "setname", "lk"]), Value::Okay);
    assert_eq!(run(&mut e, T0, &["CLIENT", "GETNAME"]), bulk("lk"));
    assert_eq!(
        run(&mut e, T0, &["CLIENT", "SETNAME", "a b"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
}

#[test]
fn getex_refreshes_the_lease_and_replicates_an_absolute_expiry() {
    let mut e = Engine::new(Role::Master);
    run(&mut e, T0, &["SET", "lock", "me"]);
    let out = exec(&mut e, T0, &["GETEX", "lock", "PX", "500"]);
    assert_eq!(out.reply, bulk("me"));
    assert_eq!(out.effects, vec![argv(&["PEXPIREAT", "lock", "1500"])]);
    let out = exec(&mut e, T0, &["GETEX", "lock", "PERSIST"]);
    assert_eq!(out.effects, vec![argv(&["PERSIST", "lock"])]);
    assert_eq!(run(&mut e, T0, &["PTTL", "lock"]), int(-1));
}
