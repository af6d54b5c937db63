//! The storage node's native fenced write against `fenced_write.lua`, the script real mode runs:
//! the same replies and the same stored state for any sequence of writes.

use lockcheck::resource::{COUNTER_KEY, HIGHEST_TOKEN_KEY, SEQ_KEY};
use lockcheck::sim::storage::fenced_write;
use lockcheck::simredis::{Engine, Role};
use proptest::prelude::*;
use redis::Value;

const SCRIPT: &str = include_str!("../../src/resource/scripts/fenced_write.lua");

fn keys() -> Vec<Vec<u8>> {
    [COUNTER_KEY, HIGHEST_TOKEN_KEY, SEQ_KEY]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect()
}

fn by_script(e: &mut Engine, value: &[u8], token: &[u8]) -> Value {
    let mut args = vec![b"EVAL".to_vec(), SCRIPT.as_bytes().to_vec(), b"3".to_vec()];
    args.extend(keys());
    args.push(value.to_vec());
    args.push(token.to_vec());
    e.execute(0, 1, &args).reply
}

fn state(e: &mut Engine) -> Vec<Value> {
    keys()
        .into_iter()
        .map(|k| e.execute(0, 1, &[b"GET".to_vec(), k]).reply)
        .collect()
}

fn token_bytes(t: Option<u64>) -> Vec<u8> {
    t.map(|t| t.to_string().into_bytes()).unwrap_or_default()
}

#[test]
fn a_stale_token_is_refused_and_a_newer_one_accepted_by_both() {
    let mut lua = Engine::new(Role::Master);
    let mut native = Engine::new(Role::Master);
    let mut replies = Vec::new();
    for (value, token) in [
        (b"1", Some(5)),
        (b"2", Some(3)),
        (b"3", None),
        (b"4", Some(12)),
    ] {
        let t = token_bytes(token);
        let a = by_script(&mut lua, value, &t);
        let b = fenced_write(&mut native, 1, &keys(), value, &t);
        assert_eq!(a, b);
        replies.push(b);
    }
    assert_eq!(
        replies,
        vec![Value::Int(1), Value::Int(0), Value::Int(2), Value::Int(3)]
    );
    assert_eq!(state(&mut lua), state(&mut native));
}

proptest! {
    #[test]
    fn native_and_script_agree(writes in prop::collection::vec((0u64..1000, prop::option::of(0u64..50)), 1..40)) {
        let mut lua = Engine::new(Role::Master);
        let mut native = Engine::new(Role::Master);
        for (value, token) in writes {
            let v = value.to_string().into_bytes();
            let t = token_bytes(token);
            let a = by_script(&mut lua, &v, &t);
            let b = fenced_write(&mut native, 1, &keys(), &v, &t);
            prop_assert_eq!(a, b);
        }
        prop_assert_eq!(state(&mut lua), state(&mut native));
    }
}
