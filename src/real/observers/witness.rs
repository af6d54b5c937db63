//! The servers' word in real mode: which client's lock entry each command removed.
//!
//! In simulation the servers compare the lock entry before and after every command and record an
//! [`EventKind::EntryRemoved`]. A spawned `redis-server` cannot be asked to do that, but it can
//! be watched: a `MONITOR` connection receives every command each server executes, in execution
//! order, with the server's timestamp and the connection it came from (and a script's own
//! commands, as `[0 lua]`, right after the `EVAL`/`EVALSHA` that ran them). Every lock client's
//! connection names itself (`CLIENT SETNAME client-<c>`, which `MONITOR` shows too), so the
//! witness knows who sent what. It replays the commands that touch the lock key on a model of
//! that one string entry (its value, who created it, when it expires on the server's clock) and
//! records an `EntryRemoved` whenever a client's command removes a live entry: a `DEL`, a
//! script's `DEL`, an overwriting `SET`, an `EXPIRE` into the past.
//!
//! The witness reads each stream behind the servers (by milliseconds on a loaded machine), so a
//! removal is not recorded when it is read: a client may have recorded its release's answer by
//! then, and the release check would see the answer before the removal. Each removal is kept with
//! the server's timestamp and, once the run is over, put in the history at the true time the
//! server executed it. The server's clock is tied to the run's at both ends: a marker `ECHO` sent
//! when watching starts and another when it finishes, each timed by the run's clock around its
//! round trip; between the two, server time maps linearly to run time (which also absorbs a
//! constant libfaketime drift). A mapped time is never later than the moment the line was read
//! and never earlier than the server's previous removal.
//!
//! The witness vouches for a run only if it understood every command on the key of every server
//! to the end: then it records [`EventKind::LockEntriesWatched`] and the foreign-release check
//! judges from what the servers did. A command on the key it does not model (a hash lock's
//! `HSET`), a server that died or restarted, or a stream it could not read leaves the history
//! without that event, and the check falls back to inferring owners from the clients' events.

use crate::history::{EventKind, Recorder};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The name a lock client's connection gives itself, so the witness can tell clients apart.
pub fn client_connection_name(client: u32) -> String {
    format!("client-{client}")
}

/// What `finish` sends each server so the witness knows it has seen everything before it.
const END_MARKER: &str = "lockcheck-witness-end";

/// What `start` sends each server once its `MONITOR` is in place: the first tie between the
/// server's clock and the run's.
const START_MARKER: &str = "lockcheck-witness-start";

/// Sends `ECHO <marker>` to the server on `port` and waits for the answer; the run's time (µs)
/// halfway through the round trip, when the server executed it to within half the round trip.
/// `None`: the server could not be reached.
fn send_marker(port: u16, marker: &str, rec: &Recorder) -> Option<u64> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let cmd = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{marker}\r\n", marker.len());
    let sent = rec.now_us();
    s.write_all(cmd.as_bytes()).ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    let answered = rec.now_us();
    Some(sent + (answered - sent) / 2)
}

/// A removal as the witness read it: the server's time (µs), the run's time when read, and the
/// event.
struct Removal {
    server_us: i64,
    read_us: u64,
    kind: EventKind,
}

/// What following one server's stream gave: the server's time of the start and end markers,
/// and its removals in execution order.
#[derive(Default)]
struct Followed {
    start_us: Option<i64>,
    end_us: Option<i64>,
    removals: Vec<Removal>,
}

impl Followed {
    /// The removals with run times: server time mapped linearly through the two markers
    /// (`start` and `end`: the run's times when the server executed them), each no later than
    /// when it was read and no earlier than the one before.
    fn timed(self, start: Option<u64>, end: Option<u64>) -> Vec<(u64, EventKind)> {
        let tie = match (self.start_us, start, self.end_us, end) {
            (Some(s0), Some(r0), Some(s1), Some(r1)) if s1 > s0 => Some((s0, r0, s1, r1)),
            _ => None,
        };
        let mut last = 0u64;
        self.removals
            .into_iter()
            .map(|r| {
                let mapped = tie.map_or(r.read_us, |(s0, r0, s1, r1)| {
                    let along = (r.server_us - s0) as f64 / (s1 - s0) as f64;
                    let at = r0 as f64 + along * (r1 as f64 - r0 as f64);
                    at.max(0.0) as u64
                });
                last = mapped.min(r.read_us).max(last);
                (last, r.kind)
            })
            .collect()
    }
}

