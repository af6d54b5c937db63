//! What a running script can reach ([`RunState`]): the engine's data and the unit's context,
//! lent for the duration of one script, and the per-script settings Redis keeps beside them.
//!
//! Why a file of its own: the state lives in the Lua state's app data, where the Rust functions
//! scripts call (`redis.call` in `api.rs`, `math.random` in `random.rs`, the error handler in
//! `errors.rs`, `redis.register_function` in `library.rs`) find it, and the host (`host.rs`)
//! swaps the engine's data in and out of it. All of them import it; it imports none of them.

use super::registered::Registered;
use super::sha::Sha;
use crate::simredis::context::{Ctx, Db};
use crate::simredis::role::Role;

/// What a running script can reach. Lives in the Lua state's app data; the engine swaps its
/// real data in for the duration of one script.
pub(super) struct RunState {
    pub(super) db: Db,
    pub(super) ctx: Ctx,
    pub(super) role: Role,
    pub(super) sha: Sha,
    /// Redis's rand48 state behind `math.random`. Measured on 7.0.15: one sequence per
    /// server process, starting from rand48's static initial state and NOT reseeded per
    /// script (effects replication made that unnecessary), so it is kept per engine.
    pub(super) rand48: u64,
    /// Millions of Lua instructions the current script has executed (see `INSTRUCTION_BUDGET`
    /// in `errors.rs`).
    pub(super) mega_instructions: u32,
    /// The running script declared `#!lua flags=no-writes`.
    pub(super) no_writes: bool,
    /// The protocol the running script chose with `redis.setresp` (2 at every start): under 3,
    /// a command's null reaches Lua as nil, and a returned boolean replies 1 or 0.
    pub(super) resp: u8,
    /// The running function's name (FCALL): error texts name it where a script shows its sha.
    pub(super) function: Option<String>,
    /// Functions registered so far by the library being loaded (FUNCTION LOAD); `None` when
    /// no load is in progress, where `redis.register_function` is refused.
    pub(super) loading: Option<Vec<Registered>>,
}
