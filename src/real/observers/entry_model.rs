//! The lock entries on one server, replayed from the commands its `MONITOR` stream shows: who
//! created each, its value, when it expires on the server's clock, and each removal of a live
//! entry by a client's command (a `DEL`, a script's `DEL`, `UNLINK`, `GETDEL`, an overwriting
//! `SET`, an `EXPIRE` into the past), attributed to the connection that sent it and compared with
//! the entry's owner at that moment. Expiry is not a removal: no client did it. A script's own
//! commands (`[0 lua]`) are the client's whose `EVAL`/`EVALSHA` ran the script.
//!
//! Which keys are lock entries is learned from the locks themselves ([`LockKeys`]): the
//! scenario's `[lock] key`, and every key a client's command creates with `SET … NX` or `SETNX`,
//! the one shape every string lock's acquire has. A library nobody here wrote adds its own
//! prefix to the name it is given (`lock:<name>`, `lock.<name>`, `mutex:<name>`), so following
//! the configured name alone would leave every one of its entries unwatched and its releases not
//! judged. Learning from `NX` rather than from "any key a client touches" keeps out what is not
//! an entry: a fencing counter (`INCR`) or a library's bookkeeping is not created with `NX`, and
//! a command the model does not know on a learned key still stops the witness from vouching,
//! as it always did on the configured one. A replica's stream shows what its master sent it
//! (`SET … PXAT`, without the `NX`: the master rewrites what it propagates), so the keys are
//! learned once for all the watched servers and a replica follows the keys its master's clients
//! created.
//!
//! This is the servers' truth the foreign-release and release checks judge from in real mode
//! (`docs/checks.md`): a client program's answer says only what the program said; whether its
//! command deleted someone's entry is what this model saw the server do.

use crate::history::{EventKind, Recorder};
use crate::real::observers::clock_ties::{place, ClockTies, Marker, Seen, Tie};
use crate::real::observers::connection_names::ConnectionNames;
use crate::real::observers::monitor_line::{parse_line, Line};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The keys that hold lock entries: the configured key, and those the clients' `SET … NX`
/// created on any watched server (shared by every server's model, so a replica follows what its
/// master's clients created).
#[derive(Clone, Debug)]
pub(crate) struct LockKeys {
    configured: Vec<u8>,
    learned: Arc<Mutex<BTreeSet<Vec<u8>>>>,
}

impl LockKeys {
    /// The lock's configured key (`[lock] key`), with nothing learned yet.
    pub(crate) fn new(configured: &str) -> LockKeys {
        LockKeys {
            configured: configured.as_bytes().to_vec(),
            learned: Arc::default(),
        }
    }

    /// Whether `key` holds lock entries.
    fn holds(&self, key: &[u8]) -> bool {
        key == self.configured.as_slice() || self.learned.lock().unwrap().contains(key)
    }

    fn learn(&self, key: &[u8]) {
        if key != self.configured.as_slice() {
            self.learned.lock().unwrap().insert(key.to_vec());
        }
    }

    /// Every key followed, the configured one first, for the history's note.
    pub(crate) fn describe(&self) -> String {
        let mut keys = vec![String::from_utf8_lossy(&self.configured).into_owned()];
        keys.extend(
            self.learned
                .lock()
                .unwrap()
                .iter()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
        );
        keys.join(", ")
    }
}

/// A removal as the witness read it: the server's time (µs), the run's time when read, and the
/// event.
struct Removal {
    server_us: i64,
    read_us: u64,
    kind: EventKind,
}

/// What following one server's stream gave: the markers it showed (with the server's time) and
/// its removals, in execution order.
#[derive(Default)]
pub(super) struct Followed {
    seen: Vec<Seen>,
    removals: Vec<Removal>,
    /// Entries a command created under the key (a vouched-for run must have seen some).
    pub(super) created: u64,
}

