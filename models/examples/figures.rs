//! The figures for the models: every shortest counterexample (BFS, one
//! thread) with its length and time, every exhaustive proof (DFS) with its
//! state count and time, and throughput on one thread and on every core.
//!
//! ```text
//! cargo run --release --example figures            # the default set
//! cargo run --release --example figures -- --large # plus larger bounds
//! ```
//!
//! DFS runs of `redlock` use client symmetry (unique states are then
//! representatives); the throughput runs turn it off.
//!
//! The throughput table runs one full DFS of each model, and of
//! stateright's own two-phase-commit example (`examples/2pc.rs` of the
//! stateright version Cargo resolved, located in the cargo registry by
//! `build.rs`, not copied here) as a baseline, on 1 thread and on
//! [`std::thread::available_parallelism`] threads, all in this one run.
//!
//! Every run also checks that the verdict is the one the model declares;
//! the program exits 1 if one is not.

use lockcheck_models::{run, Expectation, Finding, ModelReport, RunOptions, Strategy};

// stateright's `examples/2pc.rs` without its `main` (see build.rs): the
// `TwoPhaseSys` model of Gray & Lamport's "Consensus on Transaction Commit".
include!(concat!(env!("OUT_DIR"), "/stateright_2pc.rs"));

struct Case {
    model: &'static str,
    property: &'static str,
    params: &'static [(&'static str, &'static str)],
    what: &'static str,
}

#[rustfmt::skip]
const COUNTEREXAMPLES: &[Case] = &[
    Case { model: "lease", property: "mutual_exclusion", params: &[], what: "GC pause past the lease" },
    Case { model: "lease", property: "no_stale_write", params: &[], what: "pause, then the stale write" },
    Case { model: "lease", property: "mutual_exclusion", params: &[("pauses", "0"), ("jump", "3")], what: "server clock jump" },
    Case { model: "failover", property: "mutual_exclusion", params: &[], what: "failover before replication" },
    Case { model: "failover", property: "mutual_exclusion", params: &[("wait", "1")], what: "WAIT times out, client proceeds" },
    Case { model: "failover", property: "mutual_exclusion", params: &[("replicas", "2"), ("wait", "1"), ("on_wait_timeout", "give-up")], what: "WAIT 1 of 2, the other replica promoted" },
    Case { model: "failover", property: "mutual_exclusion", params: &[("wait", "1"), ("on_wait_timeout", "give-up"), ("replica_skew", "2")], what: "acked key, replica clock ahead" },
    Case { model: "fencing", property: "no_stale_write", params: &[("failover", "true")], what: "token reused after failover" },
    Case { model: "fencing", property: "tokens_increase", params: &[("failover", "true")], what: "counter goes back on failover" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("jumps", "1")], what: "N=3, server clock jump" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("jumps", "1")], what: "N=5, server clock jump" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("jumps", "1"), ("ttl", "3")], what: "N=5, clock jump, TTL 3" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("crashes", "1")], what: "N=3, restart without delay" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("crashes", "1")], what: "N=5, restart without delay" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("drift_period", "4"), ("fast_nodes", "3"), ("client_clock", "drift"), ("slow_clients", "2"), ("allowance", "1")], what: "N=3, drift beyond the allowance" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("recheck_after_acquire", "false")], what: "N=3, no elapsed-time re-check" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("pauses", "1")], what: "N=3, holder pauses" },
    Case { model: "redlock", property: "no_stale_write", params: &[("pauses", "1"), ("check_validity_before_write", "true")], what: "N=3, pause between check and write" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("ttl", "3"), ("time_bound", "8"), ("client_clock", "lag")], what: "specl redlock.tla configuration" },
    Case { model: "redisson", property: "mutual_exclusion", params: &[], what: "pause longer than the lease" },
    Case { model: "redisson", property: "mutual_exclusion", params: &[("max_pause", "2")], what: "pause of 2/3 lease before a renewal" },
];

