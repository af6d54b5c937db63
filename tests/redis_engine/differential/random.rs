//! Random differential sequences: proptest generates short sequences of commands and scripts
//! (right and wrong types, wrong arity, unknown commands, transactions, script errors) over a
//! few keys; each sequence runs from an empty server and an empty engine, and every reply must
//! be equal.
//!
//! `LOCKCHECK_DIFF_CASES` sets the number of sequences (default 300); the benchmark run uses
//! `LOCKCHECK_DIFF_CASES=10000 cargo test --release --test redis_engine random_sequences`.

use super::Diff;
use lockcheck::simredis::{Engine, Role};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use std::cell::RefCell;

/// Keys of every type the sequences write, so wrong-type errors come up often.
const KEYS: &[&str] = &["k", "h", "n"];
const VALUES: &[&str] = &["v", "1", "-3", "x y", "99999999999999999999"];
/// Scripts a lock library might send, and a few that fail.
const SCRIPTS: &[&str] = &[
    "return redis.call('get', KEYS[1])",
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    "return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', 100000)",
    "return redis.call('incr', KEYS[1])",
    "return redis.pcall('incr', KEYS[1])",
    "return redis.call('hset', KEYS[1], ARGV[1], 1)",
    "return {1, 'two', {3}, false, true}",
    "return redis.call('nosuch')",
    "return {err='custom failure'}",
    "return {ok='fine'}",
    "return 3.99",
    "return tostring(nil) .. #ARGV",
    "error('raised')",
    "return redis.sha1hex(ARGV[1])",
    "local t = {} t[1] = KEYS[1] return t",
    "return x +",
    // The bundled libraries.
    "return {bit.band(ARGV[1], 255), bit.tohex(-1, -4), bit.bxor(5, 3), bit.lshift(1, 40), bit.tobit(2.5), bit.ror(0x12345678, 8), bit.bswap(ARGV[1])}",
    "return {bit.tohex(ARGV[1]), bit.arshift(-256, 4), bit.rshift(-1, 28), bit.bnot(0), bit.rol(1, 33), bit.bor()}",
    "return cjson.encode({ARGV[1], {KEYS[1], 0.1, 1e20, -0.0, 2^53, true, cjson.null}, {}, {[1]=1, [3]=3}})",
    "return cjson.encode({name=ARGV[1]})",
    "return cjson.encode('a\"b\\\\/\\n\\1\\127')",
    "return cjson.encode(cjson.decode(ARGV[1]))",
    "local ok, e = pcall(cjson.decode, ARGV[1]) return {tostring(ok), type(e)}",
    "return cjson.decode('[1, 2.5, \"x\\u00e9\", null, true, {\"a\": [ ]}]')",
    "return cjson.encode({[1]=1, [20]=2})",
    "return cjson.encode(1/0)",
    "return cjson.decode('{\"a\" 1}')",
    "return cjson.decode('[1,')",
    "return cjson.encode()",
    "return cjson.encode(print)",
    "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return {hex(cmsgpack.pack(1, -1, 200, -200, 70000, 2^40, 1.5, 0.1, ARGV[1], true, false, nil, {1, 2}, {a=1}, {}, {[1]=1, [3]=3}, -2^40, 2^31, -0.0, string.rep('x', 40)))}",
    "return {cmsgpack.unpack(cmsgpack.pack(1, ARGV[1], {1, {2}}, 1.5, true))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2))}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 0)}",
    "return {pcall(cmsgpack.unpack, ARGV[1])}",
    "return cmsgpack.unpack('\\146\\1')",
    "return cmsgpack.pack()",
    "local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end return {hex(struct.pack('>I2<i4bBhHlL', 258, -2, -1, 255, -2, 65535, -3, 4)), hex(struct.pack('>d f s c3 c0', 1.5, 1.5, 'ab', 'abcd', 'xy')), hex(struct.pack('!4 b i x>i', 1, 2, 7)), hex(struct.pack('>i >I >i', 2^31, -1, 1.7))}",
    "return {struct.unpack('>I2', '\\1\\2'), struct.unpack('<i4 b', '\\254\\255\\255\\255\\5')}",
    "return {struct.unpack('s', 'ab\\0cd')}",
    "return {struct.unpack('c2', 'abcd', 2)}",
    "return {struct.unpack('B c0', '\\3abcd')}",
    "return {struct.unpack('>i3', '\\255\\255\\254'), struct.size('>i2 d c3 b')}",
    "return struct.pack('z', 1)",
    "return struct.unpack('i4', ARGV[1])",
    "return {pcall(struct.unpack, 's', ARGV[1])}",
    "return struct.size('s')",
    "return struct.pack('i', ARGV[1])",
    "return struct.pack('c5', ARGV[1])",
    "return struct.unpack('c0', 'abc')",
    "return struct.unpack('b', 'a', 0)",
    "return struct.pack('!3 i', 1)",
    // Metatables: replies are read raw; globals and libraries stay read-only.
    "return setmetatable({1, 2}, {__index = function(t, k) return 'x' end})",
    "return setmetatable({}, {__index = {err = 'from metatable'}})",
    "return setmetatable({}, {__index = function() error('index ran') end})",
    "local t = setmetatable({}, {__newindex = function(t, k, v) rawset(t, k, v .. '!') end}) t[1] = ARGV[1] return t",
    "setmetatable(_G, nil) return 1",
    "return {pcall(setmetatable, _G, {})}",
    "return getmetatable(_G)",
    "rawset(_G, 'y', 1) return 1",
    "_G.x = 1",
    "string.x = 1",
    "cjson.x = 1",
    "return tostring(getmetatable('').__index == string)",
    // RESP3 shapes and redis.setresp.
    "return {double=3.5}",
    "return {double=ARGV[1]}",
    "return {double=0.1}",
    "return {map={a=1}}",
    "return {set={a=true}}",
    "return {big_number='123'}",
    "return {verbatim_string={format='txt', string=ARGV[1]}}",
    "redis.setresp(3) return {true, false, redis.call('get', 'nokey')}",
    "redis.setresp(3) return false",
    "redis.setresp(3) return type(redis.call('get', KEYS[1]))",
    "redis.setresp(2) return false",
    "redis.setresp(3) local t = redis.call('hgetall', KEYS[1]) return {type(t.map), t.map[ARGV[1]]}",
    "redis.setresp(3) return redis.call('hgetall', KEYS[1])",
    "redis.setresp(3) local s = redis.call('smembers', KEYS[1]) return {type(s.set), s.set['1'] == true}",
    "redis.setresp(3) local d = redis.call('zscore', KEYS[1], '1') return {type(d), type(d) == 'table' and tostring(d.double)}",
    "redis.setresp(3) local r = redis.call('zrange', KEYS[1], 0, -1, 'WITHSCORES') return {#r, r[1] and r[1][1], r[1] and tostring(r[1][2].double)}",
];

