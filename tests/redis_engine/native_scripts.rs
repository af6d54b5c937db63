//! The engine's native compare-and-delete (`simredis::native`) against the same script run in
//! Lua: for any sequence of commands (writes of every kind, expiries, a key of another type, a
//! flushed script cache, transactions, a demoted node) both engines give the same replies,
//! replication effects and data, and the native path is really taken.

use lockcheck::simredis::{Engine, Executed, Role};
use proptest::prelude::*;
use redis::Value;

const SCRIPT: &str = include_str!("../../src/lock/scripts/compare_and_delete.lua");

fn sha() -> String {
    redis::Script::new(SCRIPT).get_hash().to_string()
}

#[derive(Clone, Debug)]
enum Op {
    Set(usize, u8, Option<u64>),
    HSet(usize, u8),
    Del(usize),
    Release(usize, u8),
    ReleaseByEval(usize, u8),
    ReleaseTwoKeys(usize, u8),
    ReleaseUppercaseSha(usize, u8),
    Load,
    Flush,
    Multi,
    Exec,
    Watch(usize),
    Role(bool),
    Tick(u64),
}

const KEYS: [&str; 2] = ["lock", "other"];

fn token(t: u8) -> String {
    format!("owner-{t}")
}

fn argv(op: &Op) -> Option<Vec<String>> {
    let (sha, script) = (sha(), SCRIPT.to_string());
    let parts: Vec<String> = match op {
        Op::Set(k, t, None) => vec!["SET".into(), KEYS[*k].into(), token(*t), "NX".into()],
        Op::Set(k, t, Some(px)) => vec![
            "SET".into(),
            KEYS[*k].into(),
            token(*t),
            "PX".into(),
            px.to_string(),
        ],
        Op::HSet(k, t) => vec!["HSET".into(), KEYS[*k].into(), token(*t), "1".into()],
        Op::Del(k) => vec!["DEL".into(), KEYS[*k].into()],
        Op::Release(k, t) => vec![
            "EVALSHA".into(),
            sha,
            "1".into(),
            KEYS[*k].into(),
            token(*t),
        ],
        Op::ReleaseByEval(k, t) => {
            vec![
                "EVAL".into(),
                script,
                "1".into(),
                KEYS[*k].into(),
                token(*t),
            ]
        }
        Op::ReleaseTwoKeys(k, t) => vec![
            "EVALSHA".into(),
            sha,
            "2".into(),
            KEYS[*k].into(),
            "x".into(),
            token(*t),
        ],
        Op::ReleaseUppercaseSha(k, t) => vec![
            "EVALSHA".into(),
            sha.to_uppercase(),
            "1".into(),
            KEYS[*k].into(),
            token(*t),
        ],
        Op::Load => vec!["SCRIPT".into(), "LOAD".into(), script],
        Op::Flush => vec!["SCRIPT".into(), "FLUSH".into()],
        Op::Multi => vec!["MULTI".into()],
        Op::Exec => vec!["EXEC".into()],
        Op::Watch(k) => vec!["WATCH".into(), KEYS[*k].into()],
        Op::Role(_) | Op::Tick(_) => return None,
    };
    Some(parts)
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0usize..2;
    let t = 0u8..3;
    prop_oneof![
        (k.clone(), t.clone(), prop::option::of(1u64..30)).prop_map(|(k, t, px)| Op::Set(k, t, px)),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::HSet(k, t)),
        k.clone().prop_map(Op::Del),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::Release(k, t)),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::Release(k, t)),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::ReleaseByEval(k, t)),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::ReleaseTwoKeys(k, t)),
        (k.clone(), t.clone()).prop_map(|(k, t)| Op::ReleaseUppercaseSha(k, t)),
        Just(Op::Load),
        Just(Op::Flush),
        Just(Op::Multi),
        Just(Op::Exec),
        k.prop_map(Op::Watch),
        any::<bool>().prop_map(Op::Role),
        (0u64..20).prop_map(Op::Tick),
    ]
}

