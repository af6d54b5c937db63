//! Simulator throughput, next to bare madsim measured in the same run.
//!
//! `cargo bench --bench sim` (release). Every rate is per CPU second of the benchmark's thread (one
//! core), not per wall-clock second, so other load on the machine does not skew it. Prints:
//! - bare madsim: RPC round trips per second over madsim's own `Endpoint`, and timer wake-ups;
//! - the simulated Redis engine alone: `SET NX PX` + compare-and-delete release pairs per second;
//! - lockcheck: simulated lock cycles per CPU second for every lock kind (the no-fault
//!   scenario with 4 clients; Redlock on 5 masters), each with "bare": how many bare madsim round
//!   trips cost as much CPU time as one lock cycle (lockcheck's overhead over the engine, as one
//!   number); and seeds per second for `failover-lock-loss` and `redlock-kleppmann-clock-jump`.

/// The allocator the `lockcheck` binary uses, so the figures are the binary's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use lockcheck::lock::LockKind;
use lockcheck::scenario::Scenario;
use lockcheck::simredis::{Engine, Role};
use std::path::Path;
use std::time::Duration;

fn scenario(name: &str) -> Scenario {
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(name),
    )
    .unwrap()
}

/// CPU time of this thread, in seconds (outside a madsim runtime this is the real clock).
fn cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Measures CPU time from its creation.
struct Stopwatch(f64);

impl Stopwatch {
    fn start() -> Stopwatch {
        Stopwatch(cpu_seconds())
    }

    fn seconds(&self) -> f64 {
        cpu_seconds() - self.0
    }
}

fn bare_madsim_rpc(n: u64) -> f64 {
    let rt = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
    let started = Stopwatch::start();
    rt.block_on(async move {
        let h = madsim::runtime::Handle::current();
        let server = h
            .create_node()
            .name("server")
            .ip("10.0.0.1".parse().unwrap())
            .build();
        let client = h
            .create_node()
            .name("client")
            .ip("10.0.0.2".parse().unwrap())
            .build();
        server.spawn(async move {
            let ep = madsim::net::Endpoint::bind("10.0.0.1:1").await.unwrap();
            loop {
                let (p, from) = ep.recv_from_raw(1).await.unwrap();
                ep.send_to_raw(from, 2, p).await.unwrap();
            }
        });
        client
            .spawn(async move {
                madsim::time::sleep(Duration::from_millis(1)).await;
                let ep = madsim::net::Endpoint::bind("10.0.0.2:1").await.unwrap();
                let dst = "10.0.0.1:1".parse().unwrap();
                for i in 0..n {
                    ep.send_to_raw(dst, 1, Box::new(i)).await.unwrap();
                    ep.recv_from_raw(2).await.unwrap();
                }
            })
            .await
            .unwrap();
    });
    n as f64 / started.seconds()
}

fn bare_madsim_timers(n: u64) -> f64 {
    let rt = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
    let started = Stopwatch::start();
    rt.block_on(async move {
        for _ in 0..n {
            madsim::time::sleep(Duration::from_micros(200)).await;
        }
    });
    n as f64 / started.seconds()
}

fn engine_pairs(n: u64) -> f64 {
    let mut e = Engine::new(Role::Master);
    let script = include_str!("../src/lock/scripts/compare_and_delete.lua");
    let sha = {
        let out = e.execute(
            0,
            1,
            &[
                b"SCRIPT".to_vec(),
                b"LOAD".to_vec(),
                script.as_bytes().to_vec(),
            ],
        );
        match out.reply {
            redis::Value::BulkString(b) => b,
            other => panic!("{other:?}"),
        }
    };
    let started = Stopwatch::start();
    for i in 0..n {
        let now = 1_700_000_000_000 + i;
        let owner = format!("owner-{i}").into_bytes();
        e.execute(
            now,
            1,
            &[
                b"SET".to_vec(),
                b"lock".to_vec(),
                owner.clone(),
                b"NX".to_vec(),
                b"PX".to_vec(),
                b"10000".to_vec(),
            ],
        );
        e.execute(
            now,
            1,
            &[
                b"EVALSHA".to_vec(),
                sha.clone(),
                b"1".to_vec(),
                b"lock".to_vec(),
                owner,
            ],
        );
    }
    n as f64 / started.seconds()
}

