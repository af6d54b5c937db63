//! Scenario input before it becomes a [`Scenario`]: reading the file
//! (a regular file, of bounded size, in UTF-8), the position of every key and value (from the
//! TOML parser's spans, never by searching the text), and the ranges numbers must stay in so that
//! no file can make lockcheck hang, overflow or take the machine's memory.

use std::io::Read as _;
use std::ops::Range;
use std::path::Path;

use super::{RedisSpec, Scenario, Trigger};

/// The largest scenario file read. The bundled ones are under 4 KiB.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The largest time, in ms, any `*_ms` setting may hold (about eleven and a half days); negative
/// ones (clock offsets and jumps) may go as far back. Far below `2^63`, so sums of times cannot
/// overflow.
pub const MAX_MS: i64 = 1_000_000_000;

/// A rate error in parts per million: above -1000000 (a clock that stands still or runs
/// backwards), at most +1000000 (twice as fast).
pub const PPM: (i64, i64) = (-999_999, 1_000_000);

/// The most critical sections one run may have (`clients * cycles * (nested + 1)`).
pub const MAX_SECTIONS: i64 = 1_000_000;

/// Allowed ranges of the counts, by key name, wherever the key appears (`[workload]`, and the
/// `[explore]` ranges of the same name).
pub const COUNT_LIMITS: &[(&str, i64, i64)] = &[
    ("clients", 1, 256),
    ("cycles", 1, 100_000),
    ("nested", 0, 16),
    ("masters", 1, 16),
    ("replicas", 0, 16),
    ("max_faults", 0, 64),
    ("sentinels", 0, 9),
    ("quorum", 1, 9),
    ("min_replicas_to_write", 0, 16),
    ("min_replicas_max_lag_s", 0, 3600),
];

/// The most characters of a value from the file that a message quotes: a wrong-typed string of
/// a million characters is named by its start and its length, not echoed whole.
pub const MAX_QUOTED_CHARS: usize = 40;

/// The most characters of a whole message (after [`MAX_QUOTED_CHARS`] has shortened what it
/// quotes): a long list of valid choices still fits, a runaway message does not.
pub const MAX_MESSAGE_CHARS: usize = 600;

/// `s` when it has at most `max` characters, else its first `max` and how long it was.
pub fn excerpt(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… ({n} characters)")
}

/// A message about the file with every value it quotes (between `"` or `` ` ``) cut to
/// [`MAX_QUOTED_CHARS`] and the whole cut to [`MAX_MESSAGE_CHARS`]. The parser's and serde's
/// messages quote the offending value whole (`invalid type: string "…", expected u32`).
pub fn short_message(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        if c != '"' && c != '`' {
            continue;
        }
        // The closing delimiter (a `\"` inside a Debug-quoted string does not close it).
        let mut j = i;
        while j < chars.len() && chars[j] != c {
            j += if c == '"' && chars[j] == '\\' { 2 } else { 1 };
        }
        if j >= chars.len() {
            continue;
        }
        let inner: String = chars[i..j].iter().collect();
        out.push_str(&excerpt(&inner, MAX_QUOTED_CHARS));
        out.push(c);
        i = j + 1;
    }
    excerpt(&out, MAX_MESSAGE_CHARS)
}

/// An input error: where (a byte range of the text; `None` when the file could not be read) and
/// what.
#[derive(Debug)]
pub struct InputError {
    /// Byte range of the offending text, which the caller turns into `file:line:col`.
    pub span: Option<Range<usize>>,
    /// What is wrong and what to write instead, in one line.
    pub message: String,
}

impl InputError {
    fn at(span: Range<usize>, message: impl Into<String>) -> Self {
        InputError {
            span: Some(span),
            message: message.into(),
        }
    }
}

