//! Redlock figures, all measured in one run.
//!
//! `cargo bench --bench redlock` (release). Prints:
//! - real servers: acquire latency of Redlock over 5 spawned `redis-server`s against `set-nx-px`
//!   on one of them, same client stack (lockcheck's `RoutedConnection`, `RealEnv`, the tokio
//!   runtime real mode uses), uncontended, acquire and release alternating; only `acquire` is
//!   timed. The goal is a ratio of at most 1.5: the five SETs go out in parallel, so an attempt
//!   costs the slowest reply, not the sum.
//! - simulation: seeds per second of `redlock-kleppmann-clock-jump`;
//! - random exploration: per seed, a random fault schedule over the same five masters and two
//!   clients (each client cut off from a random 0-2 masters, one clock jump of a random master at
//!   a random time by a random amount), and how many seeds it takes until one violates.
//!
//! Arguments: `--quick` for a short run (CI smoke), `--no-real` to skip the real servers.

use lockcheck::judge::{Mode, Outcome};
use lockcheck::lock::{Lock, LockConfig, Redlock, SetNxPx};
use lockcheck::real::RealEnv;
use lockcheck::real::{ConnectionTimeouts, RedisServer, Route, RoutedConnection, ServerOptions};
use lockcheck::scenario::{Direction, Fault, FaultKind, Scenario, Trigger};
use lockcheck::Verdict;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::{Duration, Instant};

fn scenario(name: &str) -> Scenario {
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(format!("{name}.toml")),
    )
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One uncontended acquire, timed, then an untimed release.
async fn timed_acquire(lock: &mut impl Lock) -> Duration {
    let t = Instant::now();
    let g = lock.acquire().await.unwrap().expect("uncontended acquire");
    let took = t.elapsed();
    lock.release(&g).await.unwrap();
    took
}

/// The floor without any client library: `SET` written to `k` blocking sockets at once, then
/// the `k` replies read. What is left is the servers' own latency (process wake-ups included).
fn raw_round(socks: &mut [std::net::TcpStream]) -> Duration {
    use std::io::{Read, Write};
    const SET: &[u8] =
        b"*5\r\n$3\r\nSET\r\n$9\r\nbench:raw\r\n$1\r\nv\r\n$2\r\nPX\r\n$5\r\n10000\r\n";
    let mut buf = [0u8; 16];
    let t = Instant::now();
    for s in socks.iter_mut() {
        s.write_all(SET).unwrap();
    }
    for s in socks.iter_mut() {
        let n = s.read(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"+OK\r\n");
    }
    t.elapsed()
}

/// The same five SETs one after another: what a sequential Redlock client pays at least.
fn raw_sequential(socks: &mut [std::net::TcpStream]) -> Duration {
    let t = Instant::now();
    for s in socks.iter_mut() {
        raw_round(std::slice::from_mut(s));
    }
    t.elapsed()
}

fn report(name: &str, v: &mut [Duration]) -> f64 {
    v.sort();
    println!(
        "  {name:<34} p50 {:>7.1} µs   p90 {:>7.1} µs   p99 {:>7.1} µs",
        us(percentile(v, 0.5)),
        us(percentile(v, 0.9)),
        us(percentile(v, 0.99))
    );
    us(percentile(v, 0.5))
}

