//! From SQL text to the simulated engine's statements, through `sqlparser` (MySQL dialect).
//!
//! The engine models a small InnoDB subset; this file is where the subset is drawn. Anything the
//! engine would have to guess at (joins, subqueries, functions, `OR`, savepoints, consistent reads
//! of other columns than literals…) becomes [`SqlError::Unsupported`] naming the statement, never
//! a silently wrong answer.

use crate::sql::error::SqlError;
use crate::sql::value::Value;
use sqlparser::ast::{
    self, AssignmentTarget, BinaryOperator, ColumnOption, Expr, FromTable, LockType, NonBlock,
    SelectItem, SetExpr, Statement, TableConstraint, TableFactor, TableObject, UnaryOperator,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

/// A statement of the simulated subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `CREATE TABLE` with a primary key and optional unique keys (single columns).
    CreateTable(TableDef),
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK` (without savepoints).
    Rollback,
    /// `SET [SESSION] innodb_lock_wait_timeout = N` (seconds).
    SetLockWaitTimeout(u64),
    /// `SELECT cols FROM t [WHERE conds] [FOR UPDATE [NOWAIT | SKIP LOCKED]]`.
    Select {
        /// The table read.
        table: String,
        /// `None` for `*`.
        columns: Option<Vec<String>>,
        /// The `WHERE` conjunction; empty: every row.
        filter: Vec<Cond>,
        /// `FOR UPDATE` and how it waits; `None`: a plain (non-locking, consistent) read.
        lock: Option<LockMode>,
    },
    /// `INSERT INTO t (cols) VALUES (...), ...`.
    Insert {
        /// The table written.
        table: String,
        /// The listed columns; the others get NULL.
        columns: Vec<String>,
        /// The literal rows, in the listed columns' order.
        rows: Vec<Vec<Value>>,
    },
    /// `UPDATE t SET col = literal, ... [WHERE conds]`.
    Update {
        /// The table written.
        table: String,
        /// Each assigned column and its literal.
        set: Vec<(String, Value)>,
        /// The `WHERE` conjunction; empty: every row.
        filter: Vec<Cond>,
    },
    /// `DELETE FROM t [WHERE conds]`.
    Delete {
        /// The table written.
        table: String,
        /// The `WHERE` conjunction; empty: every row.
        filter: Vec<Cond>,
    },
}

/// A table of the subset: columns, one primary-key column, single-column unique keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// The table's name, as statements name it.
    pub name: String,
    /// Its columns, in `CREATE TABLE` order.
    pub columns: Vec<String>,
    /// Index into `columns`.
    pub primary_key: usize,
    /// Indexes into `columns`.
    pub unique: Vec<usize>,
}

/// How a locking read treats a row another transaction holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Wait up to `innodb_lock_wait_timeout`, then error 1205.
    Wait,
    /// `NOWAIT`: fail at once (MariaDB: error 1205).
    Nowait,
    /// `SKIP LOCKED`: leave locked rows out of the result.
    SkipLocked,
}

/// `column op literal`; a `WHERE` clause is a conjunction of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    /// The column compared.
    pub column: String,
    /// The comparison.
    pub op: CmpOp,
    /// The literal it is compared with.
    pub value: Value,
}

/// The comparisons the subset evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `=`: how both locks find their row.
    Eq,
    /// `<>` or `!=`.
    Ne,
    /// `<`: the cleanup job's "older than".
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl CmpOp {
    /// SQL comparison with NULL making the condition false.
    pub fn holds(self, left: &Value, right: &Value) -> bool {
        if *left == Value::Null || *right == Value::Null {
            return false;
        }
        let ord = match (left, right) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (Value::Int(a), Value::Str(b)) | (Value::Str(b), Value::Int(a)) => {
                // MySQL compares a string with a number as numbers; the subset keeps to columns
                // of one type, so this only guards against a wrong answer.
                match b.parse::<i64>() {
                    Ok(b) => a.cmp(&b),
                    Err(_) => return false,
                }
            }
            _ => return false,
        };
        use std::cmp::Ordering::*;
        match self {
            CmpOp::Eq => ord == Equal,
            CmpOp::Ne => ord != Equal,
            CmpOp::Lt => ord == Less,
            CmpOp::Le => ord != Greater,
            CmpOp::Gt => ord == Greater,
            CmpOp::Ge => ord != Less,
        }
    }
}

/// Parses one statement of the subset.
pub fn parse(sql: &str) -> Result<Stmt, SqlError> {
    let unsupported = |why: &str| SqlError::Unsupported(format!("{why}: {sql}"));
    let mut statements = Parser::parse_sql(&MySqlDialect {}, sql)
        .map_err(|e| SqlError::server(1064, format!("syntax error: {e}: {sql}")))?;
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
        Statement::Set(ast::Set::SingleAssignment {
            variable, values, ..
        }) => {
            let name = variable.to_string().to_ascii_lowercase();
            let name = name
                .trim_start_matches("@@session.")
                .trim_start_matches("@@");
            if name != "innodb_lock_wait_timeout" || values.len() != 1 {
                return Err(unsupported(
                    "only SET innodb_lock_wait_timeout is simulated",
                ));
            }
            match literal(&values[0]) {
                Some(Value::Int(n)) if n >= 0 => Ok(Stmt::SetLockWaitTimeout(n as u64)),
                _ => Err(unsupported("innodb_lock_wait_timeout takes whole seconds")),
            }
        }
        Statement::CreateTable(create) => create_table(create).map_err(|w| unsupported(&w)),
        Statement::Query(query) => select(*query).map_err(|w| unsupported(&w)),
        Statement::Insert(insert) => self::insert(insert).map_err(|w| unsupported(&w)),
        Statement::Update(update) => {
            if update.from.is_some() || update.limit.is_some() || !update.table.joins.is_empty() {
                return Err(unsupported("UPDATE with FROM, LIMIT or joins"));
            }
            let table = table_name(&update.table.relation).map_err(|w| unsupported(&w))?;
            let mut set = Vec::new();
            for a in &update.assignments {
                let AssignmentTarget::ColumnName(col) = &a.target else {
                    return Err(unsupported("UPDATE of a column tuple"));
                };
                let v =
                    literal(&a.value).ok_or_else(|| unsupported("UPDATE sets literals only"))?;
                set.push((ident(&col.to_string()), v));
            }
            let filter = conds(update.selection.as_ref()).map_err(|w| unsupported(&w))?;
            Ok(Stmt::Update { table, set, filter })
        }
        Statement::Delete(delete) => {
            if delete.using.is_some() || delete.limit.is_some() || !delete.tables.is_empty() {
                return Err(unsupported("DELETE with USING, LIMIT or several tables"));
            }
            let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &delete.from;
            if from.len() != 1 || !from[0].joins.is_empty() {
                return Err(unsupported("DELETE from one table"));
            }
            let table = table_name(&from[0].relation).map_err(|w| unsupported(&w))?;
            let filter = conds(delete.selection.as_ref()).map_err(|w| unsupported(&w))?;
            Ok(Stmt::Delete { table, filter })
        }
        _ => Err(unsupported("statement kind")),
    }
}

fn ident(s: &str) -> String {
    s.trim_matches('`').to_ascii_lowercase()
}

