//! `lockcheck table`: runs the bundled scenarios and prints, in markdown, what each lock does under
//! each fault: a lock x fault matrix of the checks that were violated, and one row per scenario
//! with every check's verdict in simulation (over several seeds) and, with `--real`, on real
//! `redis-server` processes. The README's table is this command's output, not typed by hand.

use crate::check;
use crate::check::Verdict;
use crate::cli::run::{run_scenario, scenario_files, BadInput, RunOptions};
use crate::exec::run_ordered;
use crate::judge::SeedsOutcome;
use crate::lock::LockKind;
use crate::scenario::{Scenario, Trigger, WorkloadKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Options of `lockcheck table`.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Simulation seeds per scenario (seed, seed+1, ...; from each scenario's own seed).
    pub seeds: u64,
    /// Also run every scenario once on real servers.
    pub real: bool,
    /// Threads for the simulated runs (one scenario per thread at a time).
    pub jobs: usize,
    /// `--junit FILE` / `--report DIR`: every run as a test case and a page.
    pub artifacts: crate::suite::Artifacts,
    /// The lock kinds scenarios may name: lockcheck's, and those the program registered.
    pub locks: crate::registry::Registry,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            seeds: 5,
            real: false,
            jobs: crate::exec::default_jobs(),
            artifacts: Default::default(),
            locks: Default::default(),
        }
    }
}

/// A column label: what happens to the lock in this scenario.
pub fn fault_label(s: &Scenario) -> String {
    let lease = s.lock.lease_ms();
    let mut parts: Vec<String> = Vec::new();
    for f in &s.faults {
        let at = match &f.trigger {
            Trigger::Point { point, .. } => format!(" at {point}"),
            Trigger::BeforeWrite { .. } => " at before_write".to_string(),
            Trigger::Acquired { .. } => String::new(),
            Trigger::At(ms) => format!(" at {ms} ms"),
        };
        parts.push(f.kind.label(&f.trigger, &at, lease));
    }
    if !s.clocks.is_perfect() {
        parts.push("clock skew".to_string());
    }
    let mut seen = Vec::new();
    parts.retain(|p| {
        let new = !seen.contains(p);
        seen.push(p.clone());
        new
    });
    if parts.is_empty() {
        if s.workload.hold_ms[0] > lease {
            "none, section > lease".to_string()
        } else {
            "none".to_string()
        }
    } else {
        parts.join(" + ")
    }
}

/// For a lock with a watchdog: which lease mode the scenario runs it in.
fn lease_mode(s: &Scenario) -> Option<&'static str> {
    s.lock.kind.has_default_lease().then(|| {
        if s.lock.ttl_ms.is_some() {
            "fixed lease"
        } else {
            "watchdog"
        }
    })
}

