//! What one Redis Cluster node believes about the cluster: its `CLUSTER NODES` reply, read line by
//! line.
//!
//! Every node keeps its own view, spread by gossip: right after a fault two nodes can disagree on
//! who is master of a slot, or whether a node has failed. So a line says what *the asked node*
//! believes, and the deployment (`cluster.rs`) decides whose word counts for each question (a
//! node's own `myself` line for its role, every node for convergence).
//!
//! The format (Redis documentation, `CLUSTER NODES`): one node per line,
//! `<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch>
//! <link-state> <slot> <slot> ...`, where `<master>` is `-` for a master, flags are
//! comma-separated (`myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`,
//! `nofailover`, `noflags`), and a slot is `N`, `A-B`, or a slot in migration in brackets
//! (`[N->-id]`, `[N-<-id]`), which is not owned by the migration and is skipped here.

pub use crate::backend::redis::engine::cluster::topology::{initial_slots, SlotRange, SLOTS};

/// One line of a `CLUSTER NODES` reply: one node as the asked node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLine {
    /// The node's cluster id (40 hex digits; kept in its `nodes.conf` across restarts).
    pub id: String,
    /// The address clients reach it at, as gossip last told the asked node.
    pub ip: String,
    /// Its client port.
    pub port: u16,
    /// Its cluster bus port.
    pub bus_port: u16,
    /// Its flags, as written (`myself`, `master`, `slave`, `fail?`, `fail`, ...).
    pub flags: Vec<String>,
    /// The id of its master, for a replica.
    pub master: Option<String>,
    /// The configuration epoch it last announced: the newer claim on a slot wins.
    pub config_epoch: u64,
    /// Whether the asked node's cluster-bus link to it is up.
    pub connected: bool,
    /// The slots it serves (migrations in progress are not counted).
    pub slots: Vec<SlotRange>,
}

impl NodeLine {
    fn flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x == f)
    }

    /// Whether this line is the asked node itself.
    pub fn is_myself(&self) -> bool {
        self.flag("myself")
    }

    /// Whether the asked node sees it as a master.
    pub fn is_master(&self) -> bool {
        self.flag("master")
    }

    /// Whether the asked node sees it as a replica (`slave` in the reply).
    pub fn is_replica(&self) -> bool {
        self.flag("slave")
    }

    /// Whether the asked node holds it failed with the majority's agreement (`fail`).
    pub fn is_failed(&self) -> bool {
        self.flag("fail")
    }

    /// Whether the asked node alone suspects it (`fail?`: no reply within the node timeout).
    pub fn is_suspected(&self) -> bool {
        self.flag("fail?")
    }

    /// Whether the asked node has not finished meeting it (`handshake`) or has no address for it
    /// (`noaddr`).
    pub fn is_unknown(&self) -> bool {
        self.flag("handshake") || self.flag("noaddr")
    }

    /// Whether it serves `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|r| r.contains(slot))
    }
}

/// Reads a `CLUSTER NODES` reply; an error names the line it could not read.
pub fn parse_cluster_nodes(reply: &str) -> Result<Vec<NodeLine>, String> {
    reply
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| parse_line(l).ok_or_else(|| format!("unreadable CLUSTER NODES line: {l:?}")))
        .collect()
}

fn parse_line(line: &str) -> Option<NodeLine> {
    let mut f = line.split_whitespace();
    let id = f.next()?.to_string();
    let address = f.next()?;
    let flags = f.next()?.split(',').map(String::from).collect();
    let master = match f.next()? {
        "-" => None,
        m => Some(m.to_string()),
    };
    let (_ping_sent, _pong_received) = (f.next()?, f.next()?);
    let config_epoch = f.next()?.parse().ok()?;
    let connected = f.next()? == "connected";
    let slots = f
        .filter(|s| !s.starts_with('['))
        .map(parse_slots)
        .collect::<Option<Vec<_>>>()?;
    // `ip:port@cport[,hostname]`; the ip may be empty for a node with no address yet.
    let address = address.split(',').next()?;
    let (ip_port, bus) = address.split_once('@')?;
    let (ip, port) = ip_port.rsplit_once(':')?;
    Some(NodeLine {
        id,
        ip: ip.to_string(),
        port: port.parse().ok()?,
        bus_port: bus.parse().ok()?,
        flags,
        master,
        config_epoch,
        connected,
        slots,
    })
}

fn parse_slots(s: &str) -> Option<SlotRange> {
    let (first, last) = match s.split_once('-') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => {
            let n = s.parse().ok()?;
            (n, n)
        }
    };
    (first <= last && last < SLOTS).then_some(SlotRange { first, last })
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002,host-b master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003 master,fail? - 0 1426238318243 3 disconnected 10923-16383 [77->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 16000
";

    #[test]
    fn a_reply_reads_into_one_line_per_node() {
        let nodes = parse_cluster_nodes(REPLY).unwrap();
        assert_eq!(nodes.len(), 4);
        let replica = &nodes[0];
        assert!(replica.is_replica() && !replica.is_master());
        assert_eq!(
            replica.master.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert_eq!((replica.port, replica.bus_port), (30004, 31004));
        assert_eq!(
            nodes[1].slots,
            vec![SlotRange {
                first: 5461,
                last: 10922
            }]
        );
        let suspected = &nodes[2];
        assert!(suspected.is_suspected() && !suspected.is_failed() && !suspected.connected);
        assert!(
            suspected.owns(10923) && !suspected.owns(77),
            "a migration is not ownership"
        );
        let me = &nodes[3];
        assert!(me.is_myself() && me.is_master() && me.owns(16000) && !me.owns(15999));
        assert_eq!(me.config_epoch, 1);
    }

    #[test]
    fn an_unreadable_line_is_named() {
        let e = parse_cluster_nodes("abc 127.0.0.1:1 master").unwrap_err();
        assert!(e.contains("abc 127.0.0.1:1 master"), "{e}");
    }

    #[test]
    fn the_initial_split_covers_every_slot_once() {
        for masters in 3..=7 {
            let ranges: Vec<SlotRange> = (0..masters).map(|m| initial_slots(m, masters)).collect();
            assert_eq!(ranges[0].first, 0);
            assert_eq!(ranges[masters - 1].last, SLOTS - 1);
            for w in ranges.windows(2) {
                assert_eq!(w[0].last + 1, w[1].first);
            }
        }
        assert_eq!(
            initial_slots(0, 3),
            SlotRange {
                first: 0,
                last: 5460
            }
        );
        assert_eq!(
            initial_slots(2, 3),
            SlotRange {
                first: 10923,
                last: 16383
            }
        );
    }
}
