//! Liveness: the lock must not stay unavailable for long while some client asks for it and no
//! live client holds it. The definition, what the check can never see, and why: `docs/checks.md`,
//! "liveness".
//!
//! Only asking time counts. In a free period (no live holder: a crashed holder is not live, a
//! paused one is), which a grant or the run's end ends, a client asks from its first
//! `acquire-start` there to the end of its last acquire call there (a grant, a give-up, its crash,
//! or the run's end: `RunEnd` is an event, so a client still waiting then has waited until then),
//! minus the time it was paused: a paused process sends nothing and hears nothing, so a free lock
//! nobody can ask for is not a liveness failure, while a client that gives up and tries again
//! still asks in between. The period's unavailable time is the measure of the instants in it at
//! which some client was asking.
//! Measuring a stretch from its first asking instant to its last instead would count a pause
//! that splits a wait: a waiter refused at 2 ms, paused until 3,520 ms and granted at 3,522 ms
//! asked for 20 ms, not 3,520.
//!
//! A lease exists so that a holder that dies does not take the lock with it. When it fails (the
//! naive lock of the address-book article dies between `SETNX` and `EXPIRE`, leaving a key that
//! never expires) every other client waits forever. A free period whose unavailable time is
//! longer than the bound is a violation: `[checks] liveness_bound_ms`, by default three leases,
//! far more than a correct lease lock ever makes a waiter wait after its holder died. A lock whose
//! release never deletes (every holding lasts a full lease) makes each waiter wait most of a lease
//! after every release: a bound under one lease catches it, and so does the throughput check.

use super::{grants, CheckResult, Checker, Declaration, Reads};
use crate::check::Verdict;
use crate::history::{fmt_ms, EventKind, History, PartitionNote, PauseNote};
use std::collections::{BTreeMap, BTreeSet};

/// The liveness checker with its bound (`[checks] liveness_bound_ms`, three leases by default).
pub struct Liveness {
    /// A wait longer than this (µs) with no live holder is a liveness violation.
    pub bound_us: u64,
    /// The servers the lock's data lives on (`Params::lock_servers`): a client a partition cuts
    /// off from all of them cannot ask. Empty: unknown, and only a cut from everyone counts.
    pub lock_servers: Vec<String>,
}

/// A free period during which some client asked for the lock: its first asking instant, its end,
/// and how long someone was asking in between.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stretch {
    /// When the first client began asking in this free period (µs, true time).
    pub from_us: u64,
    /// When it ended: the grant that ended it, or the last asking instant (µs, true time).
    pub to_us: u64,
    /// The unavailable time: how long, between `from_us` and `to_us`, at least one client was
    /// asking (µs). Pauses and gaps in which nobody asked are not in it.
    pub asking_us: u64,
    /// Clients that were waiting during it.
    pub waiting: Vec<u32>,
    /// Whether a grant ended it (false: the history ended, or every waiter stopped trying).
    pub ended_by_grant: bool,
}

