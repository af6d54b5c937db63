//! The real service: the servers lockcheck spawns, the client connection to them, its nemesis,
//! the faults it has a recipe for, and its world.

pub mod conn;
pub mod nemesis;
pub(crate) mod recipes;
pub mod server;
pub mod world;

pub use conn::RealSqlConn;
pub use server::MariaDb;
