//! Writing what explore found as a normal scenario file.
//!
//! The file starts from the input document (its comments, lock, cluster and clocks stay as the
//! user wrote them) and replaces only what the search chose: the `[[faults]]`, the seed, the
//! workload knobs, `expect`/`expect_checks` and `about`. `lockcheck run` on the result replays the
//! found run to the same trace hash, because the scenario it parses is the one the search ran.

use super::real::Rate;
use super::search::Found;
use crate::check::{Verdict, MUTUAL_EXCLUSION};
use crate::scenario::fault_table;
use std::path::Path;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};

/// The found scenario's text, from the input scenario's text. `rate`: on real servers, how often
/// the file violated when run from the file (`None` before it has been run, and in simulation).
/// `moved_from`: the input's directory, when the file is written in another one.
pub fn found_scenario(
    input: &str,
    found: &Found,
    rate: Option<Rate>,
    moved_from: Option<&Path>,
) -> Result<String, String> {
    found_scenario_replayed(input, found, rate, moved_from, None)
}

/// [`found_scenario`] for a file run `rate.runs` times on real servers, `by_check` counting the
/// runs that violated each check: it expects what most of its runs showed (the check searched
/// for stays violated: that is the finding, with its rate in `about`), not what the search's one
/// run showed, since a real run is not a function of its seed.
pub fn found_scenario_replayed(
    input: &str,
    found: &Found,
    rate: Option<Rate>,
    moved_from: Option<&Path>,
    by_check: Option<&super::real::ByCheck>,
) -> Result<String, String> {
    let mut doc: DocumentMut = input
        .parse()
        .map_err(|e| format!("cannot re-read the scenario to write the finding: {e}"))?;
    if let Some(dir) = moved_from {
        rebase_command(&mut doc, dir);
    }
    let s = &found.scenario;
    let name = format!("{}-found", s.name);
    doc["name"] = value(name);
    doc["about"] = value(about(found, rate));
    // What a check is expected to give: in the found run, or in most runs of the file.
    let violated = |name: &str| match (by_check, rate) {
        (Some(by), Some(r)) if r.runs > 0 => {
            name == found.check || 2 * by.get(name).copied().unwrap_or(0) > r.runs
        }
        _ => found.outcome.checks[name].verdict == Verdict::Violation,
    };
    let me = if violated(MUTUAL_EXCLUSION) {
        Verdict::Violation
    } else {
        Verdict::Safe
    };
    doc["expect"] = value(me.to_string());
    // Every check the case violated is stated, the one searched for among them: under
    // `expect = "safe"` an unstated check is expected safe (`Scenario::expected`), so a finding
    // that broke two checks must say so of both to replay as expected.
    let mut checks = InlineTable::new();
    for name in found.outcome.checks.keys() {
        if name != MUTUAL_EXCLUSION && violated(name) {
            checks.insert(name, Verdict::Violation.to_string().into());
        }
    }
    if found.check != MUTUAL_EXCLUSION && !checks.contains_key(&found.check) {
        checks.insert(&found.check, Verdict::Violation.to_string().into());
    }
    doc.remove("expect_checks");
    if !checks.is_empty() {
        doc["expect_checks"] = value(checks);
    }
    doc["seed"] = value(s.seed as i64);
    let workload = doc
        .entry("workload")
        .or_insert(Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or("[workload] is not a table")?;
    workload.insert("clients", value(i64::from(s.workload.clients)));
    workload.insert("cycles", value(i64::from(s.workload.cycles)));
    workload.insert("hold_ms", value(pair(s.workload.hold_ms)));
    // Written only where it matters, so a space without nesting writes the file it always did.
    if s.workload.nested > 0 || workload.contains_key("nested") {
        workload.insert("nested", value(i64::from(s.workload.nested)));
    }
    doc.remove("explore");
    // The one `[explore]` key a run reads: its pauses keep out of the check-to-write windows.
    if s.pauses_spare_writes() {
        let mut explore = Table::new();
        explore.insert("pause_between_check_and_write", value(false));
        doc.insert("explore", Item::Table(explore));
    }
    doc.remove("faults");
    if !s.faults.is_empty() {
        let mut faults = ArrayOfTables::new();
        for f in &s.faults {
            let mut table = fault_table(f);
            if let (Some(by), Some(r)) = (by_check, rate) {
                let idle = by.get(&crate::world::never_fired(f)).copied().unwrap_or(0);
                if idle > 0 {
                    table
                        .decor_mut()
                        .set_prefix(never_fired_note(found, idle, r));
                }
            }
            faults.push(table);
        }
        doc.insert("faults", Item::ArrayOfTables(faults));
    }
    Ok(doc.to_string())
}

/// The comment above a fault that never fired in `idle` of the file's runs (`rate`): why it is
/// still in the file. The shrink's last pass drops every fault the violation does not need at
/// the margin, so one that stayed without firing changed the runs anyway: on real servers a
/// world prepares for some faults before any client runs, and that shifts the run's timing.
fn never_fired_note(found: &Found, idle: u32, rate: Rate) -> String {
    let kept = if found.cut_short || found.run_cut {
        "the search ran out of time before it tried the case without it"
    } else {
        "the search kept it because without it the case violated less often than the margin; \
         a real world prepares for some faults before any client runs (a failover holds \
         replication back, a clock fault starts the client under libfaketime, a partition \
         routes it through a proxy), and that changes the run's timing even when the fault \
         itself never fires"
    };
    let mut note = format!(
        "This fault never fired in {idle} of the {} runs of this file (no client reached its \
         point by the run's end); {kept}.",
        rate.runs
    );
    // Wrapped as TOML comments of at most 100 columns.
    let mut out = String::from("\n");
    while !note.is_empty() {
        let cut = if note.len() <= 96 {
            note.len()
        } else {
            note[..96].rfind(' ').unwrap_or(96)
        };
        out.push_str("# ");
        out.push_str(note[..cut].trim_end());
        out.push('\n');
        note = note[cut..].trim_start().to_string();
    }
    out
}

/// The `about` line: what the search found, in which case, and the seed; on real servers, how
/// often it reproduces instead of the seed (which does not fix a real run).
fn about(found: &Found, rate: Option<Rate>) -> String {
    let summary = &found.outcome.checks[&found.check].summary;
    let steps = if found.run_cut {
        "0 steps: --time-limit cut the case's own run, judged up to the cut; it may not be \
         minimal"
            .to_string()
    } else if found.cut_short {
        format!(
            "{} steps, then cut short by --time-limit: a smaller case may also violate",
            found.shrink_steps
        )
    } else {
        format!("{} steps", found.shrink_steps)
    };
    let Some(confirmed) = found.confirmed else {
        return format!(
            "Found by lockcheck explore (case {}, shrunk in {steps}): {} violated — {}; seed {}.",
            found.index, found.check, summary, found.scenario.seed
        );
    };
    let file = rate.map_or_else(
        || "not yet run from this file".to_string(),
        |r| format!("this file violated in {r} on real servers"),
    );
    let back = match found.taken_back {
        0 => String::new(),
        1 => ", the last step taken back as it fell short of the margin when run again".to_string(),
        n => format!(", the last {n} taken back as they fell short of the margin when run again"),
    };
    format!(
        "Found by lockcheck explore --real (case {}, shrunk in {steps}{back}): {} violated — {}; \
         {file} (the case as drawn: once in the search, then in {confirmed} when rerun).",
        found.index, found.check, summary
    )
}

/// A client program's `[lock] command` names its files relative to the scenario's directory (and
/// runs there). A finding written in another directory gets them as absolute paths, so that
/// `lockcheck run` on it starts the same program; it then runs in the finding's directory.
fn rebase_command(doc: &mut DocumentMut, input_dir: &Path) {
    let Some(command) = doc
        .get_mut("lock")
        .and_then(|l| l.get_mut("command"))
        .and_then(|c| c.as_array_mut())
    else {
        return;
    };
    for arg in command.iter_mut() {
        let Some(text) = arg.as_str() else { continue };
        let path = Path::new(text);
        if text.contains('/') && path.is_relative() {
            // Joined, not canonicalized: a virtualenv's `bin/python` is a symlink whose target
            // is another interpreter, without the virtualenv's packages.
            *arg = lexically_joined(input_dir, path)
                .display()
                .to_string()
                .into();
        }
    }
}

/// `dir` joined with `rel`, each `..` of `rel` taking back one component of `dir` as written
/// (`/a/scenarios/clients` + `../../bin/x` = `/a/bin/x`), without reading the file system, so
/// that a symlink at the end keeps its name. A `..` with nothing left to take back is kept (in a
/// relative `dir`) or dropped (at `/`).
fn lexically_joined(dir: &Path, rel: &Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = dir.to_path_buf();
    for part in rel.components() {
        match part {
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir) => {}
                _ => out.push(".."),
            },
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

fn pair(v: [u64; 2]) -> Array {
    let mut a = Array::new();
    a.push(v[0] as i64);
    a.push(v[1] as i64);
    a
}

#[cfg(test)]
mod tests {
    use super::lexically_joined;
    use std::path::Path;

    #[test]
    fn a_client_command_path_is_joined_without_resolving_symlinks() {
        let dir = Path::new("/repo/scenarios/clients");
        assert_eq!(
            lexically_joined(dir, Path::new("../../.venv-clients/bin/python")),
            Path::new("/repo/.venv-clients/bin/python")
        );
        assert_eq!(
            lexically_joined(dir, Path::new("./client.py")),
            Path::new("/repo/scenarios/clients/client.py")
        );
        assert_eq!(
            lexically_joined(Path::new("/a"), Path::new("../../x")),
            Path::new("/x")
        );
    }
}
