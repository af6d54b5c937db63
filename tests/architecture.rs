//! The layering rule as a test: every path in `src/` runs down the layers that `ARCHITECTURE.md`
//! draws, so no two folders import each other, directly or through others.
//!
//! A module may import only modules of a lower layer (same-layer modules stay apart too). A strict
//! order has no cycles, so this also holds "no import cycle between folders". The test reads the
//! source text of every file to its end, test modules included (a test module may import only
//! what its file may): `use crate::a::…`, `crate::{a, b}` and inline `crate::a::f()` paths; a
//! crate-root item (`crate::Scenario`, `crate::outln!`) as the module `src/lib.rs` re-exports it
//! from or the module that exports the macro; `super::` chains, climbed from the file's module
//! (and any inline `mod` it is in), counted when they leave the folder; and the file an
//! `include_str!`/`include_bytes!`/`include!` reads, which belongs to the folder it lives in.
//! Comments and the insides of string literals are left out.

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

/// The unit of layering a file of `src/` belongs to: its top-level module (`src/sim/x.rs` →
/// `sim`, `src/history.rs` → `history`), or inside a backend's folder its role there
/// (`src/backend/etcd/sim/world.rs` → `backend/etcd/sim`, `src/backend/etcd/scenario.rs` →
/// `backend/etcd/scenario`, the service's own `mod.rs` → `backend/etcd`); `None` for the crate
/// root and the binary.
fn module_of(rel: &Path) -> Option<String> {
    let path: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .map(|c| c.trim_end_matches(".rs").to_string())
        .collect();
    if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
        return None;
    }
    let path: Vec<String> = path.into_iter().filter(|p| p != "mod").collect();
    Some(unit_of_path(&path))
}

/// The unit a module path names (`[backend, etcd, sim, world]` → `backend/etcd/sim`, `[sim,
/// clock]` → `sim`): see [`module_of`].
fn unit_of_path(path: &[String]) -> String {
    match path {
        [b, rest @ ..] if b == "backend" => {
            let mut unit = vec![b.as_str()];
            unit.extend(rest.iter().take(2).map(String::as_str));
            unit.join("/")
        }
        [first, ..] => first.clone(),
        [] => String::new(),
    }
}

/// A backend unit's layer is its role's, written `backend/*/<role>` in the diagram
/// (`backend/etcd/sim` → `backend/*/sim`; a service's `mod.rs`, `backend/etcd` → `backend/*`).
fn layer_of(of: &BTreeMap<String, u32>, unit: &str) -> Option<u32> {
    if let Some(&l) = of.get(unit) {
        return Some(l);
    }
    let parts: Vec<&str> = unit.split('/').collect();
    if parts.len() >= 2 && parts[0] == "backend" {
        let mut generic = parts.clone();
        generic[1] = "*";
        return of.get(&generic.join("/")).copied();
    }
    None
}

/// The service of a backend unit (`backend/etcd/sim` → `etcd`).
fn service_of(unit: &str) -> Option<&str> {
    let mut parts = unit.split('/');
    (parts.next() == Some("backend"))
        .then(|| parts.next())
        .flatten()
}

/// A file's module path from the crate root (`sim/cluster/failover.rs` → `[sim, cluster,
/// failover]`, `sim/mod.rs` → `[sim]`), which `super::` paths climb.
fn module_path(rel: &Path) -> Vec<String> {
    let mut path: Vec<String> = rel
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .map(|c| c.trim_end_matches(".rs").to_string())
        .collect();
    if path.last().is_some_and(|l| l == "mod" || l == "lib") {
        path.pop();
    }
    path
}

