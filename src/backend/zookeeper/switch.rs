//! The ZooKeeper seam through the world switch: a session on the simulated service or on spawned
//! ZooKeeper servers, so a ZooKeeper lock is written once against [`ZkClient`].

use crate::backend::zookeeper::seam::{CreateMode, SessionState, Stat, ZkClient, ZkError, ZkEvent};
use crate::env::Switch;
use futures::future::Either;
use std::future::Future;

impl<S: ZkClient, R: ZkClient> ZkClient for Switch<S, R> {
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> impl Future<Output = Result<(String, Stat), ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.create(path, data, mode)),
            Switch::Real(c) => Either::Right(c.create(path, data, mode)),
        }
    }

    fn delete(
        &mut self,
        path: &str,
        version: Option<i32>,
    ) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.delete(path, version)),
            Switch::Real(c) => Either::Right(c.delete(path, version)),
        }
    }

    fn exists(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Option<Stat>, ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.exists(path, watch)),
            Switch::Real(c) => Either::Right(c.exists(path, watch)),
        }
    }

    fn get_data(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat), ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.get_data(path, watch)),
            Switch::Real(c) => Either::Right(c.get_data(path, watch)),
        }
    }

    fn get_children(
        &mut self,
        path: &str,
        watch: bool,
    ) -> impl Future<Output = Result<Vec<String>, ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.get_children(path, watch)),
            Switch::Real(c) => Either::Right(c.get_children(path, watch)),
        }
    }

    fn next_event(&mut self, timeout_ms: u64) -> impl Future<Output = Option<ZkEvent>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.next_event(timeout_ms)),
            Switch::Real(c) => Either::Right(c.next_event(timeout_ms)),
        }
    }

    fn state(&self) -> SessionState {
        match self {
            Switch::Sim(c) => c.state(),
            Switch::Real(c) => c.state(),
        }
    }

    fn session_id(&self) -> i64 {
        match self {
            Switch::Sim(c) => c.session_id(),
            Switch::Real(c) => c.session_id(),
        }
    }

    fn session_timeout_ms(&self) -> u64 {
        match self {
            Switch::Sim(c) => c.session_timeout_ms(),
            Switch::Real(c) => c.session_timeout_ms(),
        }
    }

    fn last_heard_ms(&self) -> u64 {
        match self {
            Switch::Sim(c) => c.last_heard_ms(),
            Switch::Real(c) => c.last_heard_ms(),
        }
    }

    fn reconnect(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.reconnect()),
            Switch::Real(c) => Either::Right(c.reconnect()),
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), ZkError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.close()),
            Switch::Real(c) => Either::Right(c.close()),
        }
    }
}
