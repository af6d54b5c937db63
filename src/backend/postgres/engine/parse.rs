//! From SQL text to the simulated server's statements, through `sqlparser` (PostgreSQL dialect).
//!
//! The subset is what the advisory-lock patterns send: transaction control, the two timeouts a
//! waiter sets, `DISCARD ALL` (what a pooler resets a server connection with), one function call
//! per `SELECT` (the advisory-lock functions, `pg_backend_pid`, `pg_terminate_backend`,
//! `nextval`) and `CREATE SEQUENCE IF NOT EXISTS` for the fencing counter. Anything else is
//! [`PgError::Unsupported`] naming the statement, never a silently wrong answer.

use crate::backend::postgres::engine::advisory::{Key, Mode, Scope};
use crate::backend::postgres::seam::PgError;
use sqlparser::ast::{
    self, DiscardObject, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, SelectItem,
    SetExpr, Statement, UnaryOperator, Value as SqlValue,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

/// SQLSTATE `42601` syntax_error.
const SYNTAX_ERROR: &str = "42601";

/// A statement of the simulated subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `COMMIT` / `END`.
    Commit,
    /// `ROLLBACK` / `ABORT`.
    Rollback,
    /// `SET lock_timeout = …` (ms; 0 turns it off).
    SetLockTimeout(u64),
    /// `SET statement_timeout = …` (ms; 0 turns it off).
    SetStatementTimeout(u64),
    /// `DISCARD ALL`: what PgBouncer's default `server_reset_query` runs; it releases every
    /// session-level advisory lock and resets the session's settings.
    DiscardAll,
    /// `pg_[try_]advisory_[xact_]lock[_shared](key)`.
    Lock {
        /// The lock's key (bigint or two ints: two separate key spaces).
        key: Key,
        /// Exclusive or shared.
        mode: Mode,
        /// Held to the session's end (or an unlock) or to the transaction's.
        scope: Scope,
        /// `pg_try_…`: answer `f` at once instead of waiting.
        try_only: bool,
    },
    /// `pg_advisory_unlock[_shared](key)`: one session-level hold fewer.
    Unlock {
        /// The lock's key.
        key: Key,
        /// The mode the hold was taken in.
        mode: Mode,
    },
    /// `pg_advisory_unlock_all()`.
    UnlockAll,
    /// `pg_backend_pid()`.
    BackendPid,
    /// `pg_terminate_backend(pid)`.
    Terminate(i64),
    /// `nextval('name')`.
    NextVal(String),
    /// `CREATE SEQUENCE IF NOT EXISTS name`.
    CreateSequence(String),
}

/// Parses one statement of the subset.
pub fn parse(sql: &str) -> Result<Stmt, PgError> {
    let unsupported = |why: &str| PgError::Unsupported(format!("{why}: {sql}"));
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| PgError::error(SYNTAX_ERROR, format!("syntax error: {e}: {sql}")))?;
    if statements.len() != 1 {
        return Err(unsupported("exactly one statement per call"));
    }
    match statements.remove(0) {
        Statement::StartTransaction { .. } => Ok(Stmt::Begin),
        Statement::Commit { chain: false, .. } => Ok(Stmt::Commit),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Ok(Stmt::Rollback),
        Statement::Discard {
            object_type: DiscardObject::ALL,
        } => Ok(Stmt::DiscardAll),
        Statement::Set(ast::Set::SingleAssignment {
            scope: None,
            variable,
            values,
            ..
        }) => {
            let name = variable.to_string().to_ascii_lowercase();
            let ms = match values.as_slice() {
                [v] => {
                    duration_ms(v).ok_or_else(|| unsupported("a timeout in ms, '…ms' or '…s'"))?
                }
                _ => return Err(unsupported("one value")),
            };
            match name.as_str() {
                "lock_timeout" => Ok(Stmt::SetLockTimeout(ms)),
                "statement_timeout" => Ok(Stmt::SetStatementTimeout(ms)),
                _ => Err(unsupported(
                    "only SET lock_timeout and SET statement_timeout are simulated",
                )),
            }
        }
        Statement::CreateSequence {
            if_not_exists: true,
            name,
            sequence_options,
            ..
        } if sequence_options.is_empty() => Ok(Stmt::CreateSequence(name.to_string())),
        Statement::Query(q) => {
            let SetExpr::Select(select) = *q.body else {
                return Err(unsupported("only SELECT <function>(…)"));
            };
            if !select.from.is_empty() || select.selection.is_some() || select.projection.len() != 1
            {
                return Err(unsupported("only SELECT <function>(…) with one column"));
            }
            let SelectItem::UnnamedExpr(Expr::Function(f)) = &select.projection[0] else {
                return Err(unsupported("only SELECT <function>(…)"));
            };
            let name = f.name.to_string().to_ascii_lowercase();
            let args = match &f.args {
                FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
                        _ => None,
                    })
                    .collect::<Option<Vec<&Expr>>>()
                    .ok_or_else(|| unsupported("positional arguments"))?,
                FunctionArguments::None => Vec::new(),
                FunctionArguments::Subquery(_) => return Err(unsupported("a subquery argument")),
            };
            call(&name, &args).ok_or_else(|| unsupported("this function or its arguments"))
        }
        _ => Err(unsupported("outside the simulated subset")),
    }
}

