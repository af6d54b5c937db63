//! The SQL seam through the world switch: a connection to the simulated InnoDB subset in
//! simulation, to a spawned MariaDB in real mode, so a MySQL lock is written once against
//! [`SqlConn`].

use crate::env::Switch;
use crate::sql::{SqlConn, SqlError, Value};
use futures::future::Either;
use std::future::Future;

impl<S: SqlConn, R: SqlConn> SqlConn for Switch<S, R> {
    fn query(
        &mut self,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, SqlError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.query(sql)),
            Switch::Real(c) => Either::Right(c.query(sql)),
        }
    }

    fn execute(&mut self, sql: &str) -> impl Future<Output = Result<u64, SqlError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.execute(sql)),
            Switch::Real(c) => Either::Right(c.execute(sql)),
        }
    }
}