pub(super) fn pick(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(items).prop_map(str::to_owned)
}

/// Scores a sorted-set command may get, valid and not.
const SCORES: &[&str] = &["1", "2.5", "-inf", "+inf", "(1", "0x10", "x", "1e400"];
/// Integer members only: a real server lists a set of strings in a random hash order.
const MEMBERS: &[&str] = &["1", "2", "-3", "10"];

/// One set or sorted-set command, as arguments (SMEMBERS only on integer members).
fn collection_command() -> impl Strategy<Value = Vec<String>> {
    let key = || pick(KEYS);
    let member = || pick(MEMBERS);
    let score = || pick(SCORES);
    let with = |name: &str, rest: Vec<String>| {
        let mut c = vec![name.to_string()];
        c.extend(rest);
        c
    };
    prop_oneof![
        (key(), member(), member()).prop_map(move |(k, a, b)| with("SADD", vec![k, a, b])),
        (key(), member()).prop_map(move |(k, a)| with("SREM", vec![k, a])),
        (key(), member()).prop_map(move |(k, a)| with("SISMEMBER", vec![k, a])),
        key().prop_map(move |k| with("SMEMBERS", vec![k])),
        key().prop_map(move |k| with("SCARD", vec![k])),
        (
            key(),
            pick(&["", "NX", "XX", "GT", "LT", "CH", "INCR", "XX CH", "GT INCR"]),
            score(),
            member()
        )
            .prop_map(move |(k, opts, s, m)| {
                let mut c = with("ZADD", vec![k]);
                c.extend(opts.split_whitespace().map(str::to_owned));
                c.extend([s, m]);
                c
            }),
        (key(), score(), member()).prop_map(move |(k, s, m)| with("ZINCRBY", vec![k, s, m])),
        (key(), member()).prop_map(move |(k, m)| with("ZSCORE", vec![k, m])),
        (key(), member()).prop_map(move |(k, m)| with("ZREM", vec![k, m])),
        key().prop_map(move |k| with("ZCARD", vec![k])),
        (
            key(),
            pick(&[
                "0 -1",
                "1 2",
                "-inf +inf BYSCORE",
                "(1 +inf BYSCORE LIMIT 0 1",
                "+inf -inf BYSCORE REV",
                "0 -1 REV"
            ]),
            prop::bool::ANY
        )
            .prop_map(move |(k, range, scores)| {
                let mut c = with("ZRANGE", vec![k]);
                c.extend(range.split_whitespace().map(str::to_owned));
                if scores {
                    c.push("WITHSCORES".into());
                }
                c
            }),
        (key(), score(), score()).prop_map(move |(k, a, b)| with("ZRANGEBYSCORE", vec![k, a, b])),
        (key(), score(), score())
            .prop_map(move |(k, a, b)| with("ZREMRANGEBYSCORE", vec![k, a, b])),
    ]
}

