//! A key's hash slot, as every Redis Cluster node computes it (`keyHashSlot` in Redis's
//! `cluster.c`; the cluster spec's "Keys distribution model"): CRC16 of the key, modulo 16384.
//!
//! The CRC is the XMODEM variant (polynomial 0x1021, initial value 0, no reflection): the spec
//! gives its check value, `CRC16("123456789") = 0x31C3`. Only the low 14 bits are used, hence
//! 16384 slots.
//!
//! **Hash tags** let a lock keep several keys in one slot (a lock key and its fencing counter, a
//! Redisson lock and its channel): if the key has a `{`, and a `}` somewhere after that first `{`,
//! and at least one byte between them, only the bytes between that first `{` and the first `}`
//! after it are hashed. `{}` (nothing between) means the whole key is hashed, and so does a
//! key whose first `{` has no `}` after it. Only the first `{` counts: `{{a}}` hashes `{a`, and
//! `{}{a}` hashes the whole key (its first tag is empty).

/// The number of hash slots (the spec: "16384 hash slots"), the real deployment's constant.
pub use crate::backend::redis::engine::cluster::topology::SLOTS;

/// CRC16-XMODEM, the table built at compile time (the spec's reference code uses a table too).
const TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-XMODEM of `bytes` (polynomial 0x1021, initial value 0).
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// The part of `key` that is hashed: the hash tag if it has a non-empty one, else all of it.
pub fn hashed_part(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &key[open + 1..open + 1 + len],
        _ => key,
    }
}

/// The hash slot of `key`: `CRC16(hashed part) mod 16384`, as `CLUSTER KEYSLOT` answers.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) & (SLOTS - 1)
}

/// `key` placed in master `m`'s initial slots of `masters`: `{<n>}key` with the smallest
/// number `n` whose slot is in that share. How Redlock's instances are put on the masters of
/// one cluster (one key per master, as users who try it do with hash tags).
pub fn placed_on_master(key: &str, m: usize, masters: usize) -> String {
    let share = super::topology::initial_slots(m, masters);
    (0u32..)
        .map(|n| format!("{{{n}}}{key}"))
        .find(|k| share.contains(key_slot(k.as_bytes())))
        .expect("every share of the slots has a decimal tag that hashes into it")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placed_key_lands_in_its_masters_share() {
        for masters in 3..=5 {
            for m in 0..masters {
                let k = placed_on_master("lock", m, masters);
                assert!(k.ends_with("}lock"), "{k}");
                let share = crate::backend::redis::engine::cluster::initial_slots(m, masters);
                assert!(share.contains(key_slot(k.as_bytes())), "{k} on master {m}");
            }
        }
    }

    #[test]
    fn the_crc_is_xmodem_with_the_specs_check_value() {
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn known_slots_from_the_redis_documentation() {
        // CLUSTER KEYSLOT's documentation: somekey 11058, foo{hash_tag} and bar{hash_tag} 2515;
        // the cluster tutorial's foo is 12182.
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"foo{hash_tag}"), 2515);
        assert_eq!(key_slot(b"bar{hash_tag}"), 2515);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 0x31C3);
    }

    #[test]
    fn a_hash_tag_hashes_only_what_is_between_the_first_braces() {
        assert_eq!(hashed_part(b"lock:{order-17}"), b"order-17");
        assert_eq!(key_slot(b"lock:{order-17}"), key_slot(b"order-17"));
        assert_eq!(key_slot(b"fence:{order-17}"), key_slot(b"order-17"));
        // The spec's examples: {user1000}.following and {user1000}.followers share a slot;
        // foo{}{bar} hashes whole; foo{{bar}}zap hashes "{bar"; foo{bar}{zap} hashes "bar".
        assert_eq!(hashed_part(b"{user1000}.following"), b"user1000");
        assert_eq!(hashed_part(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hashed_part(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hashed_part(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hashed_part(b"{}"), b"{}");
        assert_eq!(hashed_part(b"no-close{abc"), b"no-close{abc");
        assert_eq!(
            hashed_part(b"}{x}"),
            b"x",
            "a closing brace before the first opening one is ordinary"
        );
    }

    #[test]
    fn every_slot_is_below_16384() {
        for i in 0..5000u32 {
            assert!(key_slot(format!("key-{i}").as_bytes()) < SLOTS);
        }
    }
}