fn main() {
    // `cargo bench` passes `--bench`. A lock kind's name instead runs only that kind's cycles, long
    // enough to profile (20 runs of the table's size): `cargo bench --bench sim -- set-nx-px`; a
    // number after it sets the runs (`-- set-nx-px 1` under callgrind, whose instruction counts
    // do not depend on other load on the machine).
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if let Some(only) = words.first() {
        let runs: u32 = words
            .get(1)
            .map_or(20, |n| n.parse().expect("a number of runs"));
        let kind = *LockKind::builtins()
            .iter()
            .find(|k| k.name() == only)
            .unwrap_or_else(|| panic!("no lock kind named {only}"));
        let masters = if kind.name() == "redlock" { 5 } else { 1 };
        let (mut cycles, mut secs) = (0, 0.0);
        for _ in 0..runs {
            let (c, s, _) = lock_cycles(kind, 4, 0, masters, 10_000);
            cycles += c;
            secs += s;
        }
        println!("{only}: {:.0} cycles/s", cycles as f64 / secs);
        return;
    }
    println!("lockcheck simulator benchmark (one core, release build)");
    let rpc = bare_madsim_rpc(200_000);
    println!("  bare madsim Endpoint RPC round trips/s     {:>12.0}", rpc);
    let timers = bare_madsim_timers(500_000);
    println!(
        "  bare madsim timer wake-ups/s               {:>12.0}",
        timers
    );
    let pairs = engine_pairs(200_000);
    println!(
        "  engine SET NX PX + EVALSHA release pairs/s {:>12.0}",
        pairs
    );

    // A warm-up run, untimed: the first simulated run of a process pays for the allocator's
    // first pages and the scripts' first compilation, which the table's first row measured as
    // a fifth slower than the same run repeated.
    lock_cycles(set_nx_px(), 4, 0, 1, 10_000);
    println!("  lock cycles/s per kind (4 clients, no faults, no replicas; the median of {RUNS} runs of 10,000 cycles); bare = bare madsim round trips per lock cycle");
    for &kind in LockKind::builtins()
        .iter()
        .filter(|k| !k.is_client_program())
    {
        if let Err(why) = no_fault_scenario(kind) {
            println!("    {:<20} skipped: {why}", kind.name());
            continue;
        }
        let masters = if kind.name() == "redlock" { 5 } else { 1 };
        let (cycles, secs, commands) = median_run(kind, 4, 0, masters);
        let rate = cycles as f64 / secs;
        println!(
            "    {:<20} {masters} master(s) {:>10.0} cycles/s   bare {:>5.2}   (median run: {cycles} cycles in {secs:.3} s, {:.1} commands/cycle)",
            kind.name(),
            rate,
            rpc / rate,
            commands as f64 / cycles as f64,
        );
    }
    for (clients, replicas) in [(4u32, 1u32), (1, 0)] {
        let (cycles, secs, commands) = median_run(set_nx_px(), clients, replicas, 1);
        let rate = cycles as f64 / secs;
        println!(
            "    set-nx-px, {clients} client(s), {replicas} replica(s) {:>10.0} cycles/s   bare {:>5.2}   (median run: {cycles} cycles in {secs:.3} s, {:.1} commands/cycle)",
            rate,
            rpc / rate,
            commands as f64 / cycles as f64,
        );
    }

    for (name, seeds) in [
        ("failover-lock-loss", 200),
        ("redlock-kleppmann-clock-jump", 200),
    ] {
        seeds_per_second(name, seeds);
    }
    end_to_end();
    explore_rate();
}

/// Explore's rate on a fault-free scenario: cases per second of `tests/explore/scenarios/
/// failover-no-faults.toml` (each case a drawn fault schedule, simulated and judged), on one
/// thread and on every core (per wall-clock second: other load on the machine lowers it), running
/// the whole budget.
fn explore_rate() {
    use lockcheck::explore::search::{search, SearchOptions};
    let base = Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/explore/scenarios/failover-no-faults.toml"),
    )
    .unwrap();
    let space = lockcheck::scenario::Space::of(&base).unwrap();
    let opts = |jobs: usize, cases: u64| SearchOptions {
        cases,
        seed: 1,
        jobs,
        shard: lockcheck::exec::Shard::WHOLE,
        time_limit: None,
        check: None,
        max_shrink_steps: 0,
        keep_going: true,
        locks: lockcheck::registry::Registry::new(),
        mode: lockcheck::explore::SearchMode::Sim,
    };
    let cases = 2_000;
    // Wall clock for both rows: the search runs its cases on worker threads, whose CPU time this
    // thread's clock does not see.
    let wall = std::time::Instant::now();
    let one = search(&base, &space, &opts(1, cases), &|_, _| {});
    let one_rate = one.tried as f64 / wall.elapsed().as_secs_f64();
    let all_jobs = lockcheck::exec::default_jobs();
    let wall = std::time::Instant::now();
    let all = search(&base, &space, &opts(all_jobs, cases), &|_, _| {});
    let all_rate = all.tried as f64 / wall.elapsed().as_secs_f64();
    println!(
        "  explore: tests/explore/scenarios/failover-no-faults.toml, {cases} cases, whole budget"
    );
    println!(
        "    one thread (wall clock)                  {:>10.0} cases/s   ({} of {} cases violating)",
        one_rate, one.violating, one.tried
    );
    println!(
        "    {all_jobs} threads (wall clock)                     {:>10.0} cases/s   ({:.2}x one thread)",
        all_rate,
        all_rate / one_rate
    );
}

