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
use crate::real::observers::entry_model::{Followed, Model};
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

/// One watched server: its name and the thread following its `MONITOR` stream.
type Watched = (String, JoinHandle<Result<Followed, String>>);

/// Watches the lock entry on a set of servers (one thread and one `MONITOR` connection each).
pub struct Witness {
    key: String,
    rec: Recorder,
    servers: Vec<Watched>,
    stop: Arc<AtomicBool>,
    ties: ClockTies,
}

impl Witness {
    /// Starts watching `key` on each `(name, port)` server on 127.0.0.1. Returns once every
    /// `MONITOR` is in place, so no client command is missed.
    /// `names`: the client programs' forwarded connections (empty for in-process clients, which
    /// name theirs).
    pub fn start(
        servers: &[(String, u16)],
        key: &str,
        rec: &Recorder,
        names: &ConnectionNames,
    ) -> Result<Witness, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let ties = ClockTies::new(servers, rec);
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
            let mut model = Model::new(
                name.clone(),
                key.as_bytes().to_vec(),
                rec.clone(),
                names.clone(),
            );
            let stop = stop.clone();
            let thread = std::thread::spawn(move || model.follow(reader, &stop));
            ties.send(name, Marker::Start);
            threads.push((name.clone(), thread));
        }
        Ok(Witness {
            key: key.to_string(),
            rec: rec.clone(),
            servers: threads,
            stop,
            ties,
        })
    }

    /// The handle the nemesis changes a watched server's clock through
    /// ([`ClockTies::around`]), so that the witness places what the server did on either side
    /// of the change by the clock it ran on then.
    pub fn clock_ties(&self) -> ClockTies {
        self.ties.clone()
    }

    /// Stops watching once every server's stream has been read up to now. Records
    /// [`EventKind::LockEntriesWatched`] when every server's commands on the key were understood
    /// to the end; otherwise returns why not (and records nothing).
    pub fn finish(self) -> Result<(), String> {
        // The marker goes through the server like any command: once the witness reads it, it
        // has read every command before it. A dead server has nothing more to say.
        for (name, _) in &self.servers {
            self.ties.send(name, Marker::End);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && self.servers.iter().any(|(_, t)| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, Ordering::Relaxed);
        let mut why: Vec<String> = self
            .ties
            .untied()
            .into_iter()
            .map(|s| format!("{s}: its clock changed and the witness could not tie it again"))
            .collect();
        let mut removals = Vec::new();
        let mut created = 0u64;
        // A removal is placed between two ties by the server's clock, so it is off by no more
        // than the worse of them (half a round trip; milliseconds on a loaded machine), or by the
        // length of the bracket around a clock change it fell in. The release-truth check allows
        // that much (`docs/checks.md`).
        let mut within_us = 0u64;
        for (name, t) in self.servers {
            match t.join() {
                Ok(Ok(followed)) => {
                    created += followed.created;
                    let ties = self.ties.of(&name);
                    within_us = ties.values().map(|t| t.within_us).fold(within_us, u64::max);
                    let (timed, bound) = followed.timed(&ties);
                    within_us = within_us.max(bound);
                    removals.push((name, timed))
                }
                Ok(Err(e)) => why.push(e),
                Err(_) => why.push(format!("{name}: the witness thread panicked")),
            }
        }
        if !why.is_empty() {
            return Err(why.join("; "));
        }
        // Removals are judged against the entries the witness saw created: a lock that keeps
        // its entries under another key (pottery's Redlock prefixes `redlock:`) leaves the
        // watched key untouched, and "no removal" would then read as every release lying.
        if created == 0 {
            return Err(format!(
                "no command created an entry under `{}` on any server: the lock keeps its \
                 entries under another key (set `[lock] key` to the key it writes), or none was \
                 granted",
                self.key
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
                key: self.key,
                // Never 0 in real mode: 0 is simulation's exact placement.
                placed_within_us: within_us.max(1),
            },
        );
        Ok(())
    }
}
