//! A real client's own faults at its named point, for the worlds whose clients are tokio tasks
//! behind a [`Gate`] (the MySQL and etcd worlds): the longest pause asked for there and whether
//! it crashes, gathered while the fault families fire ([`Stops`]), then carried out in the
//! client's task ([`ClientTasks`]): a crash kills its gate and aborts its task where it stands,
//! a pause closes its gate (its background tasks stop with it) and opens it again.

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fault::{ClientRef, Occasion, Refused};
use crate::history::{EventKind, Recorder};
use crate::real::Gate;
use crate::world::mysql::record_client_crash;

/// What the faults fired at one client's point ask of that client.
#[derive(Default)]
pub(in crate::real) struct Stops {
    stall: Cell<Duration>,
    crashed: Cell<bool>,
}

impl Stops {
    /// A pause of `victim` (the holder, or a named client) for `for_ms`; the history says what
    /// `stays` meanwhile.
    pub(in crate::real) fn pause(
        &self,
        rec: &Recorder,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
        stays: &str,
    ) -> Result<(), Refused> {
        let Some(c) = victim.victim(at.by, rec) else {
            return Ok(());
        };
        rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!(
                    "client-{c} paused for {for_ms} ms at {} ({stays})",
                    at.point
                ),
            },
        );
        self.stall
            .set(self.stall.get().max(Duration::from_millis(for_ms)));
        Ok(())
    }

    /// The client dies at its point.
    pub(in crate::real) fn crash(&self) {
        self.crashed.set(true);
    }

    /// Whether the client is to die.
    pub(in crate::real) fn crashed(&self) -> bool {
        self.crashed.get()
    }

    /// The longest pause asked for (zero: none).
    pub(in crate::real) fn stall(&self) -> Duration {
        self.stall.get()
    }
}

/// The clients' gates and tasks, which their own faults act on.
#[derive(Clone)]
pub(in crate::real) struct ClientTasks {
    pub(in crate::real) rec: Recorder,
    pub(in crate::real) gates: Vec<Gate>,
    /// Each client's task, to abort it when the client crashes.
    pub(in crate::real) tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl ClientTasks {
    /// Gates for `clients` clients, no task yet.
    pub(in crate::real) fn new(rec: Recorder, clients: u32) -> ClientTasks {
        ClientTasks {
            rec,
            gates: (0..clients).map(|_| Gate::default()).collect(),
            tasks: Arc::default(),
        }
    }

    /// If `crashed` ([`Stops::crashed`]), `client` dies at `point`: records it (`how` the
    /// world carries it out), kills its gate and aborts its task, and never returns.
    pub(in crate::real) async fn crash_if_asked(
        &self,
        crashed: bool,
        client: u32,
        point: &str,
        how: &str,
    ) {
        if !crashed {
            return;
        }
        record_client_crash(&self.rec, client, point, how);
        self.gates[client as usize].kill();
        if let Some(t) = self.tasks.lock().unwrap().get(client as usize) {
            t.abort();
        }
        std::future::pending::<()>().await;
    }

    /// Stalls `client` for `stall` ([`Stops::stall`]) with its gate closed, if not zero.
    pub(in crate::real) async fn stall_if_asked(&self, stall: Duration, client: u32) {
        if stall.is_zero() {
            return;
        }
        let gate = &self.gates[client as usize];
        gate.close();
        tokio::time::sleep(stall).await;
        gate.open();
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("client-{client} resumed"),
            },
        );
    }
}
