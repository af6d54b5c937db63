//! The PostgreSQL seam through the world switch: a session of the simulated server or a
//! `tokio-postgres` connection to a spawned one, so a PostgreSQL lock is written once against
//! [`PgClient`].

use crate::backend::postgres::seam::{PgClient, PgError, Row};
use crate::env::Switch;
use futures::future::Either;
use std::future::Future;

impl<S: PgClient, R: PgClient> PgClient for Switch<S, R> {
    fn simple_query(
        &mut self,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Row>, PgError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.simple_query(sql)),
            Switch::Real(c) => Either::Right(c.simple_query(sql)),
        }
    }
}
