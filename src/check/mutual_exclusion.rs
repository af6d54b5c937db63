//! Mutual exclusion: no two critical sections overlap in true time.
//! What it reads, what counts as a violation, what it can never see: `docs/checks.md`, "mutual_exclusion".
//!
//! A critical section runs from a client's `enter` to its `exit`; one still open when the history
//! ends runs to the end. Two sections that merely touch (one exits at the instant the other enters)
//! do not overlap. The sweep sorts sections by entry and keeps the open ones ordered by exit, so it
//! finds every overlapping pair in O(n log n + k) for k pairs.

use super::{CheckResult, Checker, Declaration, Reads};
use crate::check::Verdict;
use crate::history::{believed_lease_ms, fmt_ms, Event, EventKind, History};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One critical section and the acquisition that led to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Section {
    /// The client that held the section.
    pub client: u32,
    /// True time the acquire returned (µs).
    pub acquired_us: u64,
    /// True time the client entered its critical section (µs).
    pub enter_us: u64,
    /// True time of exit (µs); `None` when the history ended inside the section.
    pub exit_us: Option<u64>,
    /// The owner token the lock stored for this grant, to tell which release removed whose entry.
    pub owner: String,
    /// The grant's fencing token, when the lock hands one out.
    pub fencing_token: Option<u64>,
    /// The client's clock when it acquired (ms).
    pub acquired_at_ms: u64,
    /// Where the client believed its lease ended, on its own clock (ms): the evidence sets this
    /// belief beside the overlap, to show whether the holder knew its lease had run out.
    pub valid_until_ms: u64,
    /// Where the holder's last renewal inside the section moved its validity to, on its own
    /// clock (ms): the workload's `renew_every_ms`, or a client program's own `renewed`
    /// message (a library that renews itself). `None`: never renewed.
    pub renewed_until_ms: Option<u64>,
}

impl Section {
    /// Where the holder last believed its lease ended, on its own clock: its last renewal's
    /// end, else the grant's.
    pub fn believed_until_ms(&self) -> u64 {
        self.renewed_until_ms.unwrap_or(self.valid_until_ms)
    }

    fn end(&self, history_end: u64) -> u64 {
        self.exit_us.unwrap_or(history_end)
    }
}

/// Two holders at once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// The section entered first.
    pub first: Section,
    /// The section entered while the first was still open.
    pub second: Section,
    /// True time the overlap starts (µs).
    pub from_us: u64,
    /// True time the overlap ends (µs): when the earlier of the two sections closes.
    pub to_us: u64,
}

/// What the mutual-exclusion check finds in a history: every critical section and every pair that
/// overlapped. The verdict is reached from it, and a report draws it (the HTML timeline's
/// sections and overlap bands), so what the page shows is what was judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holdings {
    /// Every critical section, in order of entry.
    pub sections: Vec<Section>,
    /// Every overlapping pair, ordered by the second section's entry.
    pub overlaps: Vec<Overlap>,
}

impl Holdings {
    /// Reads the critical sections of `history` and finds every overlapping pair.
    pub fn of(history: &History) -> Holdings {
        let sections = sections(history);
        let overlaps = overlaps(&sections, history.end_us());
        Holdings { sections, overlaps }
    }
}

/// Extracts the critical sections of a history, in order of entry.
fn sections(history: &History) -> Vec<Section> {
    // Each client's latest successful acquire, as its event: the owner token is copied once,
    // into the section, not at every acquire (a long run has a hundred thousand).
    let mut last_acquired: BTreeMap<u32, &Event> = BTreeMap::new();
    let mut open: BTreeMap<u32, usize> = BTreeMap::new();
    // A hint, not a bound: a section takes at least an acquire, an enter and an exit event.
    let mut out: Vec<Section> = Vec::with_capacity(history.events.len() / 4);
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match &e.kind {
            EventKind::Acquired { .. } => {
                last_acquired.insert(c, e);
            }
            EventKind::Enter => {
                let acquired = last_acquired.get(&c).map(|a| (a.at_us, &a.kind));
                let (acquired_us, owner, fencing_token, acquired_at_ms, valid_until_ms) =
                    match acquired {
                        Some((
                            at_us,
                            EventKind::Acquired {
                                owner,
                                fencing_token,
                                acquired_at_ms,
                                valid_until_ms,
                            },
                        )) => (
                            at_us,
                            owner.clone(),
                            *fencing_token,
                            *acquired_at_ms,
                            *valid_until_ms,
                        ),
                        _ => (e.at_us, String::new(), None, 0, 0),
                    };
                open.insert(c, out.len());
                out.push(Section {
                    client: c,
                    acquired_us,
                    enter_us: e.at_us,
                    exit_us: None,
                    owner,
                    fencing_token,
                    acquired_at_ms,
                    valid_until_ms,
                    renewed_until_ms: None,
                });
            }
            EventKind::Renewed { valid_until_ms } => {
                if let Some(&i) = open.get(&c) {
                    out[i].renewed_until_ms = Some(*valid_until_ms);
                }
            }
            // A crashed client is no longer a holder: its section ends with it.
            EventKind::Exit | EventKind::Crashed { .. } => {
                if let Some(i) = open.remove(&c) {
                    out[i].exit_us = Some(e.at_us);
                }
            }
            _ => {}
        }
    }
    out
}

