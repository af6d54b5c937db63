//! The liveness definition of `docs/checks.md`, checked against a reference simple enough to be
//! obviously right: generated clients (waits that end in a grant, a give-up, a crash or the run's
//! end; holds that end in a release or a crash; pauses that a resume, a crash or the run's end
//! ends) are turned into a history, and the checker's unavailable time of each free period must
//! equal the reference's, which walks true time one microsecond at a time: it splits time into
//! free periods (a grant or a held instant closes one), finds each client's first and last instant
//! inside an acquire call (and not paused) in each, and counts the instants of the period at which
//! some client is between its first and last one and not paused.

use super::stretches;
use crate::check::{acquired, ev, grants};
use crate::history::{Event, EventKind, History};
use proptest::prelude::*;

/// How one wait ends.
#[derive(Clone, Copy, Debug)]
enum WaitEnd {
    /// Granted, held this long, then released (`false`) or crashed (`true`).
    Granted(u64, bool),
    /// Gave up.
    GaveUp,
    /// Crashed while waiting.
    Crashed,
}

/// One client's life: cycles of (think, wait, how the wait ended), and its pauses (start, length).
#[derive(Clone, Debug)]
struct Life {
    cycles: Vec<(u64, u64, WaitEnd)>,
    pauses: Vec<(u64, u64)>,
    /// Whether its last wait is still open when the run ends.
    still_waiting: bool,
}

fn life() -> impl Strategy<Value = Life> {
    let end = prop_oneof![
        (0u64..30, any::<bool>()).prop_map(|(h, c)| WaitEnd::Granted(h, c)),
        Just(WaitEnd::GaveUp),
        Just(WaitEnd::Crashed),
    ];
    (
        proptest::collection::vec((0u64..20, 0u64..30, end), 0..4),
        proptest::collection::vec((0u64..150, 1u64..40), 0..3),
        any::<bool>(),
    )
        .prop_map(|(cycles, pauses, still_waiting)| Life {
            cycles,
            pauses,
            still_waiting,
        })
}

/// What the reference knows of one client, in half-open intervals of true time.
#[derive(Default)]
struct Truth {
    waits: Vec<(u64, u64)>,
    holds: Vec<(u64, u64)>,
    pauses: Vec<(u64, u64)>,
    grants: Vec<u64>,
}

