//! The connection and environment a registered lock gets, whichever world runs it: [`Conn`] (a
//! Redis connection), [`Db`] (a database connection), [`EtcdConn`] (an etcd client), [`ZkConn`]
//! (a ZooKeeper session) and [`NodeEnv`]. Each is the simulated one in simulation and the real
//! one on spawned servers, so one constructor serves both worlds.

use crate::backend::etcd::real::RealEtcdConn;
use crate::backend::etcd::sim::NetEtcdConn;
use crate::backend::mysql::real::RealSqlConn;
use crate::backend::mysql::sim::NetSqlConn;
use crate::backend::redis::real::subscription::RealSubscription;
use crate::backend::redis::sim::subscription::SimSubscription;
use crate::backend::redis::sim::SimConnection;
use crate::backend::zookeeper::real::RealZkClient;
use crate::backend::zookeeper::sim::SimZkClient;
use crate::env::{Env, TaskHandle};
use crate::etcd::{EtcdClient, EtcdError, Lease, LeaseId, RangeRequest, RangeResponse};
use crate::etcd::{Revision, Txn, TxnResponse};
use crate::real::RealEnv;
use crate::real::RoutedConnection;
use crate::sim::SimEnv;
use crate::sql::{SqlConn, SqlError, Value};
use crate::subscription::{Subscribe, Subscription};
use crate::zookeeper::{CreateMode, SessionState, Stat, ZkClient, ZkError, ZkEvent};
use futures::future::Either;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture};
use std::future::Future;
use std::time::Duration;

/// The connection a registered lock gets: to a simulated server in simulation, to a spawned
/// `redis-server` in real mode. A [`redis::aio::ConnectionLike`], so `redis::cmd(..).query_async`
/// and `redis::Script::invoke_async` work on it, and [`Subscribe`] for pub/sub.
#[derive(Clone)]
pub enum Conn {
    /// Simulation.
    Sim(SimConnection),
    /// Real servers.
    Real(RoutedConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Conn::Sim(c) => c.req_packed_command(cmd),
            Conn::Real(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Conn::Sim(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Real(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Sim(c) => c.get_db(),
            Conn::Real(c) => c.get_db(),
        }
    }
}

/// A [`Conn`]'s subscriber connection.
pub enum ConnSubscription {
    /// Simulation.
    Sim(SimSubscription),
    /// Real servers.
    Real(RealSubscription),
}

impl Subscribe for Conn {
    type Subscription = ConnSubscription;

    fn subscription(&self) -> ConnSubscription {
        match self {
            Conn::Sim(c) => ConnSubscription::Sim(c.subscription()),
            Conn::Real(c) => ConnSubscription::Real(c.subscription()),
        }
    }
}

impl Subscription for ConnSubscription {
    fn subscribe(&mut self, channel: &str) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.subscribe(channel)),
            ConnSubscription::Real(s) => Either::Right(s.subscribe(channel)),
        }
    }

    fn unsubscribe(
        &mut self,
        channel: &str,
    ) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.unsubscribe(channel)),
            ConnSubscription::Real(s) => Either::Right(s.unsubscribe(channel)),
        }
    }

    fn next_message(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send {
        match self {
            ConnSubscription::Sim(s) => Either::Left(s.next_message()),
            ConnSubscription::Real(s) => Either::Right(s.next_message()),
        }
    }
}

/// The environment a registered lock gets: its simulated node's in simulation, the real one on
/// spawned servers. Every method is the world's own, so clock faults reach the lock as they
/// reach lockcheck's locks.
#[derive(Clone)]
pub enum NodeEnv {
    /// Simulation.
    Sim(SimEnv),
    /// Real servers.
    Real(RealEnv),
}

impl Env for NodeEnv {
    fn now_ms(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.now_ms(),
            NodeEnv::Real(e) => e.now_ms(),
        }
    }

    fn monotonic_ms(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.monotonic_ms(),
            NodeEnv::Real(e) => e.monotonic_ms(),
        }
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> + Send {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.sleep(d)),
            NodeEnv::Real(e) => Either::Right(e.sleep(d)),
        }
    }

    fn spawn<F>(&self, task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match self {
            NodeEnv::Sim(e) => e.spawn(task),
            NodeEnv::Real(e) => e.spawn(task),
        }
    }

    fn random_u64(&self) -> u64 {
        match self {
            NodeEnv::Sim(e) => e.random_u64(),
            NodeEnv::Real(e) => e.random_u64(),
        }
    }

    fn point(&self, name: &'static str) -> impl Future<Output = ()> + Send {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.point(name)),
            NodeEnv::Real(e) => Either::Right(e.point(name)),
        }
    }

    fn timeout<F>(&self, d: Duration, task: F) -> impl Future<Output = Option<F::Output>> + Send
    where
        F: Future + Send,
    {
        match self {
            NodeEnv::Sim(e) => Either::Left(e.timeout(d, task)),
            NodeEnv::Real(e) => Either::Right(e.timeout(d, task)),
        }
    }
}

/// The database connection a registered MySQL lock gets: to the simulated InnoDB subset in
/// simulation, to a spawned MariaDB in real mode. (The simulated one is the larger; a client
/// has one for its whole run, so the size is not worth a box.)
#[allow(clippy::large_enum_variant)]
pub enum Db {
    /// Simulation.
    Sim(NetSqlConn),
    /// A real MariaDB.
    Real(RealSqlConn),
}