fn table_name(t: &TableFactor) -> Result<String, String> {
    match t {
        TableFactor::Table { name, .. } => Ok(ident(&name.to_string())),
        _ => Err("a plain table name".into()),
    }
}

fn create_table(c: ast::CreateTable) -> Result<Stmt, String> {
    let columns: Vec<String> = c.columns.iter().map(|d| ident(&d.name.value)).collect();
    let mut primary = None;
    let mut unique = Vec::new();
    for (i, d) in c.columns.iter().enumerate() {
        for o in &d.options {
            match &o.option {
                ColumnOption::PrimaryKey(_) => primary = Some(i),
                ColumnOption::Unique(_) => unique.push(i),
                _ => {}
            }
        }
    }
    let position = |cols: &[ast::IndexColumn]| -> Result<usize, String> {
        if cols.len() != 1 {
            return Err("keys of one column only".into());
        }
        let name = ident(&cols[0].to_string());
        columns
            .iter()
            .position(|c| *c == name)
            .ok_or_else(|| format!("key on unknown column {name}"))
    };
    for k in &c.constraints {
        match k {
            TableConstraint::PrimaryKey(p) => primary = Some(position(&p.columns)?),
            TableConstraint::Unique(u) => unique.push(position(&u.columns)?),
            _ => return Err("constraints other than PRIMARY KEY and UNIQUE".into()),
        }
    }
    let primary_key = primary.ok_or("a table needs a PRIMARY KEY (InnoDB clusters rows by it)")?;
    Ok(Stmt::CreateTable(TableDef {
        name: ident(&c.name.to_string()),
        columns,
        primary_key,
        unique,
    }))
}