/// One command, as arguments.
fn command() -> impl Strategy<Value = Vec<String>> {
    let key = || pick(KEYS);
    let val = || pick(VALUES);
    prop_oneof![
        key().prop_map(|k| vec!["GET".into(), k]),
        (key(), val()).prop_map(|(k, v)| vec!["SET".into(), k, v]),
        (
            key(),
            val(),
            pick(&["NX", "XX", "GET", "KEEPTTL", "PX", "EX"])
        )
            .prop_map(|(k, v, o)| vec!["SET".into(), k, v, o, "100000".into()]),
        (key(), val()).prop_map(|(k, v)| vec!["SETNX".into(), k, v]),
        (key(), val()).prop_map(|(k, v)| vec!["SETEX".into(), k, "1000".into(), v]),
        // Never a short expiry: the two sides' clocks differ by the round trip.
        (key(), pick(&["100000", "0", "-3", "x"]), val()).prop_map(|(k, ms, v)| vec![
            "PSETEX".into(),
            k,
            ms,
            v
        ]),
        (key(), key()).prop_map(|(a, b)| vec!["MGET".into(), a, b]),
        (key(), val(), key()).prop_map(|(a, v, b)| vec!["MSET".into(), a, v, b]),
        (key(), val(), key(), val()).prop_map(|(a, v, b, w)| vec!["MSET".into(), a, v, b, w]),
        key().prop_map(|k| vec!["DEL".into(), k]),
        key().prop_map(|k| vec!["INCR".into(), k]),
        (key(), val()).prop_map(|(k, v)| vec!["INCRBY".into(), k, v]),
        key().prop_map(|k| vec!["TYPE".into(), k]),
        key().prop_map(|k| vec!["EXISTS".into(), k]),
        (key(), val()).prop_map(|(k, f)| vec!["HSET".into(), k, f, "1".into()]),
        (key(), val()).prop_map(|(k, f)| vec!["HGET".into(), k, f]),
        (key(), val()).prop_map(|(k, f)| vec!["HINCRBY".into(), k, f, "2".into()]),
        key().prop_map(|k| vec!["HGETALL".into(), k]),
        (key(), val()).prop_map(|(k, v)| vec!["RPUSH".into(), k, v]),
        (key(), val(), val()).prop_map(|(k, v, w)| vec!["LPUSH".into(), k, v, w]),
        (key(), pick(&["", "0", "2", "-1"])).prop_map(|(k, n)| {
            let mut c = vec!["LPOP".into(), k];
            if !n.is_empty() {
                c.push(n);
            }
            c
        }),
        (key(), pick(&["0", "-2", "1"])).prop_map(|(k, s)| vec![
            "LRANGE".into(),
            k,
            s,
            "-1".into()
        ]),
        (key(), pick(&["0", "-1", "1"]), val()).prop_map(|(k, n, v)| vec!["LREM".into(), k, n, v]),
        key().prop_map(|k| vec!["LLEN".into(), k]),
        key().prop_map(|k| vec!["WATCH".into(), k]),
        Just(vec!["UNWATCH".into()]),
        Just(vec!["MULTI".into()]),
        Just(vec!["EXEC".into()]),
        Just(vec!["DISCARD".into()]),
        Just(vec!["GET".into()]),
        Just(vec!["HSET".into(), "h".into(), "f".into()]),
        (pick(&["nosuch", "GETT", "FOO"]), val()).prop_map(|(c, v)| vec![c, v]),
        (pick(SCRIPTS), key(), val()).prop_map(|(s, k, v)| vec![
            "EVAL".into(),
            s,
            "1".into(),
            k,
            v
        ]),
        (pick(SCRIPTS), prop::bool::ANY).prop_map(|(s, upper)| {
            let sha = sha1_smol::Sha1::from(&s).digest().to_string();
            let sha = if upper { sha.to_ascii_uppercase() } else { sha };
            vec!["EVALSHA".into(), sha, "1".into(), "k".into(), "v".into()]
        }),
        (pick(SCRIPTS), prop::bool::ANY).prop_map(|(s, upper)| {
            let sha = sha1_smol::Sha1::from(&s).digest().to_string();
            let sha = if upper { sha.to_ascii_uppercase() } else { sha };
            vec!["SCRIPT".into(), "EXISTS".into(), sha, "abc".into()]
        }),
        pick(SCRIPTS).prop_map(|s| vec!["SCRIPT".into(), "LOAD".into(), s]),
        Just(vec!["EVALSHA".into(), "abc".into(), "0".into()]),
        Just(vec![
            "EVAL".into(),
            "return 1".into(),
            "2".into(),
            "k".into()
        ]),
    ]
}

