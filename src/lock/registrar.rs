//! How a lock is registered: by name, with its constructor, on the backend it runs on. A program
//! registers its own locks through `lockcheck::Harness::lock` (the registry's `register`), and
//! lockcheck registers its own locks through this same seam ([`super::builtin::register`]).
//!
//! Every constructor has one signature: the scenario's `[lock]` read into a [`LockConfig`], the
//! client's connections (one per master group, in group order; one for a database lock) and its
//! environment. A registrar says which connection and environment types that is: the registry's
//! [`Conn`](crate::registry::Conn) and [`NodeEnv`](crate::registry::NodeEnv), which are the
//! simulated or the real ones, so one constructor serves every world.

use super::mysql::DatabaseLock;
use super::{Lock, LockConfig, LockKind};
use crate::env::Env;
use crate::etcd::EtcdClient;
use crate::sql::SqlConn;
use crate::subscription::Subscribe;
use crate::zookeeper::ZkClient;
use redis::aio::ConnectionLike;

/// Something lock kinds are registered with.
pub trait Registrar {
    /// The connection a Redis lock gets.
    type Conn: ConnectionLike + Subscribe + Clone + Send + Sync + 'static;
    /// The connection a database lock gets.
    type Db: SqlConn + Sync + 'static;
    /// An etcd client connection in the world the registry runs (`registry::EtcdConn`).
    type Etcd: EtcdClient + Clone + Sync + 'static;
    /// The session a ZooKeeper lock gets.
    type Zk: ZkClient + Sync + 'static;
    /// The environment every lock gets.
    type Env: Env;

    /// Registers a lock on Redis as `kind = "<name>"`.
    fn redis<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Self::Conn>, Self::Env) -> L + Send + Sync + 'static;

    /// Registers a lock on a MySQL/MariaDB database as `kind = "<name>"`; the world creates
    /// what it needs before any client runs ([`DatabaseLock::prepare`]).
    fn database<L, F>(&mut self, name: &'static str, make: F)
    where
        L: DatabaseLock + 'static,
        F: Fn(LockConfig, Vec<Self::Db>, Self::Env) -> L + Send + Sync + 'static;

    /// Registers an etcd lock: it gets one etcd client connection (its keep-alive task clones
    /// it, as etcd's client multiplexes one connection).
    fn etcd<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Self::Etcd>, Self::Env) -> L + Send + Sync + 'static;

    /// Registers a lock on ZooKeeper as `kind = "<name>"`: each client gets one session.
    fn zookeeper<L, F>(&mut self, name: &'static str, make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Self::Zk>, Self::Env) -> L + Send + Sync + 'static;

    /// Registers the kind whose lock is a client program that real mode starts, one per client
    /// ([`LockKind::client_program`]).
    fn client_program(&mut self, kind: LockKind);
}

/// The one connection of a lock that talks to one server (every kind but Redlock): the first of
/// the client's connections, which is its only one.
pub(crate) fn only_connection<C>(conns: Vec<C>) -> C {
    conns
        .into_iter()
        .next()
        .expect("a client gets at least one connection")
}
