//! `lockcheck list`: what lockcheck can run.

use crate::lock::LockKind;
use crate::scenario::{Scenario, FAULT_KINDS, WORKLOAD_POINTS};
use std::fmt::Write as _;
use std::path::Path;

/// The bundled scenarios' directory, next to the crate.
pub const SCENARIO_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios");

/// The listing text.
pub fn list() -> String {
    let mut out = String::from("lock kinds:\n");
    for k in LockKind::ALL {
        let _ = writeln!(out, "  {:<22} {}", k.name(), k.about());
    }
    out.push_str("fault kinds:\n");
    for f in FAULT_KINDS {
        let _ = writeln!(out, "  {f}");
    }
    out.push_str("named points (`on = ...`; a client `crash` fires at one):\n");
    let _ = writeln!(out, "  {:<22} {}", "workload", WORKLOAD_POINTS.join(", "));
    for k in LockKind::ALL {
        if !k.points().is_empty() {
            let _ = writeln!(out, "  {:<22} {}", k.name(), k.points().join(", "));
        }
    }
    out.push_str("scenarios:\n");
    match crate::runner::scenario_files(Path::new(SCENARIO_DIR)) {
        Ok(files) => {
            for f in files {
                match Scenario::load(&f) {
                    Ok(s) => {
                        let _ = writeln!(
                            out,
                            "  {:<32} expect {:<9} {}",
                            s.name,
                            s.expect.to_string(),
                            f.display()
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(out, "  (unreadable) {e}");
                    }
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  ({e})");
        }
    }
    out
}
