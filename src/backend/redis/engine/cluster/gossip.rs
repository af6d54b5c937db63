//! The bus's heartbeat and failure detection: each node's cron, pings and pongs with their
//! gossip, `PFAIL` and `FAIL`, configuration updates, and the cluster state a node serves by.
//!
//! From the cluster spec ("Heartbeat and gossip messages", "Failure detection", "Hash slots
//! configuration propagation") and Redis 7.0's `clusterCron`, `clusterProcessPacket`,
//! `markNodeAsFailingIfNeeded` and `clusterUpdateState`:
//! - A node pings a peer whose last pong is older than half the node timeout, and once a second
//!   the one with the oldest pong among 5 random peers. A connection that breaks (the peer's
//!   process died) is retried every cron; a refused connect counts as a ping sent, so a crashed
//!   peer is suspected one node timeout after the first cron that finds it gone. A connection
//!   silent for half the node timeout with a ping pending is dropped and reopened with a new
//!   ping once the peer can be reached: that is how a healed partition is heard again.
//! - A peer with a ping unanswered for more than the node timeout (and no other data from it
//!   meanwhile) is `PFAIL`. Every ping and pong carries gossip on a few random peers plus every
//!   peer the sender suspects; a master's word that a peer is `PFAIL` or `FAIL` is a failure
//!   report, valid for 2 × node timeout. A node that itself suspects a peer, with reports from a
//!   majority of the masters serving slots (itself counted if a master), marks it `FAIL` and
//!   broadcasts `FAIL`, which every node accepts.
//! - A pong clears `PFAIL`; `FAIL` of a replica or of a master without slots clears on a pong,
//!   of a master with slots only once it has been failed 2 × node timeout.
//! - A master's ping claims its slots with its configuration epoch: a newer epoch takes the
//!   slots; a node whose view of the claimant's slots is newer answers `UPDATE`. A master left
//!   with no slot, all taken by one claimant, becomes that claimant's replica, and so do its
//!   replicas.
//! - The cluster state turns fail when a slot is unowned or owned by a `FAIL` node
//!   (`cluster-require-full-coverage yes`), or when this node reaches (not `PFAIL`, not `FAIL`)
//!   fewer than a majority of the masters serving slots: the minority side of a partition stops
//!   serving after about the node timeout (measured: 746 ms at 500 ms). A master turns ok again
//!   only 2 s after its start and, after being in the minority, only after the node timeout
//!   (clamped to 0.5–5 s) so that it hears of a failover first.

use crate::backend::redis::engine::cluster::bus::{
    Body, Bus, BusEvent, Header, Message, Pending, WRITABLE_DELAY_MS,
};
use rand::RngCore;

/// Failure reports are valid for this many node timeouts (`CLUSTER_FAIL_REPORT_VALIDITY_MULT`).
const REPORT_VALIDITY_MULT: u64 = 2;
/// A failed master with slots is cleared after this many node timeouts
/// (`CLUSTER_FAIL_UNDO_TIME_MULT`).
const FAIL_UNDO_TIME_MULT: u64 = 2;
/// The rejoin delay's bounds (`CLUSTER_MIN_REJOIN_DELAY`, `CLUSTER_MAX_REJOIN_DELAY`).
const REJOIN_DELAY_MS: (u64, u64) = (500, 5000);

