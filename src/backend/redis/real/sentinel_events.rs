//! What the real sentinels decided, in the history: lockcheck subscribes to each sentinel's
//! event channels and records each event as a nemesis `Fault`, in the words the simulated
//! sentinels use (`backend/redis/sim/sentinel.rs`), so the checkers and the HTML timeline read both alike:
//!
//! | channel | history |
//! | --- | --- |
//! | `+sdown master group-0 ...` | `sentinel-<i>: +sdown master redis-0` |
//! | `+odown master group-0 ... #quorum 2/2` | `sentinel-<i>: +odown master redis-0 #quorum 2` |
//! | `+switch-master group-0 <old> <new>` | `sentinel-<i>: +switch-master redis-0 -> redis-0-replica-0` |
//! | `+convert-to-slave slave ...` | `redis-0 demoted to a replica (+convert-to-slave): its dataset is replaced` |
//! | `-failover-abort-no-good-slave master ...` | `sentinel-<i>: -failover-abort-no-good-slave master redis-0` |
//!
//! Addresses in the events are the nodes' announced ones, named back to their nodes. Unlike the
//! simulation, every sentinel that sees a master objectively down, or learns of a switch, says so.
//! The subscriptions go to the sentinels' own ports, not through the link proxies: lockcheck is
//! no node, and a partition must not hide what the sentinels decided.

use crate::history::{EventKind, Recorder};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The channels recorded.
pub(crate) const CHANNELS: &[&str] = &[
    "+sdown",
    "+odown",
    "+switch-master",
    "+convert-to-slave",
    "-failover-abort-no-good-slave",
];

/// How to name what a sentinel says.
#[derive(Clone)]
pub(crate) struct Namer {
    /// Node name by announced address.
    pub(crate) nodes: BTreeMap<SocketAddr, String>,
    /// The configured quorum (the simulation's wording names it).
    pub(crate) quorum: u32,
}

impl Namer {
    fn node(&self, ip: &str, port: &str) -> String {
        format!("{ip}:{port}")
            .parse::<SocketAddr>()
            .ok()
            .and_then(|a| self.nodes.get(&a).cloned())
            .unwrap_or_else(|| format!("{ip}:{port}"))
    }

    /// The history line for `payload` on `channel` from sentinel `i`, if it is recorded.
    pub(crate) fn line(&self, i: usize, channel: &str, payload: &str) -> Option<String> {
        let w: Vec<&str> = payload.split_whitespace().collect();
        let who = format!("sentinel-{i}");
        match (channel, w.as_slice()) {
            ("+sdown", ["master", _, ip, port, ..]) => {
                Some(format!("{who}: +sdown master {}", self.node(ip, port)))
            }
            ("+odown", ["master", _, ip, port, ..]) => Some(format!(
                "{who}: +odown master {} #quorum {}",
                self.node(ip, port),
                self.quorum
            )),
            ("+switch-master", [_, oip, oport, nip, nport, ..]) => Some(format!(
                "{who}: +switch-master {} -> {}",
                self.node(oip, oport),
                self.node(nip, nport)
            )),
            ("+convert-to-slave", ["slave", _, ip, port, ..]) => Some(format!(
                "{} demoted to a replica (+convert-to-slave): its dataset is replaced",
                self.node(ip, port)
            )),
            ("-failover-abort-no-good-slave", ["master", _, ip, port, ..]) => Some(format!(
                "{who}: -failover-abort-no-good-slave master {}",
                self.node(ip, port)
            )),
            _ => None,
        }
    }
}

/// Subscribes to sentinel `i` on 127.0.0.1:`port` and records its events until the runtime
/// stops. Returns once subscribed, so nothing the sentinel says after that is missed.
pub(crate) async fn follow(
    i: usize,
    port: u16,
    namer: Namer,
    rec: Recorder,
) -> redis::RedisResult<()> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut pubsub = client.get_async_pubsub().await?;
    for channel in CHANNELS {
        pubsub.subscribe(*channel).await?;
    }
    tokio::spawn(async move {
        let mut messages = pubsub.on_message();
        while let Some(msg) = messages.next().await {
            let payload: String = msg.get_payload().unwrap_or_default();
            if let Some(what) = namer.line(i, msg.get_channel_name(), &payload) {
                rec.record("nemesis", EventKind::Fault { what });
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Namer;

    fn namer() -> Namer {
        Namer {
            nodes: [
                ("127.77.0.1:4001", "redis-0"),
                ("127.77.0.2:4002", "redis-0-replica-0"),
            ]
            .into_iter()
            .map(|(a, n)| (a.parse().unwrap(), n.to_string()))
            .collect(),
            quorum: 2,
        }
    }

    /// The payloads as Redis 7 publishes them, in the simulation's words.
    #[test]
    fn sentinel_events_read_as_in_simulation() {
        let n = namer();
        let cases = [
            (
                "+sdown",
                "master group-0 127.77.0.1 4001",
                "sentinel-1: +sdown master redis-0",
            ),
            (
                "+odown",
                "master group-0 127.77.0.1 4001 #quorum 2/2",
                "sentinel-1: +odown master redis-0 #quorum 2",
            ),
            (
                "+switch-master",
                "group-0 127.77.0.1 4001 127.77.0.2 4002",
                "sentinel-1: +switch-master redis-0 -> redis-0-replica-0",
            ),
            (
                "+convert-to-slave",
                "slave 127.77.0.1:4001 127.77.0.1 4001 @ group-0 127.77.0.2 4002",
                "redis-0 demoted to a replica (+convert-to-slave): its dataset is replaced",
            ),
        ];
        for (channel, payload, line) in cases {
            assert_eq!(
                n.line(1, channel, payload).as_deref(),
                Some(line),
                "{payload}"
            );
        }
        assert_eq!(
            n.line(
                1,
                "+sdown",
                "slave 127.77.0.2:4002 127.77.0.2 4002 @ group-0 127.77.0.1 4001"
            ),
            None,
            "the simulation notes masters only"
        );
    }
}
