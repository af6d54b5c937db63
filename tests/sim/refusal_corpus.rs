//! Every refusal in the user's words, over a corpus of malformed scenario files: the bundled
//! scenarios mutated deterministically (wrong types, numbers out of range or too large for any
//! type, truncations, unknown keys, NULs, a key left without its value, repeated tables). Each
//! refusal must name a real position (a line and column inside the file; never `:0:0:`), say
//! something (never an empty message), and speak in scenario terms: no Rust type (`u64`,
//! `struct RawFault`, "wanted string or table"), and a number too large comes with its range.

use lockcheck::scenario::{Scenario, ScenarioError};

/// Rust's type names, which no refusal may use as a word.
const RUST_TYPES: &[&str] = &[
    "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32",
    "f64",
];

/// The bundled scenarios' texts, in name order.
fn bundled() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The values a `key = value` line's value is replaced by: wrong types, out of every range,
/// beyond any integer type, and an empty value.
const VALUES: &[&str] = &[
    "\"junk\"",
    "99999999999999999999",
    "-99999999999999999999",
    "-5",
    "10000000000",
    "1.5",
    "true",
    "[1, 2, 3]",
    "[\"a\", \"b\"]",
    "{ a = 1 }",
    "",
    "1979-05-27",
];

/// Every mutation of one scenario text: each `key = value` line with each of [`VALUES`], its key
/// renamed to an unknown one, the text cut short at several places, a NUL in a comment, a key
/// without a value at the end, and a table header repeated.
fn mutations(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let with_line = |i: usize, line: String| {
        let mut l = lines.clone();
        l[i] = &line;
        let mut t = l.join("\n");
        t.push('\n');
        t
    };
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((key, _)) = line.split_once(" = ") else {
            continue;
        };
        if key.starts_with('#') || key.contains('"') {
            continue;
        }
        for v in VALUES {
            out.push((
                format!("line {} = {v}", i + 1),
                with_line(i, format!("{key} = {v}")),
            ));
        }
        out.push((
            format!("line {} unknown key", i + 1),
            with_line(i, line.replacen(key, &format!("{key}_zz"), 1)),
        ));
    }
    for cut in [1, 2, 3, 5, 8, 13] {
        let at = text.len() * cut / 16;
        let at = (0..=at).rev().find(|&a| text.is_char_boundary(a)).unwrap();
        out.push((format!("cut at {cut}/16"), text[..at].to_string()));
    }
    out.push(("NUL in a comment".into(), format!("# a\0b\n{text}")));
    out.push(("NUL in a value".into(), text.replacen("= \"", "= \"\0", 1)));
    out.push(("key without value at the end".into(), format!("{text}x =")));
    out.push(("key without value, newline".into(), format!("{text}x =\n")));
    if let Some(header) = lines
        .iter()
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
    {
        out.push(("repeated table".into(), format!("{text}\n{header}\n")));
    }
    out
}

/// What is wrong with a refusal of `text`, if anything.
fn violation(text: &str, e: &ScenarioError) -> Option<String> {
    let m = &e.message;
    let lines = text.lines().count().max(1);
    if e.line == 0 || e.column == 0 || e.to_string().contains(":0:0:") {
        return Some("no position".into());
    }
    if e.line > lines {
        return Some(format!("line {} of a {lines}-line file", e.line));
    }
    if m.trim().is_empty() {
        return Some("empty message".into());
    }
    let word = |w: &str| {
        m.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|x| x == w)
    };
    if let Some(t) = RUST_TYPES.iter().find(|t| word(t)) {
        return Some(format!("names the Rust type `{t}`"));
    }
    for rust in ["struct ", "enum ", "wanted string or table", "Raw"] {
        if m.contains(rust) {
            return Some(format!("says `{rust}`"));
        }
    }
    if m.contains("too large") && !m.contains(" from ") {
        return Some("too large, without the range".into());
    }
    None
}

#[test]
fn every_refusal_of_a_thousand_malformed_files_has_a_position_and_plain_words() {
    let mut files = 0;
    let mut refusals = 0;
    let mut violations = Vec::new();
    for (name, text) in bundled() {
        for (what, mutated) in mutations(&text) {
            files += 1;
            let Err(e) = Scenario::parse(&name, &mutated) else {
                continue;
            };
            refusals += 1;
            if let Some(v) = violation(&mutated, &e) {
                violations.push(format!("{name} ({what}): {v}: {e}"));
            }
        }
    }
    eprintln!(
        "refusal corpus: {files} files, {refusals} refusals, {} violations",
        violations.len()
    );
    assert!(files >= 1000, "only {files} files");
    assert!(refusals >= 1000, "only {refusals} refusals");
    assert!(
        violations.is_empty(),
        "{} of {refusals} refusals break the rules, the first 40:\n{}",
        violations.len(),
        violations
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
