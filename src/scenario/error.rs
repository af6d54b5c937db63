//! Where a scenario error points: the file, line and column of the offending key, so every
//! message about bad input can be acted on without reading the parser.

use std::fmt;

/// A scenario error, located in its file: bad input must name where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file as given (or the name passed to [`Scenario::parse`](super::Scenario::parse)).
    pub file: String,
    /// 1-based; 0 when the file could not be read at all.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// What is wrong and what the valid choices are.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            // The whole file is refused (missing, not a regular file, too large): no position.
            return write!(f, "{}: {}", self.file, self.message);
        }
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ScenarioError {}

/// Converts a byte offset into 1-based line and column. The end of a text that ends with a line
/// break is the end of its last line, not a line after it: where an early end of file is.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    if offset == text.len() && text.ends_with('\n') {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map(|nl| before[nl + 1..].chars().count() + 1)
        .unwrap_or_else(|| before.chars().count() + 1);
    (line, col)
}

/// The key written on the line of byte `offset` (`ttl_ms = 99999999999999999999` gives
/// `ttl_ms`), as (its last name, the name as written): for errors of a text that does not parse,
/// which has no spans yet.
pub(super) fn key_on_line(text: &str, offset: usize) -> Option<(String, String)> {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let (key, _) = text[start..end].split_once('=')?;
    let key = key.trim();
    let valid = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.');
    if key.is_empty() || !key.chars().all(valid) {
        return None;
    }
    let last = key.rsplit('.').next().unwrap_or(key);
    Some((last.to_string(), key.to_string()))
}

/// The text being parsed, so any check can turn a span into a located error.
pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
    /// Where each key's value is (the parser's spans).
    pub(super) spans: super::input::Spans<'a>,
    /// The lock kinds lockcheck ships, from the catalog it parses with.
    pub(super) builtins: &'a [crate::lock::LockKind],
}

impl Ctx<'_> {
    /// The error `message` at the start of `span`, with what it quotes from the file cut short
    /// (`input::short_message`): a message names a bad value, it does not echo a huge one.
    pub(super) fn err(
        &self,
        span: std::ops::Range<usize>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let (line, column) = line_col(self.text, span.start);
        ScenarioError {
            file: self.file.to_string(),
            line,
            column,
            message: super::input::short_message(&message.into()),
        }
    }
}
pub(super) use crate::fault::quoted;