/// Reads a scenario file: only a regular file (a FIFO or a device would block or never end), at
/// most [`MAX_FILE_BYTES`], in UTF-8. Invalid UTF-8 is reported at its position: the text before
/// it and the byte offset are returned so the caller can name line and column.
pub fn read_file(path: &Path) -> Result<String, ReadError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| ReadError::Io(format!("cannot read scenario file: {e}")))?;
    if !meta.is_file() {
        return Err(ReadError::Io(
            "not a regular file: a scenario is a .toml file (a FIFO, device or socket is refused)"
                .to_string(),
        ));
    }
    let too_big = || {
        ReadError::Io(format!(
            "the file is larger than the {} KiB a scenario may have",
            MAX_FILE_BYTES / 1024
        ))
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| ReadError::Io(format!("cannot read scenario file: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        let before = String::from_utf8_lossy(&bytes[..at]).into_owned();
        ReadError::Utf8 {
            before,
            offset: at,
            byte: bytes[at],
        }
    })
}

/// Why a scenario file could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The file is missing, not a regular file, too large or unreadable (no position).
    Io(String),
    /// Invalid UTF-8 at byte `offset`.
    Utf8 {
        /// The valid text up to the bad byte, to compute the line and column from.
        before: String,
        /// Where the bad byte is.
        offset: usize,
        /// The bad byte itself, for the message.
        byte: u8,
    },
}

/// The parsed document with its spans: where each key's value is.
pub struct Spans<'a> {
    doc: toml_edit::ImDocument<&'a str>,
}