impl Bus {
    /// What `node` says of itself in every message.
    pub(super) fn header(&mut self, node: usize) -> Header {
        let n = &self.nodes[node];
        let master = n.peers[node].replica_of.unwrap_or(node);
        let others: Vec<usize> = (0..self.nodes.len()).filter(|&p| p != node).collect();
        // A few random peers (at least 3, a tenth of the nodes), then every suspected one.
        let wanted = (self.nodes.len() / 10)
            .max(3)
            .min(others.len().saturating_sub(1));
        let mut gossip: Vec<(usize, bool, bool)> = Vec::new();
        let mut pool = others.clone();
        while gossip.len() < wanted && !pool.is_empty() {
            let p = pool.remove((self.rng.next_u64() % pool.len() as u64) as usize);
            let peer = &self.nodes[node].peers[p];
            if !peer.pfail {
                gossip.push((p, false, peer.fail));
            }
        }
        let n = &self.nodes[node];
        gossip.extend(
            others
                .iter()
                .filter(|&&p| n.peers[p].pfail)
                .map(|&p| (p, true, false)),
        );
        Header {
            current_epoch: n.current_epoch,
            config_epoch: n.map.epoch(master),
            replica_of: n.peers[node].replica_of,
            claimed: n.map.ranges_of(master),
            offset: n.offset,
            paused: n.paused_until.is_some(),
            gossip,
        }
    }

    /// Sends `body` from `from` to `to`; it arrives after the latency if the link holds then.
    pub(super) fn send(&mut self, from: usize, to: usize, body: Body) {
        if !self.reach.can_talk(from, to) {
            return;
        }
        let header = self.header(from);
        let msg = Message {
            from,
            to,
            to_incarnation: self.nodes[to].incarnation,
            header,
            body,
        };
        let at = self.now + self.config.latency_ms;
        self.push(at, Pending::Deliver(msg));
    }

    /// `body` to every other node.
    pub(super) fn broadcast(&mut self, from: usize, body: Body) {
        for to in (0..self.nodes.len()).filter(|&to| to != from) {
            self.send(from, to, body.clone());
        }
    }

    /// A ping from `from` to `to`, remembering when if none is pending.
    fn ping(&mut self, from: usize, to: usize) {
        let now = self.now;
        let peer = &mut self.nodes[from].peers[to];
        if peer.ping_sent == 0 {
            peer.ping_sent = now;
        }
        self.send(from, to, Body::Ping);
    }

    /// One run of `node`'s cron.
    pub(super) fn cron(&mut self, node: usize) {
        let now = self.now;
        let timeout = self.config.node_timeout_ms;
        self.nodes[node].iteration += 1;
        let others: Vec<usize> = (0..self.nodes.len()).filter(|&p| p != node).collect();
        // Connections: one silent for half the node timeout with a ping pending is dropped; a
        // dropped or broken one is reopened if the peer can be reached, and a connect that fails
        // (refused by a dead peer, or across a cut) is a ping sent now.
        for &p in &others {
            let peer = &mut self.nodes[node].peers[p];
            if peer.link
                && now - peer.link_since > timeout
                && peer.ping_sent != 0
                && now - peer.ping_sent > timeout / 2
                && now - peer.data_received > timeout / 2
            {
                peer.link = false;
            }
            if peer.link {
                continue;
            }
            if self.reach.can_talk(node, p) {
                self.nodes[node].peers[p].link = true;
                self.nodes[node].peers[p].link_since = now;
                self.ping(node, p);
            } else if self.nodes[node].peers[p].ping_sent == 0 {
                self.nodes[node].peers[p].ping_sent = now;
            }
        }
        // Once a second: of 5 random peers, ping the one heard from longest ago.
        if self.nodes[node].iteration.is_multiple_of(10) {
            let mut oldest: Option<(u64, usize)> = None;
            for _ in 0..5 {
                let p = others[(self.rng.next_u64() % others.len() as u64) as usize];
                let peer = &self.nodes[node].peers[p];
                if !peer.link || peer.ping_sent != 0 {
                    continue;
                }
                if oldest.is_none_or(|(t, _)| peer.pong_received < t) {
                    oldest = Some((peer.pong_received, p));
                }
            }
            if let Some((_, p)) = oldest {
                self.ping(node, p);
            }
        }
        let mf_replica = self.nodes[node].manual.as_ref().and_then(|m| m.replica);
        for &p in &others {
            let peer = &self.nodes[node].peers[p];
            if peer.link && peer.ping_sent == 0 && now - peer.pong_received > timeout / 2 {
                self.ping(node, p);
                continue;
            }
            if mf_replica == Some(p) {
                self.ping(node, p);
            }
            let peer = &self.nodes[node].peers[p];
            if peer.ping_sent == 0 {
                continue;
            }
            let delay = (now - peer.ping_sent).min(now - peer.data_received);
            if delay > timeout && !peer.pfail && !peer.fail {
                self.nodes[node].peers[p].pfail = true;
                self.record(BusEvent::Suspected { by: node, node: p });
            }
        }
        self.manual_failover_timeout(node);
        if self.nodes[node].peers[node].replica_of.is_some() {
            self.handle_manual_failover(node);
            self.handle_replica_failover(node);
        }
        self.update_state(node);
    }

