//! A client's connection to the simulated etcd cluster over the simulated network, behind the
//! [`EtcdClient`] seam.
//!
//! A request goes to the client's current member: the hop there takes the link's latency and a
//! cut link never delivers it; a crashed member refuses at once (the client's next request goes
//! to the next member, as etcd's client balances over its endpoints); the member passes it to the
//! leader, waiting while there is none; the leader applies it; the answer comes back the same
//! way. No answer within the request timeout fails it with [`EtcdError::NoAnswer`]: what it did
//! is then unknown, as with a real client whose context ends. A watch waits for its event as
//! long as it takes (the lock bounds it) and, like etcd's client, survives a member's crash.

use std::time::Duration;

use crate::backend::etcd::engine::EtcdEngine;
use crate::backend::etcd::seam::{
    EtcdClient, EtcdError, Lease, LeaseId, RangeRequest, RangeResponse, Revision,
};
use crate::backend::etcd::seam::{Txn, TxnResponse};
use crate::backend::etcd::sim::server::SimEtcd;

/// How often an answer held back by a cut link looks again whether the link healed.
const RETRY_LINK_MS: u64 = 50;

/// One client's connection to the simulated etcd cluster.
#[derive(Clone)]
pub struct NetEtcdConn {
    etcd: SimEtcd,
    /// The client's node index.
    node: usize,
    /// The client's index (`client-<c>`).
    client: u32,
    /// The member this client talks to now.
    member: usize,
    timeout: Duration,
}

impl NetEtcdConn {
    /// Client `client`'s connection from node `node` with a request timeout, starting at member
    /// `client mod members`.
    pub(super) fn new(etcd: SimEtcd, node: usize, client: u32, timeout: Duration) -> NetEtcdConn {
        let member = client as usize % etcd.members();
        NetEtcdConn {
            etcd,
            node,
            client,
            member,
            timeout,
        }
    }

    /// One hop of a message between the client and its member.
    async fn hop(&self, from: usize, to: usize) {
        madsim::time::sleep(self.etcd.net.latency()).await;
        if !self.etcd.net.reachable(from, to) {
            std::future::pending::<()>().await;
        }
    }

    async fn attempt<R>(&mut self, f: impl Fn(&mut EtcdEngine, u64) -> R) -> Result<R, EtcdError> {
        let m = self.member;
        self.hop(self.node, m).await;
        let (up, incarnation) = self.etcd.member(m);
        if !up {
            madsim::time::sleep(self.etcd.net.latency()).await;
            self.member = (m + 1) % self.etcd.members();
            return Err(EtcdError::NoAnswer(format!(
                "connection refused by etcd-{m} (down)"
            )));
        }
        // A follower passes the request to the leader and its answer back.
        let via_follower = self.etcd.leader() != Some(m);
        if via_follower {
            madsim::time::sleep(self.etcd.net.latency()).await;
        }
        let r = self.etcd.on_leader(self.client, f).await;
        if via_follower {
            madsim::time::sleep(self.etcd.net.latency()).await;
        }
        if self.etcd.member(m) != (true, incarnation) {
            // The member died with the answer: the connection resets.
            self.member = (m + 1) % self.etcd.members();
            return Err(EtcdError::NoAnswer(format!(
                "connection to etcd-{m} reset (crashed)"
            )));
        }
        self.hop(m, self.node).await;
        Ok(r)
    }

    async fn call<R>(&mut self, f: impl Fn(&mut EtcdEngine, u64) -> R) -> Result<R, EtcdError> {
        let timeout = self.timeout;
        let member = self.member;
        match madsim::time::timeout(timeout, self.attempt(f)).await {
            Ok(r) => r,
            Err(_) => {
                self.member = (member + 1) % self.etcd.members();
                Err(EtcdError::NoAnswer(format!(
                    "nothing from etcd-{member} within {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}

impl EtcdClient for NetEtcdConn {
    async fn lease_grant(&mut self, ttl_s: i64) -> Result<Lease, EtcdError> {
        self.call(move |e, now| e.lease_grant(now, ttl_s)).await
    }

    async fn lease_keep_alive(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        self.call(move |e, now| e.lease_keep_alive(now, id)).await?
    }

    async fn lease_time_to_live(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        self.call(move |e, now| e.lease_time_to_live(now, id))
            .await?
    }

    async fn lease_revoke(&mut self, id: LeaseId) -> Result<(), EtcdError> {
        self.call(move |e, _| e.lease_revoke(id)).await?
    }

    async fn range(&mut self, request: RangeRequest) -> Result<RangeResponse, EtcdError> {
        self.call(move |e, _| e.range(&request)).await
    }

    async fn txn(&mut self, txn: Txn) -> Result<TxnResponse, EtcdError> {
        self.call(move |e, _| e.txn(&txn)).await?
    }

    async fn delete(&mut self, key: &str) -> Result<(i64, Revision), EtcdError> {
        let key = key.to_string();
        self.call(move |e, _| e.delete(&key)).await
    }

    async fn wait_deleted(&mut self, key: &str, from: Revision) -> Result<Revision, EtcdError> {
        let m = self.member;
        self.hop(self.node, m).await;
        let key = key.to_string();
        let revision = self.etcd.watch(|e| e.deleted_since(&key, from)).await;
        // The event reaches the client once a link to it works again.
        loop {
            madsim::time::sleep(self.etcd.net.latency()).await;
            if self.etcd.net.reachable(self.member, self.node) {
                return Ok(revision);
            }
            madsim::time::sleep(Duration::from_millis(RETRY_LINK_MS)).await;
        }
    }
}