/// Applies `ops` to a native engine and a Lua-only one, checking each outcome; returns how many
/// script calls ran natively.
fn agree(ops: &[Op]) -> Result<u64, TestCaseError> {
    let mut native = Engine::new(Role::Master);
    let mut lua = Engine::new(Role::Master);
    lua.set_native_scripts(false);
    let mut now = 1_000u64;
    for op in ops {
        match op {
            Op::Role(master) => {
                let role = if *master { Role::Master } else { Role::Replica };
                native.set_role(role);
                lua.set_role(role);
            }
            Op::Tick(ms) => now += ms,
            _ => {
                let args: Vec<Vec<u8>> = argv(op)
                    .expect("a command")
                    .into_iter()
                    .map(String::into_bytes)
                    .collect();
                let a: Executed = native.execute(now, 1, &args);
                let b: Executed = lua.execute(now, 1, &args);
                prop_assert_eq!(&a, &b, "after {:?}", op);
            }
        }
    }
    for key in KEYS {
        let probe = |e: &mut Engine, cmd: &str| {
            e.set_role(Role::Master);
            e.execute(now, 2, &[cmd.as_bytes().to_vec(), key.as_bytes().to_vec()])
        };
        for cmd in ["TYPE", "PTTL", "GET", "HGETALL"] {
            prop_assert_eq!(probe(&mut native, cmd), probe(&mut lua, cmd));
        }
    }
    prop_assert_eq!(lua.native_runs(), 0);
    Ok(native.native_runs())
}

#[test]
fn native_release_matches_lua_on_a_lock_cycle() {
    use Op::*;
    let runs = agree(&[
        Load,
        Set(0, 1, Some(10)),
        Release(0, 2),
        Release(0, 1),
        Set(0, 1, Some(10)),
        Tick(11),
        Release(0, 1),
        HSet(0, 1),
        Release(0, 1),
        Role(false),
        Release(0, 1),
    ])
    .unwrap();
    // The two releases of a string or a missing key on a master ran natively; the hash and the
    // replica cases went to Lua.
    assert_eq!(runs, 3);
}

#[test]
fn the_native_path_answers_like_lua() {
    let mut e = Engine::new(Role::Master);
    let args = |v: &[&str]| v.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
    let sha = sha();
    e.execute(0, 1, &args(&["SCRIPT", "LOAD", SCRIPT]));
    e.execute(0, 1, &args(&["SET", "lock", "me", "PX", "100"]));
    let other = e.execute(0, 1, &args(&["EVALSHA", &sha, "1", "lock", "you"]));
    assert_eq!((other.reply, other.effects), (Value::Int(0), vec![]));
    let mine = e.execute(0, 1, &args(&["EVALSHA", &sha, "1", "lock", "me"]));
    assert_eq!(mine.reply, Value::Int(1));
    assert_eq!(mine.effects, vec![args(&["del", "lock"])]);
    assert_eq!(e.native_runs(), 2);
}

/// The engine caches a native script's body without compiling it (no Lua host is built for the
/// scripts every lock cycle runs), trusting that it compiles: each one does, in Lua, and runs
/// there when the native path declines after it was cached uncompiled.
#[test]
fn every_native_script_compiles_and_runs_in_lua_when_declined() {
    let args = |v: &[&str]| v.iter().map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
    for body in [
        SCRIPT,
        include_str!("../../src/resource/scripts/fenced_write.lua"),
    ] {
        let sha = redis::Script::new(body).get_hash().to_string();
        let mut lua = Engine::new(Role::Master);
        lua.set_native_scripts(false);
        let loaded = lua.execute(0, 1, &args(&["SCRIPT", "LOAD", body]));
        assert_eq!(loaded.reply, Value::BulkString(sha.clone().into_bytes()));

        let mut native = Engine::new(Role::Master);
        native.execute(0, 1, &args(&["SCRIPT", "LOAD", body]));
        assert!(!native.lua_host_built(), "cached without Lua");
        // A key of another type under KEYS[1] (and KEYS[3]): the native path declines.
        native.execute(0, 1, &args(&["HSET", "a", "f", "v"]));
        native.execute(0, 1, &args(&["HSET", "c", "f", "v"]));
        let declined = native.execute(
            0,
            1,
            &args(&["EVALSHA", &sha, "3", "a", "b", "c", "1", "2"]),
        );
        assert!(native.lua_host_built(), "compiled when first needed");
        assert!(
            matches!(&declined.reply, Value::ServerError(e) if e.code() != "NOSCRIPT"),
            "Lua's own error: {:?}",
            declined.reply
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn native_and_lua_agree(ops in prop::collection::vec(op(), 1..40)) {
        agree(&ops)?;
    }
}
