//! Running a statement whose row locks are all available: the engine's data operations.

use crate::backend::mysql::engine::machine::{Engine, RowId, SessionId, Table};
use crate::backend::mysql::engine::parse::{CmpOp, Cond, Stmt};
use crate::sql::error::{SqlError, ER_DUP_ENTRY};
use crate::sql::value::{Output, Value};
use std::collections::{BTreeMap, BTreeSet};

impl Engine {
    /// Runs a statement whose locks are all available.
    pub(super) fn run(&mut self, s: SessionId, stmt: Stmt) -> Result<Output, SqlError> {
        match stmt {
            Stmt::CreateTable(def) => {
                if self.tables.contains_key(&def.name) {
                    return Err(SqlError::server(
                        1050,
                        format!("Table '{}' already exists", def.name),
                    ));
                }
                self.tables.insert(
                    def.name.clone(),
                    Table {
                        def,
                        rows: BTreeMap::new(),
                    },
                );
                Ok(Output::Affected(0))
            }
            Stmt::Begin => {
                // BEGIN inside a transaction commits it first, as MySQL does.
                self.commit(s);
                self.sessions.get_mut(&s).expect("exists").in_tx = true;
                Ok(Output::Affected(0))
            }
            Stmt::Commit => {
                self.commit(s);
                Ok(Output::Affected(0))
            }
            Stmt::Rollback => {
                self.rollback(s);
                Ok(Output::Affected(0))
            }
            Stmt::SetLockWaitTimeout(n) => {
                self.sessions
                    .get_mut(&s)
                    .expect("exists")
                    .lock_wait_timeout_s = n;
                Ok(Output::Affected(0))
            }
            Stmt::Select {
                table,
                columns,
                filter,
                lock,
            } => {
                let t = self.table(&table)?;
                let projection = match &columns {
                    None => (0..t.def.columns.len()).collect(),
                    Some(cols) => cols
                        .iter()
                        .map(|c| column(t, c))
                        .collect::<Result<Vec<_>, _>>()?,
                };
                let filter = resolve(t, &filter)?;
                let mut out = Vec::new();
                let mut locked = Vec::new();
                for (pk, row) in &self.visible_rows(s, &table, lock.is_some()) {
                    if !filter.iter().all(|(i, op, v)| op.holds(&row[*i], v)) {
                        continue;
                    }
                    if lock.is_some() {
                        let id = (table.clone(), pk.clone());
                        if !self.blockers(&id, s).is_empty() {
                            continue; // SKIP LOCKED
                        }
                        locked.push(id);
                    }
                    out.push(projection.iter().map(|i| row[*i].clone()).collect());
                }
                for id in locked {
                    self.lock(s, id);
                }
                Ok(Output::Rows(out))
            }
            Stmt::Insert {
                table,
                columns,
                rows,
            } => {
                let fulls = match self.insert_rows(&table, &columns, &rows)? {
                    Ok(fulls) => fulls,
                    Err((e, _)) if !self.sessions[&s].in_tx => return Err(e),
                    Err(_) => {
                        // InnoDB then keeps a shared next-key lock on the duplicate record (and
                        // the gap before it) to the end of the transaction: gap locks are not
                        // simulated, so the engine refuses rather than diverge.
                        return Err(SqlError::Unsupported(format!(
                            "a duplicate-key INSERT into {table} inside a transaction (next-key locks)"
                        )));
                    }
                };
                let n = fulls.len() as u64;
                for full in fulls {
                    let pk = full[self.tables[&table].def.primary_key].clone();
                    self.write(s, (table.clone(), pk), Some(full));
                }
                Ok(Output::Affected(n))
            }
            Stmt::Update { table, set, filter } => {
                let t = self.table(&table)?;
                let filter = resolve(t, &filter)?;
                let set: Vec<(usize, Value)> = set
                    .into_iter()
                    .map(|(c, v)| column(t, &c).map(|i| (i, v)))
                    .collect::<Result<_, _>>()?;
                if set.iter().any(|(i, _)| *i == t.def.primary_key) {
                    return Err(SqlError::Unsupported(format!(
                        "UPDATE of the primary key of {table}"
                    )));
                }
                let mut changes = Vec::new();
                for (pk, row) in &t.rows {
                    if filter.iter().all(|(i, op, v)| op.holds(&row[*i], v)) {
                        let mut new = row.clone();
                        for (i, v) in &set {
                            new[*i] = v.clone();
                        }
                        for u in &t.def.unique {
                            let clash = t.rows.iter().any(|(k, r)| {
                                k != pk && r[*u] == new[*u] && new[*u] != Value::Null
                            });
                            if clash {
                                return Err(dup_entry(&new[*u], &t.def.columns[*u]));
                            }
                        }
                        changes.push((pk.clone(), *row != new, new));
                    }
                }
                // MySQL counts changed rows, not matched rows.
                let n = changes.iter().filter(|c| c.1).count() as u64;
                for (pk, _, new) in changes {
                    self.write(s, (table.clone(), pk), Some(new));
                }
                Ok(Output::Affected(n))
            }
            Stmt::Delete { table, filter } => {
                let t = self.table(&table)?;
                let filter = resolve(t, &filter)?;
                let gone: Vec<Value> = t
                    .rows
                    .iter()
                    .filter(|(_, row)| filter.iter().all(|(i, op, v)| op.holds(&row[*i], v)))
                    .map(|(pk, _)| pk.clone())
                    .collect();
                let n = gone.len() as u64;
                for pk in gone {
                    self.write(s, (table.clone(), pk), None);
                }
                Ok(Output::Affected(n))
            }
        }
    }

