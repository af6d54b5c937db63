//! Refusals in the user's words. The TOML parser and serde describe a bad value in Rust's terms
//! (`invalid type: string "x", expected u64`, `expected struct RawFault`, `wanted string or
//! table`, `number too large to fit in target type`) or not at all (an empty message at an early
//! end of the file). A scenario's author knows keys, not Rust types: every message is rewritten
//! here to name the key, what it takes in the scenario's terms (with its range where lockcheck
//! knows it) and what was written instead.

use super::input::expected_value;

/// Words the parser and serde use for Rust types, and what a scenario's author calls them.
const TYPE_WORDS: &[(&str, &str)] = &[
    ("u8", "a whole number"),
    ("u16", "a whole number"),
    ("u32", "a whole number"),
    ("u64", "a whole number"),
    ("usize", "a whole number"),
    ("i8", "a whole number"),
    ("i16", "a whole number"),
    ("i32", "a whole number"),
    ("i64", "a whole number"),
    ("isize", "a whole number"),
    ("f32", "a number"),
    ("f64", "a number"),
    ("a sequence", "a list `[...]`"),
    ("a map", "a table"),
    ("wanted string or table", "a name in quotes"),
    ("a boolean", "`true` or `false`"),
    ("a borrowed string", "a string in quotes"),
    ("a string", "a string in quotes"),
];

/// `message` (from the parser, serde or a check) about the value of `key` (its last name and
/// dotted path, when the error points into a value) in the scenario's terms.
pub fn plain(message: &str, key: Option<(&str, &str)>) -> String {
    let m = message.trim();
    let name = key.map(|(_, path)| format!("`{path}`"));
    let want = key.and_then(|(k, path)| expected_value(k, path));
    if m.is_empty() {
        return format!(
            "the file breaks off here{}: a key is written `key = value`, and every `[`, `{{` and \
             `\"` is closed",
            name.map(|n| format!(" after {n}")).unwrap_or_default()
        );
    }
    if let Some(rest) = m
        .strip_prefix("invalid type: ")
        .or_else(|| m.strip_prefix("invalid value: "))
    {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let want = want.unwrap_or_else(|| words(expected));
        let who = name.unwrap_or_else(|| "this value".into());
        return format!("{who} must be {want}, got {}", written(got));
    }
    if m.starts_with("number too large") || m.starts_with("number too small") {
        let who = name.unwrap_or_else(|| "this number".into());
        return match want {
            Some(want) => format!("{who} must be {want}; this number is out of that range"),
            None => format!(
                "{who}: this number is out of the range a scenario's whole numbers have, from {} \
                 to {}",
                i64::MIN,
                i64::MAX
            ),
        };
    }
    if m == "wanted string or table" || m.starts_with("wanted exactly 1 element") {
        let who = name.unwrap_or_else(|| "this value".into());
        return match key.and_then(|(k, path)| choices(k, path)) {
            Some(c) => format!("{who} must be one of {c}, in quotes"),
            None => format!("{who} must be one of its names, in quotes (`key = \"name\"`)"),
        };
    }
    let m = words(m);
    match name {
        Some(n) if !m.contains(n.trim_matches('`')) => format!("{n}: {m}"),
        _ => m,
    }
}

/// The names a key that takes one of a list may hold (`` `safe` or `violation` ``), read from
/// the type that holds it, so the list cannot fall behind it.
fn choices(key: &str, path: &str) -> Option<String> {
    fn of<T: serde::de::DeserializeOwned>() -> Option<String> {
        #[derive(serde::Deserialize)]
        struct One<T> {
            #[allow(dead_code)]
            v: T,
        }
        let e = toml::from_str::<One<T>>("v = \"\"").err()?;
        let (_, names) = e.message().split_once("expected ")?;
        Some(names.trim().trim_start_matches("one of ").to_string())
    }
    if key == "expect" || path.starts_with("expect_checks.") {
        of::<crate::check::Verdict>()
    } else if path == "workload.kind" {
        of::<super::WorkloadKind>()
    } else {
        None
    }
}

/// What serde says was written (`string "x"`, ``integer `5` ``, `sequence`) as the file has it.
fn written(got: &str) -> String {
    for prefix in [
        "string ",
        "integer ",
        "floating point ",
        "boolean ",
        "character ",
    ] {
        if let Some(v) = got.strip_prefix(prefix) {
            let v = v.trim_matches('`');
            return if prefix == "string " {
                format!("the string {v}")
            } else {
                format!("`{v}`")
            };
        }
    }
    match got {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        other => words(other),
    }
}

/// `text` with every Rust type name replaced by the scenario's word for it; a `struct RawFault` or
/// `enum Expect` becomes "a table" or "one of its names".
fn words(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest
            .strip_prefix("struct ")
            .or_else(|| rest.strip_prefix("enum "))
        {
            let is_struct = rest.starts_with("struct ");
            let ident = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            out.push_str(if is_struct {
                "a table"
            } else {
                "one of its names, in quotes"
            });
            rest = &after[ident..];
            continue;
        }
        let at_word_start = out
            .chars()
            .last()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let hit = TYPE_WORDS.iter().find(|(rust, _)| {
            at_word_start
                && rest.starts_with(rust)
                && rest[rust.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        });
        match hit {
            Some((rust, plain)) => {
                out.push_str(plain);
                rest = &rest[rust.len()..];
            }
            None => {
                let c = rest.chars().next().expect("rest is not empty");
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::plain;

    #[test]
    fn rust_types_become_the_scenario_s_words() {
        let m = plain(
            "invalid type: string \"x\", expected u64",
            Some(("cycles", "workload.cycles")),
        );
        assert_eq!(
            m,
            "`workload.cycles` must be a whole number from 1 to 100000, got the string \"x\""
        );
        let m = plain(
            "invalid type: integer `5`, expected struct RawFault",
            Some(("faults", "faults")),
        );
        assert_eq!(m, "`faults` must be a table, got `5`");
        let m = plain("wanted string or table", Some(("expect", "expect")));
        assert_eq!(
            m,
            "`expect` must be one of `safe` or `violation`, in quotes"
        );
        let m = plain(
            "number too large to fit in target type",
            Some(("ttl_ms", "lock.ttl_ms")),
        );
        assert!(
            m.contains("a whole number of milliseconds from 0 to 1000000000"),
            "{m}"
        );
        let m = plain("", None);
        assert!(m.starts_with("the file breaks off here"), "{m}");
        assert_eq!(
            plain("invalid type: sequence, expected f64", None),
            "this value must be a number, got a list"
        );
        // A word that only contains a type's name is left alone.
        assert_eq!(plain("u64x and au32", None), "u64x and au32");
    }
}