/// Every overlapping pair of sections, ordered by the second section's entry.
fn overlaps(sections: &[Section], history_end: u64) -> Vec<Overlap> {
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| (sections[i].enter_us, i));
    // Open sections keyed by (end, index): the earliest-ending is first, so the ones that ended
    // at or before the next entry are popped from the front.
    let mut active: BTreeSet<(u64, usize)> = BTreeSet::new();
    let mut found = Vec::new();
    for &i in &order {
        let s = &sections[i];
        while let Some(&(end, j)) = active.first() {
            if end <= s.enter_us {
                active.remove(&(end, j));
            } else {
                break;
            }
        }
        for &(end, j) in &active {
            let first = &sections[j];
            found.push(Overlap {
                first: first.clone(),
                second: s.clone(),
                from_us: s.enter_us,
                to_us: end.min(s.end(history_end)),
            });
        }
        let end = s.end(history_end);
        if end > s.enter_us {
            active.insert((end, i));
        }
    }
    found
}

/// The mutual-exclusion checker.
pub struct MutualExclusion;

impl MutualExclusion {
    /// Its entry in `check::CHECKERS`: every critical section against every other; no parameter.
    pub const DECLARATION: Declaration = Declaration {
        name: "mutual_exclusion",
        label: "ME",
        reads: Reads::History,
        runs_only: None,
        build: |_| Some(Box::new(MutualExclusion)),
    };
}