fn select(q: ast::Query) -> Result<Stmt, String> {
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() || q.locks.len() > 1 {
        return Err("SELECT with WITH, ORDER BY, LIMIT or several lock clauses".into());
    }
    let lock = match q.locks.first() {
        None => None,
        Some(l) if l.lock_type == LockType::Update && l.of.is_none() => Some(match l.nonblock {
            None => LockMode::Wait,
            Some(NonBlock::Nowait) => LockMode::Nowait,
            Some(NonBlock::SkipLocked) => LockMode::SkipLocked,
        }),
        Some(_) => return Err("only FOR UPDATE locking reads".into()),
    };
    let SetExpr::Select(s) = *q.body else {
        return Err("a plain SELECT".into());
    };
    if s.from.len() != 1 || !s.from[0].joins.is_empty() || s.having.is_some() {
        return Err("SELECT from exactly one table, no joins".into());
    }
    let table = table_name(&s.from[0].relation)?;
    let columns = match s.projection.as_slice() {
        [SelectItem::Wildcard(_)] => None,
        items => Some(
            items
                .iter()
                .map(|i| match i {
                    SelectItem::UnnamedExpr(Expr::Identifier(id)) => Ok(ident(&id.value)),
                    _ => Err("SELECT of plain columns or *".to_string()),
                })
                .collect::<Result<_, _>>()?,
        ),
    };
    let filter = conds(s.selection.as_ref())?;
    Ok(Stmt::Select {
        table,
        columns,
        filter,
        lock,
    })
}

fn insert(i: ast::Insert) -> Result<Stmt, String> {
    if i.ignore || i.on.is_some() || i.or.is_some() || !i.assignments.is_empty() {
        return Err("plain INSERT (no IGNORE, ON DUPLICATE KEY, SET)".into());
    }
    let TableObject::TableName(name) = &i.table else {
        return Err("INSERT into a table name".into());
    };
    let columns: Vec<String> = i.columns.iter().map(|c| ident(&c.to_string())).collect();
    if columns.is_empty() {
        return Err("INSERT names its columns".into());
    }
    let Some(source) = i.source else {
        return Err("INSERT … VALUES".into());
    };
    let SetExpr::Values(values) = *source.body else {
        return Err("INSERT … VALUES (no INSERT … SELECT)".into());
    };
    let mut rows = Vec::new();
    for row in &values.rows {
        let row: Option<Vec<Value>> = row.iter().map(literal).collect();
        let row = row.ok_or("INSERT of literal values")?;
        if row.len() != columns.len() {
            return Err("as many values as columns".into());
        }
        rows.push(row);
    }
    Ok(Stmt::Insert {
        table: ident(&name.to_string()),
        columns,
        rows,
    })
}

/// A `WHERE` clause as a conjunction of `column op literal`.
fn conds(e: Option<&Expr>) -> Result<Vec<Cond>, String> {
    let mut out = Vec::new();
    if let Some(e) = e {
        collect(e, &mut out)?;
    }
    Ok(out)
}

fn collect(e: &Expr, out: &mut Vec<Cond>) -> Result<(), String> {
    match e {
        Expr::Nested(inner) => collect(inner, out),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            collect(left, out)?;
            collect(right, out)
        }
        Expr::BinaryOp { left, op, right } => {
            let op = match op {
                BinaryOperator::Eq => CmpOp::Eq,
                BinaryOperator::NotEq => CmpOp::Ne,
                BinaryOperator::Lt => CmpOp::Lt,
                BinaryOperator::LtEq => CmpOp::Le,
                BinaryOperator::Gt => CmpOp::Gt,
                BinaryOperator::GtEq => CmpOp::Ge,
                _ => return Err("WHERE with AND of comparisons only".into()),
            };
            let Expr::Identifier(col) = left.as_ref() else {
                return Err("WHERE column op literal".into());
            };
            let value = literal(right).ok_or("WHERE column op literal")?;
            out.push(Cond {
                column: ident(&col.value),
                op,
                value,
            });
            Ok(())
        }
        _ => Err("WHERE with AND of comparisons only".into()),
    }
}

/// A literal value, or `None` when the expression is anything else.
fn literal(e: &Expr) -> Option<Value> {
    match e {
        Expr::Value(v) => match &v.value {
            ast::Value::Number(n, false) => n.parse().ok().map(Value::Int),
            ast::Value::SingleQuotedString(s) => Some(Value::Str(s.clone())),
            ast::Value::Null => Some(Value::Null),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match literal(expr)? {
            Value::Int(i) => Some(Value::Int(-i)),
            _ => None,
        },
        _ => None,
    }
}
