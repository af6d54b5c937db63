//! Asynchronous replication from a master to its replicas: each write's effects travel as a
//! batch with a drawn lag, in order per replica, and a cut link holds the stream back (Redis
//! resumes from its backlog when the link heals). This lag is why a failover can lose a lock.
//!
//! A batch travels on the wire (`sim::wire`) like a client's request: it is applied at its time
//! without a task or timer of its own, before anything later can look at the replica.

use crate::backend::redis::sim::cluster::{Batch, Cluster, State};
use crate::sim::draw::lo_hi_random;
use crate::sim::wire;
use std::time::Duration;

impl Cluster {
    /// Queues `effects` on every replication stream of master `idx`; returns the new offset.
    pub(super) fn replicate(&self, st: &mut State, idx: usize, effects: Vec<Vec<Vec<u8>>>) -> u64 {
        let s = &mut st.servers[idx];
        s.offset += 1;
        let offset = s.offset;
        if s.streams.is_empty() {
            return offset;
        }
        let now_us = self.rec.now_us();
        let now = wire::now();
        let targets: Vec<usize> = s.streams.keys().copied().collect();
        for r in targets {
            let lag = lo_hi_random(self.lag_us);
            let stream = s.streams.get_mut(&r).expect("stream exists");
            let deliver_us = (now_us + lag).max(stream.last_deliver_us);
            stream.last_deliver_us = deliver_us;
            stream.queue.push_back(Batch {
                deliver_us,
                offset,
                cmds: effects.clone(),
            });
            let me = self.clone();
            let wait = Duration::from_micros(deliver_us - now_us);
            wire::send(
                now + wait,
                wire::Delivery::Once(Box::new(move || me.deliver(idx, r))),
            );
        }
        offset
    }

    /// Applies every batch of the `master -> replica` stream that is due. A cut link holds the
    /// stream back (Redis resumes from its backlog when the link heals).
    pub(super) fn deliver(&self, master: usize, replica: usize) {
        let mut st = self.st();
        let now_us = self.rec.now_us();
        if !st.servers[master].alive {
            return;
        }
        if !self.net.reachable(master, replica) {
            drop(st);
            let me = self.clone();
            let retry = wire::now() + Duration::from_millis(10);
            wire::send(
                retry,
                wire::Delivery::Once(Box::new(move || me.deliver(master, replica))),
            );
            return;
        }
        let mut due = Vec::new();
        if let Some(stream) = st.servers[master].streams.get_mut(&replica) {
            while stream.queue.front().is_some_and(|b| b.deliver_us <= now_us) {
                due.push(stream.queue.pop_front().expect("front exists"));
            }
        }
        let now = self.clocks.now_ms(replica);
        let r = &mut st.servers[replica];
        if !r.alive {
            return;
        }
        for b in due {
            r.engine.apply_replicated(now, &b.cmds);
            r.applied = r.applied.max(b.offset);
        }
    }
}
