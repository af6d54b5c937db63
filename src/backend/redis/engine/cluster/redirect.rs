//! What a Redis Cluster node answers before it executes a command: serve it, or redirect the
//! client (`MOVED`, `ASK`), or refuse (`CROSSSLOT`, `TRYAGAIN`, `CLUSTERDOWN`). This is
//! `getNodeByQuery` and `clusterRedirectClient` of Redis 7.0's `cluster.c`, which
//! `processCommand` runs for every command with keys, after the arity check and before the
//! command; the cluster spec's "Redirection and resharding" describes the same rules.
//!
//! The order matters, and is Redis's: the keys are read first (different slots: `CROSSSLOT`,
//! whatever the cluster state; a slot nobody owns: `CLUSTERDOWN Hash slot not served`), then the
//! cluster state (`CLUSTERDOWN The cluster is down`), then a slot in migration (`ASK` from the
//! source when it has none of the keys, `TRYAGAIN` when it has some; on the target, after `ASKING`, serve, or `TRYAGAIN` for a
//! multi-key command missing some), then a replica's `READONLY` reads of its master's slots, and
//! last `MOVED` to the owner. Every answer was checked against `redis-server` 7.0.15 by
//! `tests/redis/cluster_sim.rs`.
//!
//! `ASKING` holds for one command: Redis clears the flag after any command but `ASKING` itself
//! (`resetClient`), whether that command was served or redirected. [`ClientFlags::after`] does
//! the same. Commands inside `MULTI` are not modelled (lockcheck's locks send none in cluster
//! mode).

use crate::backend::redis::engine::cluster::slot::key_slot;
use crate::backend::redis::engine::cluster::slot_map::SlotMap;

/// What a node does with a command, before executing it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// It executes the command.
    Serve,
    /// `-MOVED <slot> <host:port>`: the slot is `to`'s, for good.
    Moved {
        /// The slot of the command's keys.
        slot: u16,
        /// The node this node believes owns it.
        to: usize,
    },
    /// `-ASK <slot> <host:port>`: the slot is migrating to `to` and a key is not here any more;
    /// ask `to` once, after `ASKING`.
    Ask {
        /// The slot of the command's keys.
        slot: u16,
        /// The migration's target.
        to: usize,
    },
    /// `-CROSSSLOT Keys in request don't hash to the same slot`.
    CrossSlot,
    /// `-TRYAGAIN Multiple keys request during rehashing of slot`.
    TryAgain,
    /// `-CLUSTERDOWN The cluster is down`: this node's cluster state is fail.
    ClusterDown,
    /// `-CLUSTERDOWN Hash slot not served`: no node owns the slot in this node's map.
    SlotNotServed,
}

impl Decision {
    /// The error line Redis sends (without the leading `-`), with node addresses from
    /// `address` (`host:port`); `None` for [`Decision::Serve`].
    pub fn error_line(&self, address: impl Fn(usize) -> String) -> Option<String> {
        Some(match self {
            Decision::Serve => return None,
            Decision::Moved { slot, to } => format!("MOVED {slot} {}", address(*to)),
            Decision::Ask { slot, to } => format!("ASK {slot} {}", address(*to)),
            Decision::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Decision::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Decision::ClusterDown => "CLUSTERDOWN The cluster is down".into(),
            Decision::SlotNotServed => "CLUSTERDOWN Hash slot not served".into(),
        })
    }
}

/// Which arguments of a command are keys, and whether it writes: the part of Redis's command
/// table (`COMMAND INFO`'s key specs and flags) that routing reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpec {
    /// No key: served by any node, in any state (`PING`, `INFO`, `WAIT`, `PUBLISH`, `SCRIPT`).
    None,
    /// The first argument.
    First,
    /// Every argument (`DEL`, `EXISTS`, `MGET`, `UNLINK`, `WATCH`).
    All,
    /// Every other argument from the first (`MSET`, `MSETNX`: key value key value ...).
    EveryOther,
    /// `numkeys` at the second argument, then that many keys (`EVAL`, `EVALSHA`, `FCALL`).
    NumKeys,
}