#[rustfmt::skip]
const PROOFS: &[Case] = &[
    Case { model: "lease", property: "mutual_exclusion", params: &[("pauses", "0")], what: "no faults" },
    Case { model: "lease", property: "no_stale_write", params: &[("fencing", "true"), ("pauses", "2"), ("jump", "2")], what: "fencing, 2 pauses + clock jump" },
    Case { model: "failover", property: "mutual_exclusion", params: &[("wait", "1"), ("on_wait_timeout", "give-up")], what: "strict WAIT on every replica" },
    Case { model: "fencing", property: "no_stale_write", params: &[("pauses", "2")], what: "fencing, no failover, 2 pauses" },
    Case { model: "fencing", property: "tokens_increase", params: &[("pauses", "2")], what: "tokens, no failover" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[], what: "N=3, no faults" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("drift_period", "4"), ("fast_nodes", "3"), ("client_clock", "drift"), ("slow_clients", "2"), ("allowance", "2")], what: "N=3, drift within the allowance" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("crashes", "1"), ("restart_delay", "true")], what: "N=3, crash with delayed restart" },
    Case { model: "redlock", property: "no_stale_write", params: &[("recheck_after_acquire", "false"), ("check_validity_before_write", "true")], what: "N=3, no re-check but validity check" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("ttl", "3")], what: "N=5, no faults, TTL 3" },
    Case { model: "redisson", property: "mutual_exclusion", params: &[("max_pause", "1")], what: "pauses under 2/3 lease" },
];

#[rustfmt::skip]
const LARGE_PROOFS: &[Case] = &[
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5")], what: "N=5, no faults, TTL 4" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("drift_period", "4"), ("fast_nodes", "5"), ("client_clock", "drift"), ("slow_clients", "2"), ("allowance", "2")], what: "N=5, drift within the allowance" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("crashes", "1"), ("restart_delay", "true"), ("retries", "0")], what: "N=5, crash with delayed restart" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("time_bound", "12"), ("retries", "2")], what: "N=3, time bound 12, 2 retries" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("clients", "3")], what: "N=3, 3 clients" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("crashes", "1"), ("restart_delay", "true"), ("time_bound", "10")], what: "N=3, crash with delay, time bound 10" },
    Case { model: "lease", property: "no_stale_write", params: &[("fencing", "true"), ("clients", "3"), ("cycles", "2"), ("pauses", "2"), ("jump", "2"), ("time_bound", "12")], what: "fencing, 3 clients x 2 cycles" },
];

fn opts(case: &Case, strategy: Strategy, threads: usize) -> RunOptions {
    RunOptions {
        property: Some(case.property.to_string()),
        strategy,
        max_depth: None,
        params: case
            .params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        threads,
    }
}

fn params(case: &Case) -> String {
    let p: Vec<String> = case
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if p.is_empty() {
        "(defaults)".to_string()
    } else {
        p.join(" ")
    }
}

fn check(r: &ModelReport, bad: &mut u32) -> &'static str {
    if r.matches_expectation() {
        "ok"
    } else {
        *bad += 1;
        "UNEXPECTED"
    }
}

fn proofs(cases: &[Case], bad: &mut u32) {
    println!("| model | configuration | property | unique states | generated | depth | secs | unique/s | |");
    println!("|---|---|---|---:|---:|---:|---:|---:|---|");
    for case in cases {
        let r = run(case.model, &opts(case, Strategy::Dfs, 1)).expect("valid case");
        let (states, unique, secs) = match r.outcome {
            Finding::Holds {
                states,
                unique_states,
                secs,
            } => (states, unique_states, secs),
            Finding::Violated { states, secs, .. } => (states, r.unique_states, secs),
            Finding::Bounded { .. } => unreachable!("the proofs set no depth limit"),
        };
        println!(
            "| {} | {} ({}) | {} | {} | {} | {} | {:.3} | {:.0} | {} |",
            case.model,
            case.what,
            params(case),
            case.property,
            unique,
            states,
            r.depth_reached,
            secs,
            unique as f64 / secs.max(1e-9),
            check(&r, bad)
        );
    }
}