    /// `msg` arrives at its receiver.
    pub(super) fn receive(&mut self, msg: Message) {
        let Message {
            from,
            to,
            header,
            body,
            ..
        } = msg;
        let now = self.now;
        {
            let n = &mut self.nodes[to];
            n.peers[from].data_received = now;
            n.peers[from].offset = header.offset;
            n.current_epoch = n.current_epoch.max(header.current_epoch);
            if header.replica_of.is_none() && header.config_epoch > n.map.epoch(from) {
                n.map.set_epoch(from, header.config_epoch);
            }
        }
        match body {
            Body::Ping | Body::Pong | Body::MfStart => {
                if matches!(body, Body::Ping) {
                    self.send(to, from, Body::Pong);
                }
                if matches!(body, Body::Pong) {
                    self.pong_from(to, from);
                }
                self.learn_role(to, from, &header);
                self.gossip(to, from, &header.gossip);
                if matches!(body, Body::MfStart) {
                    self.start_manual_failover_as_master(to, from);
                }
                self.paused_master_offset(to, from, &header);
            }
            Body::Fail(node) => {
                let p = &mut self.nodes[to].peers[node];
                if node != to && !p.fail {
                    p.fail = true;
                    p.pfail = false;
                    p.fail_time = now;
                    self.record(BusEvent::Failed { by: to, node });
                }
            }
            Body::AuthRequest { force } => self.maybe_vote(to, from, &header, force),
            Body::AuthAck => self.count_vote(to, from, &header),
            Body::Update { node, epoch, slots } => {
                if self.nodes[to].map.epoch(node) < epoch && node != to {
                    self.nodes[to].peers[node].replica_of = None;
                    self.apply_claim(to, node, epoch, &slots);
                }
            }
        }
        self.update_state(to);
    }

    /// A pong answers `from`'s ping: `node` is reachable.
    fn pong_from(&mut self, me: usize, node: usize) {
        let now = self.now;
        let timeout = self.config.node_timeout_ms;
        let failed_with_slots = {
            let n = &self.nodes[me];
            n.peers[node].replica_of.is_none() && n.map.count_of(node) > 0
        };
        let p = &mut self.nodes[me].peers[node];
        p.pong_received = now;
        p.ping_sent = 0;
        if p.pfail {
            p.pfail = false;
            self.record(BusEvent::Cleared { by: me, node });
        } else if p.fail
            && (!failed_with_slots || now - p.fail_time > FAIL_UNDO_TIME_MULT * timeout)
        {
            p.fail = false;
            self.record(BusEvent::Cleared { by: me, node });
        }
    }

    /// What a ping or pong says of its sender's role and slots.
    fn learn_role(&mut self, me: usize, from: usize, header: &Header) {
        let n = &mut self.nodes[me];
        match header.replica_of {
            Some(master) => {
                if n.peers[from].replica_of.is_none() {
                    // A master turned replica: it serves nothing any more.
                    n.map.unassign_node(from);
                }
                n.peers[from].replica_of = Some(master);
            }
            None => {
                n.peers[from].replica_of = None;
                if n.map.ranges_of(from) != header.claimed {
                    self.apply_claim(me, from, header.config_epoch, &header.claimed);
                }
            }
        }
    }

