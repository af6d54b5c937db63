//! The locks lockcheck ships: the one list of them ([`register`]), in `lockcheck list` order.
//! Adding a lock is its file and one line here.
//!
//! The registry runs the list to build its locks; the scenario format reads the same list, with
//! a registrar that builds nothing ([`kinds`]), to know the names, leases and named points.

use super::etcd_mutex::{self, EtcdMutex};
use super::mysql::DatabaseLock;
use super::zk_recipe::{self, Variant, ZkRecipe};
use super::{
    fenced, lettuce_reentrant, mysql_for_update, mysql_insert_unique, naive_setnx_expire, redisson,
    redlock, set_ex_nx_del, set_nx_px, Backend, Fenced, LettuceReentrant, Lock, LockConfig,
    LockKind, NaiveSetnxExpire, Origin, Redisson, Redlock, Registrar, SetExNxDel, SetNxPx,
};
use super::{mysql_for_update::MysqlForUpdate, mysql_insert_unique::MysqlInsertUnique};
use crate::env::{Env, TaskHandle};
use crate::etcd::{EtcdClient, EtcdError, Lease, LeaseId, RangeRequest, RangeResponse};
use crate::etcd::{Revision, Txn, TxnResponse};
use crate::sql::{SqlConn, SqlError, Value};
use crate::subscription::{NoSubscription, Subscribe};
use crate::zookeeper::{CreateMode, SessionState, Stat, ZkClient, ZkError, ZkEvent};
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture};
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// The client-program kind's name; `process` is its older name, which scenario files still use.
pub const CLIENT_PROGRAM: &str = "client-program";

/// Registers every lock lockcheck ships with `r`, as a program registers its own.
pub fn register<R: Registrar>(r: &mut R) {
    r.redis(set_nx_px::NAME, SetNxPx::new);
    r.redis(set_ex_nx_del::NAME, SetExNxDel::new);
    r.redis(naive_setnx_expire::NAME, NaiveSetnxExpire::new);
    r.redis(lettuce_reentrant::NAME, LettuceReentrant::new);
    r.redis(redisson::NAME, Redisson::new);
    r.redis(fenced::NAME, Fenced::new);
    r.redis(redlock::NAME, Redlock::new);
    r.client_program(LockKind::client_program(
        CLIENT_PROGRAM,
        &["process"],
        "your own client program (any language) over the JSON-lines client protocol, on Redis, or on ZooKeeper / etcd when the scenario has a [zookeeper] / [etcd] table; real mode only (docs/client-protocol.md)",
    ));
    r.database(mysql_for_update::NAME, MysqlForUpdate::new);
    r.database(mysql_insert_unique::NAME, MysqlInsertUnique::new);
    r.etcd(
        etcd_mutex::NAME,
        EtcdMutex::<_, _, { etcd_mutex::PLAIN }>::new,
    );
    r.etcd(
        etcd_mutex::NAME_LEASE_CHECK,
        EtcdMutex::<_, _, { etcd_mutex::LEASE_CHECK }>::new,
    );
    r.etcd(
        etcd_mutex::NAME_FENCED,
        EtcdMutex::<_, _, { etcd_mutex::FENCED }>::new,
    );
    r.zookeeper(
        zk_recipe::Plain::NAME,
        ZkRecipe::<_, _, zk_recipe::Plain>::new,
    );
    r.zookeeper(
        zk_recipe::Listener::NAME,
        ZkRecipe::<_, _, zk_recipe::Listener>::new,
    );
    r.zookeeper(
        zk_recipe::Fenced::NAME,
        ZkRecipe::<_, _, zk_recipe::Fenced>::new,
    );
}

/// The kinds [`register`] registers, in its order.
pub fn kinds() -> &'static [LockKind] {
    static KINDS: OnceLock<Vec<LockKind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let mut list = KindList(Vec::new());
        register(&mut list);
        list.0
    })
}

/// A registrar that only writes the kinds down: its connection types have no values, so no
/// lock is ever built through it.
struct KindList(Vec<LockKind>);

impl Registrar for KindList {
    type Conn = Unbuilt;
    type Db = Unbuilt;
    type Etcd = Unbuilt;
    type Zk = Unbuilt;
    type Env = Unbuilt;

