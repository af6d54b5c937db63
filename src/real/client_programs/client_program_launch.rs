//! Real mode's `kind = "client-program"` clients: one program per client, its environment (the client
//! protocol's `LOCKCHECK_*` variables) and its clock (libfaketime), started and past `hello`
//! before the run begins ([`LaunchedPrograms`]), whichever service the programs speak to.
//!
//! Each world gives a program the addresses of its own forwarders, never the servers': on Redis
//! a [`crate::real::RouteProxy`] per master group, so the failover, restart and partition recipes
//! that re-route lockcheck's own connections re-route the program's too; on etcd and ZooKeeper a
//! forwarder per member or server, which a partition or a pause holds. So every fault reaches a
//! program without it knowing.

use std::process::{ChildStdin, ChildStdout};
use std::sync::Arc;

use super::client_program::{handshake, ClientCommand, ClientProgram, Programs};
use super::client_program_lock::{ClientProgramLock, PROTOCOL_VERSION};
use crate::history::Recorder;
use crate::lock::LockConfig;
use crate::real::nemesis::recipes::{ClockSetting, ClockSettings};
use crate::real::servers::faketime::FakeTime;
use crate::real::{RealEnv, RealError};
use crate::scenario::Scenario;

/// How one process (a master or a client program) runs under libfaketime, from its start
/// `offset_ms`, its drift and whether its clock jumps later; `None` for a true clock.
/// libfaketime either reads a jumpable offset from a file or runs at a rate, not both.
pub(crate) fn fake_time(
    who: &str,
    drift_ppm: i64,
    offset_ms: i64,
    jumps: bool,
) -> Result<Option<FakeTime>, RealError> {
    let rate = 1.0 + drift_ppm as f64 / 1e6;
    Ok(match (drift_ppm != 0, offset_ms != 0, jumps) {
        (false, false, false) => None,
        (true, false, false) => Some(FakeTime::Rate(rate)),
        (_, _, false) => Some(FakeTime::Skewed { offset_ms, rate }),
        (false, _, true) => Some(FakeTime::Jumpable),
        (true, _, true) => {
            return Err(RealError::Unsupported(format!(
                "{who} both drifts and jumps: libfaketime does one or the other per process; \
                 run it in simulation, without --real"
            )))
        }
    })
}

/// Each client program's libfaketime clock: its `[clocks]` start (offset ms, drift ppm), the
/// drift faults on it (applied from the start: a process's libfaketime rate is fixed) and
/// whether it jumps. A jumpable clock starts at its offset by a first jump (see
/// [`start_offsets`]).
pub(crate) fn client_clocks(
    s: &Scenario,
    starts: &[(i64, i64)],
) -> Result<Vec<Option<FakeTime>>, RealError> {
    let settings = ClockSettings::of(s);
    let mut out = Vec::new();
    for (c, &(offset, mut ppm)) in starts.iter().enumerate() {
        let name = format!("client-{c}");
        let mut jumps = false;
        for (node, setting) in &settings {
            match setting {
                ClockSetting::Drift(p) if *node == name => ppm = *p,
                ClockSetting::Jumps if *node == name => jumps = true,
                _ => {}
            }
        }
        out.push(fake_time(&name, ppm, offset, jumps)?);
    }
    Ok(out)
}

/// Each client program's clock where only client programs' clocks are faked (etcd, ZooKeeper,
/// PostgreSQL): its `[clocks]` start offset, drawn from `seed` in the simulator's ranges and
/// order (not its numbers), and its libfaketime setting ([`client_clocks`]). A `[clocks]` entry
/// on any other node was refused before (`check_consensus`).
pub(crate) fn program_clocks(
    s: &Scenario,
    seed: u64,
) -> Result<Vec<(i64, Option<FakeTime>)>, RealError> {
    use rand::{Rng, SeedableRng};
    let mut starts = vec![(0i64, 0i64); s.workload.clients as usize];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for start in crate::schedule::clocks::draw(&s.clocks, &s.node_names(), |[lo, hi]| {
        rng.gen_range(lo..=hi)
    }) {
        let c = start
            .node
            .strip_prefix("client-")
            .and_then(|c| c.parse::<usize>().ok());
        if let Some(slot) = c.and_then(|c| starts.get_mut(c)) {
            *slot = (start.offset_ms, start.drift_ppm);
        }
    }
    let fakes = client_clocks(s, &starts)?;
    Ok(starts
        .iter()
        .map(|&(offset, _)| offset)
        .zip(fakes)
        .collect())
}

