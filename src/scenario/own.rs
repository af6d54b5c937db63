//! Lock kinds of the user's own, as the scenario format sees them: the name a program registered
//! with the harness (`[lock] kind = "check-then-set"`), the named points the lock declares, and
//! its `[lock.params]` table, read with serde into the type the lock's constructor takes.
//!
//! The table is checked when the scenario is parsed, against that type, so a misspelt or
//! mistyped parameter is an error at its `file:line:col` like any other key, not a panic in the
//! middle of a run.

use std::ops::Range;

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::lock::LockKind;

/// Where a `[lock.params]` error is (a span of the scenario text; `None`: the `kind` key) and what.
pub(super) type ParamsError = (Option<Range<usize>>, String);

/// A lock kind registered with the harness, as scenarios see it.
#[derive(Clone, Copy, Debug)]
pub struct OwnKind {
    /// The kind: the name scenarios give as `[lock] kind`, and what the lock declares about
    /// itself (its named points, [`crate::lock::Lock::POINTS`]: faults may fire there).
    pub kind: LockKind,
    /// Checks a scenario's `[lock.params]` (given the whole scenario text, so an error has its
    /// span) against the lock's parameter type.
    check_params: fn(&str, &str) -> Result<(), ParamsError>,
}

impl OwnKind {
    /// The kind `kind`, whose lock reads `[lock.params]` into `P`.
    pub fn new<P: DeserializeOwned>(kind: LockKind) -> Self {
        OwnKind {
            kind,
            check_params: check::<P>,
        }
    }

    /// Checks the `[lock.params]` of scenario `text`: the span and message of the first error.
    pub(super) fn check_params(&self, text: &str) -> Result<(), ParamsError> {
        (self.check_params)(self.kind.name(), text)
    }
}

/// Reads `[lock.params]` (absent: `None`) into `P`. A lock with no parameters (`P = ()`) takes no
/// table, or an empty one; a parameter type whose fields all have defaults takes an absent one.
pub fn read_params<P: DeserializeOwned>(table: Option<&toml::Table>) -> Result<P, String> {
    let unit =
        || P::deserialize(serde::de::value::UnitDeserializer::<serde::de::value::Error>::new());
    match table {
        Some(t) => toml::Value::Table(t.clone())
            .try_into::<P>()
            .or_else(|e| {
                if t.is_empty() {
                    unit().map_err(|_| e)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| e.message().to_string()),
        None => toml::Value::Table(toml::Table::new())
            .try_into::<P>()
            .or_else(|e| unit().map_err(|_| e))
            .map_err(|e| e.message().to_string()),
    }
}

/// The scenario file, read only as far as `[lock.params]`, typed: serde's errors keep their
/// spans in the file.
#[derive(Deserialize)]
struct Doc<P> {
    lock: LockTable<P>,
}

#[derive(Deserialize)]
struct LockTable<P> {
    params: Option<P>,
}

fn check<P: DeserializeOwned>(kind: &str, text: &str) -> Result<(), ParamsError> {
    let takes_none = read_params::<P>(None).is_ok()
        && toml::Value::Table(toml::Table::new())
            .try_into::<P>()
            .is_err();
    match toml::from_str::<Doc<P>>(text) {
        Ok(Doc {
            lock: LockTable { params: Some(_) },
        }) => Ok(()),
        Ok(_) => read_params::<P>(None).map(|_| ()).map_err(|m| {
            (
                None,
                format!("lock kind `{kind}` needs a [lock.params] table: {m}"),
            )
        }),
        Err(_) if takes_none => Err((
            None,
            format!("lock kind `{kind}` takes no parameters: remove [lock.params]"),
        )),
        Err(e) => Err((
            e.span(),
            format!(
                "[lock.params] of lock kind `{kind}`: {}",
                e.message().trim()
            ),
        )),
    }
}
