//! The layering rule as a test: every `crate::` path in `src/` runs down the layers that
//! `ARCHITECTURE.md` draws, so no two folders import each other, directly or through others.
//!
//! A module may import only modules of a lower layer (same-layer modules stay apart too). A strict
//! order has no cycles, so this also holds "no import cycle between folders". The test reads the
//! source text, as `../shared/tools/folder-cycles` does: `use crate::a::…`, `crate::{a, b}` and
//! inline `crate::a::f()` paths, and the `crate::out!`/`crate::outln!` macros (which expand to
//! `stdout`); comment lines and `#[cfg(test)]` code (from that line to the end of the file, where
//! the tests of this crate live) are left out, since test code may build whatever it checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Module name → layer number, from the diagram under `## Layers` in `ARCHITECTURE.md`: the
/// lines of its first code block shaped `  N │ modules │ what they hold`, where a line with no
/// number continues the layer above it.
fn layers(architecture: &str) -> Result<BTreeMap<String, u32>, String> {
    let section = architecture
        .split("\n## Layers")
        .nth(1)
        .ok_or("ARCHITECTURE.md has no `## Layers` section")?;
    let block = section
        .split("```")
        .nth(1)
        .ok_or("`## Layers` has no diagram (a ``` block)")?;
    let mut of = BTreeMap::new();
    let mut current = None;
    for line in block.lines() {
        let fields: Vec<&str> = line.split('│').collect();
        if fields.len() < 3 {
            continue;
        }
        let number = fields[0].trim();
        if !number.is_empty() {
            match number.parse::<u32>() {
                Ok(n) => current = Some(n),
                Err(_) => continue, // the header row
            }
        }
        let Some(layer) = current else { continue };
        for module in fields[1].split_whitespace() {
            if let Some(before) = of.insert(module.to_string(), layer) {
                return Err(format!(
                    "ARCHITECTURE.md puts `{module}` in layers {before} and {layer}"
                ));
            }
        }
    }
    if of.is_empty() {
        return Err("the `## Layers` diagram names no module".into());
    }
    Ok(of)
}

/// The top-level module a file of `src/` belongs to (`src/sim/x.rs` → `sim`, `src/history.rs` →
/// `history`); `None` for the crate root and the binary.
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    if rel.components().count() > 1 {
        return Some(first.to_string());
    }
    let name = first.strip_suffix(".rs")?;
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The top-level modules `line` reaches through `crate::` paths.
fn imports_of_line(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a::X, b}`: the first segment of each item at the top of the braces.
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphabetic() || c == '_') => {
                        item_start = false;
                        found.push(ident_at(&group[j..]));
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident_at(after);
            // The crate's output macros are exported at its root and expand to `stdout`.
            if after[name.len()..].starts_with('!') {
                found.push("stdout".into());
            } else {
                found.push(name);
            }
        }
        rest = after;
    }
    found
}

fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every import of a module from another layer's point of view: `(file:line, from, to)`.
fn imports(files: &[(PathBuf, String)]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let Some(from) = module_of(rel) else { continue };
        for (n, line) in text.lines().enumerate() {
            if line.contains("#[cfg(test)]") {
                break;
            }
            if line.trim_start().starts_with("//") {
                continue;
            }
            for to in imports_of_line(line) {
                if to != from {
                    let at = format!("src/{}:{}", rel.display(), n + 1);
                    out.push((at, from.clone(), to));
                }
            }
        }
    }
    out
}

/// Every import that does not run down the layers, and every module with no layer, as messages
/// naming the file and line.
fn violations(architecture: &str, files: &[(PathBuf, String)]) -> Vec<String> {
    let of = match layers(architecture) {
        Ok(of) => of,
        Err(e) => return vec![e],
    };
    let mut bad = Vec::new();
    let mut modules: Vec<String> = files.iter().filter_map(|(r, _)| module_of(r)).collect();
    modules.sort();
    modules.dedup();
    for m in &modules {
        if !of.contains_key(m) {
            bad.push(format!(
                "src/{m}: in no layer of ARCHITECTURE.md's `## Layers` diagram; add it there"
            ));
        }
    }
    for (at, from, to) in imports(files) {
        if !modules.contains(&to) {
            continue; // an item at the crate root, not a module
        }
        let (Some(&lf), Some(&lt)) = (of.get(&from), of.get(&to)) else {
            continue;
        };
        if lt >= lf {
            bad.push(format!(
                "{at}: `{from}` (layer {lf}) imports `{to}` (layer {lt}); imports must run down \
                 the layers of ARCHITECTURE.md: move the shared part down, or pass it in"
            ));
        }
    }
    bad
}

