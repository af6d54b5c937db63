//! One `[[faults]]` table as written, and what a family's parser reads it with: the key's value,
//! the node names checked against the topology, and an error that points at the key.

use serde::Deserialize;
use std::ops::Range;
use toml::Spanned;

use super::Trigger;

/// The fault table as written: a flat set of optional keys, checked per kind after parsing so
/// errors can point at the exact key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct RawFault {
    pub kind: Spanned<String>,
    pub on: Option<Spanned<String>>,
    pub after_ms: Option<Spanned<u64>>,
    pub at_ms: Option<Spanned<u64>>,
    pub client: Option<Spanned<toml::Value>>,
    pub master: Option<Spanned<u32>>,
    pub for_ms: Option<Spanned<u64>>,
    pub nodes: Option<Spanned<Vec<String>>>,
    pub from: Option<Spanned<Vec<String>>>,
    pub direction: Option<Spanned<String>>,
    pub node: Option<Spanned<String>>,
    pub by_ms: Option<Spanned<i64>>,
    pub ppm: Option<Spanned<i64>>,
    pub restart_after_ms: Option<Spanned<u64>>,
}

impl RawFault {
    /// Every key besides `kind` and the trigger's that is present, with where it is.
    pub fn present(&self) -> [(&'static str, Option<Range<usize>>); 10] {
        [
            ("client", self.client.as_ref().map(|s| s.span())),
            ("master", self.master.as_ref().map(|s| s.span())),
            ("for_ms", self.for_ms.as_ref().map(|s| s.span())),
            ("nodes", self.nodes.as_ref().map(|s| s.span())),
            ("from", self.from.as_ref().map(|s| s.span())),
            ("direction", self.direction.as_ref().map(|s| s.span())),
            ("node", self.node.as_ref().map(|s| s.span())),
            ("by_ms", self.by_ms.as_ref().map(|s| s.span())),
            ("ppm", self.ppm.as_ref().map(|s| s.span())),
            (
                "restart_after_ms",
                self.restart_after_ms.as_ref().map(|s| s.span()),
            ),
        ]
    }
}

/// A bad key of a fault table: where it is in the file (a byte range) and what is wrong. The
/// scenario parser turns it into `file:line:col`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    /// Where in the file.
    pub span: Range<usize>,
    /// What is wrong and what the valid choices are.
    pub message: String,
}

/// How a `failover` fault is shaped on a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverShape {
    /// A master group's replica is promoted: `master = <group>` picks which.
    MasterGroup,
    /// The leader of an ensemble dies and the others elect a new one: there is one leader, so
    /// `master` is 0 or left out.
    Leader,
    /// The service has no failover.
    None,
}

/// What of the scenario a fault's keys are checked against.
pub struct Setting<'a> {
    /// Every node name of the topology.
    pub nodes: &'a [String],
    /// How many clients run.
    pub clients: u32,
    /// Redis master groups.
    pub masters: u32,
    /// Replicas per master.
    pub replicas: u32,
    /// `[redis] sentinels`, as read. No fault family reads it: a backend checks its own nodes
    /// in `BackendDecl::check_fault`.
    #[deprecated(
        since = "0.1.0",
        note = "no fault family reads it; a backend checks its nodes in `BackendDecl::check_fault`"
    )]
    pub sentinels: u32,
    /// The service the clients talk to, by name, for messages.
    pub service: &'static str,
    /// Whether its servers can be paused (`kind = "pause"` with `node`).
    pub pauses_servers: bool,
    /// How a `failover` is shaped on it (a master group's replica promoted, or an ensemble's
    /// leader replaced).
    pub failover: FailoverShape,
    /// The named points a fault may fire at.
    pub points: &'a [&'static str],
}

/// One `[[faults]]` table being converted by its family, with what its errors need to point into
/// the file.
pub struct Table<'a> {
    /// The keys as written.
    pub raw: &'a RawFault,
    /// The whole table, for errors about a key that is missing.
    pub span: Range<usize>,
    /// Its `kind`.
    pub kind: &'a str,
    /// The topology and workload its nodes and clients are checked against.
    pub setting: &'a Setting<'a>,
    /// When it fires (already checked).
    pub trigger: &'a Trigger,
}

impl Table<'_> {
    /// The error `message` at `span`.
    pub fn err(&self, span: Range<usize>, message: impl Into<String>) -> KeyError {
        KeyError {
            span,
            message: message.into(),
        }
    }

    /// The error for a key this kind needs and the table lacks.
    pub fn need(&self, key: &str) -> KeyError {
        self.err(
            self.span.clone(),
            format!("fault `{}` needs `{key}`", self.kind),
        )
    }

    /// A required key's value.
    pub fn required<'v, T>(&self, key: &str, v: &'v Option<Spanned<T>>) -> Result<&'v T, KeyError> {
        v.as_ref()
            .map(|s| s.get_ref())
            .ok_or_else(|| self.need(key))
    }

    /// A node name, checked against the scenario's topology.
    pub fn node(&self, name: &Spanned<String>) -> Result<String, KeyError> {
        let nodes = self.setting.nodes;
        if nodes.iter().any(|n| n == name.get_ref()) {
            Ok(name.get_ref().clone())
        } else {
            Err(self.err(
                name.span(),
                format!(
                    "unknown node `{}`; this scenario's nodes are {}",
                    name.get_ref(),
                    quoted(&nodes.iter().map(String::as_str).collect::<Vec<_>>())
                ),
            ))
        }
    }

    /// The required `node` key, checked against the topology.
    pub fn required_node(&self) -> Result<String, KeyError> {
        self.node(self.raw.node.as_ref().ok_or_else(|| self.need("node"))?)
    }

    /// A list of node names, each checked against the topology.
    pub fn node_list(&self, v: &Spanned<Vec<String>>) -> Result<Vec<String>, KeyError> {
        v.get_ref()
            .iter()
            .map(|n| self.node(&Spanned::new(v.span(), n.clone())))
            .collect()
    }
}

/// `a`, `b`, `c`: the choices an error lists.
pub fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