impl Checker for MutualExclusion {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        let Holdings {
            sections: secs,
            overlaps: found,
        } = Holdings::of(history);
        let verdict = if found.is_empty() {
            Verdict::Safe
        } else {
            Verdict::Violation
        };
        let summary = match found.first() {
            None => format!(
                "{} critical sections, none overlapping in true time",
                secs.len()
            ),
            Some(o) => format!(
                "{} overlapping pair(s) of critical sections; first: client-{} and client-{} both held the lock from {} ms to {} ms",
                found.len(),
                o.first.client,
                o.second.client,
                fmt_ms(o.from_us),
                fmt_ms(o.to_us)
            ),
        };
        let mut timeline = Vec::new();
        if let Some(o) = found.first() {
            for s in [&o.first, &o.second] {
                // The holder's belief, placed on the true timeline as if its clock ran true: the
                // validity its last renewal moved to, when it renewed.
                let believed = believed_lease_ms(s.acquired_at_ms, s.believed_until_ms());
                let belief = match (believed, s.renewed_until_ms) {
                    (None, _) => "no lease: it holds until it releases".to_string(),
                    (Some(lease_ms), None) => format!(
                        "believed lease {lease_ms} ms, until ~{} ms",
                        fmt_ms(s.acquired_us.saturating_add(lease_ms.saturating_mul(1000)))
                    ),
                    (Some(lease_ms), Some(_)) => format!(
                        "believed lease {} ms, renewed to {lease_ms} ms after its grant, until ~{} ms",
                        s.valid_until_ms.saturating_sub(s.acquired_at_ms),
                        fmt_ms(s.acquired_us.saturating_add(lease_ms.saturating_mul(1000)))
                    ),
                };
                timeline.push(format!(
                    "client-{}  acquired {:>9} ms  entered {:>9} ms  exited {:>11}  {belief}",
                    s.client,
                    fmt_ms(s.acquired_us),
                    fmt_ms(s.enter_us),
                    s.exit_us
                        .map(|x| format!("{} ms", fmt_ms(x)))
                        .unwrap_or_else(|| "(never)".into()),
                ));
            }
            timeline.push(format!(
                "overlap  {} ms .. {} ms ({} ms with two holders)",
                fmt_ms(o.from_us),
                fmt_ms(o.to_us),
                fmt_ms(o.to_us - o.from_us)
            ));
        }
        let shown: Vec<&Overlap> = found.iter().take(10).collect();
        CheckResult {
            verdict,
            summary,
            evidence: serde_json::json!({
                "sections": secs.len(),
                "overlapping_pairs": found.len(),
                "overlaps": shown,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Event;

    fn ev(at_us: u64, c: u32, kind: EventKind) -> Event {
        Event {
            at_us,
            node: format!("client-{c}").into(),
            kind,
        }
    }

    fn history(sections: &[(u32, u64, Option<u64>)]) -> History {
        let mut events = Vec::new();
        for &(c, enter, exit) in sections {
            events.push(ev(enter, c, EventKind::Enter));
            if let Some(x) = exit {
                events.push(ev(x, c, EventKind::Exit));
            }
        }
        events.sort_by_key(|e| e.at_us);
        History { events }
    }

    fn pairs(h: &History) -> Vec<(u32, u32, u64, u64)> {
        let s = sections(h);
        overlaps(&s, h.end_us())
            .into_iter()
            .map(|o| (o.first.client, o.second.client, o.from_us, o.to_us))
            .collect()
    }

    #[test]
    fn disjoint_sections_are_safe() {
        let h = history(&[(0, 0, Some(10)), (1, 20, Some(30)), (0, 40, Some(50))]);
        assert!(pairs(&h).is_empty());
        assert_eq!(MutualExclusion.check(&h).verdict, Verdict::Safe);
    }

    #[test]
    fn touching_sections_do_not_overlap() {
        let h = history(&[(0, 0, Some(10)), (1, 10, Some(20))]);
        assert!(pairs(&h).is_empty());
    }

    #[test]
    fn overlap_is_found_with_its_window() {
        let h = history(&[(0, 0, Some(100)), (1, 60, Some(200))]);
        assert_eq!(pairs(&h), vec![(0, 1, 60, 100)]);
        let r = MutualExclusion.check(&h);
        assert_eq!(r.verdict, Verdict::Violation);
        assert_eq!(r.evidence["overlapping_pairs"], 1);
    }

    #[test]
    fn unfinished_section_runs_to_the_end() {
        // client 0 never exits (paused forever); client 1 enters later.
        let h = history(&[(0, 0, None), (1, 50, Some(80))]);
        assert_eq!(pairs(&h), vec![(0, 1, 50, 80)]);
    }

    #[test]
    fn a_crashed_client_stops_holding_when_it_dies() {
        // client 0 dies inside its section at 30; client 1 enters at 50: no second holder.
        let mut h = history(&[(0, 0, None), (1, 50, Some(80))]);
        h.events.insert(
            1,
            ev(
                30,
                0,
                EventKind::Crashed {
                    point: "acquired".into(),
                },
            ),
        );
        assert_eq!(pairs(&h), vec![]);
        assert_eq!(sections(&h)[0].exit_us, Some(30));
    }

    #[test]
    fn an_instantaneous_section_inside_another_overlaps() {
        let h = history(&[(0, 0, Some(100)), (1, 40, Some(40))]);
        assert_eq!(pairs(&h), vec![(0, 1, 40, 40)]);
    }

    #[test]
    fn many_holders_give_every_pair() {
        // Three sections all overlapping each other, plus one disjoint one.
        let h = history(&[
            (0, 0, Some(100)),
            (1, 10, Some(90)),
            (2, 20, Some(30)),
            (3, 200, Some(300)),
        ]);
        let mut p = pairs(&h);
        p.sort();
        assert_eq!(p, vec![(0, 1, 10, 90), (0, 2, 20, 30), (1, 2, 20, 30)]);
    }

    #[test]
    fn sweep_matches_brute_force_on_random_histories() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..200 {
            let n = rng.gen_range(0..12);
            let mut secs = Vec::new();
            for c in 0..n {
                let a = rng.gen_range(0..100u64);
                let b = a + rng.gen_range(1..30u64);
                secs.push((c as u32, a, Some(b)));
            }
            let h = history(&secs);
            let mut fast: Vec<(u32, u32)> = pairs(&h)
                .into_iter()
                .map(|(a, b, _, _)| (a.min(b), a.max(b)))
                .collect();
            fast.sort();
            let mut slow = Vec::new();
            for (i, x) in secs.iter().enumerate() {
                for y in &secs[i + 1..] {
                    let (xa, xb) = (x.1, x.2.unwrap());
                    let (ya, yb) = (y.1, y.2.unwrap());
                    if xa < yb && ya < xb {
                        slow.push((x.0.min(y.0), x.0.max(y.0)));
                    }
                }
            }
            slow.sort();
            assert_eq!(fast, slow, "{secs:?}");
        }
    }
}