fn read_src(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            read_src(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            out.push((p.strip_prefix(root).unwrap().to_path_buf(), text));
        }
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn imports_run_down_the_layers_of_architecture_md() {
    let architecture = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let src = repo().join("src");
    let mut files = Vec::new();
    read_src(&src, &src, &mut files);
    let bad = violations(&architecture, &files);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn lib_rs_lists_its_modules_by_layer() {
    let architecture = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let of = layers(&architecture).unwrap();
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    let listed: Vec<(String, u32)> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| {
            let m = m.trim_end_matches(';').to_string();
            let layer = of[&m];
            (m, layer)
        })
        .collect();
    assert!(
        listed.windows(2).all(|w| w[0].1 <= w[1].1),
        "src/lib.rs lists its modules out of layer order (lowest first): {listed:?}"
    );
}

const DIAGRAM: &str = "# A\n\n## Layers\n\n```text\n layer │ modules │ what\n   3   │ cli     │ top\n   2   │ check   │ middle\n   1   │ history │ bottom\n       │ env     │\n```\n";

fn file(path: &str, text: &str) -> (PathBuf, String) {
    (PathBuf::from(path), text.to_string())
}

/// The rule catches what it is for: a deliberate upward import fails, naming file and line.
#[test]
fn a_deliberate_upward_import_fails_naming_file_and_line() {
    let files = vec![
        file("cli/mod.rs", "use crate::check::Verdict;\n"),
        file(
            "check/mod.rs",
            "//! doc\nuse crate::history::History;\nuse crate::cli::run;\n",
        ),
        file("history.rs", "pub struct History;\n"),
        file("env/mod.rs", "pub trait Env {}\n"),
    ];
    let bad = violations(DIAGRAM, &files);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("src/check/mod.rs:3: `check` (layer 2) imports `cli` (layer 3)"),
        "{}",
        bad[0]
    );
}

/// Same-layer imports, grouped imports, inline paths and the output macros all count; comments
/// and test code do not; a module missing from the diagram is named.
#[test]
fn every_kind_of_path_counts() {
    let files = vec![
        file("history.rs", "fn f() { crate::env::thing(); }\n"),
        file("env/mod.rs", "use crate::{history::Event, check};\n// use crate::cli;\n#[cfg(test)]\nuse crate::cli;\n"),
        file("check/mod.rs", "fn g() { crate::outln!(\"x\"); }\n"),
        file("stdout.rs", "\n"),
    ];
    let bad = violations(DIAGRAM, &files);
    let text = bad.join("\n");
    assert!(text.contains("src/stdout: in no layer"), "{text}");
    assert!(
        text.contains("src/history.rs:1: `history` (layer 1) imports `env` (layer 1)"),
        "{text}"
    );
    assert!(
        text.contains("src/env/mod.rs:1: `env` (layer 1) imports `history` (layer 1)"),
        "{text}"
    );
    assert!(
        text.contains("src/env/mod.rs:1: `env` (layer 1) imports `check` (layer 2)"),
        "{text}"
    );
    assert!(!text.contains("imports `cli`"), "{text}");
    assert_eq!(bad.len(), 4, "{text}");
}

/// Literals outside `src/check/` that spell a check's name but mean something else, with why.
const NOT_CHECK_NAMES: &[(&str, &str, &str)] = &[(
    "src/real/program_lock.rs",
    "release",
    "the client-program protocol's operation, not the release check",
)];

/// Every `"<check name>"` string literal in `files` outside `src/check/` (`file:line: name`), but
/// those `allowed` names; and every allowed entry that no longer occurs, so the list stays true.
fn check_name_literals(
    files: &[(PathBuf, String)],
    names: &[&str],
    allowed: &[(&str, &str, &str)],
) -> Vec<String> {
    let mut bad = Vec::new();
    let mut seen = Vec::new();
    for (rel, text) in files {
        if rel.starts_with("check") {
            continue;
        }
        let at = format!("src/{}", rel.display());
        for (n, line) in text.lines().enumerate() {
            for name in names {
                if !line.contains(&format!("\"{name}\"")) {
                    continue;
                }
                match allowed.iter().position(|&(f, a, _)| f == at && a == *name) {
                    Some(i) => seen.push(i),
                    None => bad.push(format!(
                        "{at}:{}: names the check `{name}` by a string literal; use its \
                         declaration (`check::MUTUAL_EXCLUSION`, `<Checker>::DECLARATION.name`)",
                        n + 1
                    )),
                }
            }
        }
    }
    for (i, (f, a, why)) in allowed.iter().enumerate() {
        if !seen.contains(&i) {
            bad.push(format!(
                "{f}: no longer has \"{a}\" ({why}); drop it from the list"
            ));
        }
    }
    bad
}

/// Nothing outside `src/check/` names a check by a string literal: a check's name, label and
/// parameters come from its declaration in `check::CHECKERS`.
#[test]
fn no_check_is_named_by_a_literal_outside_check() {
    let src = repo().join("src");
    let mut files = Vec::new();
    read_src(&src, &src, &mut files);
    let bad = check_name_literals(&files, lockcheck::check::CHECK_NAMES, NOT_CHECK_NAMES);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The literal search finds a planted name, leaves `src/check/` and allowed literals alone, and
/// names an allowed literal that is gone.
#[test]
fn a_planted_check_name_literal_fails() {
    let files = vec![
        file(
            "cli/table.rs",
            "fn f() {\n    short(\"mutual_exclusion\");\n}\n",
        ),
        file("check/mod.rs", "const N: &str = \"mutual_exclusion\";\n"),
        file("real/p.rs", "call(\"release\");\n"),
    ];
    let names = ["mutual_exclusion", "release"];
    let allowed = [
        ("src/real/p.rs", "release", "a protocol word"),
        ("src/x.rs", "release", "gone"),
    ];
    let bad = check_name_literals(&files, &names, &allowed);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad[0].starts_with("src/cli/table.rs:2: names the check `mutual_exclusion`"),
        "{}",
        bad[0]
    );
    assert!(
        bad[1].starts_with("src/x.rs: no longer has \"release\""),
        "{}",
        bad[1]
    );
}
