//! The real PostgreSQL: the `postgres` servers lockcheck spawns (a primary, a streaming standby
//! it can promote), the `pgbouncer` it puts in front of one, and the `tokio-postgres` session a
//! lock uses, behind the seam's [`PgClient`](super::seam::PgClient).
//!
//! The promises are the other real servers': lockcheck's own binaries in its own temporary
//! directories on its own free ports on 127.0.0.1 (never the machine's PostgreSQL on 5432 nor a
//! system pgbouncer on 6432), every child registered with the cleanup registry and killed and
//! removed by its guard's `Drop`.

pub(crate) mod admin;
pub(crate) mod binaries;
pub mod bouncer;
pub mod conn;
pub(crate) mod nemesis;
pub(crate) mod process_tree;
pub mod route;
pub(crate) mod run_as;
pub mod server;
pub mod settings;
pub mod world;

pub use bouncer::{BouncerSettings, PgBouncer, PoolMode};
pub use conn::RealPgConn;
pub use server::Postgres;
pub use settings::ServerSettings;
