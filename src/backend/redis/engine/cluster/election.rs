//! Replica promotion: the election a replica of a failed master runs, the masters' votes, and
//! the manual failovers (`CLUSTER FAILOVER` and its `FORCE` and `TAKEOVER` forms).
//!
//! From the cluster spec ("Replica election and promotion", "Masters reply to replica vote
//! request", "Manual failover") and Redis 7.0's `clusterHandleSlaveFailover`,
//! `clusterSendFailoverAuthIfNeeded` and `clusterHandleManualFailover`:
//! - A replica whose master is `FAIL` schedules its election, at its next cron, for
//!   500 ms + a random 0–500 ms + 1000 ms × its rank (how many of its master's other replicas
//!   announced a greater replication offset), then, at the first cron past that time, bumps the
//!   current epoch and asks every master for its vote. Measured on real servers (rank 0): the
//!   promotion follows `FAIL` by 622–1105 ms, which is this delay plus up to two crons.
//! - A master serving slots votes once per epoch, for a replica whose master is `FAIL` (or any
//!   replica, in a manual failover), not twice for replicas of one master within 2 × node
//!   timeout, and not for a claim on slots it knows a newer epoch for.
//! - With votes from a majority of the masters serving slots (the failed one counted in the
//!   size) before the election expires (2 × node timeout, at least 2 s), the replica takes its
//!   master's slots with the election's epoch as its configuration epoch and tells everyone.
//!   Expired, it may try again after twice that.
//! - `CLUSTER FAILOVER`: the replica asks its master to stop its clients' writes; the master
//!   pauses them and pings its offset; once the replica has applied that offset the election
//!   starts at once, and masters vote though the master is alive. `FORCE` skips the master;
//!   `TAKEOVER` skips the votes too: the replica bumps the epoch alone. A manual failover not
//!   done in 5 s is abandoned and the master resumes writes.
//!
//! Not modelled: the replica validity factor (a replica too long disconnected from its master
//! refuses to fail over), `cluster-replica-no-failover`, and epoch collisions between two
//! masters with one configuration epoch (the deployment gives each master its own).

use crate::backend::redis::engine::cluster::bus::{Body, Bus, BusEvent, Header, ManualState};
use crate::backend::redis::engine::cluster::topology::ManualFailover;
use rand::RngCore;

/// How long a manual failover may take (`CLUSTER_MF_TIMEOUT`).
const MF_TIMEOUT_MS: u64 = 5000;

impl Bus {
    /// `CLUSTER FAILOVER [FORCE|TAKEOVER]` sent to `replica` at the time of the last
    /// [`Bus::advance`]; an error is Redis's reply.
    pub fn failover(&mut self, replica: usize, how: ManualFailover) -> Result<(), String> {
        let now = self.now;
        let Some(master) = self.nodes[replica].peers[replica].replica_of else {
            return Err("ERR You should send CLUSTER FAILOVER to a replica".into());
        };
        let master_down =
            self.nodes[replica].peers[master].fail || !self.reach.can_talk(replica, master);
        if how == ManualFailover::Coordinated && master_down {
            return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE".into());
        }
        self.nodes[replica].election = Default::default();
        match how {
            ManualFailover::Takeover => {
                self.bump_epoch_without_consensus(replica);
                let epoch = self.nodes[replica].map.epoch(replica);
                self.replace_master(replica, master, epoch);
            }
            ManualFailover::Force => {
                self.nodes[replica].manual = Some(ManualState {
                    end_ms: now + MF_TIMEOUT_MS,
                    can_start: true,
                    master_offset: None,
                    replica: None,
                });
                self.handle_replica_failover(replica);
            }
            ManualFailover::Coordinated => {
                self.nodes[replica].manual = Some(ManualState {
                    end_ms: now + MF_TIMEOUT_MS,
                    can_start: false,
                    master_offset: None,
                    replica: None,
                });
                self.send(replica, master, Body::MfStart);
            }
        }
        Ok(())
    }

    /// Master `me` got `MFSTART` from its replica `from`: it pauses writes and pings its offset.
    pub(super) fn start_manual_failover_as_master(&mut self, me: usize, from: usize) {
        if self.nodes[me].peers[from].replica_of != Some(me) {
            return;
        }
        let now = self.now;
        self.nodes[me].manual = Some(ManualState {
            end_ms: now + MF_TIMEOUT_MS,
            can_start: false,
            master_offset: None,
            replica: Some(from),
        });
        // Redis pauses for twice the manual failover's time; the failover's end lifts it.
        self.nodes[me].paused_until = Some(now + 2 * MF_TIMEOUT_MS);
        self.record(BusEvent::WritesPaused {
            node: me,
            paused: true,
        });
        self.send(me, from, Body::Ping);
    }