/// One watched server: its name, its port, the run's time its start marker was executed, and
/// the thread following its `MONITOR` stream.
type Watched = (
    String,
    u16,
    Option<u64>,
    JoinHandle<Result<Followed, String>>,
);

/// Watches the lock entry on a set of servers (one thread and one `MONITOR` connection each).
pub struct Witness {
    key: String,
    rec: Recorder,
    servers: Vec<Watched>,
    stop: Arc<AtomicBool>,
}

impl Witness {
    /// Starts watching `key` on each `(name, port)` server on 127.0.0.1. Returns once every
    /// `MONITOR` is in place, so no client command is missed.
    pub fn start(servers: &[(String, u16)], key: &str, rec: &Recorder) -> Result<Witness, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (name, port) in servers {
            let mut stream = TcpStream::connect(("127.0.0.1", *port))
                .map_err(|e| format!("{name}: MONITOR connection: {e}"))?;
            stream
                .write_all(b"MONITOR\r\n")
                .map_err(|e| format!("{name}: MONITOR: {e}"))?;
            stream
                .set_read_timeout(Some(Duration::from_millis(100)))
                .map_err(|e| format!("{name}: {e}"))?;
            let mut reader = BufReader::new(stream);
            let mut ok = String::new();
            reader
                .read_line(&mut ok)
                .map_err(|e| format!("{name}: MONITOR reply: {e}"))?;
            if ok.trim_end() != "+OK" {
                return Err(format!("{name}: MONITOR answered {ok:?}"));
            }
            let mut model = Model::new(name.clone(), key.as_bytes().to_vec(), rec.clone());
            let stop = stop.clone();
            let thread = std::thread::spawn(move || model.follow(reader, &stop));
            let started = send_marker(*port, START_MARKER, rec);
            threads.push((name.clone(), *port, started, thread));
        }
        Ok(Witness {
            key: key.to_string(),
            rec: rec.clone(),
            servers: threads,
            stop,
        })
    }

    /// Stops watching once every server's stream has been read up to now. Records
    /// [`EventKind::LockEntriesWatched`] when every server's commands on the key were understood
    /// to the end; otherwise returns why not (and records nothing).
    pub fn finish(self) -> Result<(), String> {
        // The marker goes through the server like any command: once the witness reads it, it
        // has read every command before it. A dead server has nothing more to say.
        let ends: Vec<Option<u64>> = self
            .servers
            .iter()
            .map(|(_, port, _, _)| send_marker(*port, END_MARKER, &self.rec))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && self.servers.iter().any(|(_, _, _, t)| !t.is_finished())
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        let mut why = Vec::new();
        let mut removals = Vec::new();
        for ((name, _, start, t), end) in self.servers.into_iter().zip(ends) {
            match t.join() {
                Ok(Ok(followed)) => removals.push((name, followed.timed(start, end))),
                Ok(Err(e)) => why.push(e),
                Err(_) => why.push(format!("{name}: the witness thread panicked")),
            }
        }
        if !why.is_empty() {
            return Err(why.join("; "));
        }
        for (server, timed) in removals {
            for (at_us, kind) in timed {
                self.rec.insert_at(&server, kind, at_us);
            }
        }
        self.rec
            .record("servers", EventKind::LockEntriesWatched { key: self.key });
        Ok(())
    }
}

