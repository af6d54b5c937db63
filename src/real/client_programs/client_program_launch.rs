//! Real mode's `kind = "client-program"` clients: one program per client, its environment (the client
//! protocol's `LOCKCHECK_*` variables) and its clock (libfaketime).
//!
//! Each client program reaches every master group through its own [`crate::real::RouteProxy`], so the
//! failover, restart and partition recipes that re-route lockcheck's own connections re-route the
//! program's connections too, without the program knowing.

use super::client_program::{ClientCommand, ClientProgram};
use crate::real::nemesis::recipes::{ClockSetting, ClockSettings};
use crate::real::servers::faketime::FakeTime;
use crate::real::RealError;
use crate::scenario::Scenario;

/// How one process (a master or a client program) runs under libfaketime, from its start
/// `offset_ms`, its drift and whether its clock jumps later; `None` for a true clock.
/// libfaketime either reads a jumpable offset from a file or runs at a rate, not both.
pub(in crate::real) fn fake_time(
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
pub(in crate::real) fn client_clocks(
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

/// The client protocol's environment for client `c`, whose program reaches the master groups
/// at `urls` (its proxies, in group order), and `extra` (a Sentinel run's `LOCKCHECK_SENTINELS`).
pub(in crate::real) fn protocol_env(
    s: &Scenario,
    c: u32,
    urls: &[String],
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let l = &s.lock;
    [
        (
            "LOCKCHECK_PROTOCOL",
            crate::real::client_programs::client_program_lock::PROTOCOL_VERSION.to_string(),
        ),
        ("LOCKCHECK_REDIS_URLS", urls.join(",")),
        ("LOCKCHECK_CLIENT_ID", format!("client-{c}")),
        ("LOCKCHECK_KEY", l.key.clone()),
        ("LOCKCHECK_TTL_MS", l.lease_ms().to_string()),
        ("LOCKCHECK_WAIT_MS", l.wait_ms.to_string()),
        (
            "LOCKCHECK_RETRY_MS",
            format!("{},{}", l.retry_ms[0], l.retry_ms[1]),
        ),
        (
            "LOCKCHECK_REQUEST_TIMEOUT_MS",
            s.redis.request_timeout_ms.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .chain(extra.iter().cloned())
    .collect()
}

/// Starts client `c`'s program; with a jumpable clock, sets its start offset first.
pub(in crate::real) fn start_client(
    s: &Scenario,
    c: u32,
    urls: &[String],
    extra_env: &[(String, String)],
    fake: Option<&FakeTime>,
    start_offset_ms: i64,
) -> Result<
    (
        ClientProgram,
        std::process::ChildStdin,
        std::process::ChildStdout,
    ),
    RealError,
> {
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
        env: protocol_env(s, c, urls, extra_env),
    };
    let (process, stdin, stdout) = ClientProgram::spawn(&cmd, fake)?;
    if fake == Some(&FakeTime::Jumpable) && start_offset_ms != 0 {
        process.jump_clock(start_offset_ms)?;
    }
    Ok((process, stdin, stdout))
}