/// The client protocol's environment for client `c`: what every program gets (its id, the lock
/// key, the wait and retry bounds), then `service`, the variables of the service it speaks to
/// (where its forwarders are, the lease or session timeout), which each world gives.
fn protocol_env(s: &Scenario, c: u32, service: Vec<(String, String)>) -> Vec<(String, String)> {
    let l = &s.lock;
    [
        ("LOCKCHECK_PROTOCOL", PROTOCOL_VERSION.to_string()),
        ("LOCKCHECK_CLIENT_ID", format!("client-{c}")),
        ("LOCKCHECK_WAIT_MS", l.wait_ms.to_string()),
        (
            "LOCKCHECK_RETRY_MS",
            format!("{},{}", l.retry_ms[0], l.retry_ms[1]),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .chain(service)
    .collect()
}

/// The variables a world gives a program: `(name, value)` pairs, written as the protocol names
/// them.
pub(crate) fn vars<const N: usize>(pairs: [(&str, String); N]) -> Vec<(String, String)> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// Starts client `c`'s program with the protocol's environment and `service`'s variables; with
/// a jumpable clock, sets its start offset first.
fn start_client(
    s: &Scenario,
    c: u32,
    service: Vec<(String, String)>,
    fake: Option<&FakeTime>,
    start_offset_ms: i64,
) -> Result<(ClientProgram, ChildStdin, ChildStdout), RealError> {
    let cmd = ClientCommand {
        argv: s.lock.command.clone().unwrap_or_default(),
        cwd: s
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .map(|d| {
                if d.as_os_str().is_empty() {
                    ".".as_ref()
                } else {
                    d
                }
            })
            .map(|d| d.to_path_buf()),
        env: protocol_env(s, c, service),
    };
    let (process, stdin, stdout) = ClientProgram::spawn(&cmd, fake)?;
    if fake == Some(&FakeTime::Jumpable) && start_offset_ms != 0 {
        process.jump_clock(start_offset_ms)?;
    }
    Ok((process, stdin, stdout))
}

/// How each client's program starts: its service's variables, its libfaketime clock (if any)
/// and that clock's start offset.
pub(crate) struct Launch {
    pub(crate) service: Vec<(String, String)>,
    pub(crate) fake: Option<FakeTime>,
    pub(crate) offset_ms: i64,
}

impl Launch {
    /// A program on the clock [`program_clocks`] gave it (start offset, libfaketime setting).
    pub(crate) fn on_clock(
        service: Vec<(String, String)>,
        (offset_ms, fake): (i64, Option<FakeTime>),
    ) -> Launch {
        Launch {
            service,
            fake,
            offset_ms,
        }
    }
}

/// The scenario's client programs, one per client, started and past their `hello`: the run's
/// true time 0 comes after this, so an interpreter's start-up is not part of it.
pub(crate) struct LaunchedPrograms {
    /// `programs[c]`: client `c`'s program, which the nemesis pauses and kills.
    pub(crate) programs: Programs,
    pipes: Vec<Option<(ChildStdin, ChildStdout)>>,
}

impl LaunchedPrograms {
    /// Starts every client's program as `launches[c]` says and waits until each has answered
    /// `hello`. Blocking (forks, then up to [`HELLO_TIMEOUT`](super::client_program::HELLO_TIMEOUT)).
    pub(crate) fn start(
        s: &Scenario,
        launches: Vec<Launch>,
    ) -> Result<LaunchedPrograms, RealError> {
        let mut processes = Vec::new();
        let mut pipes = Vec::new();
        for (c, launch) in launches.into_iter().enumerate() {
            let (process, stdin, stdout) = start_client(
                s,
                c as u32,
                launch.service,
                launch.fake.as_ref(),
                launch.offset_ms,
            )?;
            processes.push(Some(Arc::new(process)));
            pipes.push(Some((stdin, stdout)));
        }
        handshake(&processes, &mut pipes)?;
        Ok(LaunchedPrograms {
            programs: Arc::new(processes),
            pipes,
        })
    }

    /// Client `c`'s lock: its program, driven over the protocol, its `renewed` notices recorded
    /// in `rec`. Once per client.
    pub(crate) fn lock(
        &mut self,
        c: u32,
        config: LockConfig,
        env: RealEnv,
        rec: Recorder,
    ) -> ClientProgramLock<RealEnv> {
        let (stdin, stdout) = self.pipes[c as usize]
            .take()
            .expect("one program per client");
        let process = self.programs[c as usize]
            .clone()
            .expect("one program per client");
        ClientProgramLock::new(process, stdin, stdout, env, config, rec, c)
    }

    /// Kills every program now (each is killed when dropped too): the run is over.
    pub(crate) fn kill_all(programs: &Programs) {
        for p in programs.iter().flatten() {
            p.kill();
        }
    }
}