/// The history of `lives`, and what the reference knows of each client.
fn build(lives: &[Life], tail: u64) -> (History, Vec<Truth>) {
    let mut events: Vec<(u64, usize, Event)> = Vec::new();
    let mut truths = Vec::new();
    let mut crashes = Vec::new();
    let push = |events: &mut Vec<(u64, usize, Event)>, at: u64, e: Event| {
        let n = events.len();
        events.push((at, n, e));
    };
    let mut open_at_end: Vec<(usize, u64)> = Vec::new();
    for (c, l) in lives.iter().enumerate() {
        let node = format!("client-{c}");
        let mut t = 0;
        let mut truth = Truth::default();
        let mut crashed = None;
        for &(think, wait, end) in &l.cycles {
            t += think;
            push(&mut events, t, ev(t, &node, EventKind::AcquireStart));
            let s = t;
            t += wait;
            truth.waits.push((s, t));
            match end {
                WaitEnd::Granted(hold, crash) => {
                    push(&mut events, t, ev(t, &node, acquired(None)));
                    truth.grants.push(t);
                    let a = t;
                    t += hold;
                    truth.holds.push((a, t));
                    if crash {
                        let k = EventKind::Crashed { point: "x".into() };
                        push(&mut events, t, ev(t, &node, k));
                        crashed = Some(t);
                        break;
                    }
                    push(
                        &mut events,
                        t,
                        ev(t, &node, EventKind::Released { deleted: true }),
                    );
                }
                WaitEnd::GaveUp => {
                    let k = EventKind::AcquireFailed { reason: "r".into() };
                    push(&mut events, t, ev(t, &node, k));
                }
                WaitEnd::Crashed => {
                    let k = EventKind::Crashed { point: "x".into() };
                    push(&mut events, t, ev(t, &node, k));
                    crashed = Some(t);
                    break;
                }
            }
        }
        if crashed.is_none() && l.still_waiting {
            push(&mut events, t, ev(t, &node, EventKind::AcquireStart));
            open_at_end.push((c, t));
        }
        crashes.push(crashed);
        truths.push(truth);
    }
    let last = events.iter().map(|e| e.0).max().unwrap_or(0);
    let mut pause_notes = Vec::new();
    for (c, l) in lives.iter().enumerate() {
        // Pauses of one client never overlap or touch (the nemesis pauses a running client).
        let mut ps = l.pauses.clone();
        ps.sort();
        let mut free_from = 0;
        for (p0, len) in ps {
            if p0 < free_from || crashes[c].is_some_and(|x| p0 >= x) {
                continue;
            }
            pause_notes.push((c, p0, p0 + len));
            free_from = p0 + len + 1;
        }
    }
    let run_end = pause_notes
        .iter()
        .map(|p| p.1)
        .chain(std::iter::once(last))
        .max()
        .unwrap_or(0)
        + tail;
    for &(c, p0, p1) in &pause_notes {
        let what = format!("client-{c} paused for {} ms (GC pause)", p1 - p0);
        push(
            &mut events,
            p0,
            ev(p0, "nemesis", EventKind::Fault { what }),
        );
        let stop = crashes[c].map_or(p1, |x| x.min(p1)).min(run_end);
        if stop == p1 && p1 < run_end {
            let what = format!("client-{c} resumed");
            push(
                &mut events,
                p1,
                ev(p1, "nemesis", EventKind::Fault { what }),
            );
        }
        truths[c].pauses.push((p0, stop));
    }
    for (c, s) in open_at_end {
        truths[c].waits.push((s, run_end));
    }
    push(&mut events, run_end, ev(run_end, "run", EventKind::RunEnd));
    // True-time order; ties keep the order generated (each client's own events in its order).
    events.sort_by_key(|e| (e.0, e.1));
    let history = History {
        events: events.into_iter().map(|e| e.2).collect(),
    };
    (history, truths)
}

/// The reference: each free period's unavailable time, counted one microsecond at a time.
fn reference(truths: &[Truth], run_end: u64) -> Vec<u64> {
    let within = |iv: &[(u64, u64)], t: u64| iv.iter().any(|&(a, b)| a <= t && t < b);
    let grants: Vec<u64> = truths.iter().flat_map(|t| t.grants.clone()).collect();
    // The free periods, as lists of instants.
    let mut periods: Vec<Vec<u64>> = vec![Vec::new()];
    for t in 0..run_end {
        let held = truths.iter().any(|c| within(&c.holds, t));
        if held || grants.contains(&t) {
            periods.push(Vec::new());
        }
        if !held {
            periods.last_mut().expect("one").push(t);
        }
    }
    let mut out = Vec::new();
    for period in periods {
        // Each client's first and last asking instant in the period.
        let spans: Vec<Option<(u64, u64)>> = truths
            .iter()
            .map(|c| {
                let asks: Vec<u64> = period
                    .iter()
                    .copied()
                    .filter(|&t| within(&c.waits, t) && !within(&c.pauses, t))
                    .collect();
                Some((*asks.first()?, *asks.last()?))
            })
            .collect();
        let count = period
            .iter()
            .filter(|&&t| {
                truths.iter().zip(&spans).any(|(c, span)| {
                    span.is_some_and(|(a, b)| a <= t && t <= b) && !within(&c.pauses, t)
                })
            })
            .count() as u64;
        if count > 0 {
            out.push(count);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Whatever the order of crashes, pauses, grants, give-ups and retries, for any number of
    /// waiters, the checker's unavailable time of every free period is the reference's.
    #[test]
    fn unavailable_time_is_asking_time_with_no_live_holder(
        lives in proptest::collection::vec(life(), 1..5),
        tail in 0u64..20,
    ) {
        let (h, truths) = build(&lives, tail);
        let got: Vec<u64> = stretches(&h, &grants(&h), &[]).iter().map(|s| s.asking_us).collect();
        prop_assert_eq!(got, reference(&truths, h.end_us()), "{}", h.render());
    }
}
