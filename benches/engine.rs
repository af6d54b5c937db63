//! Per-command cost of the simulated Redis engine's hot paths (the lock commands).
//! `cargo bench --bench engine` (release). Printed, never asserted.

use lockcheck::simredis::{Engine, Role};

fn master() -> Engine {
    Engine::new(Role::Master)
}

fn run(e: &mut Engine, now: u64, parts: &[&str]) -> redis::Value {
    let args: Vec<Vec<u8>> = parts.iter().map(|p| p.as_bytes().to_vec()).collect();
    e.execute(now, 1, &args).reply
}

fn sha1(s: &str) -> String {
    sha1_smol::Sha1::from(s).digest().to_string()
}

/// Per-command cost of the hot paths, printed, never asserted (timing depends on the machine).
/// Run with: cargo bench --bench engine
fn main() {
    use std::time::Instant;
    let n = 200_000usize;
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("lock:{i}").into_bytes()).collect();
    let release = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    let sha = sha1(release);
    let mut e = master();
    run(&mut e, 0, &["SCRIPT", "LOAD", release]);
    let per_op = |t: Instant| t.elapsed().as_nanos() as f64 / n as f64;

    // Acquire: every SET NX PX succeeds (a fresh key each time).
    let t = Instant::now();
    for k in &keys {
        let args = [
            b"SET".to_vec(),
            k.clone(),
            b"owner".to_vec(),
            b"NX".to_vec(),
            b"PX".to_vec(),
            b"10000".to_vec(),
        ];
        std::hint::black_box(e.execute(1000, 1, &args));
    }
    let set_ok = per_op(t);
    // Contended acquire: the key exists, SET NX fails.
    let t = Instant::now();
    for k in &keys {
        let args = [
            b"SET".to_vec(),
            k.clone(),
            b"other".to_vec(),
            b"NX".to_vec(),
            b"PX".to_vec(),
            b"10000".to_vec(),
        ];
        std::hint::black_box(e.execute(1000, 1, &args));
    }
    let set_busy = per_op(t);
    let evalsha = |e: &mut Engine, k: &Vec<u8>, owner: &[u8]| {
        let args = [
            b"EVALSHA".to_vec(),
            sha.as_bytes().to_vec(),
            b"1".to_vec(),
            k.clone(),
            owner.to_vec(),
        ];
        std::hint::black_box(e.execute(1000, 1, &args));
    };
    // Release by a non-owner: GET, compare, return 0.
    let t = Instant::now();
    for k in &keys {
        evalsha(&mut e, k, b"intruder");
    }
    let cad_foreign = per_op(t);
    // Release by the owner: GET, compare, DEL (and a replication effect).
    let t = Instant::now();
    for k in &keys {
        evalsha(&mut e, k, b"owner");
    }
    let cad_owner = per_op(t);
    // A lock-sized keyspace (1,000 keys): acquire then release, over and over.
    let small = &keys[..1000];
    let rounds = n / small.len();
    let (mut t_set, mut t_rel) = (0u128, 0u128);
    for _ in 0..rounds {
        let t = Instant::now();
        for k in small {
            let args = [
                b"SET".to_vec(),
                k.clone(),
                b"owner".to_vec(),
                b"NX".to_vec(),
                b"PX".to_vec(),
                b"10000".to_vec(),
            ];
            std::hint::black_box(e.execute(1000, 1, &args));
        }
        t_set += t.elapsed().as_nanos();
        let t = Instant::now();
        for k in small {
            evalsha(&mut e, k, b"owner");
        }
        t_rel += t.elapsed().as_nanos();
    }
    let small_set = t_set as f64 / n as f64;
    let small_rel = t_rel as f64 / n as f64;
    // What the loop itself costs (building the argument vectors).
    let t = Instant::now();
    for i in 0..n {
        let args = [
            b"SET".to_vec(),
            small[i % 1000].clone(),
            b"owner".to_vec(),
            b"NX".to_vec(),
            b"PX".to_vec(),
            b"10000".to_vec(),
        ];
        std::hint::black_box(&args);
    }
    let overhead = per_op(t);
    let t = Instant::now();
    for i in 0..n {
        let args = [b"GET".to_vec(), small[i % 1000].clone()];
        std::hint::black_box(e.execute(1000, 1, &args));
    }
    let get = per_op(t);
    println!("building the SET args alone:        {overhead:>6.0} ns/op");
    println!("1,000 keys: GET:                    {get:>6.0} ns/op");
    println!("1,000 keys: SET NX PX acquired:     {small_set:>6.0} ns/op");
    println!("1,000 keys: EVALSHA release, owner: {small_rel:>6.0} ns/op");
    println!("200,000 keys:");
    println!("SET k v NX PX 10000, acquired:      {set_ok:>6.0} ns/op");
    println!("SET k v NX PX 10000, key held:      {set_busy:>6.0} ns/op");
    println!("EVALSHA compare-and-delete, owner:  {cad_owner:>6.0} ns/op");
    println!("EVALSHA compare-and-delete, other:  {cad_foreign:>6.0} ns/op");
    assert_eq!(e.dbsize(1000), 0);
}
