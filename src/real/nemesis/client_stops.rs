//! A real client's own faults at its named point, for the worlds whose clients are tokio tasks
//! behind a [`Gate`] (the MySQL, etcd and ZooKeeper worlds): the longest pause asked for there
//! and whether it crashes, gathered while the fault families fire ([`Stops`], [`AtClient`]),
//! then carried out in the client's task ([`ClientTasks`]): a crash kills its gate and aborts its
//! task where it stands, a pause closes its gate (its background tasks stop with it) and opens it
//! again; what else must stop with the client is the world's ([`Stopping`]). A client that is a
//! program (`kind = "client-program"`) is stopped from outside as well, as the operating system
//! would: `SIGSTOP` and `SIGCONT` for its pause, `SIGKILL` for its crash ([`signal_program`],
//! [`kill_program`], which the Redis world's nemesis uses too).

use std::cell::Cell;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::firing::fire_noting;
use crate::fault::{ClientRef, FaultKind, Nemesis, Occasion, Refused, Trigger};
use crate::history::{EventKind, Recorder};
use crate::real::client_programs::client_program::{ClientProgram, Programs};
use crate::real::Gate;
use crate::world::points::record_client_crash;

/// What the faults fired at one client's point ask of that client.
#[derive(Default)]
pub(crate) struct Stops {
    stall: Cell<Duration>,
    crashed: Cell<bool>,
}

impl Stops {
    /// A pause of `victim` (the holder, or a named client) for `for_ms`; the history says what
    /// `stays` meanwhile.
    pub(crate) fn pause(
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
    pub(crate) fn crash(&self) {
        self.crashed.set(true);
    }

    /// Whether the client is to die.
    pub(crate) fn crashed(&self) -> bool {
        self.crashed.get()
    }

    /// The longest pause asked for (zero: none).
    pub(crate) fn stall(&self) -> Duration {
        self.stall.get()
    }
}

/// `SIGSTOP`s (`stop`) or `SIGCONT`s client `client`'s program, if it is one, and says so in the
/// history. Stopped, every thread of the program stands, its library's own pings and lease
/// keep-alives too, as in a stop-the-world GC pause.
pub(crate) fn signal_program(
    rec: &Recorder,
    client: u32,
    program: Option<&ClientProgram>,
    stop: bool,
) {
    let Some(p) = program else { return };
    let (name, result) = if stop {
        ("SIGSTOP", p.pause())
    } else {
        ("SIGCONT", p.resume())
    };
    let what = match result {
        Ok(()) => format!("client-{client}: {name} of program pid {}", p.pid()),
        Err(e) => format!("client-{client} program {name} failed: {e}"),
    };
    rec.record("nemesis", EventKind::Fault { what });
}

/// `SIGKILL`s client `client`'s program, if it is one, and says so in the history: it never
/// releases, and its connections close only when the kernel closes them.
pub(crate) fn kill_program(rec: &Recorder, client: u32, program: Option<&ClientProgram>) {
    let Some(p) = program else { return };
    p.kill();
    rec.record(
        "nemesis",
        EventKind::Fault {
            what: format!("client-{client} program pid {} killed (SIGKILL)", p.pid()),
        },
    );
}

/// The clients' gates and tasks, which their own faults act on.
#[derive(Clone)]
pub(crate) struct ClientTasks {
    pub(crate) rec: Recorder,
    pub(crate) gates: Vec<Gate>,
    /// Each client's task, to abort it when the client crashes.
    pub(crate) tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    /// Each client's program, when the clients are programs: paused and killed with the client.
    pub(crate) programs: Programs,
}

impl ClientTasks {
    /// Gates for `clients` clients, no task yet; the clients are locks in this process.
    pub(crate) fn new(rec: Recorder, clients: u32) -> ClientTasks {
        ClientTasks {
            rec,
            gates: (0..clients).map(|_| Gate::default()).collect(),
            tasks: Arc::default(),
            programs: Arc::default(),
        }
    }

    /// The same clients, each of which is a program (`programs[c]`).
    pub(crate) fn with_programs(self, programs: Programs) -> ClientTasks {
        ClientTasks { programs, ..self }
    }

    fn program(&self, client: u32) -> Option<&ClientProgram> {
        self.programs.get(client as usize)?.as_deref()
    }

    /// A clock fault on `node` where the clients are programs: a jump (`jump_by_ms`) moves the
    /// program's libfaketime clock, which it was started on for this (`program_clocks`); a drift
    /// is the rate that clock has run at from the start. Refused for any other node.
    pub(crate) fn program_clock(
        &self,
        node: &str,
        jump_by_ms: Option<i64>,
        drift_ppm: i64,
    ) -> Result<(), Refused> {
        let client = node
            .strip_prefix("client-")
            .and_then(|c| c.parse::<u32>().ok());
        let Some(p) = client.and_then(|c| self.program(c)) else {
            return Err(Refused::Lacking);
        };
        let what = match jump_by_ms {
            Some(by) => match p.jump_clock(by) {
                Ok(()) => format!("{node} program clock jumped by {by} ms (libfaketime)"),
                Err(e) => format!("{node} program clock jump failed: {e}"),
            },
            None => format!(
                "{node} clock drift set to {drift_ppm} ppm (libfaketime rate from the start)"
            ),
        };
        self.rec.record("nemesis", EventKind::Fault { what });
        Ok(())
    }

