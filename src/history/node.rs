//! Who reported an event: `client-<c>`, `nemesis`, or a server's name.
//!
//! A history of a long run holds millions of events, and every checker asks each one "which
//! client?". A node is therefore its name shared among all its events (no allocation per event)
//! with the client index read once, when the name is first seen, not parsed again by every pass.

use serde::{Serialize, Serializer};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A node's name, shared by its events, and its client index when it is a client: one pointer
/// in each event (8 bytes, where a `String` took 24 and an allocation).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Node(Arc<Named>);

/// What a [`Node`] points to.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Named {
    name: Box<str>,
    client: Option<u32>,
}

impl Node {
    /// The node called `name` (`client-3` is client 3).
    pub fn new(name: &str) -> Node {
        Node(Arc::new(Named {
            name: name.into(),
            client: client_index(name),
        }))
    }

    /// Its name, as reports show it.
    pub fn as_str(&self) -> &str {
        &self.0.name
    }

    /// The client index, for a client (`client-<c>`).
    pub fn client(&self) -> Option<u32> {
        self.0.client
    }
}

/// `c` of a name `client-<c>` (digits only, as the run assembly names clients).
fn client_index(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("client-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl Deref for Node {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl From<&str> for Node {
    fn from(name: &str) -> Node {
        Node::new(name)
    }
}

impl From<String> for Node {
    fn from(name: String) -> Node {
        Node::new(&name)
    }
}

impl PartialEq<str> for Node {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Node {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The nodes a recorder has seen, so each name is made once per run: clients by index, the rest
/// (the nemesis, a few servers) by a short scan.
#[derive(Debug, Default)]
pub(super) struct Names {
    clients: Vec<Option<Node>>,
    others: Vec<Node>,
}

impl Names {
    /// The node called `name`, made the first time it is asked for.
    pub(super) fn get(&mut self, name: &str) -> Node {
        if let Some(c) = client_index(name) {
            let c = c as usize;
            if c < 1 << 16 {
                if self.clients.len() <= c {
                    self.clients.resize(c + 1, None);
                }
                return self.clients[c]
                    .get_or_insert_with(|| Node::new(name))
                    .clone();
            }
            return Node::new(name);
        }
        if let Some(n) = self.others.iter().find(|n| n.as_str() == name) {
            return n.clone();
        }
        let n = Node::new(name);
        self.others.push(n.clone());
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_known_by_index_and_the_rest_by_name() {
        assert_eq!(Node::new("client-12").client(), Some(12));
        assert_eq!(Node::new("client-").client(), None);
        assert_eq!(Node::new("client-1x").client(), None);
        assert_eq!(Node::new("nemesis").client(), None);
        assert_eq!(Node::new("redis-0").as_str(), "redis-0");
        let mut names = Names::default();
        let a = names.get("client-3");
        let b = names.get("client-3");
        assert!(Arc::ptr_eq(&a.0, &b.0), "one name per node");
        let n = names.get("nemesis");
        assert!(Arc::ptr_eq(&n.0, &names.get("nemesis").0));
        assert_eq!(std::mem::size_of::<Node>(), 8);
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"client-3\"");
        assert!(a == "client-3");
    }
}