/// A lock's row in the table: its kind, whether it runs with a fixed lease (a lock with a
/// watchdog), and the deployment when its backend names one apart (`BackendDecl::row_label`:
/// a Redis Cluster).
type Row = (LockKind, bool, Option<&'static str>);

/// The row scenario `s` belongs to.
fn row_of(s: &Scenario) -> Row {
    (
        s.lock.kind,
        lease_mode(s).is_some_and(|m| m == "fixed lease"),
        s.backend().row_label(s),
    )
}

/// The violated checks of an outcome, or "safe".
fn cell(o: &SeedsOutcome) -> String {
    let violated: Vec<&str> = o
        .violating_seeds
        .iter()
        .filter(|(_, seeds)| !seeds.is_empty())
        .map(|(name, _)| check::label(name))
        .collect();
    if violated.is_empty() {
        "safe".to_string()
    } else {
        format!("**{}**", violated.join(", "))
    }
}

/// Whether a real run was refused because real mode has no recipe for the scenario (its row
/// says n/a), rather than because it could not be made at all.
fn no_recipe(e: &BadInput) -> bool {
    let prefix = crate::real::RealError::Unsupported(String::new()).to_string();
    e.0.starts_with(&prefix)
}

/// Runs the scenarios in `dir` and renders the markdown.
pub fn table(dir: &Path, opts: &TableOptions) -> Result<String, BadInput> {
    let mut scenarios = Vec::new();
    for f in scenario_files(dir)? {
        scenarios.push(opts.locks.load(&f).map_err(|e| BadInput(e.to_string()))?);
    }
    // Simulated runs of every scenario in parallel, folded in file order; real runs after
    // them, one at a time (they spawn processes and bind ports).
    let mut sims = Vec::new();
    let mut error = None;
    let indices: Vec<u64> = (0..scenarios.len() as u64).collect();
    let per_scenario = RunOptions {
        seeds: Some(opts.seeds),
        jobs: 1,
        locks: opts.locks.clone(),
        ..RunOptions::default()
    };
    run_ordered(
        &indices,
        opts.jobs.max(1),
        |i| crate::suite::timed(|| run_scenario(&scenarios[i as usize], &per_scenario)),
        |_, (r, time)| match r {
            Ok(o) => {
                sims.push((o.expect("an unsharded run has seeds"), time));
                true
            }
            Err(e) => {
                error = Some(e);
                false
            }
        },
    );
    if let Some(e) = error {
        return Err(e);
    }
    let mut rows = Vec::new();
    let mut suite = crate::suite::Suite::new(crate::suite::title(dir), opts.artifacts.clone());
    for (s, (sim, time)) in scenarios.iter().zip(sims) {
        suite.add(s, &sim, time).map_err(BadInput)?;
        let real = if opts.real {
            let (r, time) = crate::suite::timed(|| {
                run_scenario(
                    s,
                    &RunOptions {
                        real: true,
                        locks: opts.locks.clone(),
                        ..RunOptions::default()
                    },
                )
                .map(|o| o.expect("an unsharded run has seeds"))
            });
            match &r {
                Ok(o) => suite.add(s, o, time).map_err(BadInput)?,
                Err(e) if no_recipe(e) => suite.skip(s, "real", &e.to_string()),
                // A missing `redis-server` or a server that would not start: nothing real was
                // judged, and a table that said "n/a" for every row would still exit 0.
                Err(e) => return Err(BadInput(format!("{}: --real: {e}", s.name))),
            }
            Some(r)
        } else {
            None
        };
        rows.push((s, sim, real));
    }
    suite.finish().map_err(BadInput)?;

    let mut out = String::new();
    let mode = if opts.real {
        format!(
            "simulation ({} seeds each) and real `redis-server` processes (one run each)",
            opts.seeds
        )
    } else {
        format!("simulation ({} seeds each)", opts.seeds)
    };
    let _ = writeln!(
        out,
        "<!-- Generated by `{} table{}`; do not edit by hand. -->\n",
        crate::judge::program(),
        if opts.real { " --real" } else { "" }
    );
    let _ = writeln!(out, "### Lock x fault\n");
    let _ = writeln!(
        out,
        "What each lock does under each fault in the bundled scenarios, from {mode}: the checks that \
         were violated (ME = mutual exclusion), or safe. A cell with several entries has several \
         scenarios.\n"
    );
    // Columns in first-seen order, locks in `lockcheck list` order.
    let mut columns: Vec<String> = Vec::new();
    for (s, _, _) in &rows {
        let l = fault_label(s);
        if !columns.contains(&l) {
            columns.push(l);
        }
    }
    columns.sort_by_key(|c| (c != "none", c.clone()));
    let mut grid: BTreeMap<(Row, String), Vec<String>> = BTreeMap::new();
    for (s, sim, real) in &rows {
        let mut c = cell(sim);
        if let Some(Ok(r)) = real {
            let rc = cell(r);
            if rc != c {
                c = format!("{c} (real: {rc})");
            }
        }
        if s.workload.kind == WorkloadKind::AddressBook {
            c = format!("{c} [address book]");
        }
        let cells = grid.entry((row_of(s), fault_label(s))).or_default();
        if !cells.contains(&c) {
            cells.push(c);
        }
    }
    let _ = write!(out, "| lock |");
    for c in &columns {
        let _ = write!(out, " {c} |");
    }
    let _ = write!(out, "\n|---|");
    for _ in &columns {
        let _ = write!(out, "---|");
    }
    out.push('\n');
    // Each kind's rows: lease modes in order, then each deployment named apart, first seen first.
    let mut order: Vec<Row> = Vec::new();
    for k in opts.locks.kinds() {
        for fixed in [false, true] {
            let mut labels: Vec<Option<&'static str>> = vec![None];
            for (s, _, _) in &rows {
                let (kind, f, label) = row_of(s);
                if kind == k && f == fixed && !labels.contains(&label) {
                    labels.push(label);
                }
            }
            order.extend(labels.into_iter().map(|l| (k, fixed, l)));
        }
    }
    for row in order {
        let (k, _, label) = row;
        let Some(mode) = rows
            .iter()
            .find(|(s, _, _)| row_of(s) == row)
            .map(|(s, _, _)| lease_mode(s))
        else {
            continue;
        };
        let mode = mode.map(|m| format!(" ({m})")).unwrap_or_default();
        let label = label.map(|l| format!(" on {l}")).unwrap_or_default();
        let _ = write!(out, "| `{}`{mode}{label} |", k.name());
        for c in &columns {
            let v = grid
                .get(&(row, c.clone()))
                .map(|v| v.join("; "))
                .unwrap_or_default();
            let _ = write!(out, " {v} |");
        }
        out.push('\n');
    }

    let _ = writeln!(out, "\n### Every scenario, every check\n");
    let names: Vec<&str> = check::all().iter().map(|c| c.name()).collect();
    let _ = write!(out, "| scenario | lock | fault |");
    for n in &names {
        let _ = write!(out, " {} |", check::label(n));
    }
    let _ = write!(out, " as expected |\n|---|---|---|");
    for _ in &names {
        let _ = write!(out, "---|");
    }
    let _ = writeln!(out, "---|");
    let mut not_run = Vec::new();
    for (s, sim, real) in &rows {
        let _ = write!(
            out,
            "| {} | `{}` | {} |",
            s.name,
            s.lock.kind.name(),
            fault_label(s)
        );
        for n in &names {
            let v = sim.observed(n);
            let mut text = match v {
                Verdict::Violation => "**violation**".to_string(),
                Verdict::Safe => "safe".to_string(),
                Verdict::NotJudged => "not judged".to_string(),
            };
            if let Some(Ok(r)) = real {
                let rv = r.observed(n);
                if rv != v {
                    text = format!("{text} (real: {rv})");
                }
            }
            if s.expected(n).is_some() {
                text.push_str(" ✓");
            }
            let _ = write!(out, " {text} |");
        }
        let ok_sim = sim.matches_expectation();
        let expected = match real {
            None => (if ok_sim { "yes" } else { "NO" }).to_string(),
            Some(Ok(r)) => format!(
                "sim {}, real {}",
                if ok_sim { "yes" } else { "NO" },
                if r.matches_expectation() { "yes" } else { "NO" }
            ),
            Some(Err(e)) => {
                not_run.push(format!("{}: {e}", s.name));
                format!("sim {}, real n/a", if ok_sim { "yes" } else { "NO" })
            }
        };
        let _ = writeln!(out, " {expected} |");
    }
    if !not_run.is_empty() {
        let _ = writeln!(
            out,
            "\nn/a: no real-mode recipe for the scenario's faults.\n"
        );
        for n in &not_run {
            let _ = writeln!(out, "- {n}");
        }
    }
    let _ = writeln!(
        out,
        "\n✓ marks a verdict the scenario states in `expect` / `expect_checks` (so CI enforces it)."
    );
    Ok(out)
}
