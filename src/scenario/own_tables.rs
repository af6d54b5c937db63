//! Tables a backend reads itself: a backend declared after `Scenario` stopped growing a field per
//! service keeps its `[table]` out of the scenario format's types. The file is still read with
//! serde's spans and `deny_unknown_fields`, so every error keeps its file:line:col: before serde
//! reads the rest, such a table is blanked out of a copy of the text, byte for byte (newlines
//! kept), so every other position is unchanged; the backend then reads its table from the
//! original text ([`super::BackendDecl::read_table`]) and its errors point at its own keys.

use super::input::Spans;
use super::BackendDecl;
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// What backends read from their own tables, by table name.
#[derive(Clone, Default)]
pub struct OwnTables(pub(crate) BTreeMap<&'static str, Arc<dyn Any + Send + Sync>>);

impl fmt::Debug for OwnTables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// `text` with the tables of `backends` that read their own blanked out, or `None` when there
/// are none in it.
pub(super) fn masked(
    text: &str,
    spans: &Spans<'_>,
    backends: &[&'static dyn BackendDecl],
) -> Option<String> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    for b in backends.iter().filter(|b| b.reads_own_table()) {
        ranges.extend(spans.table_ranges(&b.own_table_path()));
    }
    if ranges.is_empty() {
        return None;
    }
    let mut bytes = text.as_bytes().to_vec();
    for r in ranges {
        for b in &mut bytes[r.start.min(text.len())..r.end.min(text.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }
    // Only ASCII bytes were written over whole UTF-8 sequences' worth of positions; a
    // multi-byte character inside a blanked range became spaces too, so the text stays UTF-8.
    Some(String::from_utf8(bytes).expect("blanking keeps UTF-8"))
}
