//! `explore`'s progress, phase by phase: a bar (on a terminal) or plain lines (in a log) for the
//! search's cases, then for the confirming runs, the shrink's steps and the settling runs, each
//! named (`progress: explore x: shrink: 12/32 steps ...`). Shrinking is most of a long explore's
//! time (694 s of a 724 s real one), so a bar that ends at the violating case leaves a log silent
//! for minutes.

use crate::explore::Phase;
use crate::progress::{bar, Progress};
use std::cell::RefCell;

/// The bar of the phase in hand.
pub struct Phases {
    /// What is explored ("explore redis-py-lock-no-faults").
    what: String,
    current: RefCell<Option<(&'static str, Progress)>>,
}

impl Phases {
    /// Progress of the explore named `what`; nothing is drawn before the first phase reports.
    pub fn new(what: String) -> Phases {
        Phases {
            what,
            current: RefCell::new(None),
        }
    }

    /// Moves the bar of `phase`'s kind, starting a new one when the phase changed.
    pub fn report(&self, phase: Phase) {
        let mut current = self.current.borrow_mut();
        if current.as_ref().map(|(n, _)| *n) != Some(phase.name()) {
            if let Some((_, old)) = current.take() {
                old.finish();
            }
            let (_, total, unit) = phase.position();
            let what = format!("{}: {}", self.what, phase.name());
            *current = Some((phase.name(), bar(total, unit, &what)));
        }
        let (done, _, _) = phase.position();
        let label = match phase {
            Phase::Search { .. } => "violations",
            _ => "kept",
        };
        if let Some((_, p)) = current.as_ref() {
            p.tick_counting(done, phase.count().map(|c| (label, c)));
        }
    }

    /// Removes the last bar (plain lines stay in the log).
    pub fn finish(&self) {
        if let Some((_, p)) = self.current.borrow_mut().take() {
            p.finish();
        }
    }
}