/// The key spec and the write flag of the command named `name` (any case); `None` for a command
/// not in lockcheck's table.
///
/// `EVAL` and `EVALSHA` are not write commands in Redis 7.0's table (their flags are
/// `noscript, stale, skip_monitor, may_replicate, no_mandatory_keys`): a replica after
/// `READONLY` serves them, and a write inside the script is what fails there.
pub fn command_spec(name: &[u8]) -> Option<(KeySpec, bool)> {
    let upper = name.to_ascii_uppercase();
    Some(match upper.as_slice() {
        b"PING" | b"ECHO" | b"INFO" | b"WAIT" | b"PUBLISH" | b"SCRIPT" | b"CLIENT" | b"CLUSTER"
        | b"ASKING" | b"READONLY" | b"READWRITE" | b"MULTI" | b"EXEC" | b"DISCARD" | b"TIME"
        | b"DBSIZE" | b"HELLO" | b"SELECT" => (KeySpec::None, false),
        b"GET" | b"PTTL" | b"TTL" | b"TYPE" | b"HGET" | b"HEXISTS" | b"HGETALL" | b"HLEN"
        | b"STRLEN" => (KeySpec::First, false),
        b"SET" | b"SETNX" | b"SETEX" | b"PSETEX" | b"GETDEL" | b"GETSET" | b"INCR" | b"INCRBY"
        | b"DECR" | b"PEXPIRE" | b"EXPIRE" | b"PEXPIREAT" | b"EXPIREAT" | b"PERSIST" | b"HSET"
        | b"HDEL" | b"HINCRBY" | b"APPEND" => (KeySpec::First, true),
        b"EXISTS" | b"MGET" | b"WATCH" => (KeySpec::All, false),
        b"DEL" | b"UNLINK" => (KeySpec::All, true),
        b"MSET" | b"MSETNX" => (KeySpec::EveryOther, true),
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            (KeySpec::NumKeys, false)
        }
        _ => return None,
    })
}

/// The keys of command `args` (its name first), in order; `None` for a command not in the table.
/// A malformed `numkeys` gives no key, as Redis's key extraction does: the command itself then
/// answers its own error.
pub fn command_keys(args: &[Vec<u8>]) -> Option<Vec<&[u8]>> {
    let (spec, _) = command_spec(args.first()?)?;
    let rest = &args[1..];
    Some(match spec {
        KeySpec::None => Vec::new(),
        KeySpec::First => rest.first().map(|k| vec![k.as_slice()]).unwrap_or_default(),
        KeySpec::All => rest.iter().map(Vec::as_slice).collect(),
        KeySpec::EveryOther => rest.iter().step_by(2).map(Vec::as_slice).collect(),
        KeySpec::NumKeys => {
            let n = rest
                .get(1)
                .and_then(|n| std::str::from_utf8(n).ok())
                .and_then(|n| n.parse::<usize>().ok());
            match n {
                Some(n) if n <= rest.len().saturating_sub(2) => {
                    rest[2..2 + n].iter().map(Vec::as_slice).collect()
                }
                _ => Vec::new(),
            }
        }
    })
}

/// A connection's cluster flags (`CLIENT_ASKING`, `CLIENT_READONLY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientFlags {
    /// `ASKING` was the previous command: the next may use an importing slot.
    pub asking: bool,
    /// `READONLY` was sent (until `READWRITE`): reads of the master's slots on a replica.
    pub readonly: bool,
}

impl ClientFlags {
    /// The flags after the connection ran command `name` (served or not): `ASKING` sets the
    /// asking flag and every other command clears it; `READONLY`/`READWRITE` set and clear
    /// the read-only flag.
    pub fn after(&mut self, name: &[u8]) {
        let upper = name.to_ascii_uppercase();
        self.asking = upper == b"ASKING";
        match upper.as_slice() {
            b"READONLY" => self.readonly = true,
            b"READWRITE" => self.readonly = false,
            _ => {}
        }
    }
}

/// What the node a command arrives at knows: who it is, its slot map, its master (a replica),
/// and whether its cluster state is ok.
#[derive(Clone, Copy, Debug)]
pub struct NodeView<'a> {
    /// The node the command arrived at.
    pub me: usize,
    /// Its map of slot owners and migrations.
    pub map: &'a SlotMap,
    /// Its master, when it is a replica.
    pub replica_of: Option<usize>,
    /// Its cluster state is ok (`cluster_state:ok`).
    pub state_ok: bool,
}

/// Decides what node `view.me` does with command `args` from a connection with `flags`, where
/// `has_key(k)` says whether key `k` exists in its data now. A command not in the table
/// ([`command_spec`]) is served: the engine then answers it (an unknown command is refused
/// before routing by Redis too).
pub fn decide(
    view: &NodeView,
    args: &[Vec<u8>],
    flags: ClientFlags,
    has_key: impl Fn(&[u8]) -> bool,
) -> Decision {
    let Some(keys) = command_keys(args) else {
        return Decision::Serve;
    };
    let write = command_spec(&args[0]).is_some_and(|(_, w)| w);
    decide_keys(view, &keys, write, flags, has_key)
}

