//! What the simulated and the real PostgreSQL worlds share: the objects a lock needs before any
//! client starts.

use crate::backend::postgres::lock::FENCE_SEQUENCE;
use crate::backend::postgres::seam::{PgClient, PgError};

/// Creates what the locks need on the admin connection `conn`: the fencing sequence.
pub async fn prepare<C: PgClient>(conn: &mut C) -> Result<(), PgError> {
    conn.simple_query(&format!("CREATE SEQUENCE IF NOT EXISTS {FENCE_SEQUENCE}"))
        .await
        .map(|_| ())
}