    /// The full rows an `INSERT` adds, or the duplicate-key error and the existing row it hit.
    #[allow(clippy::type_complexity)]
    fn insert_rows(
        &self,
        table: &str,
        columns: &[String],
        rows: &[Vec<Value>],
    ) -> Result<Result<Vec<Vec<Value>>, (SqlError, RowId)>, SqlError> {
        let t = self.table(table)?;
        let mut fulls: Vec<Vec<Value>> = Vec::new();
        for r in rows {
            let full = arrange(t, columns, r)?;
            let pk = full[t.def.primary_key].clone();
            let id = (table.to_string(), pk.clone());
            if t.rows.contains_key(&pk) {
                return Ok(Err((dup_entry(&pk, "PRIMARY"), id)));
            }
            if fulls.iter().any(|f| f[t.def.primary_key] == pk) {
                return Err(dup_entry(&pk, "PRIMARY"));
            }
            for u in &t.def.unique {
                if full[*u] == Value::Null {
                    continue;
                }
                if let Some((k, _)) = t.rows.iter().find(|(_, v)| v[*u] == full[*u]) {
                    let e = dup_entry(&full[*u], &t.def.columns[*u]);
                    return Ok(Err((e, (table.to_string(), k.clone()))));
                }
                if fulls.iter().any(|f| f[*u] == full[*u]) {
                    return Err(dup_entry(&full[*u], &t.def.columns[*u]));
                }
            }
            fulls.push(full);
        }
        Ok(Ok(fulls))
    }

    /// Rows as session `s` reads them: locking reads see the latest rows; a plain read outside a
    /// transaction sees only committed rows (other sessions' changes undone).
    fn visible_rows(&self, s: SessionId, table: &str, latest: bool) -> BTreeMap<Value, Vec<Value>> {
        let mut rows = self.tables[table].rows.clone();
        if latest {
            return rows;
        }
        for (id, session) in &self.sessions {
            if *id == s {
                continue;
            }
            // The first undo entry of a row holds its committed image.
            let mut seen = BTreeSet::new();
            for u in &session.undo {
                if u.row.0 == table && seen.insert(u.row.1.clone()) {
                    match &u.before {
                        Some(before) => rows.insert(u.row.1.clone(), before.clone()),
                        None => rows.remove(&u.row.1),
                    };
                }
            }
        }
        rows
    }
}

fn dup_entry(v: &Value, key: &str) -> SqlError {
    let shown = match v {
        Value::Str(s) => s.clone(),
        other => other.to_string(),
    };
    SqlError::server(
        ER_DUP_ENTRY,
        format!("Duplicate entry '{shown}' for key '{key}'"),
    )
}

fn column(t: &Table, name: &str) -> Result<usize, SqlError> {
    t.def
        .columns
        .iter()
        .position(|c| c == name)
        .ok_or_else(|| SqlError::server(1054, format!("Unknown column '{name}'")))
}

fn resolve(t: &Table, filter: &[Cond]) -> Result<Vec<(usize, CmpOp, Value)>, SqlError> {
    filter
        .iter()
        .map(|c| column(t, &c.column).map(|i| (i, c.op, c.value.clone())))
        .collect()
}

/// The primary-key value when the filter pins it with `pk = literal`.
pub(super) fn pk_equality(t: &Table, filter: &[Cond]) -> Option<Value> {
    let pk = &t.def.columns[t.def.primary_key];
    filter
        .iter()
        .find(|c| c.column == *pk && c.op == CmpOp::Eq)
        .map(|c| c.value.clone())
}

/// A full row from an INSERT's columns and values (missing columns are NULL).
pub(super) fn arrange(
    t: &Table,
    columns: &[String],
    values: &[Value],
) -> Result<Vec<Value>, SqlError> {
    let mut full = vec![Value::Null; t.def.columns.len()];
    for (c, v) in columns.iter().zip(values) {
        full[column(t, c)?] = v.clone();
    }
    if full[t.def.primary_key] == Value::Null {
        return Err(SqlError::Unsupported(
            "INSERT without a primary-key value (AUTO_INCREMENT)".into(),
        ));
    }
    Ok(full)
}