    /// Replica `me` in a coordinated failover hears its paused master's offset.
    pub(super) fn paused_master_offset(&mut self, me: usize, from: usize, header: &Header) {
        let n = &mut self.nodes[me];
        if n.peers[me].replica_of != Some(from) || !header.paused {
            return;
        }
        if let Some(mf) = n.manual.as_mut().filter(|m| m.master_offset.is_none()) {
            mf.master_offset = Some(header.offset);
            self.handle_manual_failover(me);
            self.handle_replica_failover(me);
        }
    }

    /// `clusterHandleManualFailover`: the election may start once the replica has applied what
    /// its paused master had.
    pub(super) fn handle_manual_failover(&mut self, me: usize) {
        let n = &mut self.nodes[me];
        let offset = n.offset;
        if let Some(mf) = n.manual.as_mut() {
            if !mf.can_start && mf.master_offset == Some(offset) {
                mf.can_start = true;
            }
        }
    }

    /// A manual failover past its time is abandoned; a paused master resumes.
    pub(super) fn manual_failover_timeout(&mut self, me: usize) {
        let now = self.now;
        if self.nodes[me]
            .manual
            .as_ref()
            .is_some_and(|m| m.end_ms < now)
        {
            self.end_manual_failover(me);
        }
    }

    /// Ends `me`'s manual failover, lifting its pause (`resetManualFailover`).
    pub(super) fn end_manual_failover(&mut self, me: usize) {
        self.nodes[me].manual = None;
        if self.nodes[me].paused_until.take().is_some() {
            self.record(BusEvent::WritesPaused {
                node: me,
                paused: false,
            });
        }
    }

    /// The rank of replica `me`: its master's other replicas with a greater announced offset.
    fn rank(&self, me: usize, master: usize) -> u64 {
        let n = &self.nodes[me];
        (0..self.nodes.len())
            .filter(|&r| r != me && n.peers[r].replica_of == Some(master))
            .filter(|&r| n.peers[r].offset > n.offset)
            .count() as u64
    }

    /// `clusterHandleSlaveFailover`, run at each cron of a replica and when a vote arrives.
    pub(super) fn handle_replica_failover(&mut self, me: usize) {
        let now = self.now;
        let timeout = self.config.node_timeout_ms;
        let Some(master) = self.nodes[me].peers[me].replica_of else {
            return;
        };
        let manual = self.nodes[me].manual.as_ref().map(|m| m.can_start);
        let n = &self.nodes[me];
        if (!n.peers[master].fail && manual != Some(true)) || n.map.count_of(master) == 0 {
            return;
        }
        let auth_timeout = (2 * timeout).max(2000);
        let retry = 2 * auth_timeout;
        let age = |t: Option<u64>| t.map_or(i64::MAX, |t| now as i64 - t as i64);
        if age(n.election.auth_time) > retry as i64 {
            let rank = self.rank(me, master);
            let jitter = self.rng.next_u64() % 500;
            let e = &mut self.nodes[me].election;
            e.count = 0;
            e.sent = false;
            e.rank = rank;
            e.auth_time = Some(now + 500 + jitter + 1000 * rank);
            if manual.is_some() {
                e.auth_time = Some(now);
                e.rank = 0;
            } else {
                return;
            }
        }
        if !self.nodes[me].election.sent && manual.is_none() {
            let rank = self.rank(me, master);
            let e = &mut self.nodes[me].election;
            if rank > e.rank {
                e.auth_time = e.auth_time.map(|t| t + 1000 * (rank - e.rank));
                e.rank = rank;
            }
        }
        let e = &self.nodes[me].election;
        let auth_time = e.auth_time.expect("scheduled");
        if now < auth_time || age(Some(auth_time)) > auth_timeout as i64 {
            return;
        }
        if !e.sent {
            let n = &mut self.nodes[me];
            n.current_epoch += 1;
            n.election.epoch = n.current_epoch;
            n.election.sent = true;
            let epoch = n.current_epoch;
            self.record(BusEvent::ElectionStarted { node: me, epoch });
            self.broadcast(
                me,
                Body::AuthRequest {
                    force: manual.is_some(),
                },
            );
            return;
        }
        let needed = self.voting_masters(me).len() / 2 + 1;
        if e.count >= needed {
            let epoch = e.epoch.max(self.nodes[me].map.epoch(me));
            self.replace_master(me, master, epoch);
        }
    }