/// Every free period in which some client asked, in time order; `servers` are the lock's
/// servers ([`Liveness::lock_servers`]).
pub fn stretches(
    history: &History,
    gs: &[crate::check::grants::Grant],
    servers: &[String],
) -> Vec<Stretch> {
    let end = history.end_us();
    // Holding intervals (a crashed holder stops holding when it dies).
    let holds: Vec<(u64, u64)> = gs
        .iter()
        .map(|g| (g.acquired_us, g.end_us.unwrap_or(end)))
        .collect();
    // Waiting intervals, per client.
    // A hint, not a bound: a wait takes an acquire-start and its end.
    let mut waits: Vec<(u64, u64, u32)> = Vec::with_capacity(history.events.len() / 4);
    let mut started: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match &e.kind {
            EventKind::AcquireStart => {
                started.insert(c, e.at_us);
            }
            EventKind::Acquired { .. }
            | EventKind::AcquireFailed { .. }
            | EventKind::Crashed { .. } => {
                if let Some(s) = started.remove(&c) {
                    waits.push((s, e.at_us, c));
                }
            }
            _ => {}
        }
    }
    for (c, s) in started {
        waits.push((s, end, c));
    }
    // A paused client is not asking: a GC-paused process sends nothing and hears nothing, so a
    // free lock nobody can ask for is not unavailable. Its waits lose their paused stretches, and
    // so do the stretches in which it could reach none of the lock's servers.
    let paused = pauses(history, end, servers);
    let mut waits = asking(waits, &paused);
    // The periods with no holder: the complement of the union of holding intervals.
    let mut hs = holds.clone();
    hs.sort();
    let mut free: Vec<(u64, u64)> = Vec::new();
    let mut t = 0u64;
    for (a, b) in hs {
        if a > t {
            free.push((t, a));
        }
        t = t.max(b);
    }
    if t < end {
        free.push((t, end));
    }
    let mut grant_times: Vec<u64> = gs.iter().map(|g| g.acquired_us).collect();
    grant_times.sort_unstable();
    // A sweep over the free periods (disjoint, in time order) and the waits by start time. A
    // client waits for one acquire at a time, so the waits open during a period are at most one
    // per client plus those that start inside it: the check stays O(n log n), not O(periods x waits).
    waits.sort_unstable();
    let mut next_wait = 0;
    let mut open: Vec<(u64, u64, u32)> = Vec::new();
    let mut out = Vec::new();
    for (p0, p1) in free {
        while next_wait < waits.len() && waits[next_wait].0 < p1 {
            open.push(waits[next_wait]);
            next_wait += 1;
        }
        // A wait that ended by this period's start cannot overlap it or any later one.
        open.retain(|&(_, e, _)| e > p0);
        let inside: Vec<(u64, u64, u32)> = open
            .iter()
            .map(|&(s, e, c)| (s.max(p0), e.min(p1), c))
            .collect();
        if inside.is_empty() {
            continue;
        }
        let from = inside.iter().map(|w| w.0).min().expect("non-empty");
        let asking_us = union_length(&wanting(&inside, &paused));
        let ended_by_grant = grant_times.binary_search(&p1).is_ok();
        let to = if ended_by_grant {
            p1
        } else {
            inside.iter().map(|w| w.1).max().expect("non-empty")
        };
        let mut waiting: Vec<u32> = inside.iter().map(|w| w.2).collect();
        waiting.sort();
        waiting.dedup();
        out.push(Stretch {
            from_us: from,
            to_us: to,
            asking_us,
            waiting,
            ended_by_grant,
        });
    }
    out
}

/// Each client's asking span in one free period, from its first asking instant to its last, less
/// the time it was paused: `pieces` are its asking pieces there (`(from, to, client)`, sorted by
/// start). Between a give-up and its next try a client still asks (the workload tries again, and
/// a lock that refuses at once every time is as unavailable as one that keeps its waiters
/// waiting); while paused it does not. The result is sorted by start.
fn wanting(
    pieces: &[(u64, u64, u32)],
    pauses: &BTreeMap<u32, Vec<(u64, u64)>>,
) -> Vec<(u64, u64, u32)> {
    let mut span: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for &(s, e, c) in pieces {
        let sp = span.entry(c).or_insert((s, e));
        sp.0 = sp.0.min(s);
        sp.1 = sp.1.max(e);
    }
    let mut out = Vec::with_capacity(pieces.len());
    for (c, (first, last)) in span {
        out.extend(asking(vec![(first, last, c)], pauses));
    }
    out.sort_unstable();
    out
}

/// How long at least one of `pieces` `(from, to, client)` covers, the pieces sorted by start.
fn union_length(pieces: &[(u64, u64, u32)]) -> u64 {
    let mut total = 0;
    let mut covered_to = 0;
    for &(s, e, _) in pieces {
        let s = s.max(covered_to);
        if e > s {
            total += e - s;
            covered_to = e;
        }
    }
    total
}

