//! Run one model from the command line until the lockcheck CLI wraps it:
//! `cargo run --example check -- <model> [property] [dfs] [threads=N] [depth=N] [k=v ...]`
//! (`scenario` also prints the scenario file; `explore=127.0.0.1:3000`
//! serves stateright's Explorer instead of checking).
use lockcheck_models::{run, RunOptions, Strategy};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(model) = args.next() else {
        eprintln!(
            "usage: check <model> [property] [dfs] [threads=N] [depth=N] [scenario] [explore=ADDR] [k=v ...]"
        );
        eprintln!("models: {}", lockcheck_models::model_names().join(", "));
        std::process::exit(2);
    };
    let mut opts = RunOptions::default();
    let mut scenario = false;
    let mut explore = None;
    for a in args {
        if a == "dfs" {
            opts.strategy = Strategy::Dfs;
        } else if a == "bfs" {
            opts.strategy = Strategy::Bfs;
        } else if a == "scenario" {
            scenario = true;
        } else if let Some(addr) = a.strip_prefix("explore=") {
            explore = Some(addr.to_string());
        } else if let Some(n) = a.strip_prefix("threads=") {
            opts.threads = n.parse().expect("threads=N");
        } else if let Some(n) = a.strip_prefix("depth=") {
            opts.max_depth = Some(n.parse().expect("depth=N"));
        } else if let Some((k, v)) = a.split_once('=') {
            opts.params.push((k.to_string(), v.to_string()));
        } else {
            opts.property = Some(a);
        }
    }
    if let Some(addr) = explore {
        eprintln!("serving stateright's Explorer on http://{addr}");
        if let Err(e) = lockcheck_models::serve_explorer(&model, &opts, &addr) {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
    match run(&model, &opts) {
        Ok(r) => {
            print!("{}", r.to_text());
            if scenario {
                if let Some(s) = r.to_scenario_toml() {
                    println!("\n{s}");
                }
            }
            std::process::exit(if r.matches_expectation() { 0 } else { 1 });
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
