//! A client stopped after it sent `SET NX` does not hold its request: on a real `redis-server`
//! the key is set when the request arrives, while the client is stopped, and only the client's
//! reading of the reply waits until it resumes. This is the real half of
//! `tests/sim/cluster.rs::a_request_on_the_wire_runs_at_arrival_while_its_client_is_paused`,
//! which shows the simulation doing the same; both check the same two facts against the same
//! pause, so a simulation that froze requests on the wire (as it once did) fails there, and a
//! real server that behaved otherwise would fail here.
//!
//! The client is a separate process (a GC pause on a real machine is the process standing still,
//! which `SIGSTOP` is): a few lines of Python speaking RESP on a raw socket that stops itself
//! right after `sendall` returns, so the pause surely starts after the send and before the read,
//! and nothing between the two is a library's doing.

use lockcheck::real::{RedisServer, ServerOptions};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The stopped client's pause.
const PAUSE: Duration = Duration::from_millis(800);

/// Sends `SET k v NX PX 100000` when told to and stops itself at once (`SIGSTOP`: the pause
/// starts after the request was written, before the reply could be read), then, once continued,
/// reads the reply and says how long after the send it was read.
const CLIENT: &str = r#"
import os, signal, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("ready", flush=True)
sys.stdin.readline()
t = time.monotonic()
s.sendall(b"*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$6\r\n100000\r\n")
os.kill(os.getpid(), signal.SIGSTOP)
reply = s.recv(64)
print(reply.decode().strip(), int((time.monotonic() - t) * 1000), flush=True)
"#;

/// Whether process `pid` is stopped (state `T` in `/proc/<pid>/stat`).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: signals our own child, whose pid we hold while it is alive.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

#[test]
fn a_request_on_the_wire_runs_at_arrival_while_its_client_is_stopped() {
    let _turn = crate::common::real_servers_one_at_a_time();
    let server = RedisServer::spawn(ServerOptions::default()).expect("redis-server");
    let mut child = Command::new("python3")
        .args(["-c", CLIENT, &server.port().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let pid = child.id();
    // Killed whatever happens below (a failed assertion included): no stopped orphan.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let child = Reap(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    stdin.write_all(b"go\n").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stopped(pid) {
        assert!(
            Instant::now() < deadline,
            "the client never stopped after its send"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let stopped_at = Instant::now();

    // While it stands still, the server has run the SET: the key is there, with the lease it
    // asked for counted from the request's arrival, not from when the client will resume.
    std::thread::sleep(Duration::from_millis(50));
    let mut conn = server.control().unwrap();
    let value: Option<String> = redis::cmd("GET").arg("k").query(&mut conn).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg("k").query(&mut conn).unwrap();
    let since_set_ms = 100_000 - pttl;
    assert_eq!(
        value.as_deref(),
        Some("v"),
        "the SET ran while its client was stopped"
    );
    assert!(
        since_set_ms >= 45 && (since_set_ms as u128) < 50 + PAUSE.as_millis() / 2,
        "the key was set when the request arrived, about {since_set_ms} ms ago"
    );

    std::thread::sleep(PAUSE.saturating_sub(stopped_at.elapsed()));
    signal(pid, libc::SIGCONT);
    line.clear();
    out.read_line(&mut line).unwrap();
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("+OK"), "{line}");
    let read_after_ms: u128 = words.next().and_then(|w| w.parse().ok()).unwrap();
    assert!(
        read_after_ms >= PAUSE.as_millis(),
        "the reply was read only after the client resumed: {read_after_ms} ms after the send"
    );
    drop(child);
}
