//! Ties between a watched server's clock and the run's: where in the run's time the witness puts
//! what a server did.
//!
//! A `MONITOR` line carries the server's timestamp, read from the server's own wall clock, which
//! libfaketime may have set wrong, drifting, or jumping (the clock faults). A tie is a marker
//! `ECHO` sent to the server and timed by the run's clock around its round trip: the stream shows
//! the server's time of the marker, the sender knows the run's time to within half the round trip.
//! Between two consecutive ties in the stream's order the server's clock is mapped linearly onto
//! the run's, which is exact for a clock that runs on, fast or slow (a drift), and wrong for one
//! that jumps: a jump of 145 ms in the middle of a 700 ms run would move every later removal by
//! tens of milliseconds, past the answer of the release that sent it, and the release check
//! would read a correct release as a lie. So every change of a watched server's clock is made
//! between two ties of its own ([`ClockTies::around`]): the jump falls between them, the
//! brackets on either side run on one clock, and a removal between the two is placed to within
//! their distance (a few hundred microseconds) plus their own uncertainty.

use crate::history::Recorder;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A marker the witness sends a server, in the order they can appear in its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Marker {
    /// Sent once the server's `MONITOR` is in place.
    Start,
    /// Sent just before the nemesis changes the server's clock (the `n`-th change of the run).
    Before(u32),
    /// Sent just after that change.
    After(u32),
    /// Sent just before the nemesis kills the server, once its clients' writes are paused
    /// ([`ClockTies::quiesce`]): the stream ends after it, and nothing it did is missing.
    Down,
    /// Sent when the run is over: once the witness reads it, it has read everything before it.
    End,
}

const PREFIX: &str = "lockcheck-witness-";

impl Marker {
    /// The `ECHO` argument that carries it.
    pub(super) fn text(self) -> String {
        match self {
            Marker::Start => format!("{PREFIX}start"),
            Marker::Before(n) => format!("{PREFIX}before-{n}"),
            Marker::After(n) => format!("{PREFIX}after-{n}"),
            Marker::Down => format!("{PREFIX}down"),
            Marker::End => format!("{PREFIX}end"),
        }
    }

    /// The marker an `ECHO` argument carries, if it is one.
    pub(super) fn parse(arg: &[u8]) -> Option<Marker> {
        let rest = std::str::from_utf8(arg).ok()?.strip_prefix(PREFIX)?;
        match rest {
            "start" => Some(Marker::Start),
            "down" => Some(Marker::Down),
            "end" => Some(Marker::End),
            _ => {
                let (which, n) = rest.split_once('-')?;
                let n = n.parse().ok()?;
                match which {
                    "before" => Some(Marker::Before(n)),
                    "after" => Some(Marker::After(n)),
                    _ => None,
                }
            }
        }
    }
}

/// When the server executed a marker, in the run's time: the middle of its round trip, which is
/// within half the round trip of the truth (the server ran it between the send and the answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tie {
    pub(super) at_us: u64,
    pub(super) within_us: u64,
}

/// Sends `ECHO <marker>` to the server on `port` and waits for the answer. `None`: the server
/// could not be reached.
fn send_marker(port: u16, marker: Marker, rec: &Recorder) -> Option<Tie> {
    let text = marker.text();
    let cmd = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{text}\r\n", text.len());
    let sent = rec.now_us();
    round_trip(port, &cmd)?;
    let answered = rec.now_us();
    Some(Tie {
        at_us: sent + (answered - sent) / 2,
        within_us: (answered - sent).div_ceil(2),
    })
}

/// Sends one command (`cmd`, in RESP) to the server on `port` and reads its one-line answer.
fn round_trip(port: u16, cmd: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    s.write_all(cmd.as_bytes()).ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    Some(line)
}

/// How long the nemesis waits for the witness to read a server's `Down` marker before it kills
/// the server anyway (and the witness then does not vouch for the run).
const DOWN_READ_WAIT: Duration = Duration::from_secs(2);

/// How long a quiesced server's clients' writes are held (`CLIENT PAUSE … WRITE`): longer than
/// the wait for the marker, so none slips in before the kill.
const QUIESCE_PAUSE_MS: u64 = 10_000;

/// The ties sent to the watched servers: shared by the witness (start and end) and the nemesis
/// (around each clock change, before each kill). Keyed by stream: a server the nemesis
/// restarted is a new process with a stream of its own, and its node name then means the newest.
#[derive(Clone)]
pub struct ClockTies {
    /// Stream -> port.
    ports: Arc<Mutex<BTreeMap<String, u16>>>,
    /// Node name -> its current stream.
    current: Arc<Mutex<BTreeMap<String, String>>>,
    rec: Recorder,
    sent: Arc<Mutex<BTreeMap<(String, Marker), Tie>>>,
    /// Markers the witness has read, by stream.
    read: Arc<Mutex<BTreeSet<(String, Marker)>>>,
    /// Why the witness cannot vouch for some server's stream (a clock changed without both of
    /// its ties, a kill before the witness read everything, a restart it could not follow).
    untied: Arc<Mutex<Vec<String>>>,
    changes: Arc<AtomicU32>,
}