/// The lock entry on one server, as the commands it executed left it.
struct Model {
    server: String,
    key: Vec<u8>,
    rec: Recorder,
    /// Connection address -> client index (from `CLIENT SETNAME client-<c>`).
    clients: BTreeMap<String, u32>,
    /// The client whose script is running (the last `EVAL`/`EVALSHA`/`FCALL`).
    scripting: Option<u32>,
    entry: Option<Entry>,
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

/// One `MONITOR` line: the server's time (µs), the source (`127.0.0.1:port` or `lua`), the
/// command and its arguments.
#[derive(Debug, PartialEq)]
struct Line {
    at_us: i64,
    source: String,
    args: Vec<Vec<u8>>,
}

impl Model {
    fn new(server: String, key: Vec<u8>, rec: Recorder) -> Model {
        Model {
            server,
            key,
            rec,
            clients: BTreeMap::new(),
            scripting: None,
            entry: None,
            followed: Followed::default(),
            now_us: 0,
        }
    }

    /// Reads the stream until the end marker (or `stop`, or the server goes away).
    fn follow(
        &mut self,
        mut reader: BufReader<TcpStream>,
        stop: &AtomicBool,
    ) -> Result<Followed, String> {
        let mut buf = Vec::new();
        loop {
            match reader.read_until(b'\n', &mut buf) {
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
                    let marker =
                        |m: &str| echo && line.args.get(1).is_some_and(|a| a == m.as_bytes());
                    if marker(START_MARKER) {
                        self.followed.start_us = Some(line.at_us);
                        continue;
                    }
                    if marker(END_MARKER) {
                        self.followed.end_us = Some(line.at_us);
                        return Ok(std::mem::take(&mut self.followed));
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
            self.clients.get(&line.source).copied()
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
        if !args.contains(&self.key) {
            return Ok(());
        }
        let now_ms = line.at_us.div_euclid(1000);
        if self
            .entry
            .as_ref()
            .is_some_and(|e| e.expires_ms.is_some_and(|x| now_ms > x))
        {
            self.entry = None;
        }
        let on_key = args.first() == Some(&self.key);
        let num =
            |i: usize| -> Option<i64> { std::str::from_utf8(args.get(i)?).ok()?.parse().ok() };
        match cmd.as_str() {
            "get" | "exists" | "ttl" | "pttl" | "type" | "expiretime" | "pexpiretime"
            | "strlen" | "mget" => {}
            "set" if on_key => {
                let mut nx = false;
                let mut xx = false;
                let mut keepttl = false;
                let mut expires = None;
                let mut i = 2;
                while i < args.len() {
                    let opt = String::from_utf8_lossy(&args[i]).to_ascii_lowercase();
                    match opt.as_str() {
                        "nx" => nx = true,
                        "xx" => xx = true,
                        "get" => {}
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
                if (nx && self.entry.is_some()) || (xx && self.entry.is_none()) {
                    return Ok(());
                }
                if keepttl {
                    expires = self.entry.as_ref().and_then(|e| e.expires_ms);
                }
                self.replace(client, args.get(1).cloned(), expires);
            }
            "setnx" if on_key && self.entry.is_none() => {
                self.replace(client, args.get(1).cloned(), None)
            }
            "setnx" if on_key => {}
            "setex" | "psetex" if on_key => {
                let n = num(1).ok_or_else(|| self.unknown(line))?;
                let ms = if cmd == "setex" { n * 1000 } else { n };
                self.replace(client, args.get(2).cloned(), Some(now_ms + ms));
            }
            "expire" | "pexpire" | "expireat" | "pexpireat" if on_key => {
                let n = num(1).ok_or_else(|| self.unknown(line))?;
                let at = match cmd.as_str() {
                    "expire" => now_ms + n * 1000,
                    "pexpire" => now_ms + n,
                    "expireat" => n * 1000,
                    _ => n,
                };
                if self.entry.is_some() {
                    if at <= now_ms {
                        // An expiry in the past deletes the key at once.
                        self.replace(client, None, None);
                    } else if let Some(e) = &mut self.entry {
                        e.expires_ms = Some(at);
                    }
                }
            }
            "persist" if on_key => {
                if let Some(e) = &mut self.entry {
                    e.expires_ms = None;
                }
            }
            "del" | "unlink" => self.replace(client, None, None),
            "getdel" if on_key => self.replace(client, None, None),
            _ => return Err(self.unknown(line)),
        }
        Ok(())
    }

    /// `client` replaced the entry with `value` (`None`: removed it); records the removal of a
    /// live entry with another value.
    fn replace(&mut self, client: Option<u32>, value: Option<Vec<u8>>, expires_ms: Option<i64>) {
        if let (Some(old), Some(by)) = (&self.entry, client) {
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
        self.entry = value.map(|value| Entry {
            value,
            creator: client,
            expires_ms,
        });
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

/// Parses `+1700000000.123456 [0 127.0.0.1:5555] "set" "k" "v"` (a RESP simple string).
fn parse_line(raw: &[u8]) -> Option<Line> {
    let raw = raw.strip_prefix(b"+")?;
    let raw = raw
        .strip_suffix(b"\r\n")
        .or_else(|| raw.strip_suffix(b"\n"))?;
    let space = raw.iter().position(|&b| b == b' ')?;
    let ts = std::str::from_utf8(&raw[..space]).ok()?;
    let (secs, micros) = ts.split_once('.')?;
    let at_us = secs.parse::<i64>().ok()? * 1_000_000 + micros.parse::<i64>().ok()?;
    let rest = &raw[space + 1..];
    let rest = rest.strip_prefix(b"[")?;
    let close = rest.iter().position(|&b| b == b']')?;
    let inside = std::str::from_utf8(&rest[..close]).ok()?;
    let source = inside.split_once(' ')?.1.to_string();
    let mut args = Vec::new();
    let mut i = close + 1;
    while i < rest.len() {
        match rest[i] {
            b' ' => i += 1,
            b'"' => {
                let mut arg = Vec::new();
                i += 1;
                loop {
                    let b = *rest.get(i)?;
                    i += 1;
                    match b {
                        b'"' => break,
                        b'\\' => {
                            let e = *rest.get(i)?;
                            i += 1;
                            arg.push(match e {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'a' => 7,
                                b'b' => 8,
                                b'x' => {
                                    let hex = std::str::from_utf8(rest.get(i..i + 2)?).ok()?;
                                    i += 2;
                                    u8::from_str_radix(hex, 16).ok()?
                                }
                                other => other,
                            });
                        }
                        b => arg.push(b),
                    }
                }
                args.push(arg);
            }
            _ => return None,
        }
    }
    Some(Line {
        at_us,
        source,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Line {
        parse_line(format!("+{text}\r\n").as_bytes()).unwrap()
    }

    #[test]
    fn monitor_lines_parse_with_escapes() {
        let l = line(r#"1700000000.000250 [0 127.0.0.1:5555] "set" "k" "a\"b\\c\x01" "EX" "1""#);
        assert_eq!(l.at_us, 1_700_000_000_000_250);
        assert_eq!(l.source, "127.0.0.1:5555");
        assert_eq!(l.args[2], b"a\"b\\c\x01");
        assert_eq!(line(r#"1.000001 [0 lua] "del" "k""#).source, "lua");
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
        let mut m = Model::new("redis-0".into(), b"lock".to_vec(), rec.clone());
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
        let followed = Followed {
            start_us: Some(1_001_000),
            end_us: Some(1_111_000),
            removals: vec![
                // Executed halfway (run time 51,000), read 20 ms later: timed when executed.
                removal(1_056_000, 71_000),
                // Mapped later than it was read (a clock step): capped at the read time.
                removal(1_100_000, 60_000),
                // Mapped before the previous removal: not earlier than it.
                removal(1_002_100, 90_000),
            ],
        };
        let times: Vec<u64> = followed
            .timed(Some(1_000), Some(101_000))
            .into_iter()
            .map(|(at, _)| at)
            .collect();
        assert_eq!(times, [51_000, 60_000, 60_000]);
        // Without both markers the read time is all there is.
        let unanchored = Followed {
            start_us: None,
            end_us: Some(1_111_000),
            removals: vec![removal(1_056_000, 71_000)],
        };
        assert_eq!(unanchored.timed(None, Some(101_000))[0].0, 71_000);
    }
}
