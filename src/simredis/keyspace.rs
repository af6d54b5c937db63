//! The keyspace: values, and absolute expiry times kept in an ordered index.
//!
//! Expiry times are absolute unix milliseconds of *this node's* clock, as in Redis. A key with
//! expiry `t` is logically expired when `now > t` (strictly: Redis's `keyIsExpired`), so a key
//! set with `PX 100` at 1000 is still visible at 1100 and gone at 1101.
//!
//! Values live in a hash map (a lookup is the hot path of every command) that is never
//! iterated; everything that is iterated is ordered: the expiry index is a `BTreeSet`, so the
//! active expiry sweep visits keys in a fixed order and costs O(expired) instead of a scan.
//! Determinism is a requirement of the simulation, not a nicety. The map's hasher has no random
//! keys either, so even its memory layout is the same from run to run.

use super::sorted_set::ZSet;
use std::collections::{BTreeSet, HashMap};

/// FxHash: no random keys, so deterministic (unlike `RandomState`), and cheaper than SipHash on
/// the lookups every command makes.
type FixedState = rustc_hash::FxBuildHasher;

/// A stored value. Only the types the lock designs need exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Str(Vec<u8>),
    Hash(Hash),
    /// A list (queues of waiters in lock libraries), head first.
    List(std::collections::VecDeque<Vec<u8>>),
    /// A set, kept ordered so every reply that lists it is deterministic.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set (the Redisson article's fair lock keeps its waiters' timeouts in one).
    ZSet(ZSet),
}

impl Data {
    pub fn type_name(&self) -> &'static str {
        match self {
            Data::Str(_) => "string",
            Data::Hash(_) => "hash",
            Data::List(_) => "list",
            Data::Set(_) => "set",
            Data::ZSet(_) => "zset",
        }
    }
}

/// A hash that keeps insertion order, as Redis's small-hash encoding (listpack) does: HGETALL
/// on a real server lists fields in the order they were first set, and a differential test
/// compares that order. (Real Redis switches to an unordered table past 128 fields; the lock
/// hashes have one field per holder.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hash {
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Hash {
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_slice())
    }

    /// Sets a field; returns true if the field is new.
    pub fn set(&mut self, field: &[u8], value: Vec<u8>) -> bool {
        match self.fields.iter_mut().find(|(f, _)| f == field) {
            Some((_, v)) => {
                *v = value;
                false
            }
            None => {
                self.fields.push((field.to_vec(), value));
                true
            }
        }
    }

    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.fields.iter().position(|(f, _)| f == field) {
            Some(i) => {
                self.fields.remove(i);
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|(f, v)| (f.as_slice(), v.as_slice()))
    }
}

#[derive(Clone, Debug)]
struct Entry {
    data: Data,
    expire_at: Option<i64>,
}

/// The key → value map plus the expiry index `(expire_at, key)`.
#[derive(Clone, Debug, Default)]
pub struct Keyspace {
    map: HashMap<Vec<u8>, Entry, FixedState>,
    expires: BTreeSet<(i64, Vec<u8>)>,
    /// Bumped by every call that may change the data (see [`Keyspace::version`]).
    version: u64,
}

impl Keyspace {
    /// A number that changes whenever the data may have changed: every method that can write
    /// (including [`Keyspace::get_mut`], whose caller may write through it) bumps it, so an
    /// unchanged version means unchanged data (the deployment skips re-reading the lock entry
    /// after a command that wrote nothing).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every stored key's name, in the map's order (callers that list them sort them).
    pub fn key_names(&self) -> impl Iterator<Item = &[u8]> {
        self.map.keys().map(Vec::as_slice)
    }

    /// The raw value, ignoring expiry (callers decide what expiry means for them).
    pub fn get(&self, key: &[u8]) -> Option<&Data> {
        self.map.get(key).map(|e| &e.data)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Data> {
        self.version = self.version.wrapping_add(1);
        self.map.get_mut(key).map(|e| &mut e.data)
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.map.contains_key(key)
    }

    /// The absolute expiry of a stored key, or None if it has none (or does not exist).
    pub fn expire_at(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).and_then(|e| e.expire_at)
    }

    /// The value of a key that is stored and not logically expired at `now`, in one lookup (the
    /// deployment reads the lock entry this way around every simulated command).
    pub fn get_live(&self, key: &[u8], now: i64) -> Option<&Data> {
        self.map
            .get(key)
            .filter(|e| !matches!(e.expire_at, Some(t) if now > t))
            .map(|e| &e.data)
    }

