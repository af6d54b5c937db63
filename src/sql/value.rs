//! Column values and statement results, shared by the simulated and the real database so that the
//! differential test can compare them directly.

use std::fmt;

/// A column value in the subset lockcheck uses: integers, strings and NULL.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// SQL NULL (a column the insert did not list).
    Null,
    /// An integer column (timestamps, fencing tokens, counters).
    Int(i64),
    /// A string column (lock names, owner tokens).
    Str(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => write!(f, "NULL"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Str(s) => write!(f, "{}", quote(s)),
        }
    }
}

/// What a statement returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Rows of a `SELECT`, in primary-key order.
    Rows(Vec<Vec<Value>>),
    /// Rows changed by `INSERT`/`UPDATE`/`DELETE` (0 for session and transaction statements).
    Affected(u64),
}

/// Quotes a string as a SQL literal: single quotes, with `'` and `\` escaped. Locks build their
/// statements with it so both worlds parse the same text.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}