/// Clients still inside `acquire` when the run ended (cut off after the grace period).
fn never_served(history: &History) -> Vec<u32> {
    let mut waiting: BTreeMap<u32, bool> = BTreeMap::new();
    for e in &history.events {
        let Some(c) = e.client() else { continue };
        match e.kind {
            EventKind::AcquireStart => {
                waiting.insert(c, true);
            }
            EventKind::Acquired { .. }
            | EventKind::AcquireFailed { .. }
            | EventKind::Crashed { .. } => {
                waiting.insert(c, false);
            }
            _ => {}
        }
    }
    waiting
        .into_iter()
        .filter(|&(_, w)| w)
        .map(|(c, _)| c)
        .collect()
}

/// Each client's stretches of not asking, from the nemesis's notes: its pauses (a pause still
/// open at the end, or ended by a crash, lasts until then) and the stretches in which partitions
/// cut it off from every one of `servers` ([`cut_off`]).
fn pauses(history: &History, end: u64, servers: &[String]) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let mut out = cut_off(history, end, servers);
    let mut since: BTreeMap<u32, u64> = BTreeMap::new();
    for e in &history.events {
        match &e.kind {
            EventKind::Fault { what } => match PauseNote::parse(what) {
                Some(PauseNote::Paused(c)) => {
                    since.entry(c).or_insert(e.at_us);
                }
                Some(PauseNote::Resumed(c)) => {
                    if let Some(s) = since.remove(&c) {
                        out.entry(c).or_default().push((s, e.at_us));
                    }
                }
                None => {}
            },
            EventKind::Crashed { .. } => {
                if let Some(c) = e.client() {
                    if let Some(s) = since.remove(&c) {
                        out.entry(c).or_default().push((s, e.at_us));
                    }
                }
            }
            _ => {}
        }
    }
    for (c, s) in since {
        out.entry(c).or_default().push((s, end));
    }
    // Pauses and cuts may overlap: in order of start, as `asking` walks them.
    for stretches in out.values_mut() {
        stretches.sort_unstable();
    }
    out
}

/// Each client's stretches in which the partitions then in force cut it off from every one of
/// `servers`: nothing it sends reaches the lock and no answer reaches it, so it can no more ask
/// than a paused client (`docs/checks.md`, "liveness"). Several cuts count together (one from
/// `redis-0`, another from `redis-1`); a client that still reaches one server asks it. With no
/// servers known, only a cut of the client from everyone counts.
fn cut_off(history: &History, end: u64, servers: &[String]) -> BTreeMap<u32, Vec<(u64, u64)>> {
    let cuts: Vec<(u64, u64, PartitionNote)> = history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Fault { what } => PartitionNote::parse(what)
                .map(|n| (e.at_us, (e.at_us + n.for_ms * 1000).min(end), n)),
            _ => None,
        })
        .collect();
    let mut out: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    if cuts.is_empty() {
        return out;
    }
    let clients: BTreeSet<u32> = history.events.iter().filter_map(|e| e.client()).collect();
    for c in clients {
        let me = format!("client-{c}");
        let stretches = out.entry(c).or_default();
        if servers.is_empty() {
            let everyone = |n: &PartitionNote| n.from.is_none() && n.nodes.contains(&me);
            stretches.extend(cuts.iter().filter(|k| everyone(&k.2)).map(|k| (k.0, k.1)));
            continue;
        }
        let mine: Vec<&(u64, u64, PartitionNote)> = cuts
            .iter()
            .filter(|k| servers.iter().any(|s| k.2.separates(&me, s)))
            .collect();
        let mut edges: Vec<u64> = mine.iter().flat_map(|k| [k.0, k.1]).collect();
        edges.sort_unstable();
        edges.dedup();
        for w in edges.windows(2) {
            let (t0, t1) = (w[0], w[1]);
            let unreachable = |s: &String| {
                mine.iter()
                    .any(|k| k.0 <= t0 && t0 < k.1 && k.2.separates(&me, s))
            };
            if servers.iter().all(unreachable) {
                match stretches.last_mut() {
                    Some(last) if last.1 == t0 => last.1 = t1,
                    _ => stretches.push((t0, t1)),
                }
            }
        }
    }
    out
}

