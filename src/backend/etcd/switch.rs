//! The etcd seam through the world switch: a client of the simulated cluster or of spawned etcd
//! members, so an etcd lock is written once against [`EtcdClient`].

use crate::backend::etcd::seam::{
    EtcdClient, EtcdError, Lease, LeaseId, RangeRequest, RangeResponse,
};
use crate::backend::etcd::seam::{Revision, Txn, TxnResponse};
use crate::env::Switch;
use futures::future::Either;
use std::future::Future;

impl<S: EtcdClient, R: EtcdClient> EtcdClient for Switch<S, R> {
    fn lease_grant(&mut self, ttl_s: i64) -> impl Future<Output = Result<Lease, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.lease_grant(ttl_s)),
            Switch::Real(c) => Either::Right(c.lease_grant(ttl_s)),
        }
    }

    fn lease_keep_alive(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.lease_keep_alive(id)),
            Switch::Real(c) => Either::Right(c.lease_keep_alive(id)),
        }
    }

    fn lease_time_to_live(
        &mut self,
        id: LeaseId,
    ) -> impl Future<Output = Result<i64, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.lease_time_to_live(id)),
            Switch::Real(c) => Either::Right(c.lease_time_to_live(id)),
        }
    }

    fn lease_revoke(&mut self, id: LeaseId) -> impl Future<Output = Result<(), EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.lease_revoke(id)),
            Switch::Real(c) => Either::Right(c.lease_revoke(id)),
        }
    }

    fn range(
        &mut self,
        request: RangeRequest,
    ) -> impl Future<Output = Result<RangeResponse, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.range(request)),
            Switch::Real(c) => Either::Right(c.range(request)),
        }
    }

    fn txn(&mut self, txn: Txn) -> impl Future<Output = Result<TxnResponse, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.txn(txn)),
            Switch::Real(c) => Either::Right(c.txn(txn)),
        }
    }

    fn delete(
        &mut self,
        key: &str,
    ) -> impl Future<Output = Result<(i64, Revision), EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.delete(key)),
            Switch::Real(c) => Either::Right(c.delete(key)),
        }
    }

    fn wait_deleted(
        &mut self,
        key: &str,
        from_revision: Revision,
    ) -> impl Future<Output = Result<Revision, EtcdError>> + Send {
        match self {
            Switch::Sim(c) => Either::Left(c.wait_deleted(key, from_revision)),
            Switch::Real(c) => Either::Right(c.wait_deleted(key, from_revision)),
        }
    }
}