    /// `clusterFailoverReplaceYourMaster`: `me` becomes a master with `epoch`, takes `master`'s
    /// slots and tells every node.
    fn replace_master(&mut self, me: usize, master: usize, epoch: u64) {
        let n = &mut self.nodes[me];
        n.peers[me].replica_of = None;
        n.map.set_epoch(me, epoch);
        for r in n.map.ranges_of(master) {
            n.map.assign(r, me);
        }
        n.election = Default::default();
        self.end_manual_failover(me);
        self.record(BusEvent::Promoted {
            node: me,
            epoch,
            replaced: master,
        });
        self.broadcast(me, Body::Pong);
        self.update_state(me);
    }

    /// `clusterSendFailoverAuthIfNeeded`: master `me` weighs `candidate`'s request.
    pub(super) fn maybe_vote(&mut self, me: usize, candidate: usize, header: &Header, force: bool) {
        let now = self.now;
        let timeout = self.config.node_timeout_ms;
        let n = &self.nodes[me];
        if n.peers[me].replica_of.is_some() || n.map.count_of(me) == 0 {
            return;
        }
        if header.current_epoch < n.current_epoch || n.last_vote_epoch == n.current_epoch {
            return;
        }
        let Some(master) = n.peers[candidate].replica_of else {
            return;
        };
        if !n.peers[master].fail && !force {
            return;
        }
        if n.peers[master]
            .voted_time
            .is_some_and(|t| now - t < 2 * timeout)
        {
            return;
        }
        let newer_owner = header.claimed.iter().any(|r| {
            (r.first..=r.last).any(|slot| {
                n.map
                    .owner(slot)
                    .is_some_and(|o| n.map.epoch(o) > header.config_epoch)
            })
        });
        if newer_owner {
            return;
        }
        let n = &mut self.nodes[me];
        n.last_vote_epoch = n.current_epoch;
        n.peers[master].voted_time = Some(now);
        let epoch = n.current_epoch;
        self.record(BusEvent::Voted {
            by: me,
            candidate,
            epoch,
        });
        self.send(me, candidate, Body::AuthAck);
    }

