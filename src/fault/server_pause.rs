//! A server process stopped (`kind = "pause"` with `node`): `SIGSTOP`, then `SIGCONT` — a VM
//! freeze, a debugger, a stalled disk. It answers nothing and its own timers stand still while
//! the clients' run on. Only the MySQL locks' server has a model of what a stopped server does.

use super::{FaultKind, KeyError, Nemesis, Refused, Table};
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use toml::Spanned;

/// `kind = "pause"` with `node`: checked here, reached through [`super::pause`].
pub(super) fn parse(t: &Table<'_>, node: &Spanned<String>) -> Result<FaultKind, KeyError> {
    if let Some(c) = &t.raw.client {
        return Err(t.err(
            c.span(),
            "a pause names either `client` (a client process) or `node` (a server), not both",
        ));
    }
    let name = t.node(node)?;
    if name.starts_with("client-") {
        return Err(t.err(
            node.span(),
            format!(
                "a client is paused with `client = {}`; `node` names a server",
                name.trim_start_matches("client-")
            ),
        ));
    }
    if !t.setting.pauses_servers {
        return Err(t.err(
            node.span(),
            format!(
                "a server pause is not modelled on {}; pause a client with `client`, or cut \
                 `{name}` off with a `partition`",
                t.setting.service
            ),
        ));
    }
    Ok(FaultKind::ServerPause {
        node: name,
        for_ms: *t.required("for_ms", &t.raw.for_ms)?,
    })
}

/// The server pause's keys, as the parser reads them back.
pub(super) fn write(node: &str, for_ms: u64, t: &mut toml_edit::Table) {
    t["node"] = toml_edit::value(node);
    t["for_ms"] = toml_edit::value(for_ms as i64);
}

pub(super) fn label(at: &str) -> String {
    format!("server pause{at}")
}

/// How explore draws a server pause: of one of `servers`, lasting `ms`.
pub fn draw(servers: &[String], ms: [u64; 2]) -> BoxedStrategy<FaultKind> {
    let servers = servers.to_vec();
    (0..servers.len() as u32, ms[0]..=ms[1])
        .prop_map(move |(n, for_ms)| FaultKind::ServerPause {
            node: servers[n as usize].clone(),
            for_ms,
        })
        .boxed()
}

pub(super) fn fire<N: Nemesis + ?Sized>(n: &N, node: &str, for_ms: u64) -> Result<(), Refused> {
    n.pause_server(node, for_ms)
}
