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
    let me = found.outcome.checks[MUTUAL_EXCLUSION].verdict;
    doc["expect"] = value(me.to_string());
    // Every check the case violated is stated, the one searched for among them: under
    // `expect = "safe"` an unstated check is expected safe (`Scenario::expected`), so a finding
    // that broke two checks must say so of both to replay as expected.
    let mut checks = InlineTable::new();
    for (name, result) in &found.outcome.checks {
        if name != MUTUAL_EXCLUSION && result.verdict == Verdict::Violation {
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
            faults.push(fault_table(f));
        }
        doc.insert("faults", Item::ArrayOfTables(faults));
    }
    Ok(doc.to_string())
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
