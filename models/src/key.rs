//! The lock key as a Redis server keeps it, shared by the models whose
//! lock is a plain string key (`SET lock <holder> NX PX <ttl>`): `lease`,
//! `failover`, `redlock` and `fencing`. (Redisson's lock is a hash with a
//! hold count; its model keeps its own key.)
//!
//! The expiry is absolute, on the clock of the server that keeps the key:
//! Redis computes `now + ttl` when it sets the key, replicates the result
//! as `PXAT` (docs/design.md), and each server drops the key once its own
//! clock reaches that time. A clock that jumps or drifts therefore moves
//! the key's end, which is what the models' clock faults exploit.

/// A lock key on one server: who set it and when it expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The client whose `SET` created the key (the value a
    /// compare-and-delete release compares with).
    pub holder: u8,
    /// Expiry on the clock of the server that keeps the key (`PXAT`).
    pub expires: u8,
}

/// Drop `key` if the server's clock, reading `now`, has reached its expiry,
/// as Redis does: an expired key is gone for every later command.
pub fn expire(key: &mut Option<Key>, now: u8) {
    if matches!(key, Some(k) if now >= k.expires) {
        *key = None;
    }
}

/// Delete `key` if `client` holds it: the compare-and-delete release
/// script. Returns whether it deleted (a master then replicates the `DEL`).
pub fn release(key: &mut Option<Key>, client: u8) -> bool {
    let ours = matches!(key, Some(k) if k.holder == client);
    if ours {
        *key = None;
    }
    ours
}

/// A key's fact: `key client-<holder> until <expiry>`, or `no key`.
pub fn fact(key: Option<Key>) -> String {
    match key {
        Some(k) => format!("key client-{} until {}", k.holder, k.expires),
        None => "no key".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_expires_on_the_servers_clock_and_only_its_holder_releases_it() {
        let mut k = Some(Key {
            holder: 1,
            expires: 4,
        });
        expire(&mut k, 3);
        assert_eq!(fact(k), "key client-1 until 4");
        assert!(!release(&mut k, 0));
        assert!(k.is_some());
        assert!(release(&mut k, 1));
        assert_eq!(fact(k), "no key");
        let mut k = Some(Key {
            holder: 0,
            expires: 4,
        });
        expire(&mut k, 4);
        assert_eq!(k, None);
    }
}
