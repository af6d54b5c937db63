//! A client's stop-the-world pause (`kind = "pause"` with `client`): a GC pause, a stalled
//! process. Every task of the client stands still, its timers too, while what it already sent
//! arrives on time. Written with `node` instead, a pause stops a server ([`super::server_pause`]).

use crate::history::Recorder;
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::draw::{Cast, SLOTS};

use super::{FaultKind, KeyError, Nemesis, Occasion, Refused, Table, Trigger, Written};

/// Which client a client fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRef {
    /// The client whose acquire triggered the fault; for a fault at a fixed time, the client
    /// holding the lock then (none: the pause is skipped and the history says so).
    Holder,
    /// The client with this index (0-based).
    Index(u32),
}

impl ClientRef {
    /// The client a pause hits, in every world: the named one, the client whose step triggered
    /// it, or whoever holds the lock now (`None`: nobody does, so the pause is skipped).
    pub fn victim(&self, holder: Option<u32>, rec: &Recorder) -> Option<u32> {
        match (self, holder) {
            (ClientRef::Index(i), _) => Some(*i),
            (ClientRef::Holder, Some(h)) => Some(h),
            (ClientRef::Holder, None) => rec.snapshot().current_holder(),
        }
    }
}

/// `kind = "pause"`: a client's, or with `node` a server's.
pub const WRITTEN: Written = Written {
    name: "pause",
    keys: &["client", "node", "for_ms"],
    parse,
};

fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    if let Some(node) = &t.raw.node {
        return super::server_pause::parse(t, node);
    }
    let clients = t.setting.clients;
    let client = match &t.raw.client {
        None => ClientRef::Holder,
        Some(c) => match c.get_ref() {
            toml::Value::String(s) if s == "holder" => ClientRef::Holder,
            toml::Value::Integer(i) if *i >= 0 && (*i as u64) < clients as u64 => {
                ClientRef::Index(*i as u32)
            }
            other => {
                return Err(t.err(
                    c.span(),
                    format!(
                        "`client` must be \"holder\" or a client index 0..{clients}, got {other}"
                    ),
                ))
            }
        },
    };
    Ok(FaultKind::Pause {
        client,
        for_ms: *t.required("for_ms", &t.raw.for_ms)?,
    })
}

/// The pause's keys, as the parser reads them back.
pub(super) fn write(client: &ClientRef, for_ms: u64, t: &mut toml_edit::Table) {
    t["client"] = match client {
        ClientRef::Holder => toml_edit::value("holder"),
        ClientRef::Index(i) => toml_edit::value(i64::from(*i)),
    };
    t["for_ms"] = toml_edit::value(for_ms as i64);
}

/// "GC pause > lease", or a client held back from the start.
pub(super) fn label(
    client: &ClientRef,
    for_ms: u64,
    trigger: &Trigger,
    at: &str,
    lease_ms: u64,
) -> String {
    if matches!(client, ClientRef::Index(_)) && *trigger == Trigger::At(0) {
        return "a client starts late".to_string();
    }
    let who = match client {
        ClientRef::Holder => "",
        ClientRef::Index(_) => " of a client",
    };
    let vs = if for_ms > lease_ms {
        "> lease"
    } else {
        "< lease"
    };
    format!("GC pause{who} {vs}{at}")
}

/// Whether a pause of `victim`, set off by `client`, is for it: one that names another client
/// waits for that one.
pub(super) fn is_for(victim: &ClientRef, client: u32) -> bool {
    match victim {
        ClientRef::Index(i) => *i == client,
        ClientRef::Holder => true,
    }
}

/// Whether a pause of `victim`, set off by `client`, stops that very client.
pub(super) fn stops(victim: &ClientRef, client: u32) -> bool {
    match victim {
        ClientRef::Holder => true,
        ClientRef::Index(i) => *i == client,
    }
}

/// Why a pause at a point of the lock's own without `client` is ambiguous.
pub(super) fn ambiguous_at(point: &str, clients: u32) -> String {
    format!(
        "`on = \"{point}\"` with no `client`: the pause hits the first of the {clients} clients to reach this point of the lock's own, which may not hold the lock; write `client = N` to aim it at one client, or `client = \"holder\"` to keep this meaning"
    )
}

/// How explore draws a pause: of the holder or of a client slot, lasting `ms`.
pub fn draw(ms: [u64; 2]) -> BoxedStrategy<FaultKind> {
    (prop::option::of(0..SLOTS), ms[0]..=ms[1])
        .prop_map(|(client, for_ms)| FaultKind::Pause {
            client: client.map_or(ClientRef::Holder, ClientRef::Index),
            for_ms,
        })
        .boxed()
}

/// A drawn pause's victim on the case's clients.
pub(super) fn place(victim: &ClientRef, cast: &Cast<'_>) -> ClientRef {
    match victim {
        ClientRef::Holder => ClientRef::Holder,
        ClientRef::Index(slot) => ClientRef::Index(cast.client(*slot)),
    }
}

pub(super) fn fire<N: Nemesis + ?Sized>(
    n: &N,
    at: &Occasion<'_>,
    victim: &ClientRef,
    for_ms: u64,
) -> Result<(), Refused> {
    n.pause_client(at, victim, for_ms)
}
