//! A black-box lock: the user's own client program, driven over the client protocol.
//!
//! lockcheck cannot link a Python or Node library, so it runs the user's program (one process
//! per client, see [`crate::real::ClientProgram`]) and speaks JSON lines to it: one request per
//! line on its stdin (`{"id":1,"op":"acquire"}`), one reply per line on its stdout with the same
//! `id` (`{"id":1,"result":"acquired","lease_ms":2000,"token":7}`). `docs/client-protocol.md` is
//! the full protocol. A request that gets no reply within its timeout is an error, never a hang:
//! a program lockcheck stopped or killed is then simply a client that does not answer.
//!
//! Two answers say what the program cannot know, or did on its own: a release answered
//! `unknown` (the library sent its delete and lost the reply) is a failed release, which the
//! release check counts as an unknown outcome when the servers show its entry removed, never as
//! a lie; and a `{"event": "renewed", "validity_ms": n}` line, sent whenever a library that
//! renews itself moved its lease, is recorded as the holder's renewal, so the report shows the
//! validity it moved to rather than the one it was granted.

use crate::env::Env;
use crate::history::{EventKind, Recorder};
use crate::lock::{Guard, Lock, LockConfig, LockError};
use crate::real::ClientProgram;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The protocol version lockcheck speaks (`LOCKCHECK_PROTOCOL`).
pub const PROTOCOL_VERSION: u32 = 1;

/// How long lockcheck waits for a reply beyond the lock's own bounds: a program's start-up
/// (an interpreter importing its libraries) and scheduling noise.
const REPLY_SLACK: Duration = Duration::from_secs(10);

/// One reply line.
#[derive(Debug, Deserialize)]
struct Reply {
    id: u64,
    result: String,
    lease_ms: Option<u64>,
    token: Option<u64>,
    owner: Option<String>,
    message: Option<String>,
}

/// A line the program sends on its own, between replies: `{"event": "renewed", "validity_ms":
/// 3000}` (its library extended the lease; it now believes it holds it `validity_ms` from now).
#[derive(Debug, Deserialize)]
struct Notice {
    event: String,
    validity_ms: Option<u64>,
}

/// One client's lock, implemented by a separate program.
pub struct ClientProgramLock<E> {
    process: Arc<ClientProgram>,
    stdin: ChildStdin,
    replies: mpsc::UnboundedReceiver<String>,
    next_id: u64,
    env: E,
    config: LockConfig,
    /// Whether the client holds the lock: from an `acquired` reply until its `release` is sent.
    /// A `renewed` notice counts only then.
    holding: Arc<AtomicBool>,
}

impl<E: Env> ClientProgramLock<E> {
    /// Drives an already started program (`stdin`/`stdout` are its pipes) as client `client`;
    /// its `renewed` notices are recorded in `rec`.
    pub fn new(
        process: Arc<ClientProgram>,
        stdin: ChildStdin,
        stdout: ChildStdout,
        env: E,
        config: LockConfig,
        rec: Recorder,
        client: u32,
    ) -> Self {
        let (tx, replies) = mpsc::unbounded_channel();
        let holding = Arc::new(AtomicBool::new(false));
        let (clock, held) = (env.clone(), holding.clone());
        let me = format!("client-{client}");
        // A plain thread: reading a pipe blocks, and it ends at EOF, when the program exits.
        // Notices are recorded as they arrive, when they happened; replies go to `call`.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(n) = serde_json::from_str::<Notice>(&line) {
                    if let ("renewed", Some(ms), true) =
                        (n.event.as_str(), n.validity_ms, held.load(Ordering::SeqCst))
                    {
                        let valid_until_ms = clock.monotonic_ms() + ms;
                        rec.record(&me, EventKind::Renewed { valid_until_ms });
                    }
                    continue;
                }
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ClientProgramLock {
            process,
            stdin,
            replies,
            next_id: 0,
            env,
            config,
            holding,
        }
    }

    /// The program's pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Sends `op` and waits up to `timeout` for the reply with the same id; replies to earlier,
    /// timed-out requests are skipped.
    async fn call(&mut self, op: &str, timeout: Duration) -> Result<Reply, LockError> {
        self.next_id += 1;
        let id = self.next_id;
        let line = format!("{}\n", serde_json::json!({ "id": id, "op": op }));
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|_| self.stdin.flush())
            .map_err(|e| {
                LockError::Client(format!(
                    "writing `{op}` to client pid {}: {e}",
                    self.process.pid()
                ))
            })?;
        let replies = &mut self.replies;
        let wait = async {
            while let Some(line) = replies.recv().await {
                match serde_json::from_str::<Reply>(&line) {
                    Ok(r) if r.id == id => return Ok(r),
                    Ok(_) => continue,
                    Err(e) => {
                        return Err(format!(
                            "not a protocol reply (stdout is for protocol lines only; log to \
                             stderr): {line:?}: {e}"
                        ))
                    }
                }
            }
            Err("the client program exited".to_string())
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(LockError::Client(format!(
                "`{op}` to client pid {}: {e}",
                self.process.pid()
            ))),
            Err(_) => Err(LockError::Client(format!(
                "client pid {} did not answer `{op}` within {} ms",
                self.process.pid(),
                timeout.as_millis()
            ))),
        }
    }

    fn unexpected(&self, op: &str, reply: &Reply) -> LockError {
        LockError::Client(format!(
            "client pid {} answered `{op}` with `{}`{}",
            self.process.pid(),
            reply.result,
            reply
                .message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ))
    }
}

impl<E: Env> Lock for ClientProgramLock<E> {
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let started = self.env.monotonic_ms();
        let timeout = self.config.wait + self.config.ttl + REPLY_SLACK;
        let reply = self.call("acquire", timeout).await?;
        match reply.result.as_str() {
            "acquired" => {
                self.holding.store(true, Ordering::SeqCst);
                let lease = reply.lease_ms.unwrap_or(self.config.ttl.as_millis() as u64);
                Ok(Some(Guard {
                    owner: reply
                        .owner
                        .unwrap_or_else(|| format!("pid{}#{}", self.process.pid(), reply.id)),
                    fencing_token: reply.token,
                    acquired_at_ms: started,
                    valid_until_ms: started + lease,
                }))
            }
            "failed" => Ok(None),
            _ => Err(self.unexpected("acquire", &reply)),
        }
    }

    async fn release(&mut self, _guard: &Guard) -> Result<bool, LockError> {
        self.holding.store(false, Ordering::SeqCst);
        let reply = self.call("release", self.config.wait + REPLY_SLACK).await?;
        match reply.result.as_str() {
            "released" => Ok(true),
            "failed" => Ok(false),
            // Not a "released" (which would be a lie if nothing was removed) nor a "failed":
            // a failed call, as an in-process lock's release that lost its reply is.
            "unknown" => Err(LockError::Client(format!(
                "client pid {} answered `release` with `unknown` (outcome not known){}",
                self.process.pid(),
                reply
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ))),
            _ => Err(self.unexpected("release", &reply)),
        }
    }
}
