//! The lock kind that is not a lock of lockcheck's: a client program, in any language, that real
//! mode starts and drives over the client protocol. Every other kind lockcheck ships is
//! registered by its backend (`backend::<service>::locks`), in `backend::BACKENDS` order.

use super::LockKind;

/// The client-program kind's name; `process` is its older name, which scenario files still use.
pub const CLIENT_PROGRAM: &str = "client-program";

/// The client-program kind ([`LockKind::client_program`]).
pub fn client_program() -> LockKind {
    LockKind::client_program(
        CLIENT_PROGRAM,
        &["process"],
        "your own client program (any language) over the JSON-lines client protocol, on Redis, or on ZooKeeper / etcd when the scenario has a [zookeeper] / [etcd] table; real mode only (docs/client-protocol.md)",
    )
}

/// Every kind lockcheck ships, in `lockcheck list` order.
#[deprecated(note = "use `LockKind::builtins()`")]
pub fn kinds() -> &'static [LockKind] {
    LockKind::builtins()
}
