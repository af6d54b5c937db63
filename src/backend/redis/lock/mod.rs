//! The Redis locks, one file each, written against a Redis connection
//! (`redis::aio::ConnectionLike`) and an [`Env`](crate::env::Env): the naive `SETNX` + `EXPIRE`
//! lock, `SET NX PX` with a compare-and-delete release (and its `SET EX NX` + `DEL` variant),
//! the Lettuce-style reentrant lock, Redisson's `RLock`, Redlock, and the fenced lock. Their Lua
//! scripts are in `scripts/`; the lease scripts every lease lock shares (and a lock of the user's
//! own may use) stay with the `Lock` trait (`lock::lease`), below the simulated engine that runs
//! them natively. Their `[lock]` options are `lock::redis_options`; their registration, with
//! their runs in both worlds, is the backend's `locks()` (`backend::redis`).

pub mod fenced;
pub mod lettuce_reentrant;
pub mod naive_setnx_expire;
pub mod redisson;
pub mod redlock;
pub mod set_ex_nx_del;
pub mod set_nx_px;
pub mod synced_slaves;

pub use fenced::Fenced;
pub use lettuce_reentrant::LettuceReentrant;
pub use naive_setnx_expire::NaiveSetnxExpire;
pub use redisson::Redisson;
pub use redlock::Redlock;
pub use set_ex_nx_del::SetExNxDel;
pub use set_nx_px::SetNxPx;
