//! The servers' word in real mode: which client's lock entry each command removed.
//!
//! In simulation the servers compare the lock entry before and after every command and record an
//! [`EventKind::EntryRemoved`]. A spawned `redis-server` cannot be asked to do that, but it can
//! be watched: a `MONITOR` connection receives every command each server executes, in execution
//! order, with the server's timestamp and the connection it came from (and a script's own
//! commands, as `[0 lua]`, right after the `EVAL`/`EVALSHA` that ran them). Every lock client's
//! connection names itself (`CLIENT SETNAME client-<c>`, which `MONITOR` shows too), so the
//! witness knows who sent what; a client program's connections are known by their address, which
//! its forwarder registered ([`ConnectionNames`]). It replays the commands that touch the lock key on a model of
//! that one string entry (its value, who created it, when it expires on the server's clock) and
//! records an `EntryRemoved` whenever a client's command removes a live entry: a `DEL`, a
//! script's `DEL`, an overwriting `SET`, an `EXPIRE` into the past (`entry_model.rs`; the lines'
//! format is `monitor_line.rs`'s).
//!
//! The witness reads each stream behind the servers (by milliseconds on a loaded machine), so a
//! removal is not recorded when it is read: a client may have recorded its release's answer by
//! then, and the release check would see the answer before the removal. Each removal is kept with
//! the server's timestamp and, once the run is over, put in the history at the true time the
//! server executed it. The server's clock is tied to the run's by marker `ECHO`s timed by the
//! run's clock around their round trip: one when watching starts, one when it finishes, and two
//! around every change the nemesis makes to the server's clock (`clock_ties.rs`); between two
//! ties, server time maps linearly to run time (which also absorbs a libfaketime drift). A mapped
//! time is never later than the moment the line was read and never earlier than the server's
//! previous removal.
//!
//! The witness vouches for a run only if it understood every command on the key of every server
//! to the end: then it records [`EventKind::LockEntriesWatched`] and the foreign-release check
//! judges from what the servers did. A command on the key it does not model (a hash lock's
//! `HSET`), a server that died or restarted, a stream it could not read, or a run in which no
//! command ever created an entry under the key (a library that writes its entries under a key
//! of its own: "nothing of mine was removed" would then be read as every release lying) leaves
//! the history without that event, and the check falls back to inferring owners from the
//! clients' events.

use crate::history::{EventKind, Recorder};
use crate::real::observers::clock_ties::{ClockTies, Marker};
use crate::real::observers::connection_names::ConnectionNames;
use crate::real::observers::entry_model::{Followed, LockKeys, Model};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The name a lock client's connection gives itself, so the witness can tell clients apart.
pub fn client_connection_name(client: u32) -> String {
    format!("client-{client}")
}

/// One watched stream: its id (for the ties), the node it is of (the lane its removals go on),
/// and the thread following it.
struct Watched {
    stream: String,
    node: String,
    thread: JoinHandle<Result<Followed, String>>,
}

/// Watches the lock entries on a set of servers (one thread and one `MONITOR` connection each).
/// Cloned into the nemesis, which quiesces a server before it kills it and has a restarted one
/// followed before clients reach it ([`Witness::quiesce`], [`Witness::attach`]).
#[derive(Clone)]
pub struct Witness {
    keys: LockKeys,
    rec: Recorder,
    names: ConnectionNames,
    streams: Arc<Mutex<Vec<Watched>>>,
    stop: Arc<AtomicBool>,
    ties: ClockTies,
}

impl Witness {
    /// Starts watching the lock entries (`key` and those the clients create with `NX`:
    /// `entry_model.rs`) on each `(name, port)` server on 127.0.0.1. Returns once every
    /// `MONITOR` is in place, so no client command is missed.
    /// `names`: the client programs' forwarded connections (empty for in-process clients, which
    /// name theirs).
    pub fn start(
        servers: &[(String, u16)],
        key: &str,
        rec: &Recorder,
        names: &ConnectionNames,
    ) -> Result<Witness, String> {
        let w = Witness {
            keys: LockKeys::new(key),
            rec: rec.clone(),
            names: names.clone(),
            streams: Arc::default(),
            stop: Arc::new(AtomicBool::new(false)),
            ties: ClockTies::new(servers, rec),
        };
        for (name, port) in servers {
            w.follow(name, name, *port)?;
        }
        Ok(w)
    }

