//! The bound on what pauses add up to in one case (`[explore] max_total_pause_ms`).
//!
//! A lease survives one pause shorter than it, but not two back-to-back ones that together
//! outlast it: with a pause bound alone, a "must find nothing" search over a 600 ms lease and
//! pauses under 390 ms found a 348 ms pause followed by a 229 ms one. So a space that is meant
//! to be safe bounds the sum. The bound is applied to the drawn schedule in its order: each pause
//! is cut to what the budget has left, and one with nothing left is dropped. Proptest's shrinking
//! still works on the drawn values; a shrunk case is mapped through the same cut.

use super::strategy::When;
use crate::fault::FaultKind;

/// `faults` with every pause (a client's or the server's) cut so that together they last at
/// most `budget` ms; a pause the budget has nothing left for is dropped.
pub fn within(faults: Vec<(When, FaultKind)>, budget: u64) -> Vec<(When, FaultKind)> {
    let mut left = budget;
    faults
        .into_iter()
        .filter_map(|(when, mut drawn)| {
            if let Some(for_ms) = drawn.pause_ms_mut() {
                if left == 0 {
                    return None;
                }
                *for_ms = (*for_ms).min(left);
                left -= *for_ms;
            }
            Some((when, drawn))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause(for_ms: u64) -> (When, FaultKind) {
        (
            When::At(0),
            FaultKind::Pause {
                client: crate::fault::ClientRef::Holder,
                for_ms,
            },
        )
    }

    fn lengths(faults: &[(When, FaultKind)]) -> Vec<u64> {
        faults
            .iter()
            .map(|(_, d)| d.clone().pause_ms_mut().map_or(0, |ms| *ms))
            .collect()
    }

    #[test]
    fn pauses_are_cut_to_what_the_budget_has_left_and_the_rest_dropped() {
        // The unsafe pair the Redisson search found: 348 + 229 > 390.
        let cut = within(vec![pause(348), pause(229), pause(5)], 390);
        assert_eq!(lengths(&cut), vec![348, 42]);
        let crash = (When::At(1), FaultKind::ClientCrash { client: 0 });
        let cut = within(vec![pause(400), crash.clone(), pause(1)], 390);
        assert_eq!(cut, vec![pause(390), crash]);
        // No bound: nothing changes.
        let all = vec![pause(348), pause(229)];
        assert_eq!(within(all.clone(), u64::MAX), all);
    }
}
