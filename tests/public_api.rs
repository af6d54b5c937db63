//! A user's code written against lockcheck's public paths keeps compiling when a module moves:
//! the paths that moved into `lockcheck::backend::<service>` (see CHANGELOG.md) still name the
//! same items, through deprecated modules and re-exports. A path dropped without its alias
//! fails this file's build.
#![allow(deprecated)]

use std::any::TypeId;

// Functions (and traits) under the old module paths resolve as well.
#[allow(unused_imports)]
use lockcheck::backend::redis::real::world::real_mode_unsupported as _;
#[allow(unused_imports)]
use lockcheck::etcd::EtcdClient as _;
#[allow(unused_imports)]
use lockcheck::lock::builtin::kinds as _;
#[allow(unused_imports)]
use lockcheck::lock::etcd_mutex::EtcdMutex as _;
#[allow(unused_imports)]
use lockcheck::lock::mysql::DatabaseLock as _;
#[allow(unused_imports)]
use lockcheck::lock::mysql_insert_unique::cleanup_once as _;
#[allow(unused_imports)]
use lockcheck::lock::zk_recipe::ZkRecipe as _;
#[allow(unused_imports)]
use lockcheck::real::redis_world::run_with as _;
#[allow(unused_imports)]
use lockcheck::scenario::database::{request_timeout as _, SERVER as _};
#[allow(unused_imports)]
use lockcheck::sim::etcd_world::run_with as _;
#[allow(unused_imports)]
use lockcheck::sim::run_with as _;
#[allow(unused_imports)]
use lockcheck::world::mysql::cleanup_pass as _;
#[allow(unused_imports)]
use lockcheck::zookeeper::{ping_after_idle_ms as _, sequence_of as _, ZkClient as _};

/// The world switch kept the two sides' names: a user's `Conn::Sim(c)` / `NodeEnv::Real(e)` and
/// matches on them still compile.
#[allow(dead_code)]
fn the_switch_keeps_its_variants(c: lockcheck::registry::Conn, e: lockcheck::registry::NodeEnv) {
    match c {
        lockcheck::registry::Conn::Sim(_) | lockcheck::registry::Conn::Real(_) => {}
    }
    let _ = match e {
        lockcheck::registry::NodeEnv::Sim(e) => lockcheck::registry::NodeEnv::Sim(e),
        lockcheck::registry::NodeEnv::Real(e) => lockcheck::registry::NodeEnv::Real(e),
    };
}

/// The same type under its old and its new path.
fn same<A: 'static, B: 'static>() -> bool {
    TypeId::of::<A>() == TypeId::of::<B>()
}

#[test]
fn paths_moved_into_the_backends_name_the_same_items() {
    use lockcheck::backend::{etcd, mysql, redis, zookeeper};
    assert!(same::<
        lockcheck::sim::SimZkClient,
        zookeeper::sim::SimZkClient,
    >());
    assert!(same::<lockcheck::sim::SimZk, zookeeper::sim::SimZk>());
    assert!(same::<lockcheck::sim::NetEtcdConn, etcd::sim::NetEtcdConn>());
    assert!(same::<lockcheck::sim::NetSqlConn, mysql::sim::NetSqlConn>());
    assert!(same::<lockcheck::sim::SharedEngine, mysql::sim::SharedEngine>());
    assert!(same::<
        lockcheck::sim::SimConnection,
        redis::sim::SimConnection,
    >());
    assert!(same::<
        lockcheck::sim::cluster::Cluster,
        redis::sim::cluster::Cluster,
    >());
    assert!(same::<
        lockcheck::real::RealZkClient,
        zookeeper::real::RealZkClient,
    >());
    assert!(same::<
        lockcheck::real::RealEtcdConn,
        etcd::real::RealEtcdConn,
    >());
    assert!(same::<lockcheck::real::RealSqlConn, mysql::real::RealSqlConn>());
    assert!(same::<lockcheck::real::MariaDb, mysql::real::MariaDb>());
    assert!(same::<lockcheck::real::ZooKeeper, zookeeper::real::ZooKeeper>());
    assert!(same::<lockcheck::real::EtcdCluster, etcd::real::EtcdCluster>());
    assert!(same::<lockcheck::real::FailoverRig, redis::real::FailoverRig>());
    assert!(same::<lockcheck::real::BlackHole, redis::real::BlackHole>());
    assert!(same::<
        lockcheck::real::external::ExternalRedis,
        redis::real::external::ExternalRedis,
    >());
    assert!(same::<
        lockcheck::real::servers::mariadb::MariaDb,
        mysql::real::MariaDb,
    >());
    assert!(same::<
        lockcheck::simzk::ZkEngine,
        zookeeper::engine::ZkEngine,
    >());
    assert!(same::<
        lockcheck::simetcd::EtcdEngine,
        etcd::engine::EtcdEngine,
    >());
    assert!(same::<lockcheck::simsql::Engine, mysql::engine::Engine>());
    assert!(same::<lockcheck::etcd::KeyValue, etcd::seam::KeyValue>());
    assert!(same::<lockcheck::etcd::types::Txn, etcd::seam::Txn>());
    assert!(same::<
        lockcheck::etcd::error::EtcdError,
        etcd::seam::EtcdError,
    >());
    assert!(same::<lockcheck::zookeeper::Stat, zookeeper::seam::Stat>());
    assert!(same::<
        lockcheck::zookeeper::ZkEvent,
        zookeeper::seam::ZkEvent,
    >());
    assert!(same::<
        lockcheck::zookeeper::error::ZkError,
        zookeeper::seam::ZkError,
    >());
    assert_eq!(lockcheck::scenario::database::SERVER, mysql::table::SERVER);
    assert_eq!(lockcheck::scenario::etcd::member(2), etcd::table::member(2));
    assert_eq!(
        lockcheck::scenario::zookeeper::server_name(1),
        zookeeper::table::server_name(1)
    );
    assert!(same::<
        lockcheck::lock::mysql_for_update::MysqlForUpdate<(), ()>,
        mysql::lock::MysqlForUpdate<(), ()>,
    >());
    assert!(same::<
        lockcheck::lock::mysql_insert_unique::MysqlInsertUnique<(), ()>,
        mysql::lock::MysqlInsertUnique<(), ()>,
    >());
}
