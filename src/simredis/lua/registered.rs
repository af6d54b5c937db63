//! What a FUNCTION library registers: each function's name, description, flags and Lua
//! callback ([`Registered`]), and the rule names follow ([`valid_name`]).
//!
//! Why a file of its own: the load-time API fills these in (`library.rs`), the run state holds
//! the ones registered so far while a library loads (`state.rs`), the host returns them and
//! calls them (`host.rs`), and FUNCTION LIST/FCALL outside the host read them
//! (`simredis/functions.rs`). A plain data file lets all of them import it.

use mlua::Function;

/// Function flags by bit, in the order FUNCTION LIST prints them (Redis's scripts_flags_def).
pub const FLAG_NAMES: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// The flags a function was registered with (`flags={'no-writes', ...}`): `no-writes` is the
/// one the simulation acts on (FCALL_RO and replicas); the others are kept for FUNCTION LIST.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionFlags(pub u8);

impl FunctionFlags {
    /// Declared `no-writes`: FCALL_RO may run it, a replica may run it, its writes are refused.
    pub fn no_writes(self) -> bool {
        self.0 & 1 != 0
    }

    /// The flag names, in FUNCTION LIST's order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        FLAG_NAMES
            .iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| *n)
    }
}

/// One function a library body registered: what FCALL calls and FUNCTION LIST shows.
#[derive(Clone, Debug)]
pub struct Registered {
    /// The name as registered (FCALL finds it case-insensitively; errors show this spelling).
    pub name: String,
    /// `description=` of the table form, if given.
    pub description: Option<Vec<u8>>,
    /// `flags=` of the table form.
    pub flags: FunctionFlags,
    /// The Lua function itself.
    pub callback: Function,
}

/// Redis's functionsVerifyName: letters, digits and `_`, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}
