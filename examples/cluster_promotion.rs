//! How long a real Redis Cluster takes to replace a crashed master, measured: the figures that
//! `docs/redis-cluster.md` reports and that will set the simulated cluster's timing.
//!
//! ```text
//! cargo run --release --example cluster_promotion -- [--runs N] [--timeouts 500,1000]
//! ```
//!
//! For each `cluster-node-timeout` T it starts a cluster of three masters with one replica each
//! and, `runs` times, `SIGKILL`s the master of the probe key's slot and measures from the kill until
//! (a) every other master marks it `fail` in its `CLUSTER NODES`,
//! (b) its replica says it is a master and owns that slot,
//! (c) a client that asks another master and follows one `MOVED` gets a `SET` acknowledged.
//! Then it restarts the crashed node, waits until the cluster has converged (the old master now
//! a replica) and 2.5 s more (see [`WRITABLE_DELAY`]), and goes again. Each condition is polled every 2 ms, so every figure is up to a few
//! ms late.

use lockcheck::backend::redis::real::{ClusterOptions, RedisCluster};
use std::time::{Duration, Instant};

/// The key every measured write goes to; each kill takes whichever master serves its slot now.
const KEY: &str = "promotion-probe";

/// Longer than Redis's `CLUSTER_WRITABLE_DELAY` (2 s after a node's start).
const WRITABLE_DELAY: Duration = Duration::from_millis(2500);

struct Args {
    runs: usize,
    timeouts_ms: Vec<u64>,
}

fn args() -> Args {
    let mut a = Args {
        runs: 10,
        timeouts_ms: vec![500, 1000],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_default();
        match flag.as_str() {
            "--runs" => a.runs = value.parse().expect("--runs N"),
            "--timeouts" => {
                a.timeouts_ms = value
                    .split(',')
                    .map(|t| t.parse().expect("--timeouts 500,1000"))
                    .collect()
            }
            other => panic!("unknown argument {other}; use --runs N --timeouts 500,1000"),
        }
    }
    a
}

/// One kill's figures, from the kill: (a) `fail` at every other master, (b) the replica
/// promoted, (c) a write acknowledged again.
struct Sample {
    failed: Duration,
    promoted: Duration,
    written: Duration,
}

/// A `SET` of [`KEY`] sent to `node`, following one `MOVED`: `Ok` when acknowledged, else the
/// refusal (`CLUSTERDOWN`, a `MOVED` to the dead master, a refused connection).
fn write_via(c: &RedisCluster, node: usize) -> Result<(), String> {
    let Some(url) = c.url(node) else {
        return Err("the asked master is down".into());
    };
    let set = |url: &str| -> redis::RedisResult<()> {
        let client = redis::Client::open(url)?;
        let mut conn = client.get_connection_with_timeout(Duration::from_millis(200))?;
        conn.set_read_timeout(Some(Duration::from_millis(200)))?;
        redis::cmd("SET").arg(KEY).arg("x").query(&mut conn)
    };
    match set(&url) {
        Ok(()) => Ok(()),
        Err(e) => match e.redirect_node() {
            // `MOVED <slot> <host:port>`, which redis-rs gives as (host:port, slot).
            Some((owner, _slot)) => set(&format!("redis://{owner}/"))
                .map_err(|e2| format!("{e}, then at {owner}: {e2}")),
            None => Err(e.to_string()),
        },
    }
}

fn measure_once(c: &RedisCluster, slot: u16) -> Sample {
    let old = c.master_of_slot(slot).expect("slot served");
    let replica = c.replicas_of(old).expect("replicas")[0];
    let others: Vec<usize> = c
        .masters()
        .expect("masters")
        .into_iter()
        .filter(|&m| m != old)
        .collect();
    let old_id = c.id(old).to_string();
    let killed = Instant::now();
    assert!(c.crash(old));
    let (mut failed, mut promoted, mut written) = (None, None, None);
    let mut refusals: Vec<(Duration, String)> = Vec::new();
    let deadline = killed + Duration::from_secs(30);
    while failed.is_none() || promoted.is_none() || written.is_none() {
        assert!(Instant::now() < deadline, "no promotion within 30 s");
        if failed.is_none() {
            let all = others.iter().all(|&m| {
                c.view(m).is_ok_and(|v| {
                    v.iter()
                        .any(|l| l.id == old_id && l.is_failed() && !l.is_suspected())
                })
            });
            if all {
                failed = Some(killed.elapsed());
            }
        }
        if promoted.is_none() && c.master_of_slot(slot).is_ok_and(|n| n == replica) {
            promoted = Some(killed.elapsed());
        }
        if written.is_none() {
            match write_via(c, others[0]) {
                Ok(()) => written = Some(killed.elapsed()),
                Err(e) => refusals.push((killed.elapsed(), e)),
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    c.restart(old).expect("restart");
    c.wait_converged(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", c.log_tail(old)));
    // The restarted node is the next kill's promotion target. A node that started less than 2 s
    // ago does not turn its cluster state ok as a master (Redis's writable delay), so a
    // promotion within those 2 s would measure the delay, not the promotion: let it pass.
    std::thread::sleep(WRITABLE_DELAY);
    // What the client was told, each time it changed, so a reader sees why (c) lags (b).
    let mut last = String::new();
    for (at, e) in refusals {
        let kind: String = e.chars().take_while(|ch| *ch != ':').collect();
        if kind != last {
            eprintln!("  {} ms: refused: {e}", ms(at));
            last = kind;
        }
    }
    Sample {
        failed: failed.unwrap(),
        promoted: promoted.unwrap(),
        written: written.unwrap(),
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    let median = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2
    };
    format!("{} / {} / {}", ms(v[0]), ms(median), ms(v[v.len() - 1]))
}

fn main() {
    let a = args();
    println!("| node timeout | runs | (a) FAIL at every other master | (b) replica promoted | (c) write acknowledged | (b) − (a) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for &t in &a.timeouts_ms {
        let c = RedisCluster::start(ClusterOptions {
            node_timeout: Duration::from_millis(t),
            ..ClusterOptions::default()
        })
        .expect("the cluster forms");
        let slot = c.key_slot(KEY).expect("CLUSTER KEYSLOT");
        let samples: Vec<Sample> = (0..a.runs)
            .map(|i| {
                let s = measure_once(&c, slot);
                eprintln!(
                    "T={t} ms run {i}: fail {} ms, promoted {} ms, written {} ms",
                    ms(s.failed),
                    ms(s.promoted),
                    ms(s.written)
                );
                s
            })
            .collect();
        println!(
            "| {t} ms | {} | {} | {} | {} | {} |",
            a.runs,
            summary(samples.iter().map(|s| s.failed).collect()),
            summary(samples.iter().map(|s| s.promoted).collect()),
            summary(samples.iter().map(|s| s.written).collect()),
            summary(
                samples
                    .iter()
                    .map(|s| s.promoted.saturating_sub(s.failed))
                    .collect()
            ),
        );
    }
}