    /// Master `from` claims `claimed` with `epoch`, as `me` hears it
    /// (`clusterUpdateSlotsConfigWith`).
    fn apply_claim(
        &mut self,
        me: usize,
        from: usize,
        epoch: u64,
        claimed: &[crate::backend::redis::engine::cluster::topology::SlotRange],
    ) {
        let my_master = self.nodes[me].peers[me].replica_of.unwrap_or(me);
        let had = self.nodes[me].map.count_of(my_master);
        let outcome = self.nodes[me].map.accept_claim(from, epoch, claimed);
        for owner in outcome.newer {
            let (epoch, slots) = {
                let map = &self.nodes[me].map;
                (map.epoch(owner), map.ranges_of(owner))
            };
            self.send(
                me,
                from,
                Body::Update {
                    node: owner,
                    epoch,
                    slots,
                },
            );
        }
        let taken = outcome.taken.get(&Some(my_master)).map_or(0, Vec::len);
        let claimed_len: usize = claimed.iter().map(|r| r.len()).sum();
        if had > 0
            && taken > 0
            && from != me
            && self.nodes[me].map.count_of(my_master) == 0
            && claimed_len == taken
        {
            // All our (our master's) slots went to `from`: follow it.
            self.nodes[me].peers[me].replica_of = Some(from);
            self.end_manual_failover(me);
            self.record(BusEvent::Follows {
                node: me,
                master: from,
            });
        }
    }

    /// Gossip from `from`: a master's suspicions are failure reports.
    fn gossip(&mut self, me: usize, from: usize, entries: &[(usize, bool, bool)]) {
        if self.nodes[me].peers[from].replica_of.is_some() {
            return;
        }
        for &(node, pfail, fail) in entries {
            if node == me {
                continue;
            }
            if pfail || fail {
                self.nodes[me].peers[node].reports.insert(from, self.now);
                self.mark_failing_if_needed(me, node);
            } else {
                self.nodes[me].peers[node].reports.remove(&from);
            }
        }
    }

    /// `markNodeAsFailingIfNeeded`: `me` suspects `node` and a majority of masters agree.
    fn mark_failing_if_needed(&mut self, me: usize, node: usize) {
        let now = self.now;
        let validity = REPORT_VALIDITY_MULT * self.config.node_timeout_ms;
        let needed = self.voting_masters(me).len() / 2 + 1;
        let i_am_master = self.nodes[me].peers[me].replica_of.is_none();
        let p = &mut self.nodes[me].peers[node];
        if !p.pfail || p.fail {
            return;
        }
        p.reports.retain(|_, &mut at| now - at <= validity);
        if p.reports.len() + usize::from(i_am_master) < needed {
            return;
        }
        p.pfail = false;
        p.fail = true;
        p.fail_time = now;
        self.record(BusEvent::Failed { by: me, node });
        self.broadcast(me, Body::Fail(node));
    }

