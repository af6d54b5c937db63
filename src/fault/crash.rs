//! Crashes (`kind = "crash"`): a server dies and restarts empty after `restart_after_ms` (no
//! persistence, so every lease it held is gone), or a client process dies at a named point and
//! never comes back, holding whatever it held.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::draw::SLOTS;
use super::table::quoted;
use super::{FaultKind, KeyError, Nemesis, Occasion, Refused, Table, Trigger, Written};

/// `kind = "crash"`: `node` names a server or `client-<c>`.
pub const WRITTEN: Written = Written {
    name: "crash",
    keys: &["node", "restart_after_ms", "client"],
    parse,
};

/// A server crashes and restarts empty; a client crashes for good, at a named point.
fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let f = t.raw;
    let node = t.required_node()?;
    let Some(c) = node.strip_prefix("client-") else {
        return Ok(FaultKind::Crash {
            restart_after_ms: *t.required("restart_after_ms", &f.restart_after_ms)?,
            node,
        });
    };
    if let Some(r) = &f.restart_after_ms {
        return Err(t.err(
            r.span(),
            "a crashed client does not restart: `restart_after_ms` is for Redis nodes",
        ));
    }
    if matches!(t.trigger, Trigger::At(_)) {
        return Err(t.err(
            t.span.clone(),
            format!(
                "a client crash fires at a named point: use `on = ...` with one of {}",
                quoted(t.setting.points)
            ),
        ));
    }
    Ok(FaultKind::ClientCrash {
        client: c.parse().expect("client names are client-<index>"),
    })
}

pub(super) fn write_server(node: &str, restart_after_ms: u64, t: &mut toml_edit::Table) {
    t["node"] = toml_edit::value(node);
    t["restart_after_ms"] = toml_edit::value(restart_after_ms as i64);
}

pub(super) fn write_client(client: u32, t: &mut toml_edit::Table) {
    t["node"] = toml_edit::value(format!("client-{client}"));
}

/// A server crash's label: an etcd member's (its crash is a leader failover when it leads) or a
/// Redis node's.
pub(super) fn server_label(node: &str) -> String {
    if node.starts_with("etcd-") {
        "etcd member crash".to_string()
    } else {
        "Redis crash".to_string()
    }
}

pub(super) fn client_label(at: &str) -> String {
    if at.is_empty() {
        "client crash while holding".into()
    } else {
        format!("client crash{at}")
    }
}

/// How explore draws a server crash: one of `servers`, down for `restart_ms`.
pub fn draw_server(servers: &[String], restart_ms: [u64; 2]) -> BoxedStrategy<FaultKind> {
    let servers = servers.to_vec();
    (0..servers.len() as u32, restart_ms[0]..=restart_ms[1])
        .prop_map(move |(n, restart_after_ms)| FaultKind::Crash {
            node: servers[n as usize].clone(),
            restart_after_ms,
        })
        .boxed()
}

/// How explore draws a client crash: a client slot.
pub fn draw_client() -> BoxedStrategy<FaultKind> {
    (0..SLOTS)
        .prop_map(|client| FaultKind::ClientCrash { client })
        .boxed()
}

pub(super) fn fire_server<N: Nemesis + ?Sized>(
    n: &N,
    node: &str,
    restart_after_ms: u64,
) -> Result<(), Refused> {
    n.crash_server(node, restart_after_ms)
}

pub(super) fn fire_client<N: Nemesis + ?Sized>(
    n: &N,
    at: &Occasion<'_>,
    client: u32,
) -> Result<(), Refused> {
    n.crash_client(at, client)
}
