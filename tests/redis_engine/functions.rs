//! Redis Functions as data of a replicated server, and HELLO's fields, on the engine alone:
//! what the differential test cannot show with one real server (replicas, restarts, roles).

use lockcheck::simredis::{Engine, Role};
use redis::Value;

fn args(s: &[&str]) -> Vec<Vec<u8>> {
    s.iter().map(|a| a.as_bytes().to_vec()).collect()
}

const LIB: &str = "#!lua name=locks\n\
redis.register_function('acquire', function(keys, args) return redis.call('set', keys[1], args[1], 'NX', 'PX', 1000) end)\n\
redis.register_function{function_name='holder', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";

fn err_text(v: &Value) -> String {
    lockcheck::simredis::error_text(v).unwrap_or_else(|| format!("not an error: {v:?}"))
}

/// A master and a replica fed with the master's effects, as the simulated cluster does.
fn pair() -> (Engine, Engine) {
    (Engine::new(Role::Master), Engine::new(Role::Replica))
}

#[test]
fn a_loaded_library_replicates_and_runs_on_a_promoted_replica() {
    let (mut master, mut replica) = pair();
    let out = master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", LIB]));
    assert_eq!(out.reply, Value::BulkString(b"locks".to_vec()));
    assert_eq!(out.effects, vec![args(&["FUNCTION", "LOAD", LIB])]);
    replica.apply_replicated(1_000, &out.effects);
    assert!(replica.function_exists("ACQUIRE"));

    // FCALL replicates its writes, not itself.
    let out = master.execute(1_000, 1, &args(&["FCALL", "acquire", "1", "lock", "me"]));
    assert_eq!(out.reply, Value::Okay);
    assert_eq!(
        out.effects,
        vec![args(&["SET", "lock", "me", "PXAT", "2000"])]
    );
    replica.apply_replicated(1_000, &out.effects);

    // A read-only function runs on the replica; a writing one, or FUNCTION LOAD, does not.
    let read = replica.execute(1_100, 2, &args(&["FCALL_RO", "holder", "1", "lock"]));
    assert_eq!(read.reply, Value::BulkString(b"me".to_vec()));
    let write = replica.execute(1_100, 2, &args(&["FCALL", "acquire", "1", "lock", "you"]));
    assert_eq!(
        err_text(&write.reply),
        "READONLY You can't write against a read only replica."
    );
    let load = replica.execute(1_100, 2, &args(&["FUNCTION", "LOAD", LIB]));
    assert_eq!(
        err_text(&load.reply),
        "READONLY You can't write against a read only replica."
    );

    // Promoted, it still has the library and may write through it.
    replica.set_role(Role::Master);
    let out = replica.execute(2_500, 2, &args(&["FCALL", "acquire", "1", "lock", "you"]));
    assert_eq!(out.reply, Value::Okay);
}

#[test]
fn delete_and_flush_replicate_and_a_restarted_master_has_no_functions() {
    let (mut master, mut replica) = pair();
    let load = master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", LIB]));
    replica.apply_replicated(1_000, &load.effects);
    let del = master.execute(1_000, 1, &args(&["FUNCTION", "DELETE", "locks"]));
    assert_eq!(del.reply, Value::Okay);
    assert_eq!(del.effects, vec![args(&["FUNCTION", "DELETE", "locks"])]);
    replica.apply_replicated(1_000, &del.effects);
    assert!(!replica.function_exists("acquire"));

    let load = master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", LIB]));
    replica.apply_replicated(1_000, &load.effects);
    let flush = master.execute(1_000, 1, &args(&["FUNCTION", "FLUSH", "ASYNC"]));
    assert_eq!(flush.effects, vec![args(&["FUNCTION", "FLUSH", "ASYNC"])]);
    replica.apply_replicated(1_000, &flush.effects);
    assert!(!replica.function_exists("holder"));

    // FLUSHALL and SCRIPT FLUSH leave libraries alone; a restart without persistence does not.
    master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", LIB]));
    master.execute(1_000, 1, &args(&["FLUSHALL"]));
    master.execute(1_000, 1, &args(&["SCRIPT", "FLUSH"]));
    assert!(master.function_exists("acquire"));
    let mut restarted = Engine::new(Role::Master);
    let out = restarted.execute(1_000, 1, &args(&["FCALL", "acquire", "1", "lock", "me"]));
    assert_eq!(err_text(&out.reply), "ERR Function not found");
}