impl ClockTies {
    /// Ties for the servers `(name, port)` on 127.0.0.1, each its own first stream.
    pub(super) fn new(servers: &[(String, u16)], rec: &Recorder) -> ClockTies {
        ClockTies {
            ports: Arc::new(Mutex::new(servers.iter().cloned().collect())),
            current: Arc::new(Mutex::new(
                servers
                    .iter()
                    .map(|(n, _)| (n.clone(), n.clone()))
                    .collect(),
            )),
            rec: rec.clone(),
            sent: Arc::default(),
            read: Arc::default(),
            untied: Arc::default(),
            changes: Arc::default(),
        }
    }

    /// A new stream of node `node` (a restarted server) on `port`: from now on the node's name
    /// means this one.
    pub(super) fn add(&self, node: &str, stream: &str, port: u16) {
        self.ports.lock().unwrap().insert(stream.to_string(), port);
        self.current
            .lock()
            .unwrap()
            .insert(node.to_string(), stream.to_string());
    }

    /// The current stream of node `node`, if the witness watches it.
    fn stream_of(&self, node: &str) -> Option<(String, u16)> {
        let stream = self.current.lock().unwrap().get(node)?.clone();
        let port = *self.ports.lock().unwrap().get(&stream)?;
        Some((stream, port))
    }

    /// Sends `marker` to `stream` and keeps its tie. Returns whether the server answered.
    pub(super) fn send(&self, stream: &str, marker: Marker) -> bool {
        let Some(port) = self.ports.lock().unwrap().get(stream).copied() else {
            return false;
        };
        let Some(tie) = send_marker(port, marker, &self.rec) else {
            return false;
        };
        self.sent
            .lock()
            .unwrap()
            .insert((stream.to_string(), marker), tie);
        true
    }

    /// The witness read `marker` in `stream`.
    pub(super) fn mark_read(&self, stream: &str, marker: Marker) {
        self.read
            .lock()
            .unwrap()
            .insert((stream.to_string(), marker));
    }

    /// The witness cannot vouch for the run, and why.
    pub(super) fn refuse(&self, why: String) {
        self.untied.lock().unwrap().push(why);
    }

    /// Readies node `node` to be killed so that the witness misses nothing it did: its clients'
    /// writes are held (`CLIENT PAUSE … WRITE`; those sent from now on are never executed, as
    /// if the server had died now), a `Down` marker follows the last of them, and this returns
    /// once the witness has read it (at most [`DOWN_READ_WAIT`]). Why: `SIGKILL` drops what the
    /// server had executed but not yet written to its `MONITOR` stream, and a release whose
    /// reply left before its line did would read as a lie. A node the witness does not watch is
    /// left as it is.
    pub fn quiesce(&self, node: &str) {
        let Some((stream, port)) = self.stream_of(node) else {
            return;
        };
        let pause = QUIESCE_PAUSE_MS.to_string();
        let cmd = format!(
            "*4\r\n$6\r\nCLIENT\r\n$5\r\nPAUSE\r\n${}\r\n{pause}\r\n$5\r\nWRITE\r\n",
            pause.len()
        );
        let paused = round_trip(port, &cmd).is_some_and(|l| l.starts_with("+OK"));
        let sent = paused && self.send(&stream, Marker::Down);
        let deadline = std::time::Instant::now() + DOWN_READ_WAIT;
        let key = (stream.clone(), Marker::Down);
        while sent && std::time::Instant::now() < deadline {
            if self.read.lock().unwrap().contains(&key) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.refuse(format!(
            "{node}: killed before the witness had read everything it did"
        ));
    }

    /// Runs `change`, which moves `server`'s clock, between two ties of that server, so that the
    /// witness maps the server's time on each side of the change by its own clock. A server the
    /// witness does not watch is changed as it is.
    pub fn around<T>(&self, server: &str, change: impl FnOnce() -> T) -> T {
        let Some((stream, _)) = self.stream_of(server) else {
            return change();
        };
        let n = self.changes.fetch_add(1, Ordering::Relaxed);
        let before = self.send(&stream, Marker::Before(n));
        let out = change();
        let after = self.send(&stream, Marker::After(n));
        if !(before && after) {
            self.refuse(format!(
                "{server}: its clock changed and the witness could not tie it again"
            ));
        }
        out
    }

    /// The ties sent to `server`, by marker.
    pub(super) fn of(&self, server: &str) -> BTreeMap<Marker, Tie> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|((s, _), _)| s == server)
            .map(|((_, m), t)| (*m, *t))
            .collect()
    }

    /// Why the witness cannot vouch for some stream (empty: it can).
    pub(super) fn untied(&self) -> Vec<String> {
        self.untied.lock().unwrap().clone()
    }
}

