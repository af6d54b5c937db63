//! The safety and liveness properties every lock model checks, in one
//! place so that "mutual exclusion" means the same thing in each model.
//!
//! * `mutual_exclusion`: at most one client is in its critical section; a
//!   paused client that believes it holds the lock is in it (the GC-pause
//!   argument of the Redlock debate: Kleppmann, "How to do distributed
//!   locking", 2016).
//! * `no_stale_write`: the protected [`Storage`] never accepts a write from
//!   an older lease after one from a newer lease. "Older" is the true order
//!   of grants, which the models keep as ghost state; fencing tokens are
//!   what a real storage sees instead.
//! * `handover`: a `sometimes` property, a second lease is granted, which
//!   catches a vacuous model (one where the lock can never change hands
//!   would satisfy the safety properties trivially).

use crate::lock_model::{LockModel, PropInfo};
use crate::report::{Expectation, PropertyKind};
use stateright::Property;

/// The resource the lock protects, as the models see it: the newest lease
/// whose write it accepted and, for storages that check fencing tokens,
/// the highest token. `stale` is the ghost flag `no_stale_write` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Storage {
    /// Highest fencing token accepted; 0 in models without tokens.
    pub max_token: u8,
    /// Newest lease (grant number) whose write was accepted; 0: none.
    pub max_grant: u8,
    /// A write from an older lease was accepted after one from a newer.
    pub stale: bool,
}

impl Storage {
    /// Accept a write from lease `grant` carrying fencing token `token`
    /// (0 without tokens); a grant older than the newest seen is stale.
    pub fn accept(&mut self, grant: u8, token: u8) {
        self.stale |= grant < self.max_grant;
        self.max_grant = self.max_grant.max(grant);
        self.max_token = self.max_token.max(token);
    }

    /// The suffix a state's storage fact ends with once a stale write was
    /// accepted, so that a trace shows where the property broke.
    pub fn stale_note(&self) -> &'static str {
        if self.stale {
            "; ACCEPTED A STALE WRITE"
        } else {
            ""
        }
    }

    /// The storage fact of models without tokens; none before the first write.
    pub(crate) fn fact(&self) -> Option<(String, String)> {
        (self.max_grant > 0).then(|| {
            (
                "storage".to_string(),
                format!(
                    "newest accepted write from lease #{}{}",
                    self.max_grant,
                    self.stale_note()
                ),
            )
        })
    }
}

/// What the shared properties read from a model's state.
pub(crate) trait LockState {
    /// Clients in their critical section (a paused holder counts).
    fn holders(&self) -> usize;
    fn storage(&self) -> &Storage;
    /// Leases granted so far (true order, ghost state).
    fn grants(&self) -> u8;
}

/// Implement [`LockState`] for a model state with `clients`, `storage` and
/// `grants` fields; `$in_critical_section` says whether one client is in
/// its critical section (each model's phases say it differently).
macro_rules! lock_state {
    ($state:ty, $in_critical_section:expr) => {
        impl $crate::properties::LockState for $state {
            fn holders(&self) -> usize {
                self.clients
                    .iter()
                    .filter(|c| $in_critical_section(*c))
                    .count()
            }
            fn storage(&self) -> &$crate::properties::Storage {
                &self.storage
            }
            fn grants(&self) -> u8 {
                self.grants
            }
        }
    };
}
pub(crate) use lock_state;

/// How `mutual_exclusion` is described when a model has no pauses to count.
pub(crate) const MUTEX_ABOUT: &str = "at most one client is in its critical section";
/// How `mutual_exclusion` is described when a paused holder counts.
pub(crate) const MUTEX_ABOUT_PAUSED: &str =
    "at most one client is in its critical section (a paused holder counts)";

/// `mutual_exclusion`, `no_stale_write` and `handover`, in that order;
/// `mutex_about` is the model's one-sentence meaning of mutual exclusion.
pub(crate) fn standard<M>(mutex_about: &'static str) -> Vec<(PropInfo, Property<M>)>
where
    M: LockModel,
    M::State: LockState,
{
    vec![
        (
            PropInfo {
                name: "mutual_exclusion",
                kind: PropertyKind::Always,
                about: mutex_about,
            },
            Property::always("mutual_exclusion", |_, s: &M::State| s.holders() <= 1),
        ),
        (
            PropInfo {
                name: "no_stale_write",
                kind: PropertyKind::Always,
                about: "the storage never accepts a write from an older lease after one from a newer lease",
            },
            Property::always("no_stale_write", |_, s: &M::State| !s.storage().stale),
        ),
        (
            PropInfo {
                name: "handover",
                kind: PropertyKind::Sometimes,
                about: "a second lease is granted (the lock is not stuck with its first holder)",
            },
            Property::sometimes("handover", |_, s: &M::State| s.grants() >= 2),
        ),
    ]
}

/// The verdict `handover` should reach: a second lease needs a second
/// client or a second cycle of the one client, and every model leaves
/// enough time for the first lease to end.
pub(crate) fn handover_expected(clients: u8, cycles: u8) -> Expectation {
    if clients >= 2 || cycles >= 2 {
        Expectation::Holds
    } else {
        Expectation::Violated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_lease_writing_after_a_newer_one_is_stale() {
        let mut st = Storage::default();
        assert_eq!(st.fact(), None);
        st.accept(1, 5);
        st.accept(2, 7);
        assert!(!st.stale);
        assert_eq!(st.stale_note(), "");
        st.accept(1, 5);
        assert!(st.stale);
        assert_eq!((st.max_grant, st.max_token), (2, 7));
        assert_eq!(
            st.fact().unwrap().1,
            "newest accepted write from lease #2; ACCEPTED A STALE WRITE"
        );
    }

    #[test]
    fn every_model_lists_the_shared_properties_in_its_own_order() {
        let names = |m: &str| -> Vec<&'static str> {
            crate::model_info(m)
                .unwrap()
                .properties
                .iter()
                .map(|p| p.0)
                .collect()
        };
        let std = ["mutual_exclusion", "no_stale_write", "handover"];
        for m in ["lease", "failover", "redlock"] {
            assert_eq!(names(m), std, "{m}");
        }
        assert_eq!(
            names("redisson"),
            [
                "mutual_exclusion",
                "no_stale_write",
                "handover",
                "reentered"
            ]
        );
        assert_eq!(
            names("fencing"),
            [
                "no_stale_write",
                "tokens_increase",
                "mutual_exclusion",
                "handover"
            ]
        );
    }
}