impl<'a> Spans<'a> {
    /// Parses `text`; a syntax error comes back with its span.
    pub fn parse(text: &'a str) -> Result<Spans<'a>, InputError> {
        toml_edit::ImDocument::parse(text)
            .map(|doc| Spans { doc })
            .map_err(|e| InputError {
                span: Some(e.span().unwrap_or(0..0)),
                message: e.message().trim().to_string(),
            })
    }

    /// The span of the value at `path` (`["workload", "clients"]`); when it is absent, that of
    /// the nearest table on the path that is present (its header), else the file's start.
    pub fn at(&self, path: &[&str]) -> Range<usize> {
        let mut best = 0..0;
        let mut item = self.doc.as_item();
        for key in path {
            match item.get(key) {
                Some(next) => {
                    item = next;
                    if let Some(s) = item.span() {
                        best = s;
                    }
                }
                None => break,
            }
        }
        best
    }

    /// Every byte range the table at `path` (`["postgres"]`, `["redis", "cluster"]`) occupies in
    /// the file: its header and each of its keys with their values (its sub-tables' too), or,
    /// written inline (`name = { .. }`), the whole line's key and value. Empty when the file has
    /// no such table.
    pub fn table_ranges(&self, path: &[&str]) -> Vec<Range<usize>> {
        fn table_parts(t: &toml_edit::Table, out: &mut Vec<Range<usize>>) {
            out.extend(t.span());
            for (k, item) in t.iter() {
                match item {
                    toml_edit::Item::Table(sub) => table_parts(sub, out),
                    _ => {
                        let key = t.key(k).and_then(|k| k.span());
                        if let (Some(key), Some(value)) = (key, item.span()) {
                            out.push(key.start..value.end);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        let Some((name, parents)) = path.split_last() else {
            return out;
        };
        let mut root = self.doc.as_table();
        for key in parents {
            match root.get(key) {
                Some(toml_edit::Item::Table(t)) => root = t,
                _ => return out,
            }
        }
        match root.get(name) {
            Some(toml_edit::Item::Table(t)) => table_parts(t, &mut out),
            Some(item) => {
                if let (Some(key), Some(value)) =
                    (root.key(name).and_then(|k| k.span()), item.span())
                {
                    out.push(key.start..value.end);
                }
            }
            None => {}
        }
        out
    }

    /// The span of `key`'s value in the first of `[lock]`, `[redis]`, `[workload]`, `[clocks]`
    /// and the top level that has it (so `kind` is the lock's); the file's start when none has.
    pub fn find(&self, key: &str) -> Range<usize> {
        [
            "lock",
            "redis",
            "workload",
            "clocks",
            "database",
            "etcd",
            "zookeeper",
        ]
        .iter()
        .find_map(|t| self.doc.get(t).and_then(|t| t.get(key)))
        .or_else(|| self.doc.get(key))
        .and_then(|v| v.span())
        .unwrap_or(0..0)
    }

    /// Checks every number against its allowed range (see [`COUNT_LIMITS`], [`MAX_MS`], [`PPM`],
    /// [`MAX_SECTIONS`]). Runs before the typed parse, so that an out-of-range number gets its
    /// range rather than a type's overflow message.
    pub fn check_limits(&self) -> Result<(), InputError> {
        let mut err = None;
        walk_item(self.doc.as_item(), "", &mut |key, shown, v| {
            if err.is_none() {
                err = check_value(key, shown, v);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        let int = |key: &str, default: i64| {
            self.doc
                .get("workload")
                .and_then(|w| w.get(key))
                .and_then(|v| v.as_integer())
                .unwrap_or(default)
        };
        let sections = int("clients", 2) * int("cycles", 10) * (int("nested", 0) + 1);
        if sections > MAX_SECTIONS {
            return Err(InputError::at(
                self.at(&["workload"]),
                format!(
                    "`clients * cycles * (nested + 1)` is {sections} critical sections; a run may have at most {MAX_SECTIONS}: lower `cycles` or `clients`"
                ),
            ));
        }
        Ok(())
    }
}

impl Spans<'_> {
    /// The key whose value holds byte `offset` (the innermost: `workload.hold_ms[1]`), as (its
    /// last key name, its dotted path): what a type error from the deserializer is about.
    pub fn key_at(&self, offset: usize) -> Option<(String, String)> {
        let mut best: Option<(usize, String, String)> = None;
        walk_item(self.doc.as_item(), "", &mut |key, shown, v| {
            let Some(span) = v.span() else { return };
            let inside = span.contains(&offset) || (span.is_empty() && span.start == offset);
            if inside && best.as_ref().is_none_or(|(len, _, _)| span.len() <= *len) {
                best = Some((span.len(), key.to_string(), shown.to_string()));
            }
        });
        best.map(|(_, key, path)| (key, path))
    }

    /// The span of key `key` of the `i`th `[[faults]]` table (its table when absent).
    pub fn fault(&self, i: usize, key: &str) -> Range<usize> {
        let faults = self.doc.get("faults");
        let table = faults.and_then(|f| f.get(i));
        table
            .and_then(|t| t.get(key))
            .or(table)
            .and_then(|x| x.span())
            .unwrap_or(0..0)
    }
}

/// A fault whose trigger cannot come before the run ends never fires: the key that says when
/// (`at_ms` or `after_ms`) and the message, or `None` when it can fire.
pub fn fires_after_end(trigger: &Trigger, duration_ms: u64) -> Option<(&'static str, String)> {
    let (key, t) = match trigger {
        Trigger::At(t) => ("at_ms", *t),
        Trigger::Acquired { after_ms }
        | Trigger::BeforeWrite { after_ms }
        | Trigger::Point { after_ms, .. } => ("after_ms", *after_ms),
    };
    (t >= duration_ms).then(|| {
        (
            key,
            format!(
                "`{key} = {t}` is not before the end of the run (duration_ms = {duration_ms}): the fault would never fire; move it earlier or lengthen `duration_ms`"
            ),
        )
    })
}

/// What `--real` cannot apply of a scenario: the network's latency for client programs (they
/// connect to the servers themselves, over loopback; lockcheck's in-process clients get it on
/// each request and reply) and replication lag (a replica either follows at once or is held back
/// for a failover; with sentinels or on a Redis Cluster the link proxies do apply the lag). One line per setting
/// changed from its default.
pub fn real_mode_warnings(s: &Scenario) -> Vec<String> {
    let d = RedisSpec::default();
    let mut v = Vec::new();
    if s.redis.latency_ms != d.latency_ms && s.lock.kind.is_client_program() {
        v.push(format!(
            "`[redis] latency_ms = {:?}` is not applied to client programs under --real: they connect to the servers themselves, over loopback",
            s.redis.latency_ms
        ));
    }
    if s.redis.replicas > 0
        && !s.backend().promotes_by_itself(s)
        && s.redis.replication_lag_ms != d.replication_lag_ms
    {
        v.push(format!(
            "`[redis] replication_lag_ms = {:?}` is simulated only: under --real a replica follows its master at once, or not at all while a failover fault holds replication back",
            s.redis.replication_lag_ms
        ));
    }
    v
}

/// The keys that hold a range `[low, high]` wherever they appear (`[explore]` has a few more).
const RANGE_KEYS: &[&str] = &[
    "hold_ms",
    "think_ms",
    "retry_ms",
    "latency_ms",
    "replication_lag_ms",
    "offset_ms",
    "drift_ppm",
    "pause_ms",
    "restart_ms",
    "partition_ms",
    "clock_jump_ms",
    "clock_drift_ppm",
    "wall_clock_jump_ms",
];

/// What a value under `key` (at dotted `path`) must be, in the scenario's terms ("a whole number
/// of milliseconds from 0 to 1000000000"), for the keys whose range lockcheck knows.
pub fn expected_value(key: &str, path: &str) -> Option<String> {
    let (lo, hi) = match key {
        "seed" => (0, i64::MAX),
        // Clock offsets and jumps go back as far as forward; every other time is a length.
        "offset_ms" | "by_ms" | "clock_jump_ms" | "wall_clock_jump_ms" => (-MAX_MS, MAX_MS),
        "duration_ms" => (1, MAX_MS),
        _ if key.ends_with("_ms") => (0, MAX_MS),
        _ => limit_of(key)?,
    };
    let unit = if key.ends_with("_ms") {
        " of milliseconds"
    } else if key == "ppm" || key.ends_with("_ppm") {
        " of parts per million"
    } else {
        ""
    };
    let range = RANGE_KEYS.contains(&key)
        || (path.starts_with("explore.")
            && matches!(key, "clients" | "cycles" | "nested" | "after_ms"));
    Some(if range && !path.ends_with(']') {
        format!("a range [low, high] of two whole numbers{unit}, each from {lo} to {hi}")
    } else {
        format!("a whole number{unit} from {lo} to {hi}")
    })
}

/// The allowed range of a number under `key`.
fn limit_of(key: &str) -> Option<(i64, i64)> {
    if let Some(&(_, lo, hi)) = COUNT_LIMITS.iter().find(|(k, _, _)| *k == key) {
        Some((lo, hi))
    } else if key == "duration_ms" {
        Some((1, MAX_MS))
    } else if key.ends_with("_ms") {
        Some((-MAX_MS, MAX_MS))
    } else if key == "ppm" || key.ends_with("_ppm") {
        Some(PPM)
    } else {
        None
    }
}

/// Whether `key` holds a range `[low, high]`: every `*_ms` and `*_ppm` array, and `[explore]`'s
/// `clients` and `cycles`.
fn is_pair(key: &str, path: &str) -> bool {
    key.ends_with("_ms")
        || key.ends_with("_ppm")
        || (path.starts_with("explore.") && matches!(key, "clients" | "cycles"))
}

/// The error for one value, if it is out of its range (a number) or not a pair where a range
/// `[low, high]` goes (an array).
fn check_value(key: &str, shown: &str, v: &toml_edit::Value) -> Option<InputError> {
    let span = v.span().unwrap_or(0..0);
    match v {
        toml_edit::Value::Integer(n) => {
            let (lo, hi) = limit_of(key)?;
            let n = *n.value();
            (n < lo || n > hi).then(|| {
                InputError::at(
                    span,
                    format!("`{shown}` must be between {lo} and {hi}, got {n}"),
                )
            })
        }
        toml_edit::Value::Array(a) if is_pair(key, shown) && a.len() != 2 => {
            let at = a.get(2).and_then(|x| x.span()).unwrap_or(span);
            Some(InputError::at(
                at,
                format!(
                    "`{shown}` is a range [low, high] of exactly two numbers, got {} entries",
                    a.len()
                ),
            ))
        }
        _ => None,
    }
}

/// Calls `f(key, dotted path, value)` for every value in the document, arrays and their
/// elements (under the array's key) alike.
fn walk_item(
    item: &toml_edit::Item,
    path: &str,
    f: &mut impl FnMut(&str, &str, &toml_edit::Value),
) {
    match item {
        toml_edit::Item::Table(t) => {
            for (k, v) in t.iter() {
                walk_item(v, &join(path, k), f);
            }
        }
        toml_edit::Item::ArrayOfTables(a) => {
            for (i, t) in a.iter().enumerate() {
                for (k, v) in t.iter() {
                    walk_item(v, &join(&format!("{path}[{i}]"), k), f);
                }
            }
        }
        toml_edit::Item::Value(v) => walk_value(v, path, f),
        toml_edit::Item::None => {}
    }
}

fn walk_value(v: &toml_edit::Value, path: &str, f: &mut impl FnMut(&str, &str, &toml_edit::Value)) {
    let key = path
        .rsplit('.')
        .next()
        .unwrap_or(path)
        .split('[')
        .next()
        .unwrap_or("");
    f(key, path, v);
    match v {
        toml_edit::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk_value(x, &format!("{path}[{i}]"), f);
            }
        }
        toml_edit::Value::InlineTable(t) => {
            for (k, x) in t.iter() {
                walk_value(x, &join(path, k), f);
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_point_at_values_and_fall_back_to_the_table() {
        let text = "about = \"clients = 9\"\n[workload]\nclients=0\n[lock]\nkind = \"x\"\n";
        let s = Spans::parse(text).unwrap();
        assert_eq!(&text[s.at(&["workload", "clients"])], "0");
        assert_eq!(&text[s.at(&["lock", "kind"])], "\"x\"");
        assert!(text[s.at(&["lock", "ttl_ms"])].starts_with("[lock]"));
        assert_eq!(s.at(&["redis", "masters"]), 0..0);
    }

    /// The limit error of `text`, with the text it points at.
    fn limit_error(text: &str) -> (String, &str) {
        let e = Spans::parse(text).unwrap().check_limits().unwrap_err();
        (e.message, &text[e.span.unwrap()])
    }

    #[test]
    fn limits_name_the_key_and_the_range() {
        let (m, _) = limit_error("[workload]\nclients = 100000\n");
        assert_eq!(
            m,
            "`workload.clients` must be between 1 and 256, got 100000"
        );
        let (m, at) = limit_error("[[faults]]\nkind = \"pause\"\nat_ms = 9223372036854775807\n");
        assert!(m.starts_with("`faults[0].at_ms` must be between"), "{m}");
        assert_eq!(at, "9223372036854775807");
        let (m, _) = limit_error("[workload]\nhold_ms = [1, 99999999999]\n");
        assert!(m.starts_with("`workload.hold_ms[1]`"), "{m}");
        let (m, _) = limit_error("[workload]\nclients = 256\ncycles = 100000\n");
        assert!(m.contains("25600000 critical sections"), "{m}");
        let (m, at) = limit_error("[workload]\nhold_ms = [1, 2, \"junk\"]\n");
        assert_eq!(at, "\"junk\"");
        assert!(m.contains("exactly two numbers, got 3"), "{m}");
        let (m, _) = limit_error("[explore]\nclients = [1]\n");
        assert!(m.starts_with("`explore.clients` is a range"), "{m}");
        // Lists of names are not ranges; counts within their limits pass.
        for ok in [
            "[clocks]\nnodes = [\"a\", \"b\", \"c\"]\n",
            "[workload]\nclients = 4\ncycles = 50\n",
        ] {
            assert!(Spans::parse(ok).unwrap().check_limits().is_ok(), "{ok}");
        }
    }
}
