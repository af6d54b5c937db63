//! The timeline's data: one lane per client and one per server, built from a run's history.
//!
//! The page's script draws it (see [`super::page`]); this module only decides what is on it, so
//! the same history always gives the same data. Client lanes show three rows: waiting for or
//! holding the lock, the critical section, and the lease the client believes it has (on its own
//! clock, projected onto true time from its acquire). Server lanes, one per server of whatever
//! backend the scenario runs on ([`Scenario::servers`]), show the role over time (master,
//! replica, leader, follower, standalone, killed), pauses, partitions, the sessions it expired,
//! the leases it revoked and clock notes ([`super::fault_notes`]). Faults are markers across
//! every lane; the overlap of two critical sections is drawn in red across the two client
//! lanes.

use super::fault_notes::{fault_note, Roles};
use crate::check::mutual_exclusion::Holdings;
use crate::history::{believed_lease_ms, fmt_ms, EventKind, History};
use crate::scenario::Scenario;
use serde::Serialize;
use std::collections::BTreeMap;

/// A bar on a lane, `from_us..to_us` in true time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    /// CSS class: waiting, holding, section, lease, paused, partitioned; on a server's lane its
    /// role (master, replica, leader, follower, standalone) or killed (down).
    pub kind: &'static str,
    /// Row inside the lane (0 at the top).
    pub row: u8,
    /// True time the bar starts (µs).
    pub from_us: u64,
    /// True time the bar ends (µs).
    pub to_us: u64,
    /// Hover text.
    pub title: String,
}

/// A point on a lane: a resource write, a crash, a clock note, a session expired or leases
/// revoked by a server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// CSS class: write, rejected, crash, clock; on a server's lane also expiry (a session it
    /// expired) and revoked (leases it revoked).
    pub kind: &'static str,
    /// True time of the mark (µs).
    pub at_us: u64,
    /// Short text drawn beside the mark (a fencing token, for writes).
    pub label: String,
    /// Hover text: the event in full.
    pub title: String,
}

/// One lane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lane {
    /// The node's name, as the scenario and the history give it (`client-0`, a server's).
    pub name: String,
    /// `client`, or `node` for a server.
    pub kind: &'static str,
    /// A note beside the name (a clock offset, for instance).
    pub note: String,
    /// What lasts: waiting, holding, a lease, a pause, a server's role.
    pub spans: Vec<Span>,
    /// What happens at an instant: writes, crashes, clock notes, expiries, revocations.
    pub marks: Vec<Mark>,
}

/// Two holders at once, between two client lanes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OverlapBand {
    /// The lane of the holder that entered first.
    pub first: String,
    /// The lane of the holder that entered while the first still held.
    pub second: String,
    /// True time the overlap starts (µs).
    pub from_us: u64,
    /// True time the overlap ends (µs).
    pub to_us: u64,
    /// Hover text: which clients overlapped, from when to when.
    pub title: String,
}

/// A fault, drawn as a numbered line across every lane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultMark {
    /// The fault's number, from 1 in the order the faults fired: the label drawn on its line,
    /// short enough not to cover the lanes.
    pub n: usize,
    /// True time the fault fired (µs).
    pub at_us: u64,
    /// The fault as the history recorded it (hover text).
    pub what: String,
}

/// Everything the timeline draws.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// True time the history ends (µs): the right edge of the drawing.
    pub end_us: u64,
    /// One lane per client, then one per server.
    pub lanes: Vec<Lane>,
    /// Every pair of overlapping critical sections, drawn across the two lanes.
    pub overlaps: Vec<OverlapBand>,
    /// Every fault, in the order it fired.
    pub faults: Vec<FaultMark>,
}

