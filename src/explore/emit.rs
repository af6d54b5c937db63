//! Writing what explore found as a normal scenario file.
//!
//! The file starts from the input document (its comments, lock, cluster and clocks stay as the
//! user wrote them) and replaces only what the search chose: the `[[faults]]`, the seed, the
//! workload knobs, `expect`/`expect_checks` and `about`. `lockcheck run` on the result replays the
//! found run to the same trace hash, because the scenario it parses is the one the search ran.

use super::search::Found;
use crate::check::Verdict;
use crate::scenario::fault_table;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table};

/// The found scenario's text, from the input scenario's text.
pub fn found_scenario(input: &str, found: &Found) -> Result<String, String> {
    let mut doc: DocumentMut = input
        .parse()
        .map_err(|e| format!("cannot re-read the scenario to write the finding: {e}"))?;
    let s = &found.scenario;
    let name = format!("{}-found", s.name);
    doc["name"] = value(name);
    doc["about"] = value(about(found));
    let me = found.outcome.checks["mutual_exclusion"].verdict;
    doc["expect"] = value(me.to_string());
    let mut checks = InlineTable::new();
    if found.check != "mutual_exclusion" {
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

/// The `about` line: what the search found, in which case, and the seed.
fn about(found: &Found) -> String {
    let summary = &found.outcome.checks[&found.check].summary;
    format!(
        "Found by lockcheck explore (case {}, shrunk in {} steps): {} violated — {}; seed {}.",
        found.index, found.shrink_steps, found.check, summary, found.scenario.seed
    )
}

fn pair(v: [u64; 2]) -> Array {
    let mut a = Array::new();
    a.push(v[0] as i64);
    a.push(v[1] as i64);
    a
}