/// [`decide`] with the keys and the write flag already known.
pub fn decide_keys(
    view: &NodeView,
    keys: &[&[u8]],
    write: bool,
    flags: ClientFlags,
    has_key: impl Fn(&[u8]) -> bool,
) -> Decision {
    let Some(first) = keys.first() else {
        return Decision::Serve;
    };
    let slot = key_slot(first);
    let Some(owner) = view.map.owner(slot) else {
        return Decision::SlotNotServed;
    };
    let migrating = owner == view.me && view.map.migrating_to(slot).is_some();
    let importing = !migrating && view.map.importing_from(slot).is_some();
    let mut multiple = false;
    for key in &keys[1..] {
        if key != first {
            if key_slot(key) != slot {
                return Decision::CrossSlot;
            }
            multiple = true;
        }
    }
    let missing = match migrating || importing {
        true => keys.iter().filter(|k| !has_key(k)).count(),
        false => 0,
    };
    if !view.state_ok {
        return Decision::ClusterDown;
    }
    // Redis 7.0.15 (checked): the source asks only when it has none of the keys; with some here
    // and some gone it answers TRYAGAIN, since neither node could run the command whole.
    if migrating && missing > 0 {
        if missing < keys.len() {
            return Decision::TryAgain;
        }
        let to = view.map.migrating_to(slot).expect("migrating");
        return Decision::Ask { slot, to };
    }
    if importing && flags.asking {
        return match multiple && missing > 0 {
            true => Decision::TryAgain,
            false => Decision::Serve,
        };
    }
    if flags.readonly && !write && view.replica_of == Some(owner) {
        return Decision::Serve;
    }
    match owner == view.me {
        true => Decision::Serve,
        false => Decision::Moved { slot, to: owner },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn at(me: usize, map: &SlotMap) -> NodeView<'_> {
        NodeView {
            me,
            map,
            replica_of: None,
            state_ok: true,
        }
    }

    const NONE: ClientFlags = ClientFlags {
        asking: false,
        readonly: false,
    };

    /// A key in each master's slice of a formed 3-master map (`foo` is 12182, master 2's).
    fn key_of(map: &SlotMap, master: usize) -> String {
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| map.owner(key_slot(k.as_bytes())) == Some(master))
            .unwrap()
    }

    #[test]
    fn keys_come_from_the_commands_key_positions() {
        let keys = |w: &[&str]| {
            command_keys(&args(w)).map(|k| {
                k.iter()
                    .map(|k| String::from_utf8(k.to_vec()).unwrap())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(keys(&["set", "a", "v", "NX", "PX", "10"]).unwrap(), ["a"]);
        assert_eq!(keys(&["DEL", "a", "b"]).unwrap(), ["a", "b"]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]).unwrap(), ["a", "b"]);
        assert_eq!(
            keys(&["EVAL", "s", "2", "a", "b", "x"]).unwrap(),
            ["a", "b"]
        );
        assert_eq!(
            keys(&["EVALSHA", "s", "0", "x"]).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            keys(&["EVAL", "s", "9", "a"]).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(keys(&["PUBLISH", "c", "m"]).unwrap(), Vec::<String>::new());
        assert_eq!(keys(&["NOSUCH", "a"]), None);
    }

    #[test]
    fn the_owner_serves_and_another_master_or_a_replica_answers_moved() {
        let map = SlotMap::formed(3);
        let set = args(&["SET", "foo", "1"]);
        assert_eq!(decide(&at(2, &map), &set, NONE, |_| false), Decision::Serve);
        assert_eq!(
            decide(&at(0, &map), &set, NONE, |_| false),
            Decision::Moved { slot: 12182, to: 2 }
        );
        let replica = NodeView {
            replica_of: Some(2),
            ..at(5, &map)
        };
        let get = args(&["GET", "foo"]);
        assert_eq!(
            decide(&replica, &get, NONE, |_| true),
            Decision::Moved { slot: 12182, to: 2 }
        );
        let ro = ClientFlags {
            readonly: true,
            asking: false,
        };
        assert_eq!(decide(&replica, &get, ro, |_| true), Decision::Serve);
        assert_eq!(
            decide(&replica, &set, ro, |_| true),
            Decision::Moved { slot: 12182, to: 2 },
            "READONLY is for reads only"
        );
        let eval = args(&["EVAL", "return 1", "1", "foo"]);
        assert_eq!(decide(&replica, &eval, ro, |_| true), Decision::Serve);
        let other_replica = NodeView {
            replica_of: Some(1),
            ..at(4, &map)
        };
        assert_eq!(
            decide(&other_replica, &get, ro, |_| true),
            Decision::Moved { slot: 12182, to: 2 },
            "a replica serves only its master's slots"
        );
    }

    #[test]
    fn keys_in_two_slots_are_crossslot_even_when_the_cluster_is_down() {
        let map = SlotMap::formed(3);
        let (a, b) = (key_of(&map, 0), key_of(&map, 1));
        let down = NodeView {
            state_ok: false,
            ..at(0, &map)
        };
        let del = args(&["DEL", &a, &b]);
        assert_eq!(decide(&down, &del, NONE, |_| true), Decision::CrossSlot);
        assert_eq!(
            decide(&down, &args(&["GET", &a]), NONE, |_| true),
            Decision::ClusterDown
        );
        assert_eq!(
            decide(&down, &args(&["PING"]), NONE, |_| true),
            Decision::Serve
        );
        let tagged = args(&["DEL", "{t}a", "{t}b"]);
        assert_ne!(
            decide(&at(0, &map), &tagged, NONE, |_| true),
            Decision::CrossSlot
        );
    }

    #[test]
    fn a_migrating_slot_asks_for_missing_keys_and_the_target_serves_after_asking() {
        let mut source = SlotMap::formed(3);
        let key = key_of(&source, 0);
        let slot = key_slot(key.as_bytes());
        source.set_migrating(slot, 1);
        let get = args(&["GET", &key]);
        assert_eq!(
            decide(&at(0, &source), &get, NONE, |_| true),
            Decision::Serve
        );
        assert_eq!(
            decide(&at(0, &source), &get, NONE, |_| false),
            Decision::Ask { slot, to: 1 }
        );
        let (x, y) = (format!("{{{key}}}x"), format!("{{{key}}}y"));
        let both = args(&["DEL", &x, &y]);
        assert_eq!(
            decide(&at(0, &source), &both, NONE, |k| k == x.as_bytes()),
            Decision::TryAgain,
            "some keys here, some gone"
        );
        assert_eq!(
            decide(&at(0, &source), &both, NONE, |_| false),
            Decision::Ask { slot, to: 1 }
        );
        let mut target = SlotMap::formed(3);
        target.set_importing(slot, 0);
        assert_eq!(
            decide(&at(1, &target), &get, NONE, |_| true),
            Decision::Moved { slot, to: 0 },
            "without ASKING the target sends the client back"
        );
        let mut flags = ClientFlags::default();
        flags.after(b"asking");
        assert_eq!(
            decide(&at(1, &target), &get, flags, |_| false),
            Decision::Serve
        );
        let two = args(&["DEL", &key, &key]);
        assert_eq!(
            decide(&at(1, &target), &two, flags, |_| false),
            Decision::Serve
        );
        let tag = format!("{{{key}}}x");
        assert_eq!(key_slot(tag.as_bytes()), slot);
        let multi = args(&["DEL", &tag, &format!("{{{key}}}y")]);
        assert_eq!(
            decide(&at(1, &target), &multi, flags, |k| k == tag.as_bytes()),
            Decision::TryAgain
        );
        flags.after(b"GET");
        assert!(!flags.asking, "ASKING holds for one command");
    }

    #[test]
    fn an_unowned_slot_is_not_served_and_error_lines_are_redis_words() {
        let mut map = SlotMap::formed(3);
        map.unassign(12182);
        assert_eq!(
            decide(&at(0, &map), &args(&["GET", "foo"]), NONE, |_| true),
            Decision::SlotNotServed
        );
        let addr = |n: usize| format!("127.0.0.1:{}", 7000 + n);
        assert_eq!(
            Decision::Moved { slot: 3, to: 1 }.error_line(addr).unwrap(),
            "MOVED 3 127.0.0.1:7001"
        );
        assert_eq!(
            Decision::Ask { slot: 3, to: 2 }.error_line(addr).unwrap(),
            "ASK 3 127.0.0.1:7002"
        );
        assert_eq!(Decision::Serve.error_line(addr), None);
        assert_eq!(
            Decision::SlotNotServed.error_line(addr).unwrap(),
            "CLUSTERDOWN Hash slot not served"
        );
    }
}
