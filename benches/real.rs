//! Real-mode throughput next to a bare redis-rs loop doing the same commands, in one run.
//!
//! `cargo bench --bench real` (release; needs `redis-server`, spawned on free ports, never 6379).
//! For 1 and 16 clients contending for one `set-nx-px` lock with no hold, think or retry pause:
//! - lockcheck: `Registry::run_real` of the no-fault scenario (its own lock and storage servers);
//!   cycles are the accepted storage writes, timed from the first to the last client event;
//! - bare: the same per-cycle commands straight through redis-rs (`SET NX PX` on the lock server,
//!   `GET` + the fenced-write `EVALSHA` on the storage server, the compare-and-delete `EVALSHA`),
//!   each client retrying `SET NX` at once when the lock is taken;
//!
//! - bare + MONITOR: the bare loop while a thread follows the lock server's `MONITOR` stream, as
//!   lockcheck's witness of the lock entry does in real mode (`real::witness`);
//!
//! - lockcheck again with `LOCKCHECK_WITNESS=off` (no `MONITOR`);
//!
//! and prints lockcheck without the witness / bare, and lockcheck with it / (bare + MONITOR).

use lockcheck::history::EventKind;
use lockcheck::real::{RedisServer, ServerOptions};
use lockcheck::resource::{COUNTER_KEY, FENCED_WRITE, HIGHEST_TOKEN_KEY, SEQ_KEY};
use lockcheck::scenario::Scenario;
use std::path::Path;
use std::time::Instant;

const RELEASE: &str = include_str!("../src/lock/scripts/compare_and_delete.lua");

/// lockcheck's real-mode cycles per second with `clients` clients doing `cycles` cycles each;
/// `witness`: whether the `MONITOR` witness of the lock entry runs (`LOCKCHECK_WITNESS`).
fn lockcheck_rate(clients: u32, cycles: u32, witness: bool) -> (f64, u64) {
    // Read once per run, in this thread, before any client starts.
    if witness {
        std::env::remove_var("LOCKCHECK_WITNESS");
    } else {
        std::env::set_var("LOCKCHECK_WITNESS", "off");
    }
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
    let history = lockcheck::Registry::new().run_real(&s, 1).unwrap();
    let watched = history
        .events
        .iter()
        .any(|e| matches!(e.kind, EventKind::LockEntriesWatched { .. }));
    assert_eq!(
        watched, witness,
        "the witness vouched for the run iff it ran"
    );
    let writes = history
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ResourceWrite { accepted: true, .. }))
        .count() as u64;
    // From the first client event to the last: the bare loop's clock also runs only while its
    // clients work. The history's own last event comes later: the witness vouches for the run
    // (`LockEntriesWatched`) only after the world has waited for its clients (a 20 ms poll),
    // read the final state and had every server echo an end marker, tens of milliseconds that
    // made a 1,000-cycle run look up to a sixth slower than its clients were.
    let clients = || history.events.iter().filter(|e| e.client().is_some());
    let first = clients().next().map_or(0, |e| e.at_us);
    let last = clients().next_back().map_or(0, |e| e.at_us);
    (writes as f64 / ((last - first) as f64 / 1e6), writes)
}

/// The same commands through bare redis-rs: cycles per second. With `monitor`, a thread follows
/// the lock server's `MONITOR` stream as lockcheck's witness does (`real::witness`), reading and
/// splitting its lines, so its cost can be told apart from the client path's.
fn bare_rate(clients: u32, cycles: u32, monitor: bool) -> f64 {
    let lock = RedisServer::spawn(ServerOptions::default()).unwrap();
    let storage = RedisServer::spawn(ServerOptions::default()).unwrap();
    let follower = monitor.then(|| {
        use std::io::{BufRead, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", lock.port())).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut ok = String::new();
        reader.read_line(&mut ok).unwrap();
        assert_eq!(ok.trim_end(), "+OK");
        std::thread::spawn(move || {
            let mut lines = 0u64;
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                lines += line.split(|&b| b == b' ').count() as u64;
                line.clear();
            }
            lines
        })
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rate = rt.block_on(async {
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
    });
    drop(lock);
    if let Some(f) = follower {
        let _ = f.join();
    }
    rate
}

/// The median of `xs`.
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    // The machine may be shared (other builds): the three loops take turns, five rounds each,
    // and each figure is the median of its rounds, so a burst of other load hits all of them.
    const ROUNDS: usize = 5;
    println!("lockcheck real-mode benchmark (set-nx-px, no hold/think/retry pause; medians of {ROUNDS} interleaved rounds)");
    println!("  lockcheck with its MONITOR witness (the default) is compared with bare + a MONITOR follower;");
    println!("  lockcheck with LOCKCHECK_WITNESS=off with the bare loop");
    for (clients, cycles) in [(1u32, 1_000u32), (16, 100)] {
        let (mut bare, mut watched, mut ours, mut unwatched, mut writes) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0);
        for _ in 0..ROUNDS {
            bare.push(bare_rate(clients, cycles, false));
            watched.push(bare_rate(clients, cycles, true));
            let (rate, w) = lockcheck_rate(clients, cycles, true);
            ours.push(rate);
            writes += w;
            let (rate, w) = lockcheck_rate(clients, cycles, false);
            unwatched.push(rate);
            writes += w;
        }
        let (bare, watched, ours, unwatched) = (
            median(bare),
            median(watched),
            median(ours),
            median(unwatched),
        );
        println!(
            "  {clients:>2} client(s), {writes} lockcheck cycles in all:\n      \
             witness off: lockcheck {unwatched:>7.0} cycles/s   bare redis-rs {bare:>7.0}   ratio {:.2}\n      \
             witness on:  lockcheck {ours:>7.0} cycles/s   bare + MONITOR {watched:>7.0}   ratio {:.2}   (vs bare {:.2})",
            unwatched / bare,
            ours / watched,
            ours / bare,
        );
    }
}