/// The text with comments, and the insides of string and character literals, blanked to spaces
/// (newlines kept), so a `crate::` in a doc comment or a message is not an import, and brace
/// counting sees only code. Every character stays at its place.
fn code_only(text: &str) -> Vec<char> {
    let b: Vec<char> = text.chars().collect();
    let mut out = b.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // `b'x'`: the `b` of a byte literal, not the end of an identifier.
    let byte_prefix = |i: usize| b[i - 1] == 'b' && (i < 2 || !ident(b[i - 2]));
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        let prev_ident = i > 0 && ident(b[i - 1]);
        if b[i] == '/' && next == Some('/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(b.len(), |n| i + n);
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == '/' && next == Some('*') {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if b[i] == 'r' && !prev_ident && matches!(next, Some('"' | '#')) {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == '#').count();
            let open = i + 1 + hashes;
            if b.get(open) != Some(&'"') {
                i += 1;
                continue;
            }
            let mut j = open + 1;
            while j < b.len()
                && !(b[j] == '"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes)
            {
                j += 1;
            }
            blank(&mut out, open + 1, j);
            i = j + 1 + hashes;
        } else if b[i] == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if b[i] == '\'' && (!prev_ident || byte_prefix(i)) {
            // A character literal ('x', b'x', '\n', '\u{7f}'), not a lifetime ('a).
            let end = if next == Some('\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == '\'')
                    .map(|n| i + 2 + n)
            } else {
                (b.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// What the crate root names besides its modules: each `pub use` re-export (`crate::Scenario` →
/// `scenario`) and each `#[macro_export]` macro (`crate::outln!` → `stdout`), by name → the
/// top-level module it comes from.
fn root_items(files: &[(PathBuf, String)]) -> BTreeMap<String, String> {
    let mut of = BTreeMap::new();
    for (rel, text) in files {
        let code: String = code_only(text).into_iter().collect();
        if rel == Path::new("lib.rs") {
            for statement in code.split("pub use ").skip(1) {
                let statement = statement.split(';').next().unwrap_or("");
                let module = ident_at(statement.trim_start());
                let items = match (statement.find('{'), statement.rfind("::")) {
                    (Some(open), _) => statement[open + 1..].trim_end_matches('}').to_string(),
                    (None, Some(last)) => statement[last + 2..].to_string(),
                    (None, None) => continue, // `pub use redis;`: another crate
                };
                for item in items.split(',') {
                    // `a::B as C` names C.
                    let name = item.split(" as ").last().unwrap_or("").trim();
                    let name = name.rsplit("::").next().unwrap_or("").trim();
                    if !name.is_empty() && name != "self" {
                        of.insert(name.to_string(), module.clone());
                    }
                }
            }
        } else if let Some(module) = module_of(rel) {
            for exported in code.split("#[macro_export]").skip(1) {
                if let Some(after) = exported.trim_start().strip_prefix("macro_rules!") {
                    of.insert(ident_at(after.trim_start()), module.clone());
                }
            }
        }
    }
    of
}

/// The top-level modules `line` reaches through paths: `crate::…` (an item at the crate root
/// resolved through `root`), `super::…` chains (climbed from the module path `at`) and groups
/// (`crate::{a::X, b}`).
fn imports_of_line(line: &str, at: &[String], root: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find(['c', 's']) {
        let boundary = rest[..i]
            .chars()
            .last()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
        let tail = &rest[i..];
        let base: Option<(Vec<String>, &str)> = if !boundary {
            None
        } else if let Some(after) = tail.strip_prefix("crate::") {
            Some((Vec::new(), after))
        } else if tail.starts_with("super::") {
            let mut path = at.to_vec();
            let mut after = tail;
            let mut climbed = true;
            while let Some(a) = after.strip_prefix("super::") {
                climbed &= path.pop().is_some();
                after = a;
            }
            climbed.then_some((path, after))
        } else {
            None
        };
        let Some((base, after)) = base else {
            rest = &tail[1..];
            continue;
        };
        if !base.is_empty() {
            let mut path = base.clone();
            path.extend(segments_at(after));
            found.push(unit_of_path(&path));
        } else {
            let mut names = Vec::new();
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
                            names.push(segments_at(&group[j..]));
                        }
                        _ => {}
                    }
                }
            } else {
                names.push(segments_at(after));
            }
            for path in names {
                let Some(first) = path.first() else { continue };
                found.push(
                    root.get(first)
                        .cloned()
                        .unwrap_or_else(|| unit_of_path(&path)),
                );
            }
        }
        rest = after;
    }
    found
}

/// The module path at the start of `s` (`backend::etcd::sim::X;` → `[backend, etcd, sim, X]`),
/// up to the first character that is neither part of an identifier nor a `::`.
fn segments_at(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        let ident = ident_at(rest);
        if ident.is_empty() {
            break;
        }
        rest = &rest[ident.len()..];
        out.push(ident);
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out
}

fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level module of the file an `include_str!`/`include_bytes!`/`include!` on `line`
/// reads (`code` is the line with literals blanked, `raw` the line itself): a path relative to
/// the including file, so `src/simredis/native.rs` including `../lock/scripts/x.lua` reads from
/// `lock`. A file outside `src/`, or at its top, belongs to no module.
fn includes_of_line(code: &str, raw: &str, rel: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let raw: Vec<char> = raw.chars().collect();
    let code: Vec<char> = code.chars().collect();
    let text: String = code.iter().collect();
    for macro_name in ["include_str!(", "include_bytes!(", "include!("] {
        let mut from = 0;
        while let Some(i) = text[from..].find(macro_name) {
            let start = from + i;
            from = start + macro_name.len();
            let boundary = text[..start]
                .chars()
                .last()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            let open = text[..from].chars().count();
            let Some(quote) = (open..code.len()).find(|&k| !code[k].is_whitespace()) else {
                continue;
            };
            if !boundary || code[quote] != '"' {
                continue;
            }
            let Some(close) = (quote + 1..code.len()).find(|&k| code[k] == '"') else {
                continue;
            };
            let literal: String = raw[quote + 1..close].iter().collect();
            let mut path: Vec<String> = rel
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
                .filter_map(|c| c.as_os_str().to_str().map(String::from))
                .collect();
            let mut outside = false;
            for part in literal.split('/') {
                match part {
                    "" | "." => {}
                    ".." => outside |= path.pop().is_none(),
                    p => path.push(p.to_string()),
                }
            }
            if !outside && path.len() > 1 {
                found.push(unit_of_path(&path));
            }
        }
    }
    found
}

/// Every import of a module from another layer's point of view: `(file:line, from, to)`. Every
/// line of code counts, test modules included; comments and literals do not.
fn imports(files: &[(PathBuf, String)]) -> Vec<(String, String, String)> {
    let root = root_items(files);
    let mut out = Vec::new();
    for (rel, text) in files {
        let Some(from) = module_of(rel) else { continue };
        let file_path = module_path(rel);
        let code: String = code_only(text).into_iter().collect();
        // Inline modules (`mod tests {`) open below the file's path, each closing at the depth
        // it opened at.
        let mut inline: Vec<(String, i64)> = Vec::new();
        let mut depth: i64 = 0;
        for (n, (line, raw)) in code.lines().zip(text.lines()).enumerate() {
            let mut at = file_path.clone();
            at.extend(inline.iter().map(|(m, _)| m.clone()));
            let reached = imports_of_line(line, &at, &root)
                .into_iter()
                .chain(includes_of_line(line, raw, rel));
            for to in reached {
                if to != from {
                    let at = format!("src/{}:{}", rel.display(), n + 1);
                    out.push((at, from.clone(), to));
                }
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(2) {
                if w[0] == "mod" && line.contains('{') {
                    inline.push((ident_at(w[1]), depth));
                }
            }
            for c in line.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if inline.last().is_some_and(|&(_, d)| d == depth) {
                            inline.pop();
                        }
                    }
                    _ => {}
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
        if layer_of(&of, m).is_none() {
            bad.push(format!(
                "src/{m}: in no layer of ARCHITECTURE.md's `## Layers` diagram; add it there"
            ));
        }
    }
    for (at, from, to) in imports(files) {
        if !modules.contains(&to) {
            continue; // an item at the crate root, not a module
        }
        let (Some(lf), Some(lt)) = (layer_of(&of, &from), layer_of(&of, &to)) else {
            continue;
        };
        let (sf, st) = (service_of(&from), service_of(&to));
        if sf.is_some() && st.is_some() && sf != st {
            bad.push(format!(
                "{at}: `{from}` imports `{to}`: one backend never imports another's code; move \
                 what both need out of `src/backend/`"
            ));
        } else if lt >= lf {
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
        // A module declared in place (`pub mod __moved { … }`, the old paths) holds no code.
        .filter(|m| m.ends_with(';'))
        // `backend` spans the layers: each part of a service's folder sits at its role's layer.
        .filter(|m| !m.starts_with("backend"))
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
/// and string literals do not; a module missing from the diagram is named.
#[test]
fn every_kind_of_path_counts() {
    let files = vec![
        file("history.rs", "fn f() { crate::env::thing(); }\n"),
        file(
            "env/mod.rs",
            "use crate::{history::Event, check};\n// use crate::cli;\nconst S: &str = \"crate::cli\";\n",
        ),
        file("check/mod.rs", "fn g() { crate::outln!(\"x\"); }\n"),
        file("stdout.rs", "#[macro_export]\nmacro_rules! outln { () => {} }\n"),
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
    let reached: Vec<_> = imports(&files).into_iter().map(|(_, _, to)| to).collect();
    assert!(reached.contains(&"stdout".to_string()), "{reached:?}");
}

/// The one violation `files` gives, asserted to start with `expected`.
fn fails_with(files: &[(PathBuf, String)], expected: &str) {
    let bad = violations(DIAGRAM, files);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with(expected), "{}", bad[0]);
}

/// A test module imports only what its file may: an upward import inside `#[cfg(test)]` fails.
#[test]
fn an_upward_import_in_a_test_module_fails() {
    fails_with(
        &[
            file("cli/mod.rs", "\n"),
            file(
                "check/mod.rs",
                "pub fn f() {}\n\n#[cfg(test)]\nmod tests {\n    use super::f;\n    use crate::cli::run;\n}\n",
            ),
        ],
        "src/check/mod.rs:6: `check` (layer 2) imports `cli` (layer 3)",
    );
}

/// A file `include_bytes!`/`include_str!` reads belongs to the folder it lives in.
#[test]
fn an_upward_include_fails() {
    fails_with(
        &[
            file("check/mod.rs", "\n"),
            file(
                "env/native.rs",
                "const S: &[u8] =\n    include_bytes!(\"../check/scripts/s.lua\");\nconst T: &str = include_str!(\"scripts/own.lua\");\n",
            ),
        ],
        "src/env/native.rs:2: `env` (layer 1) imports `check` (layer 2)",
    );
}

/// `crate::Name` reaches the module `src/lib.rs` re-exports `Name` from.
#[test]
fn an_upward_crate_root_path_fails() {
    fails_with(
        &[
            file(
                "lib.rs",
                "pub mod check;\npub mod cli;\npub use cli::{Report, run as Run};\n",
            ),
            file("cli/mod.rs", "pub struct Report;\n"),
            file("check/mod.rs", "fn f(_: crate::Report) {}\n"),
        ],
        "src/check/mod.rs:1: `check` (layer 2) imports `cli` (layer 3)",
    );
}

/// `super::super::` that leaves a folder reaches the module it climbs to; inside one it does not
/// count, and a test module's `super::` climbs from the test module.
#[test]
fn an_upward_super_chain_fails() {
    fails_with(
        &[
            file("cli/mod.rs", "pub fn run() {}\n"),
            file("history/mod.rs", "pub struct History;\n"),
            file("history/node/mod.rs", "pub struct Node;\n"),
            file(
                "history/node/name.rs",
                "use super::Node;\nuse super::super::History;\n#[cfg(test)]\nmod tests {\n    use super::super::Node;\n}\nuse super::super::super::cli::run;\n",
            ),
        ],
        "src/history/node/name.rs:7: `history` (layer 1) imports `cli` (layer 3)",
    );
    fails_with(
        &[
            file("check/mod.rs", "\n"),
            file(
                "history.rs",
                "#[cfg(test)]\nmod tests {\n    mod inner {\n        use super::super::super::check::X;\n    }\n}\n",
            ),
        ],
        "src/history.rs:4: `history` (layer 1) imports `check` (layer 2)",
    );
}

/// Literals outside `src/check/` that spell a check's name but mean something else, with why.
const NOT_CHECK_NAMES: &[(&str, &str, &str)] = &[(
    "src/real/client_programs/client_program_lock.rs",
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

const BACKEND_DIAGRAM: &str = "# A\n\n## Layers\n\n```text\n layer │ modules │ what\n   3   │ backend/*/sim │ worlds\n   2   │ sim backend/*/engine │ shared\n   1   │ history │ bottom\n```\n";

/// Inside a backend's folder each role sits at its own layer: a service's engine that reaches up
/// into its simulated world fails, naming the role, and so does a generic module below the
/// worlds that names one; the world using its engine and the generic parts below passes.
#[test]
fn a_backend_role_importing_up_fails_and_so_does_a_generic_module_below_it() {
    let files = vec![
        file(
            "backend/etcd/engine/machine.rs",
            "use crate::history::History;\nuse crate::backend::etcd::sim::world::run;\n",
        ),
        file(
            "backend/etcd/sim/world.rs",
            "use super::super::engine::machine::M;\nuse crate::sim::clock;\n",
        ),
        file(
            "sim/mod.rs",
            "fn f() {\n    crate::backend::etcd::sim::world::run();\n}\n",
        ),
        file("history.rs", "pub struct History;\n"),
    ];
    let bad = violations(BACKEND_DIAGRAM, &files);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad[0].starts_with(
            "src/backend/etcd/engine/machine.rs:2: `backend/etcd/engine` (layer 2) imports \
             `backend/etcd/sim` (layer 3)"
        ),
        "{}",
        bad[0]
    );
    assert!(
        bad[1]
            .starts_with("src/sim/mod.rs:2: `sim` (layer 2) imports `backend/etcd/sim` (layer 3)"),
        "{}",
        bad[1]
    );
}

/// One backend never imports another's code, whatever the layers say; and a role the diagram
/// does not place is named.
#[test]
fn a_backend_importing_another_backend_fails() {
    let files = vec![
        file(
            "backend/zookeeper/sim/world.rs",
            "use crate::backend::mysql::engine::Engine;\n",
        ),
        file("backend/mysql/engine/mod.rs", "pub struct Engine;\n"),
        file("backend/mysql/gadget.rs", "pub fn g() {}\n"),
    ];
    let bad = violations(BACKEND_DIAGRAM, &files).join("\n");
    assert!(
        bad.contains(
            "src/backend/zookeeper/sim/world.rs:1: `backend/zookeeper/sim` imports \
             `backend/mysql/engine`: one backend never imports another's code"
        ),
        "{bad}"
    );
    assert!(
        bad.contains("src/backend/mysql/gadget: in no layer"),
        "{bad}"
    );
}

/// One concept per file keeps a file readable in one sitting: no file of `src/` or `models/` is
/// over 650 lines (a long file's tests go beside it, as `check/liveness_tests.rs`).
#[test]
fn no_source_file_is_over_650_lines() {
    let mut long = Vec::new();
    for dir in ["src", "models"] {
        let root = repo().join(dir);
        let mut files = Vec::new();
        read_src(&root, &root, &mut files);
        for (rel, text) in files {
            let lines = text.lines().count();
            if lines > 650 {
                long.push(format!("{dir}/{}: {lines} lines", rel.display()));
            }
        }
    }
    assert!(long.is_empty(), "split these files:\n{}", long.join("\n"));
}