    /// Whether a stored key is logically expired at `now` (Redis: `now > when`).
    pub fn is_expired(&self, key: &[u8], now: i64) -> bool {
        matches!(self.expire_at(key), Some(t) if now > t)
    }

    /// Stores a value. Like Redis's `setKey`, this clears any expiry unless `keep_ttl`.
    pub fn set(&mut self, key: &[u8], data: Data, keep_ttl: bool) {
        self.version = self.version.wrapping_add(1);
        match self.map.get_mut(key) {
            Some(e) => {
                e.data = data;
                if !keep_ttl {
                    if let Some(t) = e.expire_at.take() {
                        self.expires.remove(&(t, key.to_vec()));
                    }
                }
            }
            None => {
                self.map.insert(
                    key.to_vec(),
                    Entry {
                        data,
                        expire_at: None,
                    },
                );
            }
        }
    }

    /// Stores a value with an absolute expiry (SET ... PX/PXAT), replacing any previous one.
    pub fn set_with_expire(&mut self, key: &[u8], data: Data, at: i64) {
        self.version = self.version.wrapping_add(1);
        let old = match self.map.get_mut(key) {
            Some(e) => {
                e.data = data;
                e.expire_at.replace(at)
            }
            None => {
                self.map.insert(
                    key.to_vec(),
                    Entry {
                        data,
                        expire_at: Some(at),
                    },
                );
                None
            }
        };
        match old {
            Some(t) if t == at => {}
            Some(t) => {
                self.expires.remove(&(t, key.to_vec()));
                self.expires.insert((at, key.to_vec()));
            }
            None => {
                self.expires.insert((at, key.to_vec()));
            }
        }
    }

    /// Removes a key; returns whether it existed.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.version = self.version.wrapping_add(1);
        match self.map.remove(key) {
            Some(e) => {
                if let Some(t) = e.expire_at {
                    self.expires.remove(&(t, key.to_vec()));
                }
                true
            }
            None => false,
        }
    }

    /// Sets the absolute expiry of an existing key (no-op for a missing key).
    pub fn set_expire(&mut self, key: &[u8], at: i64) {
        self.version = self.version.wrapping_add(1);
        if let Some(e) = self.map.get_mut(key) {
            if let Some(old) = e.expire_at.replace(at) {
                if old == at {
                    return;
                }
                self.expires.remove(&(old, key.to_vec()));
            }
            self.expires.insert((at, key.to_vec()));
        }
    }

    /// Removes the expiry; returns whether there was one.
    pub fn persist(&mut self, key: &[u8]) -> bool {
        self.version = self.version.wrapping_add(1);
        match self.map.get_mut(key).and_then(|e| e.expire_at.take()) {
            Some(t) => {
                self.expires.remove(&(t, key.to_vec()));
                true
            }
            None => false,
        }
    }

    /// Number of stored keys, including logically expired ones not yet deleted (this is what
    /// Redis's DBSIZE counts).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Number of stored keys that are logically expired at `now`.
    pub fn expired_count(&self, now: i64) -> usize {
        self.expires.range(..(now, Vec::new())).count()
    }

    /// Keys logically expired at `now`, in expiry order then key order.
    pub fn expired_keys(&self, now: i64) -> Vec<Vec<u8>> {
        self.expires
            .range(..(now, Vec::new()))
            .map(|(_, k)| k.clone())
            .collect()
    }

    pub fn clear(&mut self) {
        self.version = self.version.wrapping_add(1);
        self.map.clear();
        self.expires.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_index_follows_the_map() {
        let mut ks = Keyspace::default();
        ks.set(b"a", Data::Str(b"1".to_vec()), false);
        ks.set_expire(b"a", 100);
        ks.set(b"b", Data::Str(b"1".to_vec()), false);
        ks.set_expire(b"b", 50);
        assert!(!ks.is_expired(b"a", 100));
        assert!(ks.is_expired(b"a", 101));
        assert_eq!(ks.expired_keys(101), vec![b"b".to_vec(), b"a".to_vec()]);
        assert_eq!(ks.expired_keys(100), vec![b"b".to_vec()]);
        ks.set(b"a", Data::Str(b"2".to_vec()), true);
        assert_eq!(ks.expire_at(b"a"), Some(100));
        ks.set(b"a", Data::Str(b"3".to_vec()), false);
        assert_eq!(ks.expire_at(b"a"), None);
        assert_eq!(ks.expired_keys(1000), vec![b"b".to_vec()]);
        assert!(ks.remove(b"b"));
        assert_eq!(ks.expired_count(1000), 0);
    }
}
