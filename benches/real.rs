//! Real-mode throughput next to a bare redis-rs loop doing the same commands, in one run.
//!
//! `cargo bench --bench real` (release; needs `redis-server`, spawned on free ports, never 6379).
//! For 1 and 16 clients contending for one `set-nx-px` lock with no hold, think or retry pause:
//! - lockcheck: `real::world::run` of the no-fault scenario (its own lock and storage servers);
//!   cycles are the accepted storage writes, timed from the first to the last recorded event;
//! - bare: the same per-cycle commands straight through redis-rs (`SET NX PX` on the lock server,
//!   `GET` + the fenced-write `EVALSHA` on the storage server, the compare-and-delete `EVALSHA`),
//!   each client retrying `SET NX` at once when the lock is taken;
//!
//! and prints lockcheck / bare.

use lockcheck::history::EventKind;
use lockcheck::real::{RedisServer, ServerOptions};
use lockcheck::resource::{COUNTER_KEY, FENCED_WRITE, HIGHEST_TOKEN_KEY, SEQ_KEY};
use lockcheck::scenario::Scenario;
use std::path::Path;
use std::time::Instant;

const RELEASE: &str = include_str!("../src/lock/scripts/compare_and_delete.lua");

/// lockcheck's real-mode cycles per second with `clients` clients doing `cycles` cycles each.
fn lockcheck_rate(clients: u32, cycles: u32) -> (f64, u64) {
    let mut s = Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/set-nx-px-no-faults.toml"),
    )
    .unwrap();
    s.redis.replicas = 0;
    s.workload.clients = clients;
    s.workload.cycles = cycles;
    s.workload.hold_ms = [0, 0];
    s.workload.think_ms = [0, 0];
    s.lock.retry_ms = [0, 0];
    s.duration_ms = 600_000;
    let history = lockcheck::real::world::run(&s, 1).unwrap();
    let writes = history
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ResourceWrite { accepted: true, .. }))
        .count() as u64;
    let first = history.events.first().map_or(0, |e| e.at_us);
    let last = history.events.last().map_or(0, |e| e.at_us);
    (writes as f64 / ((last - first) as f64 / 1e6), writes)
}

/// The same commands through bare redis-rs: cycles per second.
fn bare_rate(clients: u32, cycles: u32) -> f64 {
    let lock = RedisServer::spawn(ServerOptions::default()).unwrap();
    let storage = RedisServer::spawn(ServerOptions::default()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let release = redis::Script::new(RELEASE);
        let mut conns = Vec::new();
        for _ in 0..clients {
            let l = redis::Client::open(lock.url())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let s = redis::Client::open(storage.url())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            conns.push((l, s));
        }
        let started = Instant::now();
        let tasks: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(c, (mut l, mut s))| {
                let release = release.clone();
                tokio::spawn(async move {
                    for i in 0..cycles {
                        let owner = format!("{c}-{i}");
                        loop {
                            let ok: Option<String> = redis::cmd("SET")
                                .arg("lock")
                                .arg(&owner)
                                .arg("NX")
                                .arg("PX")
                                .arg(10_000)
                                .query_async(&mut l)
                                .await
                                .unwrap();
                            if ok.is_some() {
                                break;
                            }
                        }
                        let read: Option<u64> = redis::cmd("GET")
                            .arg(COUNTER_KEY)
                            .query_async(&mut s)
                            .await
                            .unwrap();
                        let _: u64 = FENCED_WRITE
                            .key(COUNTER_KEY)
                            .key(HIGHEST_TOKEN_KEY)
                            .key(SEQ_KEY)
                            .arg(read.unwrap_or(0) + 1)
                            .arg("")
                            .invoke_async(&mut s)
                            .await
                            .unwrap();
                        let _: u64 = release
                            .key("lock")
                            .arg(&owner)
                            .invoke_async(&mut l)
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        (clients * cycles) as f64 / started.elapsed().as_secs_f64()
    })
}

fn main() {
    println!("lockcheck real-mode benchmark (set-nx-px, no hold/think/retry pause)");
    for (clients, cycles) in [(1u32, 3_000u32), (16, 300)] {
        let bare = bare_rate(clients, cycles);
        let (ours, writes) = lockcheck_rate(clients, cycles);
        println!(
            "  {clients:>2} client(s): lockcheck {ours:>8.0} cycles/s ({writes} cycles)   bare redis-rs {bare:>8.0} cycles/s   ratio {:.2}",
            ours / bare
        );
    }
}
