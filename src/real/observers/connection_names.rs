//! Which client each connection to a server belongs to, by the address it connects from: how the
//! witness attributes a command it reads in a `MONITOR` stream (`[0 127.0.0.1:40312] "del" ...`)
//! to a client that never names its connections.
//!
//! lockcheck's own clients name theirs (`CLIENT SETNAME client-<c>`, which `MONITOR` shows). A
//! client program in another language does not, and should not have to: it reaches each master
//! through its own forwarder ([`crate::real::RouteProxy`]), one per client and master group, and
//! the forwarder registers the local address of every connection it opens to a server here before
//! it forwards a byte. A command read from that address is then the client's, whatever the
//! program's library does, so the servers' truth about who deleted what does not depend on what
//! the program says.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Connection address (`127.0.0.1:port`, as `MONITOR` prints it) -> client index. Shared by
/// the forwarders (which write) and the witness (which reads); cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ConnectionNames(Arc<Mutex<BTreeMap<String, u32>>>);

impl ConnectionNames {
    /// Records that connections from `address` are client `client`'s. An address the system
    /// reuses after a connection closed is re-registered by the forwarder that opens it next.
    pub fn register(&self, address: String, client: u32) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(address, client);
    }

    /// The client whose connection comes from `address`, if a forwarder registered it.
    pub fn client(&self, address: &str) -> Option<u32> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(address)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::ConnectionNames;

    #[test]
    fn a_registered_address_names_its_client_and_a_reused_one_its_latest() {
        let names = ConnectionNames::default();
        let shared = names.clone();
        names.register("127.0.0.1:40000".into(), 2);
        assert_eq!(shared.client("127.0.0.1:40000"), Some(2));
        assert_eq!(shared.client("127.0.0.1:40001"), None);
        names.register("127.0.0.1:40000".into(), 0);
        assert_eq!(shared.client("127.0.0.1:40000"), Some(0));
    }
}
