//! Redis Functions and HELLO in the random sequences: libraries that load, replace, collide
//! and fail (every FUNCTION LOAD error path), FCALL and FCALL_RO of their functions, FUNCTION
//! DELETE, FLUSH and LIST (filtered to at most one library: a real server lists libraries in
//! hash order), and HELLO with its options.

use super::random::pick;
use proptest::prelude::*;

/// Library payloads: valid ones (each listable library registers one function, so FUNCTION
/// LIST's order is Redis's too), a replacement, a colliding function, and every load error.
pub const LIBRARIES: &[&str] = &[
    "#!lua name=liba\nredis.register_function('seta', function(keys, args) return redis.call('set', keys[1], args[1]) end)",
    "#!lua name=liba\nredis.register_function{function_name='geta', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}",
    "#!lua name=libb\nredis.register_function('incrb', function(keys, args) return redis.call('incr', keys[1]) end)",
    "#!lua name=libc\nredis.register_function('SETA', function() return 1 end)",
    "#!LUA   name=ro_lib\nredis.register_function{function_name='rw', callback=function(keys) return redis.call('del', keys[1]) end, flags={'NO-WRITES', 'allow-stale'}}",
    "#!lua name=libr\nlocal n = 0\nredis.register_function('ret', function(keys, args) n = n + 1 return {keys[1], args[1], #keys, #args, n} end)",
    "#!lua name=libe\nredis.register_function('boom', function() error('boom') end)",
    "#!lua name=libg\nredis.register_function('kglob', function() return KEYS[1] end)",
    "#!lua name=libp\nredis.register_function('pc', function(keys) return {redis.pcall('incr', keys[1]), pcall(redis.call, 'nosuch')} end)",
    "return 1",
    "#!lua",
    "#!lua\nreturn 1",
    "#!lua name=x foo=bar\nreturn 1",
    "#!lua name=x name=y\nreturn 1",
    "#!lua name=a-b\nreturn 1",
    "#!js name=bad\nreturn 1",
    "#!lua name=bad\nlocal x = 1",
    "#!lua name=bad\nreturn +",
    "#!lua name=bad\nlocal n = string.len('a')",
    "#!lua name=bad\nredis.call('get', 'k')",
    "#!lua name=bad\nx = 1",
    "#!lua name=bad\nredis.register_function('f')",
    "#!lua name=bad\nredis.register_function('f', 1)",
    "#!lua name=bad\nredis.register_function('f-x', function() end)",
    "#!lua name=bad\nredis.register_function(1, 2, 3)",
    "#!lua name=bad\nredis.register_function{function_name='f', callback=function() end, flags={'bogus'}}",
    "#!lua name=bad\nredis.register_function{function_name='f', callback=function() end, foo=1}",
    "#!lua name=bad\nredis.register_function{callback=function() end}",
    "#!lua name=bad\nredis.register_function{function_name='f'}",
    "#!lua name=bad\nredis.register_function{function_name='f', callback=function() end, flags='no-writes'}",
    // Not here: one library registering 'f' and 'F' crashes redis-server 7.0.15 (assertion
    // at functions.c:291); tests/redis_engine/functions.rs pins what the simulator does instead.
    "#!lua name=bad\nlocal t = nil\nt.x = 1",
];

/// Function names the sequences call: registered ones in other spellings, and unknown ones.
const FUNCTIONS: &[&str] = &[
    "seta", "SETA", "geta", "incrb", "rw", "ret", "boom", "kglob", "pc", "nosuch",
];
const NUMKEYS: &[&str] = &["0", "1", "1", "2", "3", "-1", "x"];
const KEYS: &[&str] = &["k", "h", "n"];
const LIBRARY_NAMES: &[&str] = &["liba", "libb", "LIBA", "ro_lib", "nosuch"];
/// FUNCTION LIST filters: each matches at most one library.
const PATTERNS: &[&str] = &["liba", "LIBA", "ro*", "lib[b]", "libr", "nomatch"];

/// One FUNCTION or FCALL command, as arguments.
pub fn function_command() -> impl Strategy<Value = Vec<String>> {
    let with = |parts: &[&str], rest: Vec<String>| {
        let mut c: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
        c.extend(rest);
        c
    };
    prop_oneof![
        4 => (pick(LIBRARIES), prop::bool::ANY).prop_map(move |(lib, replace)| {
            if replace {
                with(&["FUNCTION", "LOAD", "REPLACE"], vec![lib])
            } else {
                with(&["FUNCTION", "LOAD"], vec![lib])
            }
        }),
        6 => (
            pick(&["FCALL", "FCALL_RO", "fcall"]),
            pick(FUNCTIONS),
            pick(NUMKEYS),
            pick(KEYS),
            pick(&["v", "1"])
        )
            .prop_map(|(cmd, f, n, k, v)| vec![cmd, f, n, k, v]),
        1 => pick(LIBRARY_NAMES).prop_map(move |l| with(&["FUNCTION", "DELETE"], vec![l])),
        1 => pick(&["", "SYNC", "ASYNC", "x", "SYNC x"]).prop_map(move |m| {
            with(&["FUNCTION", "FLUSH"], m.split_whitespace().map(str::to_owned).collect())
        }),
        2 => (pick(PATTERNS), pick(&["", "WITHCODE", "WITHCODE WITHCODE", "FOO"])).prop_map(
            move |(p, extra)| {
                let mut c = with(&["FUNCTION", "LIST", "LIBRARYNAME"], vec![p]);
                c.extend(extra.split_whitespace().map(str::to_owned));
                c
            }
        ),
        1 => pick(&[
            "FUNCTION LIST LIBRARYNAME",
            "FUNCTION STATS",
            "FUNCTION KILL",
            "FUNCTION NOPE",
            "FUNCTION",
            "FUNCTION DELETE",
            "FUNCTION LOAD",
            "FUNCTION LOAD REPLACE",
            "FUNCTION LOAD a b",
            "FCALL seta",
        ])
        .prop_map(|c| c.split(' ').map(str::to_owned).collect()),
        1 => Just(vec![
            "EVAL".to_string(),
            "return redis.call('fcall', 'seta', '0')".to_string(),
            "0".to_string(),
        ]),
    ]
}

/// HELLO as a RESP2 client may send it (never `HELLO 3`: the simulated server refuses RESP3,
/// see `clients::ClientNames::hello`).
pub fn hello_command() -> impl Strategy<Value = Vec<String>> {
    pick(&[
        "HELLO",
        "HELLO 2",
        "HELLO 2 SETNAME lk",
        "HELLO 2 SETNAME a\u{1}b",
        "HELLO 2 AUTH default pw",
        "HELLO 2 AUTH someone pw",
        "HELLO 2 AUTH default",
        "HELLO 2 SETNAME",
        "HELLO 2 FOO",
        "HELLO 1",
        "HELLO 4",
        "HELLO x",
        "HELLO 02",
        "CLIENT GETNAME",
    ])
    .prop_map(|c| c.split(' ').map(str::to_owned).collect())
}
