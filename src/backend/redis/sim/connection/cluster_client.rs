//! The cluster-aware side of a simulated connection (`[redis.cluster]`): where a request goes
//! (its key's slot, as the client learned the slot map), and what it does with a redirect, a
//! refusal or no answer, as redis-rs's cluster client does.

use super::SimConnection;
use crate::backend::redis::sim::cluster::{request_slot, Redirect};
use redis::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A cluster-aware client's side (redis-rs's `ClusterConnection`, as `[redis.cluster]` sets
/// it up): it sends a request to the master of its key's slot as it last learned it, follows
/// `MOVED` (and remembers it) and `ASK` (once, after `ASKING`), waits and resends after
/// `TRYAGAIN` or `CLUSTERDOWN`, and resends a request that got no answer; each resend counts
/// against `retries`. After a request failed on a node it asks a node it can reach for the
/// slot's owner again (`CLUSTER SLOTS`).
#[derive(Clone, Debug)]
pub struct ClusterClient {
    /// The slots' owners as this client learned them; shared by the client's connections.
    slots: Arc<Mutex<BTreeMap<u16, usize>>>,
    retries: u32,
    wait_ms: [u64; 2],
}

impl ClusterClient {
    /// A client that resends a request up to `retries` times, waiting uniformly within
    /// `wait_ms` before resending after `TRYAGAIN` or `CLUSTERDOWN`.
    pub fn new(retries: u32, wait_ms: [u64; 2]) -> ClusterClient {
        ClusterClient {
            slots: Arc::default(),
            retries,
            wait_ms,
        }
    }
}

impl SimConnection {
    /// A request through a Redis Cluster client ([`ClusterClient`]): round trips until a node
    /// serves it or the retries are spent.
    pub(super) async fn cluster_round_trip(
        &self,
        client: &ClusterClient,
        mut sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let (slot, everywhere) = {
            let st = self.flight.state.lock().unwrap();
            let routed = (request_slot(st.cmds()), st.cmds().any(to_all_masters));
            routed
        };
        if everywhere && slot.is_none() {
            // `SCRIPT LOAD`, `WAIT` and the like go to every master (redis-rs's `AllMasters`),
            // here one after another: the last answer stands, or for `WAIT` the least count
            // (redis-rs's `Min`; a master this connection never wrote to answers at once with
            // its replicas).
            let mut answers: Vec<Value> = Vec::new();
            for first in self.cluster.first_slots() {
                let mut got = Vec::new();
                self.cluster_request(client, first, |v| got.push(v)).await?;
                answers = match (answers.as_slice(), got.as_slice()) {
                    ([Value::Int(a)], [Value::Int(b)]) => vec![Value::Int(*a.min(b))],
                    _ => got,
                };
            }
            answers.into_iter().for_each(&mut sink);
            return Ok(());
        }
        self.cluster_request(client, slot.unwrap_or(0), sink).await
    }

    /// [`SimConnection::cluster_round_trip`] of a request routed by `slot`.
    async fn cluster_request(
        &self,
        client: &ClusterClient,
        slot: u16,
        mut sink: impl FnMut(Value),
    ) -> redis::RedisResult<()> {
        let mut ask: Option<usize> = None;
        let mut tries = 0;
        loop {
            let asking = ask.is_some();
            let server = match ask.take() {
                Some(to) => to,
                None => self.slot_route(client, slot),
            };
            let kept = asking.then(|| {
                let mut st = self.flight.state.lock().unwrap();
                let kept = st.pipeline.take();
                let mut cmds = st.cmds_owned();
                cmds.insert(0, vec![b"ASKING".to_vec()]);
                st.pipeline = Some(cmds);
                kept
            });
            let mut replies = Vec::new();
            // Given up on mid-flight (a lock's own timeout drops the request), the request
            // still runs in redis-rs's background task, and a failure there has it ask for the
            // slot's owner again: so does this, unless the round trip completes.
            let mut forget = ForgetRoute {
                client,
                armed: true,
            };
            let answer = self.round_trip_to(server, |v| replies.push(v)).await;
            forget.armed = false;
            if let Some(kept) = kept {
                self.flight.state.lock().unwrap().pipeline = kept;
                if !replies.is_empty() {
                    replies.remove(0);
                }
            }
            let redirect = match answer {
                Err(e) => {
                    // Learn the slot map again before the next request (redis-rs refreshes
                    // its whole map after a failed request, not one slot).
                    client.slots.lock().unwrap().clear();
                    if tries >= client.retries {
                        return Err(e);
                    }
                    tries += 1;
                    continue;
                }
                Ok(()) => replies.iter().find_map(|v| self.cluster.redirect_of(v)),
            };
            match redirect {
                Some(r) if tries < client.retries => {
                    tries += 1;
                    match r {
                        Redirect::Moved { slot, to } => {
                            client.slots.lock().unwrap().insert(slot, to);
                        }
                        Redirect::Ask { to } => ask = Some(to),
                        Redirect::Wait => {
                            let ms = crate::sim::draw::lo_hi_random(client.wait_ms);
                            self.time.sleep(Duration::from_millis(ms)).await;
                        }
                    }
                }
                _ => {
                    replies.into_iter().for_each(&mut sink);
                    return Ok(());
                }
            }
        }
    }

    /// The server the client sends a request for `slot` to: the owner it learned, or, when it
    /// knows none, the one a node it can reach names (a master that cannot be reached at all
    /// is asked anyway, and the request fails as it would).
    fn slot_route(&self, client: &ClusterClient, slot: u16) -> usize {
        if let Some(&s) = client.slots.lock().unwrap().get(&slot) {
            return s;
        }
        match self.cluster.slot_owner_for(self.node, slot) {
            Some(owner) => {
                client.slots.lock().unwrap().insert(slot, owner);
                owner
            }
            None => self.cluster.master_of(self.group),
        }
    }
}

/// Whether a cluster client sends `args` to every master (redis-rs's `AllMasters` routing of
/// a command without keys): a script loaded on one master only would be missing on the next,
/// and `WAIT` counts the replicas of every master (the least count answers).
fn to_all_masters(args: &[Vec<u8>]) -> bool {
    let word = |i: usize, w: &[u8]| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(w));
    (word(0, b"SCRIPT") && (word(1, b"LOAD") || word(1, b"FLUSH")))
        || (word(0, b"FUNCTION")
            && (word(1, b"LOAD") || word(1, b"DELETE") || word(1, b"FLUSH") || word(1, b"RESTORE")))
        || word(0, b"FLUSHALL")
        || word(0, b"FLUSHDB")
        || word(0, b"WAIT")
}

/// Drops the learned slot map if the round trip it guards is abandoned before it completes
/// (dropped with the request's future): the next request asks a node for its slot's owner again.
struct ForgetRoute<'a> {
    client: &'a ClusterClient,
    armed: bool,
}

impl Drop for ForgetRoute<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.client.slots.lock().unwrap().clear();
        }
    }
}