    /// `clusterUpdateState`: whether `node` serves.
    pub(super) fn update_state(&mut self, node: usize) {
        let now = self.now;
        let timeout = self.config.node_timeout_ms;
        let masters = self.voting_masters(node);
        let n = &self.nodes[node];
        let master = n.peers[node].replica_of.is_none();
        if master && !n.state_ok && now - n.started_ms < WRITABLE_DELAY_MS {
            return;
        }
        let mut ok = n.map.covered()
            && n.map
                .owners()
                .iter()
                .all(|&o| !n.peers[o].fail || o == node);
        let reachable = masters
            .iter()
            .filter(|&&m| m == node || (!n.peers[m].pfail && !n.peers[m].fail))
            .count();
        let n = &mut self.nodes[node];
        if reachable < masters.len() / 2 + 1 {
            ok = false;
            n.among_minority_ms = Some(now);
        }
        if ok == n.state_ok {
            return;
        }
        let rejoin = timeout.clamp(REJOIN_DELAY_MS.0, REJOIN_DELAY_MS.1);
        if ok && master && n.among_minority_ms.is_some_and(|t| now - t < rejoin) {
            return;
        }
        n.state_ok = ok;
        self.record(BusEvent::State { node, ok });
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::redis::engine::cluster::bus::{Bus, BusConfig, BusEvent};
    use crate::backend::redis::engine::cluster::reach::Reach;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn bus(seed: u64) -> Bus {
        Bus::new(BusConfig::default(), &mut SmallRng::seed_from_u64(seed))
    }

    /// A bus past its formation (every state ok at 3 s), every node up.
    fn formed(seed: u64) -> (Bus, Reach) {
        let mut b = bus(seed);
        let reach = Reach::all(b.len());
        b.advance(3000, &reach);
        (b, reach)
    }

    #[test]
    fn a_formed_cluster_turns_ok_after_the_writable_delay_and_stays_quiet() {
        let mut b = bus(1);
        let reach = Reach::all(b.len());
        b.advance(1900, &reach);
        assert!(
            (0..3).all(|m| !b.state_ok(m)),
            "masters wait 2 s after their start"
        );
        let events = b.advance(5000, &reach);
        assert!((0..6).all(|n| b.state_ok(n)));
        assert!(
            events
                .iter()
                .all(|e| matches!(e.event, BusEvent::State { ok: true, .. })),
            "no suspicion among healthy nodes: {events:?}"
        );
    }

    #[test]
    fn a_crashed_master_is_suspected_then_failed_by_every_node() {
        let (mut b, mut reach) = formed(2);
        reach.crash(1);
        let events = b.advance(3000, &reach);
        assert!(events.is_empty());
        let events = b.advance(4500, &reach);
        let first_suspicion = events
            .iter()
            .find(|e| matches!(e.event, BusEvent::Suspected { node: 1, .. }))
            .expect("suspected")
            .at_ms;
        assert!(
            first_suspicion > 3500,
            "not before the node timeout: {first_suspicion}"
        );
        for n in [0, 2, 3, 4, 5] {
            assert!(b.failed(n, 1), "node {n} holds 1 failed");
            assert!(!b.failed(n, 0));
        }
    }

    #[test]
    fn a_replica_promoted_within_2_s_of_its_start_serves_only_from_then() {
        // docs/redis-cluster.md: a replica restarted a moment before its master's crash was
        // promoted, then answered CLUSTERDOWN until its start + 2 s.
        let (mut b, mut reach) = formed(4);
        reach.crash(3);
        b.advance(3000, &reach);
        reach.restart(3);
        b.advance(3200, &reach);
        reach.crash(0);
        b.advance(3300, &reach);
        let events = b.advance(8000, &reach);
        let promoted = events
            .iter()
            .find(|e| matches!(e.event, BusEvent::Promoted { node: 3, .. }))
            .expect("promoted")
            .at_ms;
        assert!(
            promoted < 3200 + 2000,
            "promoted at {promoted}: the case to test"
        );
        let ok = events
            .iter()
            .find(|e| e.at_ms >= promoted && e.event == BusEvent::State { node: 3, ok: true })
            .expect("ok in the end")
            .at_ms;
        assert!(
            (3200 + 2000..3200 + 2000 + 100).contains(&ok),
            "ok at {ok}, at the first cron after its start + 2 s"
        );
    }

    #[test]
    fn an_isolated_master_stops_serving_and_the_majority_keeps_serving() {
        let (mut b, mut reach) = formed(3);
        reach.partition(&[0]);
        b.advance(3000, &reach);
        b.advance(3400, &reach);
        assert!(b.state_ok(0), "not yet: the node timeout has not passed");
        b.advance(4000, &reach);
        assert!(!b.state_ok(0), "the minority master refuses");
        assert!(b.suspects(0, 1) && b.suspects(0, 2));
    }
}