impl SqlConn for Db {
    fn query(
        &mut self,
        sql: &str,
    ) -> impl Future<Output = Result<Vec<Vec<Value>>, SqlError>> + Send {
        match self {
            Db::Sim(c) => Either::Left(c.query(sql)),
            Db::Real(c) => Either::Right(c.query(sql)),
        }
    }

    fn execute(&mut self, sql: &str) -> impl Future<Output = Result<u64, SqlError>> + Send {
        match self {
            Db::Sim(c) => Either::Left(c.execute(sql)),
            Db::Real(c) => Either::Right(c.execute(sql)),
        }
    }
}

/// An etcd lock's connection: to the simulated cluster or to spawned etcd members.
#[derive(Clone)]
pub enum EtcdConn {
    /// A connection to the simulated etcd.
    Sim(NetEtcdConn),
    /// A client of spawned `etcd` members over their JSON gateway.
    Real(RealEtcdConn),
}

impl EtcdClient for EtcdConn {
    fn lease_grant(&mut self, ttl_s: i64) -> impl Future<Output = Result<Lease, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.lease_grant(ttl_s)),
            EtcdConn::Real(c) => Either::Right(c.lease_grant(ttl_s)),
        }
    }

    fn lease_keep_alive(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.lease_keep_alive(id)),
            EtcdConn::Real(c) => Either::Right(c.lease_keep_alive(id)),
        }
    }

    fn lease_time_to_live(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.lease_time_to_live(id)),
            EtcdConn::Real(c) => Either::Right(c.lease_time_to_live(id)),
        }
    }

    fn lease_revoke(&mut self, id: LeaseId) -> impl Future<Output = Result<(), EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.lease_revoke(id)),
            EtcdConn::Real(c) => Either::Right(c.lease_revoke(id)),
        }
    }

    fn range(
        &mut self,
        request: RangeRequest,
    ) -> impl Future<Output = Result<RangeResponse, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.range(request)),
            EtcdConn::Real(c) => Either::Right(c.range(request)),
        }
    }

    fn txn(&mut self, txn: Txn) -> impl Future<Output = Result<TxnResponse, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.txn(txn)),
            EtcdConn::Real(c) => Either::Right(c.txn(txn)),
        }
    }

    fn delete(
        &mut self,
        key: &str,
    ) -> impl Future<Output = Result<(i64, Revision), EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.delete(key)),
            EtcdConn::Real(c) => Either::Right(c.delete(key)),
        }
    }

    fn wait_deleted(
        &mut self,
        key: &str,
        from_revision: Revision,
    ) -> impl Future<Output = Result<Revision, EtcdError>> + Send {
        match self {
            EtcdConn::Sim(c) => Either::Left(c.wait_deleted(key, from_revision)),
            EtcdConn::Real(c) => Either::Right(c.wait_deleted(key, from_revision)),
        }
    }
}

/// The ZooKeeper session a registered ZooKeeper lock gets: on the simulated service, or on
/// spawned ZooKeeper servers.
pub enum ZkConn {
    /// Simulation.
    Sim(SimZkClient),
    /// A session on spawned ZooKeeper servers.
    Real(RealZkClient),
}

impl ZkClient for ZkConn {
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = Result<(String, Stat), ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.create(path, data, mode)),
            ZkConn::Real(c) => Either::Right(c.create(path, data, mode)),
        }
    }

    fn delete(
        &mut self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.delete(path, version)),
            ZkConn::Real(c) => Either::Right(c.delete(path, version)),
        }
    }

    fn exists(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Option<Stat>, ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.exists(path, watch)),
            ZkConn::Real(c) => Either::Right(c.exists(path, watch)),
        }
    }

    fn get_data(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat), ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.get_data(path, watch)),
            ZkConn::Real(c) => Either::Right(c.get_data(path, watch)),
        }
    }

    fn get_children(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Vec<String>, ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.get_children(path, watch)),
            ZkConn::Real(c) => Either::Right(c.get_children(path, watch)),
        }
    }

    fn next_event(&mut self, timeout_ms: u64) -> impl Future<Output = Option<ZkEvent>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.next_event(timeout_ms)),
            ZkConn::Real(c) => Either::Right(c.next_event(timeout_ms)),
        }
    }

    fn state(&self) -> SessionState {
        match self {
            ZkConn::Sim(c) => c.state(),
            ZkConn::Real(c) => c.state(),
        }
    }

    fn session_id(&self) -> i64 {
        match self {
            ZkConn::Sim(c) => c.session_id(),
            ZkConn::Real(c) => c.session_id(),
        }
    }

    fn session_timeout_ms(&self) -> u64 {
        match self {
            ZkConn::Sim(c) => c.session_timeout_ms(),
            ZkConn::Real(c) => c.session_timeout_ms(),
        }
    }

    fn last_heard_ms(&self) -> u64 {
        match self {
            ZkConn::Sim(c) => c.last_heard_ms(),
            ZkConn::Real(c) => c.last_heard_ms(),
        }
    }

    fn reconnect(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.reconnect()),
            ZkConn::Real(c) => Either::Right(c.reconnect()),
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            ZkConn::Sim(c) => Either::Left(c.close()),
            ZkConn::Real(c) => Either::Right(c.close()),
        }
    }
}
