//! The engine's native fenced write (`simredis::native`, what the storage node runs for every
//! critical section) against `fenced_write.lua` run in Lua, the script real mode runs: the same
//! replies and the same stored state for any sequence of writes, including the cases where the
//! native path must decline (a token or a stored highest token Lua reads differently, a key of
//! another type, a sequence at its maximum), and the native path is really taken otherwise.

use lockcheck::resource::{COUNTER_KEY, FENCED_WRITE, HIGHEST_TOKEN_KEY, SEQ_KEY};
use lockcheck::simredis::{Engine, Executed, Role};
use proptest::prelude::*;
use redis::Value;

const SCRIPT: &str = include_str!("../../src/resource/scripts/fenced_write.lua");

fn keys() -> Vec<Vec<u8>> {
    [COUNTER_KEY, HIGHEST_TOKEN_KEY, SEQ_KEY]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect()
}

fn cmd(e: &mut Engine, now_ms: u64, args: &[&[u8]]) -> Value {
    run(e, now_ms, args).reply
}

/// A command's reply and replication effects.
fn run(e: &mut Engine, now_ms: u64, args: &[&[u8]]) -> Executed {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    e.execute(now_ms, 1, &args)
}

/// The write as the storage client sends it: EVALSHA, then EVAL on NOSCRIPT (redis-rs's order).
fn write(e: &mut Engine, now_ms: u64, value: &[u8], token: &[u8]) -> Executed {
    let sha = FENCED_WRITE.get_hash().as_bytes().to_vec();
    let mut tail = vec![b"3".to_vec()];
    tail.extend(keys());
    tail.push(value.to_vec());
    tail.push(token.to_vec());
    let mut by_sha = vec![b"EVALSHA".to_vec(), sha];
    by_sha.extend(tail.iter().cloned());
    let first = e.execute(now_ms, 1, &by_sha);
    match &first.reply {
        Value::ServerError(err) if err.kind() == Some(redis::ServerErrorKind::NoScript) => {
            let mut by_body = vec![b"EVAL".to_vec(), SCRIPT.as_bytes().to_vec()];
            by_body.extend(tail);
            e.execute(now_ms, 1, &by_body)
        }
        _ => first,
    }
}

fn state(e: &mut Engine, now_ms: u64) -> Vec<Value> {
    keys()
        .iter()
        .flat_map(|k| {
            let kind = cmd(e, now_ms, &[b"TYPE", k]);
            let read: &[u8] = if kind == Value::SimpleString("hash".into()) {
                b"HGETALL"
            } else {
                b"GET"
            };
            [
                kind,
                cmd(e, now_ms, &[read, k]),
                cmd(e, now_ms, &[b"PTTL", k]),
            ]
        })
        .collect()
}

/// Two engines, one with the native path and one without.
fn engines() -> (Engine, Engine) {
    let native = Engine::new(Role::Master);
    let mut lua = Engine::new(Role::Master);
    lua.set_native_scripts(false);
    (native, lua)
}

#[test]
fn a_stale_token_is_refused_and_a_newer_one_accepted_natively() {
    let (mut native, mut lua) = engines();
    let mut replies = Vec::new();
    for (value, token) in [
        (&b"1"[..], &b"5"[..]),
        (b"2", b"3"),
        (b"3", b""),
        (b"4", b"12"),
    ] {
        let a = write(&mut lua, 0, value, token);
        let b = write(&mut native, 0, value, token);
        assert_eq!(a, b);
        replies.push(b.reply);
    }
    assert_eq!(
        replies,
        vec![Value::Int(1), Value::Int(0), Value::Int(2), Value::Int(3)]
    );
    assert_eq!(state(&mut lua, 0), state(&mut native, 0));
    assert_eq!(
        native.native_runs(),
        4,
        "every write, the first by EVAL after NOSCRIPT"
    );
    assert_eq!(lua.native_runs(), 0);
    assert!(
        !native.lua_host_built(),
        "the native script is cached without a Lua host"
    );
    assert!(lua.lua_host_built());
}

/// What can happen to the storage's keys between writes.
#[derive(Clone, Debug)]
enum Op {
    Write(Vec<u8>, Vec<u8>),
    SetHighest(Vec<u8>, Option<u64>),
    HashAt(usize),
    SetSeq(Vec<u8>),
    Flush,
    Tick(u64),
}

fn text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u64..60).prop_map(|n| n.to_string().into_bytes()),
        1 => Just(Vec::new()),
        1 => prop::sample::select(vec!["-3", "abc", "0x10", " 5", "1e3", "007", "9007199254740993", "nan", "inf"])
            .prop_map(|s| s.as_bytes().to_vec()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (text(), text()).prop_map(|(v, t)| Op::Write(v, t)),
        1 => (text(), prop::option::of(1u64..50)).prop_map(|(t, px)| Op::SetHighest(t, px)),
        1 => (0usize..3).prop_map(Op::HashAt),
        1 => prop::sample::select(vec!["7", "x", "9223372036854775807", "-2"])
            .prop_map(|s| Op::SetSeq(s.as_bytes().to_vec())),
        1 => Just(Op::Flush),
        1 => (1u64..40).prop_map(Op::Tick),
    ]
}

/// The op's reply and replication effects (none for a tick).
fn apply(e: &mut Engine, now: u64, op: &Op) -> Option<Executed> {
    let k = keys();
    Some(match op {
        Op::Write(v, t) => write(e, now, v, t),
        Op::SetHighest(t, None) => run(e, now, &[b"SET", &k[1], t]),
        Op::SetHighest(t, Some(px)) => run(
            e,
            now,
            &[b"SET", &k[1], t, b"PX", px.to_string().as_bytes()],
        ),
        Op::HashAt(i) => run(e, now, &[b"HSET", &k[*i], b"f", b"v"]),
        Op::SetSeq(s) => run(e, now, &[b"SET", &k[2], s]),
        Op::Flush => run(e, now, &[b"SCRIPT", b"FLUSH"]),
        Op::Tick(_) => return None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn native_and_script_agree(ops in prop::collection::vec(op(), 1..40)) {
        let (mut native, mut lua) = engines();
        let mut now = 0;
        for op in &ops {
            if let Op::Tick(ms) = op {
                now += ms;
            }
            let a = apply(&mut lua, now, op);
            let b = apply(&mut native, now, op);
            prop_assert_eq!(a, b, "after {:?}", op);
            prop_assert_eq!(state(&mut lua, now), state(&mut native, now));
        }
        prop_assert_eq!(lua.native_runs(), 0);
    }
}