/// The parts of each wait `(from, to, client)` during which the client was not paused.
fn asking(
    waits: Vec<(u64, u64, u32)>,
    pauses: &BTreeMap<u32, Vec<(u64, u64)>>,
) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::with_capacity(waits.len());
    for (s, e, c) in waits {
        let mut from = s;
        for &(p0, p1) in pauses.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
            if p1 <= from || p0 >= e {
                continue;
            }
            if p0 > from {
                out.push((from, p0, c));
            }
            from = from.max(p1);
        }
        if from < e {
            out.push((from, e, c));
        }
    }
    out
}

impl Liveness {
    /// Its entry in `check::CHECKERS`: waits against the grants; the liveness bound.
    pub const DECLARATION: Declaration = Declaration {
        name: "liveness",
        label: "liveness",
        reads: Reads::Grants,
        runs_only: None,
        build: |p| {
            Some(Box::new(Liveness {
                bound_us: p.liveness_bound_ms.saturating_mul(1000),
                lock_servers: p.lock_servers.clone(),
            }))
        },
    };
}

impl Checker for Liveness {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        self.check_with(history, &grants(history))
    }

    fn check_with(&self, history: &History, gs: &[crate::check::grants::Grant]) -> CheckResult {
        let all = stretches(history, gs, &self.lock_servers);
        let longest = all
            .iter()
            .max_by_key(|s| (s.asking_us, u64::MAX - s.from_us));
        let crashes: Vec<serde_json::Value> = history
            .events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Crashed { point } => Some(serde_json::json!({
                    "client": e.client(), "at_us": e.at_us, "point": point,
                })),
                _ => None,
            })
            .collect();
        let longest_us = longest.map(|s| s.asking_us).unwrap_or(0);
        let never_served = never_served(history);
        let violation = longest_us > self.bound_us;
        let mut timeline = Vec::new();
        let summary = match longest {
            Some(s) if violation => {
                for c in &crashes {
                    timeline.push(format!(
                        "client-{} crashed at {} at {} ms",
                        c["client"],
                        c["point"].as_str().unwrap_or("?"),
                        fmt_ms(c["at_us"].as_u64().unwrap_or(0))
                    ));
                }
                timeline.push(format!(
                    "from {} ms to {} ms no live client held the lock, and client(s) {:?} asked for it during {} ms of that without getting it",
                    fmt_ms(s.from_us),
                    fmt_ms(s.to_us),
                    s.waiting,
                    fmt_ms(s.asking_us)
                ));
                format!(
                    "the lock was unavailable for {} ms of asking time with no live holder (bound {} ms){}",
                    fmt_ms(longest_us),
                    fmt_ms(self.bound_us),
                    if s.ended_by_grant {
                        String::new()
                    } else if never_served.is_empty() {
                        ", and never became free again".to_string()
                    } else {
                        format!(
                            ", and never became free again: client(s) {never_served:?} still waiting when the run ended, never served"
                        )
                    }
                )
            }
            _ => format!(
                "longest asking time with no live holder {} ms (bound {} ms)",
                fmt_ms(longest_us),
                fmt_ms(self.bound_us)
            ),
        };
        CheckResult {
            verdict: Verdict::of(violation),
            summary,
            evidence: serde_json::json!({
                "bound_us": self.bound_us,
                "longest_unavailable_us": longest_us,
                "longest": longest,
                "crashes": crashes,
                "never_served": never_served,
            }),
            timeline,
        }
    }
}

#[cfg(test)]
#[path = "liveness_reference.rs"]
mod reference;

#[cfg(test)]
#[path = "liveness_tests.rs"]
mod tests;
