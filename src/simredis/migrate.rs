//! What `MIGRATE` takes from a node's keyspace in a simulated Redis Cluster: the keys a slot
//! holds, and each key as the commands that rebuild it on another node, its value and the time
//! it has left to live, which is what `DUMP` and `RESTORE` carry between real nodes.
//! Commands rather than a serialized value, so the target replicates what it restored to its
//! own replicas the way it replicates any write.

use super::keyspace::{Data, Keyspace};

/// The live keys at `now` that `keep` accepts, in byte order (the keyspace's map is never
/// iterated in its own order: determinism).
pub(super) fn live_keys_where(
    keys: &Keyspace,
    now: i64,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = keys
        .key_names()
        .filter(|k| keep(k) && !keys.is_expired(k, now))
        .map(<[u8]>::to_vec)
        .collect();
    out.sort();
    out
}

/// The commands that rebuild `key` as it is now on another node: one that writes its value,
/// then `PEXPIRE` with the time it has left if it expires; `None` if it is absent or expired.
pub(super) fn rebuild_commands(keys: &Keyspace, key: &[u8], now: i64) -> Option<Vec<Vec<Vec<u8>>>> {
    if keys.is_expired(key, now) {
        return None;
    }
    let word = |w: &str| w.as_bytes().to_vec();
    let mut write = vec![Vec::new(), key.to_vec()];
    match keys.get(key)? {
        Data::Str(v) => {
            write[0] = word("SET");
            write.push(v.clone());
        }
        Data::Hash(h) => {
            write[0] = word("HSET");
            for (f, v) in h.iter() {
                write.push(f.to_vec());
                write.push(v.to_vec());
            }
        }
        Data::List(l) => {
            write[0] = word("RPUSH");
            write.extend(l.iter().cloned());
        }
        Data::Set(s) => {
            write[0] = word("SADD");
            write.extend(s.iter().cloned());
        }
        Data::ZSet(z) => {
            write[0] = word("ZADD");
            for (member, score) in z.iter() {
                write.push(score.to_string().into_bytes());
                write.push(member.to_vec());
            }
        }
    }
    let mut cmds = vec![write];
    // As `RESTORE` takes it: the time left, which the target counts in its own clock.
    if let Some(at) = keys.expire_at(key) {
        let left = (at - now).max(1);
        cmds.push(vec![
            word("PEXPIRE"),
            key.to_vec(),
            left.to_string().into_bytes(),
        ]);
    }
    Some(cmds)
}
