//! A connection to a real MariaDB/MySQL server over `mysql_async`, behind the same [`SqlConn`]
//! seam as the simulated database.
//!
//! A statement that gets no answer within the request timeout (server paused, partition) fails
//! with [`SqlError::NoAnswer`] and the connection is dropped: its socket closes, so the
//! server rolls the session back as soon as it notices. The next statement reconnects, as a
//! connection pool would; any transaction that was open is gone.

use crate::sql::error::SqlError;
use crate::sql::value::Value;
use crate::sql::SqlConn;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Row};
use std::time::Duration;

/// One client session of a real MariaDB/MySQL server.
pub struct RealSqlConn {
    opts: Opts,
    conn: Option<Conn>,
    timeout: Duration,
}

impl RealSqlConn {
    /// Connects as `user` to `database` over TCP on 127.0.0.1:`port`; every statement gets
    /// `timeout` to answer.
    pub async fn connect(
        port: u16,
        user: &str,
        database: &str,
        timeout: Duration,
    ) -> Result<RealSqlConn, SqlError> {
        let opts: Opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .user(Some(user))
            .db_name(Some(database))
            .prefer_socket(false)
            .into();
        let mut conn = RealSqlConn {
            opts,
            conn: None,
            timeout,
        };
        conn.ensure().await?;
        Ok(conn)
    }

    /// Closes the socket without a goodbye, as a crashed client does.
    pub fn drop_connection(&mut self) {
        self.conn = None;
    }

    /// The server's id for this session (`CONNECTION_ID()`), to `KILL` it.
    pub async fn connection_id(&mut self) -> Result<u32, SqlError> {
        Ok(self.ensure().await?.id())
    }

    async fn ensure(&mut self) -> Result<&mut Conn, SqlError> {
        if self.conn.is_none() {
            let conn = tokio::time::timeout(self.timeout, Conn::new(self.opts.clone()))
                .await
                .map_err(|_| SqlError::ConnectionLost("connect timed out".into()))?
                .map_err(convert)?;
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    async fn run(&mut self, sql: &str) -> Result<(Vec<Vec<Value>>, u64), SqlError> {
        let timeout = self.timeout;
        let conn = self.ensure().await?;
        let reply = tokio::time::timeout(timeout, async {
            let rows: Vec<Row> = conn.query(sql).await?;
            Ok::<_, mysql_async::Error>((rows, conn.affected_rows()))
        })
        .await;
        match reply {
            Ok(Ok((rows, affected))) => Ok((rows.into_iter().map(convert_row).collect(), affected)),
            Ok(Err(e)) => {
                let e = convert(e);
                if !matches!(e, SqlError::Server { .. }) {
                    self.conn = None;
                }
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(SqlError::NoAnswer(format!(
                    "nothing within {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}

impl SqlConn for RealSqlConn {
    async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Value>>, SqlError> {
        Ok(self.run(sql).await?.0)
    }

    async fn execute(&mut self, sql: &str) -> Result<u64, SqlError> {
        Ok(self.run(sql).await?.1)
    }
}

fn convert(e: mysql_async::Error) -> SqlError {
    match e {
        mysql_async::Error::Server(s) => SqlError::Server {
            code: s.code,
            message: s.message,
        },
        other => SqlError::ConnectionLost(other.to_string()),
    }
}

/// Text-protocol rows arrive as bytes; numeric columns become integers.
fn convert_row(row: Row) -> Vec<Value> {
    let numeric: Vec<bool> = row
        .columns_ref()
        .iter()
        .map(|c| c.column_type().is_numeric_type())
        .collect();
    row.unwrap()
        .into_iter()
        .zip(numeric)
        .map(|(v, numeric)| match v {
            mysql_async::Value::NULL => Value::Null,
            mysql_async::Value::Int(i) => Value::Int(i),
            mysql_async::Value::UInt(u) => Value::Int(u as i64),
            mysql_async::Value::Bytes(b) => {
                let s = String::from_utf8_lossy(&b).into_owned();
                match (numeric, s.parse::<i64>()) {
                    (true, Ok(i)) => Value::Int(i),
                    _ => Value::Str(s),
                }
            }
            other => Value::Str(other.as_sql(true)),
        })
        .collect()
}