/// The statement a function call in `SELECT` is.
fn call(name: &str, args: &[&Expr]) -> Option<Stmt> {
    if let Some(rest) = name.strip_prefix("pg_") {
        if let Some(lock) = advisory(rest, args) {
            return Some(lock);
        }
    }
    match (name, args) {
        ("pg_advisory_unlock_all", []) => Some(Stmt::UnlockAll),
        ("pg_backend_pid", []) => Some(Stmt::BackendPid),
        ("pg_terminate_backend", [pid]) => Some(Stmt::Terminate(integer(pid)?)),
        ("nextval", [Expr::Value(v)]) => match &v.value {
            SqlValue::SingleQuotedString(s) => Some(Stmt::NextVal(s.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// `[try_]advisory_[xact_]lock[_shared]` and `advisory_unlock[_shared]`, with their key.
fn advisory(name: &str, args: &[&Expr]) -> Option<Stmt> {
    let key = match args {
        [k] => Key::Big(integer(k)?),
        [a, b] => Key::Pair(
            i32::try_from(integer(a)?).ok()?,
            i32::try_from(integer(b)?).ok()?,
        ),
        _ => return None,
    };
    let (name, mode) = match name.strip_suffix("_shared") {
        Some(n) => (n, Mode::Shared),
        None => (name, Mode::Exclusive),
    };
    if name == "advisory_unlock" {
        return Some(Stmt::Unlock { key, mode });
    }
    let (name, try_only) = match name.strip_prefix("try_") {
        Some(n) => (n, true),
        None => (name, false),
    };
    let scope = match name {
        "advisory_lock" => Scope::Session,
        "advisory_xact_lock" => Scope::Xact,
        _ => return None,
    };
    Some(Stmt::Lock {
        key,
        mode,
        scope,
        try_only,
    })
}

/// An integer literal, possibly negative.
fn integer(e: &Expr) -> Option<i64> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => n.parse().ok(),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => integer(expr)?.checked_neg(),
        Expr::Nested(e) => integer(e),
        _ => None,
    }
}

/// A timeout's value in ms: a bare number is ms, a string may carry `ms` or `s`.
fn duration_ms(e: &Expr) -> Option<u64> {
    if let Some(n) = integer(e) {
        return u64::try_from(n).ok();
    }
    let Expr::Value(v) = e else { return None };
    let SqlValue::SingleQuotedString(s) = &v.value else {
        return None;
    };
    let s = s.trim();
    if let Some(n) = s.strip_suffix("ms") {
        return n.trim().parse().ok();
    }
    if let Some(n) = s.strip_suffix('s') {
        return n.trim().parse::<u64>().ok()?.checked_mul(1000);
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advisory_functions_parse_with_both_key_forms() {
        assert_eq!(
            parse("SELECT pg_advisory_lock(42)").unwrap(),
            Stmt::Lock {
                key: Key::Big(42),
                mode: Mode::Exclusive,
                scope: Scope::Session,
                try_only: false
            }
        );
        assert_eq!(
            parse("select pg_try_advisory_xact_lock_shared(1, -2)").unwrap(),
            Stmt::Lock {
                key: Key::Pair(1, -2),
                mode: Mode::Shared,
                scope: Scope::Xact,
                try_only: true
            }
        );
        assert_eq!(
            parse("SELECT pg_advisory_unlock_shared(-7)").unwrap(),
            Stmt::Unlock {
                key: Key::Big(-7),
                mode: Mode::Shared
            }
        );
        assert_eq!(
            parse("SELECT pg_advisory_unlock_all()").unwrap(),
            Stmt::UnlockAll
        );
        assert_eq!(
            parse("SELECT pg_terminate_backend(12)").unwrap(),
            Stmt::Terminate(12)
        );
        assert_eq!(
            parse("SELECT nextval('fence')").unwrap(),
            Stmt::NextVal("fence".into())
        );
    }

    #[test]
    fn session_statements_parse_and_the_rest_is_refused() {
        assert_eq!(parse("BEGIN").unwrap(), Stmt::Begin);
        assert_eq!(parse("COMMIT").unwrap(), Stmt::Commit);
        assert_eq!(parse("ROLLBACK").unwrap(), Stmt::Rollback);
        assert_eq!(parse("DISCARD ALL").unwrap(), Stmt::DiscardAll);
        assert_eq!(
            parse("SET lock_timeout = 250").unwrap(),
            Stmt::SetLockTimeout(250)
        );
        assert_eq!(
            parse("SET statement_timeout = '2s'").unwrap(),
            Stmt::SetStatementTimeout(2000)
        );
        assert_eq!(
            parse("CREATE SEQUENCE IF NOT EXISTS lockcheck_fence").unwrap(),
            Stmt::CreateSequence("lockcheck_fence".into())
        );
        for sql in [
            "SELECT * FROM t",
            "SELECT pg_advisory_lock(1), pg_advisory_lock(2)",
            "SELECT pg_advisory_lock(99999999999, 1)",
            "SET work_mem = 10",
        ] {
            assert!(
                matches!(parse(sql), Err(PgError::Unsupported(_))),
                "{sql}: {:?}",
                parse(sql)
            );
        }
        assert_eq!(parse("SELEC 1").unwrap_err().sqlstate(), Some(SYNTAX_ERROR));
    }
}
