//! `lockcheck list`: what lockcheck can run.

use crate::registry::Registry;
use crate::scenario::{FAULT_KINDS, WORKLOAD_POINTS};
use std::fmt::Write as _;
use std::path::PathBuf;

/// The variable that names the bundled scenarios' directory.
pub const SCENARIOS_ENV: &str = "LOCKCHECK_SCENARIOS";

/// The bundled scenarios' directory, looked up when the program runs (never compiled in, so an
/// installed binary does not depend on the source tree it was built from): `$LOCKCHECK_SCENARIOS`
/// when set, else `scenarios/` in the current directory (the checkout's root).
pub fn scenario_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(SCENARIOS_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let here = PathBuf::from("scenarios");
    if here.is_dir() {
        Ok(here)
    } else {
        Err(format!(
            "no bundled scenarios here: run from the lockcheck checkout (its `scenarios/`), set {SCENARIOS_ENV}=<dir>, or name a directory"
        ))
    }
}

/// The listing text: lockcheck's lock kinds, then those registered in `locks`.
pub fn list(locks: &Registry) -> String {
    let kinds = locks.kinds();
    let mut out = String::from("lock kinds:\n");
    for k in &kinds {
        let _ = writeln!(out, "  {:<22} {}", k.name(), k.about());
        for alias in k.aliases() {
            let _ = writeln!(out, "  {alias:<22} the older name of `{}`", k.name());
        }
    }
    out.push_str("fault kinds:\n");
    for f in FAULT_KINDS {
        let _ = writeln!(out, "  {f}");
    }
    out.push_str("named points (`on = ...`; a client `crash` fires at one):\n");
    let mut owners = vec![("workload", WORKLOAD_POINTS)];
    owners.extend(kinds.iter().map(|k| (k.name(), k.points())));
    for (owner, points) in owners {
        for p in points {
            let _ = writeln!(out, "  {owner:<22} {:<16} {}", p.name, p.about);
        }
    }
    out.push_str("scenarios:\n");
    let files = scenario_dir().and_then(|d| super::run::scenario_files(&d).map_err(|e| e.0));
    match files {
        Ok(files) => {
            for f in files {
                match locks.load(&f) {
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