    fn redis<L, F>(&mut self, name: &'static str, _make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Unbuilt>, Unbuilt) -> L,
    {
        self.0
            .push(LockKind::of::<L>(name, Backend::Redis, Origin::Builtin));
    }

    fn database<L, F>(&mut self, name: &'static str, _make: F)
    where
        L: DatabaseLock + 'static,
        F: Fn(LockConfig, Vec<Unbuilt>, Unbuilt) -> L,
    {
        self.0
            .push(LockKind::of::<L>(name, Backend::Database, Origin::Builtin));
    }

    fn etcd<L, F>(&mut self, name: &'static str, _make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Unbuilt>, Unbuilt) -> L,
    {
        self.0
            .push(LockKind::of::<L>(name, Backend::Etcd, Origin::Builtin));
    }

    fn zookeeper<L, F>(&mut self, name: &'static str, _make: F)
    where
        L: Lock + 'static,
        F: Fn(LockConfig, Vec<Unbuilt>, Unbuilt) -> L,
    {
        self.0
            .push(LockKind::of::<L>(name, Backend::ZooKeeper, Origin::Builtin));
    }

    fn client_program(&mut self, kind: LockKind) {
        self.0.push(kind);
    }
}

/// A connection (and an environment) there can be none of: [`KindList`] names the lock types
/// without building one, so it needs neither world's seams.
#[derive(Clone)]
enum Unbuilt {}

impl ConnectionLike for Unbuilt {
    fn req_packed_command<'a>(&'a mut self, _cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        match *self {}
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match *self {}
    }

    fn get_db(&self) -> i64 {
        match *self {}
    }
}

impl Env for Unbuilt {
    fn now_ms(&self) -> u64 {
        match *self {}
    }

    async fn sleep(&self, _d: Duration) {
        match *self {}
    }

    fn spawn<F>(&self, _task: F) -> TaskHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match *self {}
    }

    fn random_u64(&self) -> u64 {
        match *self {}
    }
}

impl Subscribe for Unbuilt {
    type Subscription = NoSubscription;

    fn subscription(&self) -> NoSubscription {
        match *self {}
    }
}

impl SqlConn for Unbuilt {
    async fn query(&mut self, _sql: &str) -> Result<Vec<Vec<Value>>, SqlError> {
        match *self {}
    }

    async fn execute(&mut self, _sql: &str) -> Result<u64, SqlError> {
        match *self {}
    }
}

impl EtcdClient for Unbuilt {
    async fn lease_grant(&mut self, _ttl_s: i64) -> Result<Lease, EtcdError> {
        match *self {}
    }

    async fn lease_keep_alive(&mut self, _id: LeaseId) -> Result<i64, EtcdError> {
        match *self {}
    }

    async fn lease_time_to_live(&mut self, _id: LeaseId) -> Result<i64, EtcdError> {
        match *self {}
    }

    async fn lease_revoke(&mut self, _id: LeaseId) -> Result<(), EtcdError> {
        match *self {}
    }

    async fn range(&mut self, _request: RangeRequest) -> Result<RangeResponse, EtcdError> {
        match *self {}
    }

    async fn txn(&mut self, _txn: Txn) -> Result<TxnResponse, EtcdError> {
        match *self {}
    }

    async fn delete(&mut self, _key: &str) -> Result<(i64, Revision), EtcdError> {
        match *self {}
    }

    async fn wait_deleted(&mut self, _key: &str, _from: Revision) -> Result<Revision, EtcdError> {
        match *self {}
    }
}

impl ZkClient for Unbuilt {
    async fn create(
        &mut self,
        _path: &str,
        _data: &[u8],
        _mode: CreateMode,
    ) -> Result<(String, Stat), ZkError> {
        match *self {}
    }

    async fn delete(&mut self, _path: &str, _version: Option<i32>) -> Result<(), ZkError> {
        match *self {}
    }

    async fn exists(&mut self, _path: &str, _watch: bool) -> Result<Option<Stat>, ZkError> {
        match *self {}
    }

    async fn get_data(&mut self, _path: &str, _watch: bool) -> Result<(Vec<u8>, Stat), ZkError> {
        match *self {}
    }

    async fn get_children(&mut self, _path: &str, _watch: bool) -> Result<Vec<String>, ZkError> {
        match *self {}
    }

    async fn next_event(&mut self, _timeout_ms: u64) -> Option<ZkEvent> {
        match *self {}
    }

    fn state(&self) -> SessionState {
        match *self {}
    }

    fn session_id(&self) -> i64 {
        match *self {}
    }

    fn session_timeout_ms(&self) -> u64 {
        match *self {}
    }

    fn last_heard_ms(&self) -> u64 {
        match *self {}
    }

    async fn reconnect(&mut self) -> Result<(), ZkError> {
        match *self {}
    }

    async fn close(&mut self) -> Result<(), ZkError> {
        match *self {}
    }
}
