//! The scenario side of the MySQL locks: the `[database]` table, its keys and their defaults.
//! What the MySQL backend reads off it (its server's node name, a statement's timeout) is in its
//! folder (`backend/mysql/table.rs`).

use serde::Deserialize;

pub use crate::__moved::scenario::database::*;

/// `[database]`: the server the MySQL locks talk to.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSpec {
    /// One-way latency between a client and the server, uniform in this range (ms; simulation).
    #[serde(default = "default_latency_ms")]
    pub latency_ms: [u64; 2],
    /// A statement that gets no answer within this time fails and its connection is dropped
    /// (default: the lock wait timeout plus 2 s, so a waiting `FOR UPDATE` hears 1205 first).
    pub request_timeout_ms: Option<u64>,
    /// The server's `wait_timeout` (s): an idle connection is closed, and its transaction rolled
    /// back, after this long. A partitioned client's session dies only then. MySQL's default is
    /// 28800 (8 hours).
    #[serde(default = "default_wait_timeout_s")]
    pub wait_timeout_s: u64,
}

fn default_latency_ms() -> [u64; 2] {
    [1, 2]
}
fn default_wait_timeout_s() -> u64 {
    28_800
}

impl Default for DatabaseSpec {
    fn default() -> Self {
        DatabaseSpec {
            latency_ms: default_latency_ms(),
            request_timeout_ms: None,
            wait_timeout_s: default_wait_timeout_s(),
        }
    }
}