    /// Closes the gate of every client `s` starts late (a pause of a named client at
    /// `at_ms = 0`), before any client task starts, so none of them takes a step first; the
    /// timed fault then opens it ([`ClientTasks::start_late`]).
    pub(crate) fn hold_back_late_starters(&self, s: &crate::scenario::Scenario) {
        for f in &s.faults {
            if let (
                FaultKind::Pause {
                    client: ClientRef::Index(c),
                    ..
                },
                Trigger::At(0),
            ) = (&f.kind, &f.trigger)
            {
                if let Some(gate) = self.gates.get(*c as usize) {
                    gate.close();
                }
            }
        }
    }

    /// Client `victim` (a named one) starts `for_ms` late: its gate, closed before it started
    /// ([`ClientTasks::hold_back_late_starters`]), opens `for_ms` from now. A task world runs
    /// only this timed client pause (its `real_check` refuses a pause at any other time): a running task stops where it looks at its gate, which is
    /// at its sleeps, so a pause at a time would not stop one waiting for an answer; at its
    /// named points (`on = ...`) it stops at once.
    /// The holder cannot start late: nobody holds the lock before the clients start.
    pub(crate) fn start_late(&self, victim: &ClientRef, for_ms: u64) -> Result<(), Refused> {
        let ClientRef::Index(client) = *victim else {
            return Err(Refused::Lacking);
        };
        let Some(gate) = self.gates.get(client as usize).cloned() else {
            return Err(Refused::Because(format!("no client-{client} here")));
        };
        gate.close();
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("client-{client} starts late: held back {for_ms} ms"),
            },
        );
        let rec = self.rec.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            if !gate.is_dead() {
                gate.open();
                rec.record(
                    "nemesis",
                    EventKind::Fault {
                        what: format!("client-{client} starts"),
                    },
                );
            }
        });
        Ok(())
    }

    /// If `crashed` ([`Stops::crashed`]), `client` dies at `point`: records it (`how` the
    /// world carries it out), kills its gate and aborts its task, and never returns.
    pub(crate) async fn crash_if_asked(&self, crashed: bool, client: u32, point: &str, how: &str) {
        if !crashed {
            return;
        }
        record_client_crash(&self.rec, client, point, how);
        kill_program(&self.rec, client, self.program(client));
        self.gates[client as usize].kill();
        if let Some(t) = self.tasks.lock().unwrap().get(client as usize) {
            t.abort();
        }
        std::future::pending::<()>().await;
    }

    /// Stalls `client` for `stall` ([`Stops::stall`]) with its gate closed, if not zero; a
    /// program is `SIGSTOP`ped meanwhile, and continued before its gate opens, so the next
    /// request finds it running.
    pub(crate) async fn stall_if_asked(&self, stall: Duration, client: u32) {
        if stall.is_zero() {
            return;
        }
        let gate = &self.gates[client as usize];
        gate.close();
        signal_program(&self.rec, client, self.program(client), true);
        tokio::time::sleep(stall).await;
        signal_program(&self.rec, client, self.program(client), false);
        gate.open();
        self.rec.record(
            "nemesis",
            EventKind::Fault {
                what: format!("client-{client} resumed"),
            },
        );
    }
}

/// The nemesis as a client that reached a named point sees it: its own pause and crash are
/// gathered in `stops` (carried out in its task by [`ClientTasks::fire_at_client`]); every other
/// capability is the world's nemesis `n`'s.
pub(crate) struct AtClient<'a, N> {
    n: &'a N,
    rec: &'a Recorder,
    stops: Stops,
    /// What the history says goes on during the client's pause.
    stays: &'a str,
}

impl<N: Nemesis> Nemesis for AtClient<'_, N> {
    fn pause_client(
        &self,
        at: &Occasion<'_>,
        victim: &ClientRef,
        for_ms: u64,
    ) -> Result<(), Refused> {
        self.stops.pause(self.rec, at, victim, for_ms, self.stays)
    }

    fn crash_client(&self, _at: &Occasion<'_>, _client: u32) -> Result<(), Refused> {
        self.stops.crash();
        Ok(())
    }

    crate::fault::forward_to_world!(n);
}

/// What a world's client does beyond its task when it stops: what the history says goes on
/// during its pause and how its crash is carried out, and what else must stop with it (`hold`
/// is called with `true` before a pause or a crash, with `false` after a pause).
pub(crate) struct Stopping<'a> {
    pub(crate) paused: &'a str,
    pub(crate) crashed: &'a str,
    pub(crate) hold: &'a (dyn Fn(bool) + Sync),
}

impl ClientTasks {
    /// Fires the faults `client` triggered at `point` through `n`, then carries out its own
    /// pause or crash; returns when it may go on (never, if it crashed).
    pub(crate) async fn fire_at_client<N: Nemesis + Sync>(
        &self,
        n: &N,
        client: u32,
        point: &str,
        due: Vec<FaultKind>,
        how: &Stopping<'_>,
    ) {
        let at = Occasion {
            point,
            by: Some(client),
        };
        let here = AtClient {
            n,
            rec: &self.rec,
            stops: Stops::default(),
            stays: how.paused,
        };
        for kind in due {
            fire_noting(&self.rec, &kind, &here, &at);
            let crashed = here.stops.crashed();
            if crashed {
                (how.hold)(true);
            }
            self.crash_if_asked(crashed, client, point, how.crashed)
                .await;
        }
        let stall = here.stops.stall();
        if !stall.is_zero() {
            (how.hold)(true);
            self.stall_if_asked(stall, client).await;
            (how.hold)(false);
        }
    }
}