/// What a user's `lockcheck run` costs next to the inner loop, in the same run: one scenario
/// file of 100,000 `set-nx-px` cycles (4 clients, hold and think 0) through the code path of
/// `lockcheck run` (read and check the file, simulate, judge every check, render the report),
/// against the same 100,000 cycles simulated alone.
fn end_to_end() {
    let dir = std::env::temp_dir().join(format!("lockcheck-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("e2e.toml");
    std::fs::write(
        &file,
        "name = \"e2e\"\nexpect = \"safe\"\nduration_ms = 100000000\n[lock]\nkind = \"set-nx-px\"\nttl_ms = 10000\n[workload]\nclients = 4\ncycles = 25000\nhold_ms = [0, 0]\nthink_ms = [0, 0]\n",
    )
    .unwrap();
    let (cycles, inner_secs, _) = lock_cycles(set_nx_px(), 4, 0, 1, 100_000);
    let started = Stopwatch::start();
    let s = Scenario::load(&file).unwrap();
    let run = lockcheck::Registry::new().run_sim(&s, s.seed);
    let events = run.history.events.len();
    let outcome =
        lockcheck::judge::Outcome::judge(&s, lockcheck::judge::Mode::Sim, s.seed, run.history);
    let all = lockcheck::judge::SeedsOutcome::aggregate(&s, vec![outcome]);
    let report = lockcheck::cli::report::text(&s, &all);
    let e2e_secs = started.seconds();
    std::fs::remove_dir_all(&dir).ok();
    println!(
        "  end to end: one scenario file of 100,000 set-nx-px cycles (4 clients, hold/think 0)"
    );
    println!(
        "    inner loop (sim::run alone)              {:>10.0} cycles/s",
        cycles as f64 / inner_secs
    );
    println!(
        "    as `lockcheck run` (parse .. report)     {:>10.0} cycles/s   ({:.2} of the inner loop; {events} events, report {} bytes)",
        100_000.0 / e2e_secs,
        inner_secs / e2e_secs,
        report.len()
    );
}

/// Runs per row of the table: a single 0.1 s run moved by about 5 % between repetitions.
const RUNS: usize = 5;

/// The run with the median rate among [`RUNS`] runs of 10,000 cycles of [`lock_cycles`].
fn median_run(kind: LockKind, clients: u32, replicas: u32, masters: u32) -> (u64, f64, u64) {
    let mut runs: Vec<(u64, f64, u64)> = (0..RUNS)
        .map(|_| lock_cycles(kind, clients, replicas, masters, 10_000))
        .collect();
    runs.sort_by(|a, b| (a.0 as f64 / a.1).total_cmp(&(b.0 as f64 / b.1)));
    runs[RUNS / 2]
}

/// Simulated lock cycles of `kind` in the no-fault scenario: (cycles, CPU seconds, commands).
fn lock_cycles(
    kind: LockKind,
    clients: u32,
    replicas: u32,
    masters: u32,
    total: u32,
) -> (u64, f64, u64) {
    let mut s = no_fault_scenario(kind).expect("checked before its row");
    s.workload.cycles = total / clients;
    s.workload.clients = clients;
    s.redis.replicas = replicas;
    s.redis.masters = masters;
    s.duration_ms = u64::MAX / 4_000;
    let locks = lockcheck::Registry::new();
    let started = Stopwatch::start();
    let run = locks.run_sim(&s, 1);
    let secs = started.seconds();
    (run.counter.1, secs, run.commands)
}

/// The no-fault scenario with lock kind `kind`, parsed again with it (not the kind swapped in
/// afterwards: the scenario's servers and node names follow its lock's service). A `[lock]` key
/// the kind does not take (a lease, a wait bound) is left out; `Err` is why the scenario cannot
/// carry the kind at all.
fn no_fault_scenario(kind: LockKind) -> Result<Scenario, String> {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/set-nx-px-no-faults.toml"),
    )
    .expect("the bundled no-fault scenario");
    let text = text
        .replace(
            "kind = \"set-nx-px\"",
            &format!("kind = \"{}\"", kind.name()),
        )
        .replace("[redis]\nreplicas = 1\n", "");
    let mut last = String::new();
    for drop in [
        &[][..],
        &["ttl_ms = 10000\n"][..],
        &["ttl_ms = 10000\n", "wait_ms = 10000\n"][..],
    ] {
        let text = drop.iter().fold(text.clone(), |t, d| t.replace(d, ""));
        match Scenario::parse("bench.toml", &text) {
            Ok(s) => return Ok(s),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// The `set-nx-px` kind, the table's reference.
fn set_nx_px() -> LockKind {
    LockKind::builtin("set-nx-px").expect("lockcheck ships set-nx-px")
}

/// Seeds per CPU second of a shipped scenario, verdicts included.
fn seeds_per_second(name: &str, seeds: u64) {
    let s = scenario(&format!("{name}.toml"));
    let started = Stopwatch::start();
    let mut violated = 0;
    for seed in 0..seeds {
        let run = lockcheck::Registry::new().run_sim(&s, seed);
        let o =
            lockcheck::judge::Outcome::judge(&s, lockcheck::judge::Mode::Sim, seed, run.history);
        if o.verdict() == lockcheck::Verdict::Violation {
            violated += 1;
        }
    }
    let secs = started.seconds();
    println!(
        "  seeds/s, {name:<32} {:>10.0}   ({violated}/{seeds} violated)",
        seeds as f64 / secs
    );
}