impl Followed {
    /// The removals with run times, each placed between the ties that bracket it in the stream
    /// (`ties`: the run's times of the markers sent; `clock_ties.rs`), no later than when it was
    /// read and no earlier than the one before; and the bound on their placement (µs). A removal
    /// with no tie on one side is placed when it was read.
    pub(super) fn timed(self, ties: &BTreeMap<Marker, Tie>) -> (Vec<(u64, EventKind)>, u64) {
        let mut last = 0u64;
        let mut bound = 0u64;
        let seen = self.seen;
        let timed = self
            .removals
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mapped = match place(&seen, ties, i, r.server_us) {
                    Some((at, within)) => {
                        bound = bound.max(within);
                        at
                    }
                    None => r.read_us,
                };
                last = mapped.min(r.read_us).max(last);
                (last, r.kind)
            })
            .collect();
        (timed, bound)
    }
}

/// The lock entries on one server, as the commands it executed left them.
pub(super) struct Model {
    server: String,
    keys: LockKeys,
    rec: Recorder,
    /// Connection address -> client index (from `CLIENT SETNAME client-<c>`).
    clients: BTreeMap<String, u32>,
    /// Connection address -> client index, registered by the client programs' forwarders.
    names: ConnectionNames,
    /// The client whose script is running (the last `EVAL`/`EVALSHA`/`FCALL`).
    scripting: Option<u32>,
    /// The live entry under each lock key (as far as the commands seen tell).
    entries: BTreeMap<Vec<u8>, Entry>,
    /// What the stream has given so far.
    followed: Followed,
    /// The server's time of the command being applied (µs).
    now_us: i64,
}

struct Entry {
    value: Vec<u8>,
    creator: Option<u32>,
    /// Expiry on the server's clock, in ms (a key is gone once the clock is past it).
    expires_ms: Option<i64>,
}

impl Model {
    pub(super) fn new(
        server: String,
        keys: LockKeys,
        rec: Recorder,
        names: ConnectionNames,
    ) -> Model {
        Model {
            server,
            keys,
            rec,
            clients: BTreeMap::new(),
            names,
            scripting: None,
            entries: BTreeMap::new(),
            followed: Followed::default(),
            now_us: 0,
        }
    }