fn real_latency(n: usize) {
    let servers: Vec<RedisServer> = (0..5)
        .map(|_| RedisServer::spawn(ServerOptions::default()).expect("redis-server"))
        .collect();
    // The runtime real mode uses.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let spec = scenario("redlock-kleppmann-clock-jump").lock;
    let mut config = LockConfig::from_spec(&spec);
    config.key = "bench:lock".into();
    let conns = |k: usize| -> Vec<RoutedConnection> {
        servers[..k]
            .iter()
            .map(|s| RoutedConnection::new(Route::new(s.url()), ConnectionTimeouts::default()))
            .collect()
    };
    let env = RealEnv::default();
    let mut single = SetNxPx::new(config.clone(), conns(1), env.clone());
    let mut redlock = Redlock::new(config, conns(5), env);
    let mut socks: Vec<std::net::TcpStream> = servers
        .iter()
        .map(|s| {
            let t = std::net::TcpStream::connect(("127.0.0.1", s.port())).unwrap();
            t.set_nodelay(true).unwrap();
            t
        })
        .collect();
    let (mut one, mut five, mut raw1, mut raw5) = (vec![], vec![], vec![], vec![]);
    let mut seq5 = vec![];
    rt.block_on(async {
        for i in 0..n + 200 {
            // Interleaved, so load from elsewhere on the machine hits all four alike.
            let a = timed_acquire(&mut single).await;
            let b = timed_acquire(&mut redlock).await;
            let c = raw_round(&mut socks[..1]);
            let d = raw_round(&mut socks[..]);
            let e = raw_sequential(&mut socks[..]);
            if i >= 200 {
                seq5.push(e);
                one.push(a);
                five.push(b);
                raw1.push(c);
                raw5.push(d);
            }
        }
    });
    println!(
        "real redis-server, loopback, {n} uncontended acquires each, interleaved, {} cores:",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let s = report("set-nx-px acquire, 1 master", &mut one);
    let r = report("redlock acquire, 5 masters", &mut five);
    let f1 = report("floor: raw SET, 1 socket", &mut raw1);
    let f5 = report("floor: raw SET x5, in parallel", &mut raw5);
    report("floor: raw SET x5, one after another", &mut seq5);
    println!(
        "  redlock / set-nx-px at p50: {:.2}x (goal <= 1.5x); the floor's own ratio: {:.2}x",
        r / s,
        f5 / f1
    );
    drop(servers);
}

fn sim_seeds_per_second(seeds: u64) {
    let s = scenario("redlock-kleppmann-clock-jump");
    let started = Instant::now();
    let mut violated = 0;
    for seed in 0..seeds {
        let run = lockcheck::Registry::new().run_sim(&s, seed);
        if Outcome::judge(&s, Mode::Sim, seed, run.history).verdict() == Verdict::Violation {
            violated += 1;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "simulation: redlock-kleppmann-clock-jump  {:>8.0} seeds/s   ({violated}/{seeds} violated, {wall:.2} s)",
        seeds as f64 / wall
    );
}

/// The Kleppmann topology with a random fault schedule drawn from `seed`.
fn random_schedule(base: &Scenario, seed: u64) -> Scenario {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut s = base.clone();
    s.faults.clear();
    let ttl = s.lock.ttl_ms.unwrap() as i64;
    for c in 0..s.workload.clients {
        let k = rng.gen_range(0..=2);
        let mut cut: Vec<String> = Vec::new();
        while cut.len() < k {
            let m = format!("redis-{}", rng.gen_range(0..s.redis.masters));
            if !cut.contains(&m) {
                cut.push(m);
            }
        }
        if !cut.is_empty() {
            s.faults.push(Fault {
                trigger: Trigger::At(0),
                kind: FaultKind::Partition {
                    nodes: cut,
                    from: vec![format!("client-{c}")],
                    for_ms: s.duration_ms * 10,
                    direction: Direction::Both,
                },
                by_client: None,
            });
        }
    }
    s.faults.push(Fault {
        trigger: Trigger::At(rng.gen_range(0..s.duration_ms)),
        kind: FaultKind::ClockJump {
            node: format!("redis-{}", rng.gen_range(0..s.redis.masters)),
            by_ms: rng.gen_range(-2 * ttl..=2 * ttl),
        },
        by_client: None,
    });
    s
}

fn random_exploration(max_seeds: u64) {
    let base = scenario("redlock-kleppmann-clock-jump");
    let started = Instant::now();
    let mut hits = Vec::new();
    for seed in 0..max_seeds {
        let s = random_schedule(&base, seed);
        let run = lockcheck::Registry::new().run_sim(&s, seed);
        if Outcome::judge(&s, Mode::Sim, seed, run.history).verdict() == Verdict::Violation {
            hits.push(seed);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let first = hits.first().map(|s| (s + 1).to_string());
    println!(
        "random exploration (random cuts of 0-2 masters per client, one random jump of +-2 TTL):\n  \
         first violation after {} seed(s); {} of {max_seeds} seeds violated ({:.2}%), {:.0} seeds/s",
        first.as_deref().unwrap_or("more than max"),
        hits.len(),
        100.0 * hits.len() as f64 / max_seeds as f64,
        max_seeds as f64 / wall
    );
    if let Some(&seed) = hits.first() {
        let s = random_schedule(&base, seed);
        println!("  the first hit's schedule (seed {seed}):");
        for f in &s.faults {
            println!("    {:?} {:?}", f.trigger, f.kind);
        }
    }
    if hits.len() > 1 {
        let gaps: Vec<u64> = hits.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
        println!("  mean seeds between hits: {mean:.1}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    println!("lockcheck Redlock figures (release build, this machine)");
    if !args.iter().any(|a| a == "--no-real") {
        real_latency(if quick { 300 } else { 10_000 });
    }
    sim_seeds_per_second(if quick { 50 } else { 1_000 });
    random_exploration(if quick { 200 } else { 5_000 });
}
