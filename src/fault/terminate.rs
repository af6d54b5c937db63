//! A session ended by the server (`kind = "terminate"`): an operator's `pg_terminate_backend`,
//! or anything else that ends one client's server session while the client lives on (an idle
//! timeout, a pool's connection lifetime, a failover script that kills old backends).
//!
//! Why it is a fault of its own: a lock kept by a server session (a PostgreSQL advisory lock)
//! is freed the moment the session ends, but its client learns of it only on its next
//! statement. Meanwhile another client acquires, and the first still believes it holds
//! (JasperFx/wolverine#2602). No other family does this: a client crash ends the client too,
//! a partition ends nothing until keepalive.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::draw::{Cast, SLOTS};
use super::pause::ClientRef;
use super::{FaultKind, KeyError, Nemesis, Occasion, Refused, Table, Written};

/// `kind = "terminate"`, with `client` (a client index, or `"holder"`, the default).
pub const WRITTEN: Written = Written {
    name: "terminate",
    keys: &["client"],
    parse,
};

fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
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
    Ok(FaultKind::Terminate { client })
}

pub(super) fn write(client: &ClientRef, t: &mut toml_edit::Table) {
    t["client"] = match client {
        ClientRef::Holder => toml_edit::value("holder"),
        ClientRef::Index(i) => toml_edit::value(i64::from(*i)),
    };
}

pub(super) fn label(at: &str) -> String {
    format!("session terminated{at}")
}

/// How explore draws a termination: of the holder's session or of a client slot's.
pub fn draw() -> BoxedStrategy<FaultKind> {
    prop::option::of(0..SLOTS)
        .prop_map(|client| FaultKind::Terminate {
            client: client.map_or(ClientRef::Holder, ClientRef::Index),
        })
        .boxed()
}

pub(super) fn place(victim: &ClientRef, cast: &Cast<'_>) -> ClientRef {
    super::pause::place(victim, cast)
}

pub(super) fn fire<N: Nemesis + ?Sized>(
    n: &N,
    at: &Occasion<'_>,
    victim: &ClientRef,
) -> Result<(), Refused> {
    n.end_session(at, victim)
}