    /// A vote for replica `me` arrives from `from`.
    pub(super) fn count_vote(&mut self, me: usize, from: usize, header: &Header) {
        let n = &mut self.nodes[me];
        let voter = n.peers[from].replica_of.is_none() && n.map.count_of(from) > 0;
        if n.election.sent && voter && header.current_epoch >= n.election.epoch {
            n.election.count += 1;
            self.handle_replica_failover(me);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::redis::engine::cluster::bus::{Bus, BusConfig, BusEvent, BusRecord};
    use crate::backend::redis::engine::cluster::reach::Reach;
    use crate::backend::redis::engine::cluster::topology::ClusterRole;
    use crate::backend::redis::engine::cluster::topology::ManualFailover;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// (new master, its epoch, the master it replaced) of every promotion, in order.
    fn promotions(events: &[BusRecord]) -> Vec<(usize, u64, usize)> {
        events
            .iter()
            .filter_map(|e| match e.event {
                BusEvent::Promoted {
                    node,
                    epoch,
                    replaced,
                } => Some((node, epoch, replaced)),
                _ => None,
            })
            .collect()
    }

    fn formed(seed: u64) -> (Bus, Reach) {
        let mut b = Bus::new(BusConfig::default(), &mut SmallRng::seed_from_u64(seed));
        let reach = Reach::all(b.len());
        b.advance(3000, &reach);
        (b, reach)
    }

    #[test]
    fn the_replica_of_a_crashed_master_is_elected_with_a_new_epoch() {
        let (mut b, mut reach) = formed(11);
        reach.crash(0);
        b.advance(3000, &reach);
        let events = b.advance(6000, &reach);
        let promoted = promotions(&events);
        assert_eq!(promoted, [(3, 4, 0)], "{events:?}");
        let votes = events
            .iter()
            .filter(|e| matches!(e.event, BusEvent::Voted { candidate: 3, .. }))
            .count();
        assert_eq!(votes, 2, "both live masters vote");
        for n in [1, 2, 3, 4, 5] {
            assert_eq!(b.owner_of(n, 0), Some(3), "node {n}");
            assert!(b.state_ok(n), "node {n}");
        }
        assert_eq!(b.master_of_slot(0), Some(3));
        // The old master comes back as the new one's replica.
        reach.restart(0);
        b.advance(6000, &reach);
        let events = b.advance(9000, &reach);
        assert_eq!(b.role(0), ClusterRole::Replica { of: 3 }, "{events:?}");
        assert!(
            events
                .iter()
                .any(|e| e.event == BusEvent::Follows { node: 0, master: 3 }),
            "{events:?}"
        );
        assert!(!b.failed(1, 0), "a replica's FAIL clears when it answers");
    }

    #[test]
    fn a_coordinated_failover_waits_for_the_replica_to_catch_up() {
        let (mut b, reach) = formed(12);
        b.set_offset(1, 100);
        b.set_offset(4, 90);
        b.failover(4, ManualFailover::Coordinated).unwrap();
        b.advance(3500, &reach);
        assert!(b.writes_paused(1), "the master holds writes");
        assert_eq!(b.role(4), ClusterRole::Replica { of: 1 }, "not caught up");
        b.set_offset(4, 100);
        let events = b.advance(4000, &reach);
        assert_eq!(b.role(4), ClusterRole::Master, "{events:?}");
        assert_eq!(b.role(1), ClusterRole::Replica { of: 4 });
        assert!(!b.writes_paused(1));
        assert_eq!(b.master_of_slot(6000), Some(4));
        assert!(
            b.failover(2, ManualFailover::Coordinated).is_err(),
            "not a replica"
        );
    }

    #[test]
    fn takeover_needs_no_vote_and_force_needs_no_master() {
        let (mut b, mut reach) = formed(13);
        b.failover(5, ManualFailover::Takeover).unwrap();
        assert_eq!(b.role(5), ClusterRole::Master);
        let events = b.advance(3500, &reach);
        assert!(events
            .iter()
            .all(|e| !matches!(e.event, BusEvent::Voted { .. })));
        assert_eq!(b.role(2), ClusterRole::Replica { of: 5 });
        reach.partition(&[0]);
        let _ = b.advance(3500, &reach);
        assert!(b.failover(3, ManualFailover::Coordinated).is_err());
        b.failover(3, ManualFailover::Force).unwrap();
        let events = b.advance(3600, &reach);
        assert_eq!(b.role(3), ClusterRole::Master, "{events:?}");
        assert_eq!(b.master_of_slot(0), Some(3));
    }

    #[test]
    fn the_replica_with_the_most_data_ranks_first_and_wins() {
        let config = BusConfig {
            replicas: 2,
            ..BusConfig::default()
        };
        let mut b = Bus::new(config, &mut SmallRng::seed_from_u64(15));
        let mut reach = Reach::all(b.len());
        // Master 0's replicas are 3 and 4; 4 has applied more. Gossip spreads the offsets.
        b.set_offset(3, 50);
        b.set_offset(4, 100);
        b.advance(3000, &reach);
        reach.crash(0);
        b.advance(3000, &reach);
        let events = b.advance(8000, &reach);
        let promoted: Vec<usize> = promotions(&events).iter().map(|p| p.0).collect();
        assert_eq!(promoted, [4], "rank 0 goes first: {events:?}");
        assert!(
            events
                .iter()
                .all(|e| !matches!(e.event, BusEvent::ElectionStarted { node: 3, .. })),
            "rank 1 waits a second more and by then follows the winner"
        );
        assert_eq!(b.role(3), ClusterRole::Replica { of: 4 });
    }

    /// Two masters die one after the other: once the first's replica is master, the second's
    /// replica has a majority of the masters serving slots again and is elected too (as on
    /// real clusters, where cluster-redlock-two-failovers sees both promotions).
    #[test]
    fn a_second_master_crash_after_the_first_promotion_is_failed_over_too() {
        let (mut b, mut reach) = formed(16);
        reach.crash(0);
        b.advance(3000, &reach);
        let events = b.advance(6000, &reach);
        assert_eq!(promotions(&events), [(3, 4, 0)], "{events:?}");
        reach.crash(1);
        b.advance(6000, &reach);
        let events = b.advance(16_000, &reach);
        let promoted: Vec<usize> = promotions(&events).iter().map(|p| p.0).collect();
        assert_eq!(promoted, [4], "{events:?}");
        assert_eq!(b.master_of_slot(6000), Some(4));
    }

    #[test]
    fn a_master_votes_once_per_epoch() {
        let (mut b, mut reach) = formed(14);
        reach.crash(0);
        reach.crash(1);
        b.advance(3000, &reach);
        let events = b.advance(12_000, &reach);
        // Two of three masters down: one voter left, no majority, no promotion.
        assert!(events
            .iter()
            .all(|e| !matches!(e.event, BusEvent::Promoted { .. })));
        let mut votes: Vec<(usize, u64)> = events
            .iter()
            .filter_map(|e| match e.event {
                BusEvent::Voted { by, epoch, .. } => Some((by, epoch)),
                _ => None,
            })
            .collect();
        let all = votes.len();
        votes.dedup();
        assert_eq!(votes.len(), all, "one vote per epoch: {votes:?}");
        assert!(!b.state_ok(2));
    }
}
