//! Checker cost against history length: every checker must stay O(n log n).
//!
//! `cargo bench --bench checkers` times each checker on synthetic histories of 16k, 32k and 64k
//! critical sections (eight clients taking turns, every 50th holder paused past its lease so that
//! two holders overlap, a nested acquire in every cycle, a resource write in every section).
//! Doubling the history should roughly double the time; before the grant index, `foreign_release`
//! and `reentrancy` went from 10.5 s to 63.5 s between 16k and 32k sections.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lockcheck::history::{Event, EventKind, History};

/// A history of `sections` critical sections.
fn history(sections: u64) -> History {
    let mut events = Vec::new();
    let mut push = |at_us: u64, client: u64, kind: EventKind| {
        events.push(Event {
            at_us,
            node: format!("client-{}", client % 8).into(),
            kind,
        })
    };
    let mut t = 0u64;
    for i in 0..sections {
        let c = i % 8;
        push(t, c, EventKind::AcquireStart);
        push(
            t + 1,
            c,
            EventKind::Acquired {
                owner: format!("owner-{i}"),
                fencing_token: Some(i + 1),
                acquired_at_ms: t / 1000,
                valid_until_ms: t / 1000 + 1000,
            },
        );
        push(t + 2, c, EventKind::Enter);
        push(t + 3, c, EventKind::Reentered { depth: 2 });
        push(
            t + 4,
            c,
            EventKind::InnerReleased {
                depth: 2,
                deleted: false,
            },
        );
        // Every 50th holder is paused past its lease: the next one is granted before it writes.
        let hold = if i % 50 == 49 { 150 } else { 90 };
        push(
            t + hold,
            c,
            EventKind::ResourceWrite {
                read: i,
                wrote: i + 1,
                fencing_token: Some(i + 1),
                accepted: true,
                seq: Some(i + 1),
            },
        );
        push(t + hold, c, EventKind::Exit);
        push(t + hold + 1, c, EventKind::Released { deleted: true });
        t += 100;
    }
    events.sort_by_key(|e| e.at_us);
    History { events }
}

fn checkers(c: &mut Criterion) {
    let mut group = c.benchmark_group("checkers");
    group.sample_size(10);
    for sections in [16_000u64, 32_000, 64_000] {
        let h = history(sections);
        group.throughput(Throughput::Elements(sections));
        for checker in lockcheck::check::all() {
            group.bench_with_input(BenchmarkId::new(checker.name(), sections), &h, |b, h| {
                b.iter(|| checker.check(h))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, checkers);
criterion_main!(benches);