#[test]
fn a_failed_load_changes_nothing_and_replicates_nothing() {
    let mut master = Engine::new(Role::Master);
    master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", LIB]));
    let bad = "#!lua name=locks\nredis.register_function('other', function() return 1 end)\nlocal t = nil\nt.x = 1";
    let out = master.execute(1_000, 1, &args(&["FUNCTION", "LOAD", "REPLACE", bad]));
    assert_eq!(
        err_text(&out.reply),
        "ERR Error registering functions: ERR user_function:4: attempt to index local 't' (a nil value)"
    );
    assert!(out.effects.is_empty());
    assert!(master.function_exists("acquire"));
    assert!(!master.function_exists("other"));
}

#[test]
fn a_function_error_names_the_function_and_its_line() {
    let mut e = Engine::new(Role::Master);
    let lib = "#!lua name=l\n\nredis.register_function('Boom', function(keys) return redis.call('incr', keys[1]) end)";
    e.execute(1_000, 1, &args(&["FUNCTION", "LOAD", lib]));
    e.execute(1_000, 1, &args(&["SET", "k", "x"]));
    let out = e.execute(1_000, 1, &args(&["FCALL", "boom", "1", "k"]));
    assert_eq!(
        err_text(&out.reply),
        "ERR value is not an integer or out of range script: Boom, on @user_function:3."
    );
}

#[test]
fn hello_answers_redis_fields_with_this_connection_and_role() {
    let hello = |e: &mut Engine, client, a: &[&str]| e.execute(1_000, client, &args(a)).reply;
    let field = |v: &Value, name: &str| match v {
        Value::Array(items) => items
            .chunks(2)
            .find(|kv| kv[0] == Value::BulkString(name.as_bytes().to_vec()))
            .map(|kv| kv[1].clone()),
        _ => None,
    };
    let mut master = Engine::new(Role::Master);
    let v = hello(&mut master, 7, &["HELLO", "2", "SETNAME", "lk"]);
    assert_eq!(field(&v, "id"), Some(Value::Int(7)));
    assert_eq!(
        field(&v, "role"),
        Some(Value::BulkString(b"master".to_vec()))
    );
    assert_eq!(
        field(&v, "version"),
        Some(Value::BulkString(b"7.0.15".to_vec()))
    );
    assert_eq!(
        hello(&mut master, 7, &["CLIENT", "GETNAME"]),
        Value::BulkString(b"lk".to_vec())
    );
    let mut replica = Engine::new(Role::Replica);
    let v = hello(&mut replica, 3, &["HELLO"]);
    assert_eq!(
        field(&v, "role"),
        Some(Value::BulkString(b"replica".to_vec()))
    );
    // RESP3 is refused (a real 7.0.15 accepts it): see ClientNames::hello for why.
    assert_eq!(
        err_text(&hello(&mut master, 7, &["HELLO", "3"])),
        "NOPROTO unsupported protocol version"
    );
}

#[test]
fn names_differing_only_in_case_are_refused_where_redis_7_0_15_crashes() {
    let mut e = Engine::new(Role::Master);
    let lib = "#!lua name=l\nredis.register_function('f', function() return 1 end)\nredis.register_function('F', function() return 2 end)";
    let out = e.execute(1_000, 1, &args(&["FUNCTION", "LOAD", lib]));
    assert_eq!(
        err_text(&out.reply),
        "ERR Error registering functions: ERR Function already exists in the library"
    );
    assert!(!e.function_exists("f"));
}
