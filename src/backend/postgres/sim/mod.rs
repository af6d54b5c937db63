//! The simulated PostgreSQL: its sessions on the pure engine, the servers on the simulated
//! network, PgBouncer, the nemesis and the world.

pub mod bouncer;
pub mod conn;
pub mod nemesis;
pub mod server;
pub mod session;
pub mod world;

pub use conn::NetPgConn;