    /// Puts a `MONITOR` on `port` and follows it as stream `stream` of node `node`.
    fn follow(&self, node: &str, stream: &str, port: u16) -> Result<(), String> {
        let mut conn = TcpStream::connect(("127.0.0.1", port))
            .map_err(|e| format!("{node}: MONITOR connection: {e}"))?;
        conn.write_all(b"MONITOR\r\n")
            .map_err(|e| format!("{node}: MONITOR: {e}"))?;
        conn.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| format!("{node}: {e}"))?;
        let mut reader = BufReader::new(conn);
        let mut ok = String::new();
        reader
            .read_line(&mut ok)
            .map_err(|e| format!("{node}: MONITOR reply: {e}"))?;
        if ok.trim_end() != "+OK" {
            return Err(format!("{node}: MONITOR answered {ok:?}"));
        }
        let mut model = Model::new(
            node.to_string(),
            self.keys.clone(),
            self.rec.clone(),
            self.names.clone(),
        );
        let stop = self.stop.clone();
        let ties = self.ties.clone();
        let id = stream.to_string();
        let thread = std::thread::spawn(move || model.follow(reader, &stop, &ties, &id));
        self.ties.send(stream, Marker::Start);
        self.streams.lock().unwrap().push(Watched {
            stream: stream.to_string(),
            node: node.to_string(),
            thread,
        });
        Ok(())
    }

    /// The handle the nemesis changes a watched server's clock through
    /// ([`ClockTies::around`]), so that the witness places what the server did on either side
    /// of the change by the clock it ran on then.
    pub fn clock_ties(&self) -> ClockTies {
        self.ties.clone()
    }

    /// Readies watched node `node` for a kill: its clients' writes held and everything it did
    /// read ([`ClockTies::quiesce`]). Call it just before the kill.
    pub fn quiesce(&self, node: &str) {
        self.ties.quiesce(node);
    }

    /// Follows node `node` again, now a new process on `port` (a restart: lockcheck's servers
    /// start empty, so the model starts empty too). Call it before any client is routed there:
    /// a command before the `MONITOR` would be missed. If it cannot, the witness does not vouch
    /// for the run.
    pub fn attach(&self, node: &str, port: u16) {
        let n = self
            .streams
            .lock()
            .unwrap()
            .iter()
            .filter(|w| w.node == node)
            .count();
        let stream = format!("{node}#{n}");
        self.ties.add(node, &stream, port);
        if let Err(why) = self.follow(node, &stream, port) {
            self.ties.refuse(format!("{node} after its restart: {why}"));
        }
    }

    /// Stops watching once every server's stream has been read up to now. Records
    /// [`EventKind::LockEntriesWatched`] when every server's commands on the lock keys were
    /// understood to the end; otherwise returns why not (and records nothing).
    pub fn finish(self) -> Result<(), String> {
        let streams = std::mem::take(&mut *self.streams.lock().unwrap());
        // The marker goes through the server like any command: once the witness reads it, it
        // has read every command before it. A dead server has nothing more to say.
        for w in &streams {
            if !w.thread.is_finished() {
                self.ties.send(&w.stream, Marker::End);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && streams.iter().any(|w| !w.thread.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        let mut why = self.ties.untied();
        let mut removals = Vec::new();
        let mut created = 0u64;
        // A removal is placed between two ties by the server's clock, so it is off by no more
        // than the worse of them (half a round trip; milliseconds on a loaded machine), or by the
        // length of the bracket around a clock change it fell in. The release-truth check allows
        // that much (`docs/checks.md`).
        let mut within_us = 0u64;
        for w in streams {
            match w.thread.join() {
                Ok(Ok(followed)) => {
                    created += followed.created;
                    let ties = self.ties.of(&w.stream);
                    within_us = ties.values().map(|t| t.within_us).fold(within_us, u64::max);
                    let (timed, bound) = followed.timed(&ties);
                    within_us = within_us.max(bound);
                    removals.push((w.node, timed))
                }
                Ok(Err(e)) => why.push(e),
                Err(_) => why.push(format!("{}: the witness thread panicked", w.node)),
            }
        }
        if !why.is_empty() {
            return Err(why.join("; "));
        }
        // Removals are judged against the entries the witness saw created: a lock that keeps
        // its entries in a shape the witness does not learn (a hash, a key it never sets with
        // `NX`) leaves nothing followed, and "no removal" would then read as every release lying.
        if created == 0 {
            return Err(format!(
                "no command created a lock entry on any server (a string set with NX, or `{}`): \
                 the lock keeps its entries in another shape, or none was granted",
                self.keys.describe()
            ));
        }
        for (server, timed) in removals {
            for (at_us, kind) in timed {
                self.rec.insert_at(&server, kind, at_us);
            }
        }
        self.rec.record(
            "servers",
            EventKind::LockEntriesWatched {
                key: self.keys.describe(),
                // Never 0 in real mode: 0 is simulation's exact placement.
                placed_within_us: within_us.max(1),
            },
        );
        Ok(())
    }
}