    /// Reads the stream until the end marker (or `stop`, or the server goes away), telling
    /// `ties` which markers of `stream` it read. A server that goes away after its `Down` marker
    /// (the nemesis quiesced it, then killed it) has shown everything it did.
    pub(super) fn follow(
        &mut self,
        mut reader: BufReader<TcpStream>,
        stop: &AtomicBool,
        ties: &ClockTies,
        stream: &str,
    ) -> Result<Followed, String> {
        let mut buf = Vec::new();
        let down = |f: &Followed| f.seen.last().is_some_and(|s| s.marker == Marker::Down);
        loop {
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) if down(&self.followed) => {
                    return Ok(std::mem::take(&mut self.followed))
                }
                Ok(0) => {
                    return Err(format!(
                        "{}: the server closed its MONITOR stream",
                        self.server
                    ))
                }
                Ok(_) if buf.ends_with(b"\n") => {
                    let text = std::mem::take(&mut buf);
                    let Some(line) = parse_line(&text) else {
                        return Err(format!(
                            "{}: unreadable MONITOR line {:?}",
                            self.server,
                            String::from_utf8_lossy(&text)
                        ));
                    };
                    let echo = line
                        .args
                        .first()
                        .is_some_and(|c| c.eq_ignore_ascii_case(b"echo"));
                    let marker = echo
                        .then(|| line.args.get(1).and_then(|a| Marker::parse(a)))
                        .flatten();
                    if let Some(marker) = marker {
                        ties.mark_read(stream, marker);
                        self.followed.seen.push(Seen {
                            marker,
                            server_us: line.at_us,
                            before: self.followed.removals.len(),
                        });
                        if marker == Marker::End {
                            return Ok(std::mem::take(&mut self.followed));
                        }
                        continue;
                    }
                    self.apply(&line)?;
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if stop.load(Ordering::Relaxed) {
                        return Err(format!("{}: the end marker never arrived", self.server));
                    }
                }
                Err(e) => return Err(format!("{}: MONITOR stream: {e}", self.server)),
            }
        }
    }

    /// Replays one command on the model; `Err` when it touches the key in a way not modelled.
    fn apply(&mut self, line: &Line) -> Result<(), String> {
        self.now_us = line.at_us;
        let Some(cmd) = line.args.first() else {
            return Ok(());
        };
        let cmd = String::from_utf8_lossy(cmd).to_ascii_lowercase();
        let args = &line.args[1..];
        let client = if line.source == "lua" {
            self.scripting
        } else {
            // A connection that named itself, else one a client program's forwarder opened.
            self.clients
                .get(&line.source)
                .copied()
                .or_else(|| self.names.client(&line.source))
        };
        if cmd == "client" && args.len() == 2 && args[0].eq_ignore_ascii_case(b"setname") {
            let name = String::from_utf8_lossy(&args[1]);
            if let Some(c) = name.strip_prefix("client-").and_then(|c| c.parse().ok()) {
                self.clients.insert(line.source.clone(), c);
            }
            return Ok(());
        }
        if matches!(
            cmd.as_str(),
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
        ) {
            self.scripting = client;
            return Ok(());
        }
        // A client's `SET … NX` or `SETNX` is a lock's acquire: its key holds lock entries.
        let nx = match cmd.as_str() {
            "setnx" => true,
            "set" => args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"nx")),
            _ => false,
        };
        if let (true, Some(_), Some(key)) = (nx, client, args.first()) {
            self.keys.learn(key);
        }
        let touched: Vec<Vec<u8>> = args
            .iter()
            .filter(|a| self.keys.holds(a))
            .cloned()
            .collect();
        if touched.is_empty() {
            return Ok(());
        }
        let now_ms = line.at_us.div_euclid(1000);
        for key in &touched {
            let expired = self
                .entries
                .get(key)
                .is_some_and(|e| e.expires_ms.is_some_and(|x| now_ms > x));
            if expired {
                self.entries.remove(key);
            }
        }
        // The command's own key, if it is a lock key (`SET key …`, `EXPIRE key …`).
        let key = args.first().filter(|k| self.keys.holds(k)).cloned();
        let num =
            |i: usize| -> Option<i64> { std::str::from_utf8(args.get(i)?).ok()?.parse().ok() };
        match (cmd.as_str(), key) {
            (
                "get" | "exists" | "ttl" | "pttl" | "type" | "expiretime" | "pexpiretime"
                | "strlen" | "mget",
                _,
            ) => {}
            ("set", Some(key)) => {
                let mut xx = false;
                let mut keepttl = false;
                let mut expires = None;
                let mut i = 2;
                while i < args.len() {
                    let opt = String::from_utf8_lossy(&args[i]).to_ascii_lowercase();
                    match opt.as_str() {
                        "nx" | "get" => {}
                        "xx" => xx = true,
                        "keepttl" => keepttl = true,
                        "ex" | "px" | "exat" | "pxat" => {
                            let n = num(i + 1).ok_or_else(|| self.unknown(line))?;
                            expires = Some(match opt.as_str() {
                                "ex" => now_ms + n * 1000,
                                "px" => now_ms + n,
                                "exat" => n * 1000,
                                _ => n,
                            });
                            i += 1;
                        }
                        _ => return Err(self.unknown(line)),
                    }
                    i += 1;
                }
                let live = self.entries.contains_key(&key);
                if (nx && live) || (xx && !live) {
                    return Ok(());
                }
                if keepttl {
                    expires = self.entries.get(&key).and_then(|e| e.expires_ms);
                }
                self.replace(&key, client, args.get(1).cloned(), expires);
            }
            ("setnx", Some(key)) => {
                if !self.entries.contains_key(&key) {
                    self.replace(&key, client, args.get(1).cloned(), None)
                }
            }
            ("setex" | "psetex", Some(key)) => {
                let n = num(1).ok_or_else(|| self.unknown(line))?;
                let ms = if cmd == "setex" { n * 1000 } else { n };
                self.replace(&key, client, args.get(2).cloned(), Some(now_ms + ms));
            }
            ("expire" | "pexpire" | "expireat" | "pexpireat", Some(key)) => {
                let n = num(1).ok_or_else(|| self.unknown(line))?;
                let at = match cmd.as_str() {
                    "expire" => now_ms + n * 1000,
                    "pexpire" => now_ms + n,
                    "expireat" => n * 1000,
                    _ => n,
                };
                if at <= now_ms {
                    // An expiry in the past deletes the key at once.
                    self.replace(&key, client, None, None);
                } else if let Some(e) = self.entries.get_mut(&key) {
                    e.expires_ms = Some(at);
                }
            }
            ("persist", Some(key)) => {
                if let Some(e) = self.entries.get_mut(&key) {
                    e.expires_ms = None;
                }
            }
            ("del" | "unlink", _) => {
                for key in &touched {
                    self.replace(key, client, None, None);
                }
            }
            ("getdel", Some(key)) => self.replace(&key, client, None, None),
            _ => return Err(self.unknown(line)),
        }
        Ok(())
    }

    /// `client` replaced the entry under `key` with `value` (`None`: removed it); records the
    /// removal of a live entry with another value.
    fn replace(
        &mut self,
        key: &[u8],
        client: Option<u32>,
        value: Option<Vec<u8>>,
        expires_ms: Option<i64>,
    ) {
        if let (Some(old), Some(by)) = (self.entries.get(key), client) {
            if value.as_ref() != Some(&old.value) {
                self.followed.removals.push(Removal {
                    server_us: self.now_us,
                    read_us: self.rec.now_us(),
                    kind: EventKind::EntryRemoved {
                        by_client: by,
                        owner: String::from_utf8_lossy(&old.value).into_owned(),
                        owner_client: old.creator,
                    },
                });
            }
        }
        match value {
            Some(value) => {
                self.followed.created += 1;
                let entry = Entry {
                    value,
                    creator: client,
                    expires_ms,
                };
                self.entries.insert(key.to_vec(), entry);
            }
            None => {
                self.entries.remove(key);
            }
        }
    }

    fn unknown(&self, line: &Line) -> String {
        let words: Vec<String> = line
            .args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        format!(
            "{}: a command on the lock key the witness does not model: {}",
            self.server,
            words.join(" ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        parse_line(format!("+{text}\r\n").as_bytes()).unwrap()
    }

    fn removals(m: &Model) -> Vec<(u32, String, Option<u32>)> {
        m.followed
            .removals
            .iter()
            .filter_map(|r| match &r.kind {
                EventKind::EntryRemoved {
                    by_client,
                    owner,
                    owner_client,
                } => Some((*by_client, owner.clone(), *owner_client)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_late_del_removes_the_next_holders_entry_and_an_expired_one_is_not_there() {
        let rec = Recorder::real();
        let mut m = Model::new(
            "redis-0".into(),
            LockKeys::new("lock"),
            rec.clone(),
            ConnectionNames::default(),
        );
        for l in [
            r#"1.000000 [0 127.0.0.1:1] "client" "setname" "client-0""#,
            r#"1.000001 [0 127.0.0.1:2] "client" "setname" "client-1""#,
            r#"1.000002 [0 127.0.0.1:3] "client" "setname" "client-2""#,
            // client 0 takes it for 1 s; client 1's NX fails.
            r#"1.001000 [0 127.0.0.1:1] "set" "lock" "a" "EX" "1" "NX""#,
            r#"1.500000 [0 127.0.0.1:2] "set" "lock" "b" "EX" "1" "NX""#,
            // It expired (past 2.001 s); client 1 gets it; client 0's late DEL removes it.
            r#"2.003000 [0 127.0.0.1:2] "set" "lock" "b" "EX" "1" "NX""#,
            r#"2.500000 [0 127.0.0.1:1] "del" "lock""#,
            // client 2 takes it and releases by script: its own entry.
            r#"2.600000 [0 127.0.0.1:3] "set" "lock" "c" "PX" "1000" "NX""#,
            r#"2.700000 [0 127.0.0.1:3] "evalsha" "abc" "1" "lock" "c""#,
            r#"2.700001 [0 lua] "get" "lock""#,
            r#"2.700002 [0 lua] "del" "lock""#,
            // A DEL of nothing removes nothing.
            r#"2.800000 [0 127.0.0.1:1] "del" "lock""#,
        ] {
            m.apply(&line(l)).unwrap();
        }
        assert_eq!(
            removals(&m),
            [(0, "b".to_string(), Some(1)), (2, "c".to_string(), Some(2))]
        );
        // A command on the key the model does not know: the witness stops vouching.
        assert!(m
            .apply(&line(r#"3.0 [0 127.0.0.1:1] "hset" "lock" "f" "1""#))
            .is_err());
    }

    /// A library that adds its own prefix (`lock:<name>`): its keys are learned from its
    /// clients' `SET … NX`, and a replica follows them from its master's rewritten `SET … PXAT`.
    /// A key no client set with `NX` (a fencing counter) is not an entry, whatever is done to it.
    #[test]
    fn keys_a_library_prefixes_are_learned_from_its_nx_sets_and_shared_with_a_replica() {
        let keys = LockKeys::new("name");
        let names = ConnectionNames::default;
        let mut master = Model::new("redis-0".into(), keys.clone(), Recorder::real(), names());
        let mut replica = Model::new("replica".into(), keys.clone(), Recorder::real(), names());
        for l in [
            r#"1.000000 [0 127.0.0.1:1] "client" "setname" "client-0""#,
            r#"1.000001 [0 127.0.0.1:2] "client" "setname" "client-1""#,
            r#"1.000100 [0 127.0.0.1:1] "incr" "name:fence""#,
            r#"1.001000 [0 127.0.0.1:1] "set" "lock:name" "a" "PX" "1000" "NX""#,
            // client 1 wakes from a pause and deletes client 0's entry.
            r#"1.500000 [0 127.0.0.1:2] "del" "lock:name""#,
            r#"1.600000 [0 127.0.0.1:2] "set" "lock:name" "b" "PX" "1000" "NX""#,
        ] {
            master.apply(&line(l)).unwrap();
        }
        assert_eq!(removals(&master), [(1, "a".to_string(), Some(0))]);
        assert_eq!(keys.describe(), "name, lock:name");
        // The replica saw the master's propagation, then was promoted; client 0's late DEL there
        // removes client 1's entry.
        for l in [
            r#"1.600100 [0 127.0.0.1:6379] "SET" "lock:name" "b" "PXAT" "2600""#,
            r#"1.700000 [0 127.0.0.1:3] "client" "setname" "client-0""#,
            r#"1.800000 [0 127.0.0.1:3] "del" "lock:name""#,
        ] {
            replica.apply(&line(l)).unwrap();
        }
        assert_eq!(removals(&replica), [(0, "b".to_string(), None)]);
        // A command the model does not know on a learned key stops the witness vouching.
        assert!(master
            .apply(&line(r#"2.0 [0 127.0.0.1:1] "hset" "lock:name" "f" "1""#))
            .is_err());
    }

    fn removal(server_us: i64, read_us: u64) -> Removal {
        Removal {
            server_us,
            read_us,
            kind: EventKind::EntryRemoved {
                by_client: 0,
                owner: "a".into(),
                owner_client: Some(0),
            },
        }
    }

    #[test]
    fn removals_are_timed_by_the_servers_clock_not_when_they_were_read() {
        // The server's clock runs 1 s ahead of the run's and 10 % fast (libfaketime drift):
        // the start marker ran at run time 1,000 µs, the end marker at 101,000 µs.
        let seen = |marker, server_us, before| Seen {
            marker,
            server_us,
            before,
        };
        let followed = Followed {
            seen: vec![
                seen(Marker::Start, 1_001_000, 0),
                seen(Marker::End, 1_111_000, 3),
            ],
            removals: vec![
                // Executed halfway (run time 51,000), read 20 ms later: timed when executed.
                removal(1_056_000, 71_000),
                // Mapped later than it was read (a clock step): capped at the read time.
                removal(1_100_000, 60_000),
                // Mapped before the previous removal: not earlier than it.
                removal(1_002_100, 90_000),
            ],
            created: 3,
        };
        let tie = |at_us| Tie {
            at_us,
            within_us: 40,
        };
        let ties: BTreeMap<Marker, Tie> =
            [(Marker::Start, tie(1_000)), (Marker::End, tie(101_000))].into();
        let (timed, bound) = followed.timed(&ties);
        let times: Vec<u64> = timed.into_iter().map(|(at, _)| at).collect();
        assert_eq!(times, [51_000, 60_000, 60_000]);
        assert_eq!(bound, 40);
        // Without both markers the read time is all there is.
        let unanchored = Followed {
            seen: vec![seen(Marker::End, 1_111_000, 1)],
            removals: vec![removal(1_056_000, 71_000)],
            created: 1,
        };
        assert_eq!(unanchored.timed(&ties).0[0].0, 71_000);
    }

    #[test]
    fn a_forwarded_connection_is_its_clients_without_naming_itself() {
        // A client program's library names no connection; its forwarder registered the address.
        let names = ConnectionNames::default();
        names.register("127.0.0.1:7".into(), 1);
        names.register("127.0.0.1:8".into(), 0);
        let mut m = Model::new(
            "redis-0".into(),
            LockKeys::new("lock"),
            Recorder::real(),
            names,
        );
        for l in [
            r#"1.000000 [0 127.0.0.1:7] "set" "lock" "b" "PX" "1000" "NX""#,
            // client 0 woke from a pause: its plain DEL removes client 1's entry.
            r#"1.500000 [0 127.0.0.1:8] "del" "lock""#,
            // An owner-checked delete that found nothing removes nothing.
            r#"1.600000 [0 127.0.0.1:8] "evalsha" "abc" "1" "lock" "a""#,
            r#"1.600001 [0 lua] "get" "lock""#,
            // A connection nobody registered (an operator's redis-cli) is no client's.
            r#"1.700000 [0 127.0.0.1:9] "set" "lock" "x" "PX" "1000""#,
        ] {
            m.apply(&line(l)).unwrap();
        }
        assert_eq!(removals(&m), [(0, "b".to_string(), Some(1))]);
    }

    /// A port the system reused: the registry already names the address's newest owner
    /// (client 1) while the witness still reads the old connection's commands (client 0's). The
    /// name each forwarded connection gives itself in the stream, ahead of its commands, decides.
    #[test]
    fn a_reused_address_is_attributed_by_the_name_read_before_its_commands() {
        let names = ConnectionNames::default();
        names.register("127.0.0.1:5".into(), 1);
        let mut m = Model::new(
            "redis-0".into(),
            LockKeys::new("lock"),
            Recorder::real(),
            names,
        );
        for l in [
            r#"1.000000 [0 127.0.0.1:5] "client" "setname" "client-0""#,
            r#"1.000100 [0 127.0.0.1:5] "set" "lock" "a" "PX" "1000" "NX""#,
            r#"1.000200 [0 127.0.0.1:5] "del" "lock""#,
            r#"1.100000 [0 127.0.0.1:5] "client" "setname" "client-1""#,
            r#"1.100100 [0 127.0.0.1:5] "set" "lock" "b" "PX" "1000" "NX""#,
            r#"1.100200 [0 127.0.0.1:5] "del" "lock""#,
        ] {
            m.apply(&line(l)).unwrap();
        }
        assert_eq!(
            removals(&m),
            [(0, "a".to_string(), Some(0)), (1, "b".to_string(), Some(1))]
        );
        assert_eq!(m.followed.created, 2);
    }
}