/// A marker as a server's stream showed it: the server's time (µs) and how many removals the
/// stream had shown before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) marker: Marker,
    pub(super) server_us: i64,
    pub(super) before: usize,
}

/// Where the `i`-th removal of a stream, executed at `server_us` on the server's clock, goes in
/// the run's time, and to within how much: linearly between the ties that bracket it in the
/// stream (`seen`, in stream order; `ties`, the run's times of the markers sent), clamped to the
/// bracket. A bracket that holds a clock change (it opens with a `Before` tie) is placed to within
/// its length; any other runs on one clock, to within its ties' uncertainty. `None`: no tie
/// on one side.
pub(super) fn place(
    seen: &[Seen],
    ties: &BTreeMap<Marker, Tie>,
    i: usize,
    server_us: i64,
) -> Option<(u64, u64)> {
    let anchored = |s: &&Seen| ties.contains_key(&s.marker);
    let open = seen.iter().rev().filter(anchored).find(|s| s.before <= i)?;
    let close = seen.iter().filter(anchored).find(|s| s.before > i)?;
    let (t0, t1) = (ties[&open.marker], ties[&close.marker]);
    let (r0, r1) = (t0.at_us, t1.at_us.max(t0.at_us));
    let (s0, s1) = (open.server_us, close.server_us);
    let at = if s1 > s0 {
        let along = (server_us - s0) as f64 / (s1 - s0) as f64;
        r0 as f64 + along * (r1 - r0) as f64
    } else {
        r0 as f64
    };
    let at = (at.round().max(r0 as f64) as u64).min(r1);
    let mut within = t0.within_us.max(t1.within_us);
    if matches!(open.marker, Marker::Before(_)) {
        within += r1 - r0;
    }
    Some((at, within))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_read_back_as_sent() {
        for m in [
            Marker::Start,
            Marker::Before(0),
            Marker::After(7),
            Marker::Down,
            Marker::End,
        ] {
            assert_eq!(Marker::parse(m.text().as_bytes()), Some(m));
        }
        assert_eq!(Marker::parse(b"lockcheck-witness-sideways-1"), None);
        assert_eq!(Marker::parse(b"hello"), None);
    }

    fn tie(at_us: u64, within_us: u64) -> Tie {
        Tie { at_us, within_us }
    }

    /// A server clock that jumps 145 ms ahead at run time 30 ms, in a 700 ms run. With the two
    /// ties around the jump, a removal at run time 312 ms is placed at 312 ms; with only the
    /// start and end ties it would be placed 66 ms late, after the answer of the release that
    /// sent it.
    #[test]
    fn a_clock_jump_between_two_ties_moves_no_removal() {
        // Server time = run time + 1 s before the jump, + 1.145 s after it.
        let seen = [
            Seen {
                marker: Marker::Start,
                server_us: 1_000_000,
                before: 0,
            },
            Seen {
                marker: Marker::Before(0),
                server_us: 1_030_000,
                before: 1,
            },
            Seen {
                marker: Marker::After(0),
                server_us: 1_175_200,
                before: 1,
            },
            Seen {
                marker: Marker::End,
                server_us: 1_845_000,
                before: 2,
            },
        ];
        let ties: BTreeMap<Marker, Tie> = [
            (Marker::Start, tie(0, 50)),
            (Marker::Before(0), tie(30_000, 50)),
            (Marker::After(0), tie(30_200, 50)),
            (Marker::End, tie(700_000, 50)),
        ]
        .into();
        // Removal 0 at run time 10 ms, before the jump; removal 1 at 312 ms, after it.
        assert_eq!(place(&seen, &ties, 0, 1_010_000), Some((10_000, 50)));
        assert_eq!(place(&seen, &ties, 1, 1_457_000), Some((312_000, 50)));
        // Without the ties around the jump, the second is placed 66 ms late.
        let plain: BTreeMap<Marker, Tie> =
            [(Marker::Start, tie(0, 50)), (Marker::End, tie(700_000, 50))].into();
        let (late, _) = place(&seen, &plain, 1, 1_457_000).unwrap();
        assert!(late > 312_000 + 60_000, "{late}");
        // A removal inside the change's bracket is placed within it, to within its length.
        let seen_inside = [
            seen[0],
            seen[1],
            Seen {
                before: 2,
                ..seen[2]
            },
            Seen {
                before: 3,
                ..seen[3]
            },
        ];
        let (at, within) = place(&seen_inside, &ties, 1, 1_175_100).unwrap();
        assert!((30_000..=30_200).contains(&at), "{at}");
        assert_eq!(within, 250);
        // No tie after it (the end marker never came back): no placement.
        assert_eq!(place(&seen[..3], &ties, 1, 1_457_000), None);
    }
}