/// One full DFS per model, large enough to time (a proof, symmetry off).
#[rustfmt::skip]
const THROUGHPUT: &[Case] = &[
    Case { model: "lease", property: "no_stale_write", params: &[("fencing", "true"), ("clients", "3"), ("pauses", "2"), ("jump", "2"), ("time_bound", "12")], what: "fencing, 3 clients, 2 pauses + clock jump" },
    Case { model: "failover", property: "mutual_exclusion", params: &[("wait", "1"), ("on_wait_timeout", "give-up"), ("clients", "3"), ("cycles", "2"), ("time_bound", "12")], what: "strict WAIT, 3 clients x 2 cycles" },
    Case { model: "fencing", property: "no_stale_write", params: &[("pauses", "2"), ("clients", "3"), ("time_bound", "10")], what: "fencing, no failover, 3 clients" },
    Case { model: "redlock", property: "mutual_exclusion", params: &[("nodes", "5"), ("ttl", "3"), ("symmetry", "false")], what: "N=5, no faults, TTL 3" },
    Case { model: "redisson", property: "mutual_exclusion", params: &[("max_pause", "1"), ("clients", "3"), ("cycles", "2"), ("time_bound", "12")], what: "pauses under 2/3 lease, 3 clients x 2" },
];

/// Resource managers in the two-phase-commit baseline.
#[cfg(not(stateright_2pc_missing))]
const TWO_PC_RMS: usize = 7;

fn row(name: &str, what: &str, threads: usize, unique: usize, secs: f64) {
    println!(
        "| {name} | {what} | {threads} | {unique} | {secs:.3} | {:.0} |",
        unique as f64 / secs.max(1e-9)
    );
}

fn throughput(bad: &mut u32) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("\n## Throughput (full DFS, symmetry off, 1 thread and all {cores} cores)\n");
    println!("| model | configuration | threads | unique states | secs | unique states/s |");
    println!("|---|---|---:|---:|---:|---:|");
    for threads in [1, cores] {
        for case in THROUGHPUT {
            let r = run(case.model, &opts(case, Strategy::Dfs, threads)).expect("valid case");
            row(
                case.model,
                case.what,
                threads,
                r.unique_states,
                r.outcome.secs(),
            );
            if !r.matches_expectation() {
                *bad += 1;
            }
        }
        two_phase_commit(threads);
    }
    println!(
        "\nBaseline source: {}",
        include_str!(concat!(env!("OUT_DIR"), "/stateright_2pc.source"))
    );
}

/// stateright's own example, checked the way its `check` command does.
#[cfg(not(stateright_2pc_missing))]
fn two_phase_commit(threads: usize) {
    use stateright::{Checker, Model};
    let start = std::time::Instant::now();
    let checker = TwoPhaseSys { rms: 0..TWO_PC_RMS }
        .checker()
        .threads(threads)
        .spawn_dfs()
        .join();
    let secs = start.elapsed().as_secs_f64();
    checker.assert_properties();
    let what = format!("stateright examples/2pc.rs, {TWO_PC_RMS} RMs");
    row(
        "2pc (stateright)",
        &what,
        threads,
        checker.unique_state_count(),
        secs,
    );
}

#[cfg(stateright_2pc_missing)]
fn two_phase_commit(threads: usize) {
    println!("| 2pc (stateright) | not found at build time | {threads} | - | - | - |");
}

fn main() {
    let large = std::env::args().any(|a| a == "--large");
    let mut bad = 0;

    println!("## Shortest counterexamples (BFS, 1 thread)\n");
    println!("| model | configuration | property | steps | secs | unique states | |");
    println!("|---|---|---|---:|---:|---:|---|");
    for case in COUNTEREXAMPLES {
        let r = run(case.model, &opts(case, Strategy::Bfs, 1)).expect("valid case");
        let steps = r.trace().map(|t| t.len()).unwrap_or(0);
        println!(
            "| {} | {} ({}) | {} | {} | {:.3} | {} | {} |",
            case.model,
            case.what,
            params(case),
            case.property,
            steps,
            r.outcome.secs(),
            r.unique_states,
            check(&r, &mut bad)
        );
        assert_eq!(
            r.expected,
            Expectation::Violated,
            "{} {}",
            case.model,
            params(case)
        );
    }

    println!("\n## Exhaustive proofs within the time bound (DFS, 1 thread)\n");
    proofs(PROOFS, &mut bad);
    if large {
        println!("\n## Larger bounds (--large)\n");
        proofs(LARGE_PROOFS, &mut bad);
    }

    throughput(&mut bad);
    if bad > 0 {
        eprintln!("{bad} runs did not match their model's declared expectation");
        std::process::exit(1);
    }
}
