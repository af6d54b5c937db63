//! A script's name in the cache: the lowercase sha1 hex of its body.
//!
//! Why a file of its own: the script cache (`host.rs`), the run state (the running script's
//! sha shows in its error texts), `redis.sha1hex` (`api.rs`) and the engine's native path all
//! name scripts this way; it depends on nothing else in the host.

/// Lowercase sha1 hex of a script body: the script's name in the cache.
pub type Sha = [u8; 40];

pub fn sha1hex(body: &[u8]) -> Sha {
    let hex = sha1_smol::Sha1::from(body).digest().to_string();
    let mut out = [0u8; 40];
    out.copy_from_slice(hex.as_bytes());
    out
}
