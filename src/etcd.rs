//! etcd errors as a lock sees them: the server's refusals (named as etcd names them, so the
//! simulated and the real service can be compared error for error) apart from a lost answer.
//!
//! [`EtcdError`] sits below the locks because `lock::LockError::Etcd` carries it. The rest of
//! the etcd seam (the client trait `EtcdClient`, its requests and answers) is the etcd backend's,
//! in its folder (`backend::etcd::seam`); its old paths here still resolve.

/// Paths that moved into `crate::backend::etcd::seam`, kept for users' code (see `lib.rs`).
pub use crate::__moved::etcd::*;

/// A failed etcd call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// `etcdserver: requested lease not found`: the lease expired or was revoked (a put with it,
    /// a keep-alive or a revoke of it).
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// The server refused the request for another reason (its message as etcd words it).
    #[error("etcdserver: {0}")]
    Rejected(String),
    /// The server answered that it cannot say whether the request was applied:
    /// `etcdserver: leader changed`, `no leader`, `request timed out` (and its `, possibly due to
    /// ...` forms). etcd gives these gRPC's `Unavailable` code (`api/v3rpc/rpctypes/error.go`):
    /// a proposal in flight when its leader stepped down may still be committed by the next
    /// one, so the outcome is as unknown as a lost answer's.
    #[error("etcdserver: {0}")]
    Unavailable(String),
    /// No answer: the connection failed or the request timed out. The request may still have
    /// been applied (a partitioned member forwards it later, a leader committed it before it
    /// died): what it did is unknown to the client.
    #[error("no answer: {0}")]
    NoAnswer(String),
}

impl EtcdError {
    /// Whether the outcome is unknown to the client (as opposed to a refusal).
    pub fn is_unknown(&self) -> bool {
        matches!(self, EtcdError::NoAnswer(_) | EtcdError::Unavailable(_))
    }
}

/// The error's path before the etcd seam moved into its backend's folder.
pub mod error {
    pub use super::EtcdError;
}