fn cases() -> u32 {
    std::env::var("LOCKCHECK_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

#[test]
fn random_sequences() {
    let d = RefCell::new(Diff::new());
    let mut runner = TestRunner::new(crate::common::fixed_seed_config(cases()));
    let any = prop_oneof![
        8 => command(),
        2 => collection_command(),
        2 => super::functions::function_command(),
        1 => super::functions::hello_command(),
    ];
    let outcome = runner.run(&prop::collection::vec(any, 1..16), |seq| {
        let mut d = d.borrow_mut();
        // A fresh start on both sides: no keys, no scripts, no open transaction or watch.
        for reset in [
            &["DISCARD"][..],
            &["UNWATCH"],
            &["FLUSHALL"],
            &["SCRIPT", "FLUSH"],
            &["FUNCTION", "FLUSH"],
            &["CLIENT", "SETNAME", ""],
        ] {
            let args: Vec<Vec<u8>> = reset.iter().map(|a| a.as_bytes().to_vec()).collect();
            d.real(&args);
        }
        d.engine = Engine::new(Role::Master);
        d.mismatches.clear();
        for cmd in &seq {
            let parts: Vec<&str> = cmd.iter().map(String::as_str).collect();
            d.same(&parts);
        }
        if d.mismatches.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(d.mismatches.join("\n  ")))
        }
    });
    if let Err(e) = outcome {
        panic!("the engine diverged from redis-server on a random sequence: {e}");
    }
}