/// Open intervals per lane, closed by later events or by the end of the run.
#[derive(Default)]
pub(super) struct Open(pub(super) BTreeMap<(String, &'static str), (u64, String)>);

impl Open {
    pub(super) fn start(&mut self, lane: &str, kind: &'static str, at: u64, title: String) {
        self.0
            .entry((lane.to_string(), kind))
            .or_insert((at, title));
    }

    pub(super) fn close(&mut self, lane: &str, kind: &'static str, at: u64, out: &mut Lanes) {
        if let Some((from, title)) = self.0.remove(&(lane.to_string(), kind)) {
            out.span(lane, kind, from, at, title);
        }
    }
}

/// Lanes by name, in display order.
pub(super) struct Lanes(Vec<Lane>);

impl Lanes {
    pub(super) fn get(&mut self, name: &str) -> Option<&mut Lane> {
        self.0.iter_mut().find(|l| l.name == name)
    }

    fn span(&mut self, lane: &str, kind: &'static str, from: u64, to: u64, title: String) {
        if let Some(l) = self.get(lane) {
            l.spans.push(Span {
                kind,
                row: row_of(lane, kind),
                from_us: from,
                to_us: to.max(from),
                title,
            });
        }
    }

    pub(super) fn mark(
        &mut self,
        lane: &str,
        kind: &'static str,
        at: u64,
        label: String,
        title: String,
    ) {
        if let Some(l) = self.get(lane) {
            l.marks.push(Mark {
                kind,
                at_us: at,
                label,
                title,
            });
        }
    }
}

/// The row of a span kind: the lock state on top, then the critical section, the believed
/// lease, and what stops the node (a pause, a partition).
fn row_of(lane: &str, kind: &str) -> u8 {
    match kind {
        "section" => 1,
        "lease" => 2,
        "paused" => 3,
        "partitioned" if lane.starts_with("client-") => 3,
        "partitioned" => 1,
        _ => 0,
    }
}

impl Lanes {
    /// A write to the protected resource: labelled with its fencing token, if it carried one.
    fn write(&mut self, lane: &str, at: u64, fencing: Option<u64>, accepted: bool, what: String) {
        let (kind, verb) = if accepted {
            ("write", "accepted")
        } else {
            ("rejected", "rejected")
        };
        let label = fencing.map_or("w".into(), |t| format!("#{t}"));
        self.mark(
            lane,
            kind,
            at,
            label,
            format!("{what}{} {verb}", token(fencing)),
        );
    }
}

fn token(t: Option<u64>) -> String {
    t.map(|t| format!(" token {t}")).unwrap_or_default()
}

/// Builds the timeline of one run of `scenario`.
pub fn build(scenario: &Scenario, history: &History) -> Timeline {
    let clients: Vec<String> = scenario
        .node_names()
        .into_iter()
        .filter(|n| n.starts_with("client-"))
        .collect();
    let servers = scenario.servers();
    let end = history.end_us().max(1);
    let mut lanes = Lanes(
        clients
            .iter()
            .map(|n| (n, "client"))
            .chain(servers.iter().map(|(n, _)| (n, "node")))
            .map(|(n, kind)| Lane {
                name: n.to_string(),
                kind,
                note: String::new(),
                spans: Vec::new(),
                marks: Vec::new(),
            })
            .collect(),
    );
    let mut open = Open::default();
    // Every server starts in the role its scenario gives it.
    let mut roles = Roles::start(&servers, &mut open);
    let mut faults = Vec::new();
    // Each client's current grant: its true time and the client's clock then (ms), to place a
    // renewed validity on the true timeline as the grant's is.
    let mut granted: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for e in &history.events {
        let at = e.at_us;
        let node = e.node.as_str();
        match &e.kind {
            EventKind::Renewed { valid_until_ms } => {
                if let Some(&(from, acquired_at_ms)) = granted.get(node) {
                    let until = from + valid_until_ms.saturating_sub(acquired_at_ms) * 1000;
                    lanes.span(
                        node,
                        "lease",
                        at,
                        until.min(end),
                        format!(
                            "renewed: believed lease now {} ms after its grant, until ~{} ms",
                            valid_until_ms.saturating_sub(acquired_at_ms),
                            fmt_ms(until)
                        ),
                    );
                }
            }
            EventKind::AcquireStart => open.start(node, "waiting", at, "acquiring".into()),
            EventKind::Acquired {
                fencing_token,
                acquired_at_ms,
                valid_until_ms,
                ..
            } => {
                open.close(node, "waiting", at, &mut lanes);
                open.start(
                    node,
                    "holding",
                    at,
                    format!("holds the lock{}", token(*fencing_token)),
                );
                granted.insert(node, (at, *acquired_at_ms));
                // Drawn up to the end of the run; the title says where it ends.
                let (until, title) = match believed_lease_ms(*acquired_at_ms, *valid_until_ms) {
                    Some(lease_ms) => {
                        let until = at.saturating_add(lease_ms.saturating_mul(1000));
                        let title = format!(
                            "believed lease: {lease_ms} ms on its own clock, until ~{} ms",
                            fmt_ms(until)
                        );
                        (until, title)
                    }
                    None => (end, "no lease: it holds until it releases".to_string()),
                };
                lanes.span(node, "lease", at, until.min(end), title);
            }
            EventKind::AcquireFailed { reason } => {
                if let Some((from, _)) = open.0.remove(&(node.to_string(), "waiting")) {
                    let title = format!("acquire failed: {reason}");
                    lanes.span(node, "waiting", from, at, title);
                }
            }
            EventKind::Released { .. } | EventKind::ReleaseFailed { .. } => {
                open.close(node, "holding", at, &mut lanes)
            }
            EventKind::Crashed { point } => {
                for k in ["waiting", "holding"] {
                    open.close(node, k, at, &mut lanes);
                }
                lanes.mark(
                    node,
                    "crash",
                    at,
                    "crash".into(),
                    format!("crashed at {point}"),
                );
            }
            EventKind::ResourceWrite {
                wrote,
                fencing_token,
                accepted,
                ..
            } => lanes.write(
                node,
                at,
                *fencing_token,
                *accepted,
                format!("write {wrote}"),
            ),
            EventKind::AddressInserted {
                user,
                fencing_token,
                accepted,
                is_default,
                ..
            } => lanes.write(
                node,
                at,
                *fencing_token,
                *accepted,
                format!("address for user {user} (default: {is_default})"),
            ),
            EventKind::LeaseExpired { .. } => lanes.mark(
                node,
                "clock",
                at,
                "expired".into(),
                "lease expired on its own clock: write skipped".into(),
            ),
            EventKind::Fault { what } => {
                faults.push(FaultMark {
                    n: faults.len() + 1,
                    at_us: at,
                    what: what.clone(),
                });
                fault_note(what, at, &mut roles, &mut open, &mut lanes);
            }
            _ => {}
        }
    }
    // Critical sections and their overlaps, as the mutual-exclusion check found them.
    let holdings = Holdings::of(history);
    for s in &holdings.sections {
        let lane = format!("client-{}", s.client);
        lanes.span(
            &lane,
            "section",
            s.enter_us,
            s.exit_us.unwrap_or(end),
            format!(
                "critical section {} .. {} ms{}",
                fmt_ms(s.enter_us),
                s.exit_us.map(fmt_ms).unwrap_or("end".into()),
                token(s.fencing_token)
            ),
        );
    }
    for ((lane, kind), (from, title)) in std::mem::take(&mut open.0) {
        lanes.span(&lane, kind, from, end, title);
    }
    let overlaps = holdings
        .overlaps
        .into_iter()
        .map(|o| OverlapBand {
            first: format!("client-{}", o.first.client),
            second: format!("client-{}", o.second.client),
            from_us: o.from_us,
            to_us: o.to_us,
            title: format!(
                "client-{} and client-{} both in their critical sections from {} to {} ms",
                o.first.client,
                o.second.client,
                fmt_ms(o.from_us),
                fmt_ms(o.to_us)
            ),
        })
        .collect();
    let mut lanes = lanes.0;
    for l in &mut lanes {
        l.spans.sort_by_key(|s| (s.row, s.from_us, s.to_us, s.kind));
    }
    Timeline {
        end_us: end,
        lanes,
        overlaps,
        faults,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::{Mode, Outcome};

    fn failover() -> (Scenario, History) {
        let s = Scenario::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scenarios/failover-lock-loss.toml"
        )))
        .unwrap();
        let o = Outcome::judge(
            &s,
            Mode::Sim,
            1,
            crate::registry::Registry::new().run_sim(&s, 1).history,
        );
        (s, o.history)
    }

    #[test]
    fn failover_timeline_has_lanes_roles_and_the_overlap() {
        let (s, h) = failover();
        let t = build(&s, &h);
        let names: Vec<&str> = t.lanes.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["client-0", "client-1", "redis-0", "redis-0-replica-0"]
        );
        assert_eq!(t.overlaps.len(), 1, "{:?}", t.overlaps);
        let o = &t.overlaps[0];
        assert_eq!(
            (o.first.as_str(), o.second.as_str()),
            ("client-0", "client-1")
        );
        assert_eq!((o.from_us, o.to_us), (1_040_000, 2_706_000));
        let master = &t.lanes[2];
        let kinds: Vec<&str> = master.spans.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["master", "killed"], "{:?}", master.spans);
        let replica = &t.lanes[3];
        let kinds: Vec<&str> = replica.spans.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["replica", "master"], "{:?}", replica.spans);
        assert_eq!(replica.spans[1].from_us, 1_002_000);
        let c0 = &t.lanes[0];
        assert!(c0.spans.iter().any(|s| s.kind == "section" && s.row == 1));
        assert!(c0.spans.iter().any(|s| s.kind == "lease" && s.row == 2));
        assert!(c0.marks.iter().any(|m| m.kind == "write"));
        assert_eq!(t.faults.len(), 2);
    }

    #[test]
    fn pauses_and_partitions_become_spans() {
        let (s, _) = failover();
        let ev = |at_us, what: &str| crate::history::Event {
            at_us,
            node: "nemesis".into(),
            kind: EventKind::Fault { what: what.into() },
        };
        let h = History {
            events: vec![
                ev(10, "client-1 paused for 5 ms (GC pause)"),
                ev(20, "partition: redis-0 cut off from everyone for 5 ms"),
                ev(25, "partition healed"),
                ev(30, "client-1 resumed"),
            ],
        };
        let t = build(&s, &h);
        let paused: Vec<_> = t.lanes[1]
            .spans
            .iter()
            .filter(|s| s.kind == "paused")
            .map(|s| (s.from_us, s.to_us))
            .collect();
        assert_eq!(paused, [(10, 30)]);
        let cut: Vec<_> = t.lanes[2]
            .spans
            .iter()
            .filter(|s| s.kind == "partitioned")
            .map(|s| (s.from_us, s.to_us))
            .collect();
        assert_eq!(cut, [(20, 25)]);
    }
}
