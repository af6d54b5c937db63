//! Release truth: what each release told its caller against what the servers did. The definition,
//! what the check can never see, and why: `docs/checks.md`, "release".
//!
//! A lock's `release` returns whether it removed the caller's own entry; the workload records that
//! answer (`Released { deleted }`), and code in production trusts it. The simulated servers
//! record every removal of a lock entry (`EntryRemoved`: whose command, whose entry), and in real
//! mode the `MONITOR` witness does the same, so a release whose answer the servers contradict is
//! visible. Only one direction is a lie:
//! - it said "released" but no server removed its entry (nothing was removed, or another client's
//!   entry was: a release that swallows its error, or a `DEL` that reports any deletion as its
//!   own). Its caller goes on as if its lease ended cleanly when it did not: a violation.
//! - it said "not released", or the call failed, while its entry was removed: an unknown outcome,
//!   not a lie. A release whose commands landed but whose replies were lost (a cut inbound link,
//!   a timeout) cannot know it released; saying "not released" or failing is the honest answer,
//!   and its caller treats the lease as lost, which is safe. The evidence lists these as
//!   `unknown`, and the timeline shows them, but they are not violations.
//!
//! A release's commands are those the client sent between leaving its critical section (`Exit`)
//! and the answer (`Released`). Its removals are counted past the answer, up to the client's
//! next event that follows a server's reply (not `acquire-start` or a named point, which a client
//! records before it sends): in real mode the witness places a removal by the server's clock,
//! tied to the run's to within tens of microseconds, and a client with no think time records its
//! answer and its next `acquire-start` within a microsecond or two of each other, so a removal
//! may land after both. Past the answer only a removal of the released grant's own entry (its
//! owner token) counts: the client's next acquire may remove entries too (Redlock's clean-up of
//! a failed acquire removes the new grant's), and those have a new token. What the window gives
//! up: a release that lied, followed by an acquire that overwrote that very stale entry (a `SET`
//! without `NX`), would hide the lie; a lock whose entry does not hold its owner token gets no
//! late removal counted, as before. On several independent masters (Redlock) "released" means a
//! majority of them removed the entry. Without the servers' word (`LockEntriesWatched` absent:
//! real mode with the witness off) the check does not judge.
//!
//! An entry that went without a client's command (`EntryGone`: its lease or session expired, or
//! a real-mode observer saw it go without learning whose command it was, as etcd's watch) is no
//! removal by anyone's release: a release that answers "released" after its entry went that way
//! is a lie (npm etcd3's and kazoo's `release()`), and its evidence names when the entry went.

use super::{CheckResult, Checker, Declaration, Reads, Verdict};
use crate::history::{fmt_ms, EventKind, GoneCause, History};
use std::collections::BTreeMap;

/// The release-truth checker, for a lock on `masters` independent masters.
pub struct Release {
    /// Independent masters the lock lives on (a release on a majority counts as released).
    pub masters: u32,
}

/// What the servers' removals say about one answered (or failed) release.
enum Finding {
    /// It answered "released" and the servers removed no entry of its own (on a majority).
    Lie(serde_json::Value),
    /// It answered "not released", or failed, and its entry was removed: it could not know.
    Unknown(serde_json::Value),
}

/// What one client's release in progress has seen the servers do.
#[derive(Default)]
struct Open {
    /// The owner token of the client's current grant.
    owner: Option<String>,
    /// Whether the client is between `Exit` and its release's answer (or its next event).
    releasing: bool,
    /// The answer of a release not judged yet (its time, and whether it said "released"; `None`
    /// for a failed call): judged at the client's next event, or at the end.
    answered: Option<(u64, Option<bool>)>,
    /// Removals of its own entry, and of others' entries, during the release.
    own: u32,
    foreign: Vec<u32>,
    /// Removals of its own entry placed (by a real-mode witness) before its `Exit`, and the
    /// entry's owner token: each counts for the release if within the witness's placement bound
    /// of `Exit`. Since its grant, or, for its grant's own entry, before it too: a witness that
    /// lost sight of the servers for a while (etcd's revision reads during a leader failover)
    /// places a removal in the middle of a bracket that can begin before the grant.
    early: Vec<(u64, String)>,
    /// When its current grant's entry went without a client's removal (an expiry, or a removal
    /// the servers did not attribute), and why: the evidence of a release that answered
    /// "released" for an entry already gone.
    gone: Option<(u64, GoneCause)>,
    /// A release whose client went on (its next grant, say) before the run's time had passed its
    /// answer by the witness's bound: a removal the witness placed up to that late is still its
    /// own, so it is judged only then (or at the client's next `Exit`, or at the end).
    late: Option<Box<Open>>,
}

impl Release {
    /// Its entry in `check::CHECKERS`: each release's answer against the servers' removals; the masters.
    pub const DECLARATION: Declaration = Declaration {
        name: "release",
        label: "release",
        reads: Reads::History,
        runs_only: None,
        build: |p| Some(Box::new(Release { masters: p.masters })),
    };
}

impl Checker for Release {
    fn name(&self) -> &'static str {
        Self::DECLARATION.name
    }

    fn check(&self, history: &History) -> CheckResult {
        let watched = history.events.iter().find_map(|e| match e.kind {
            EventKind::LockEntriesWatched {
                placed_within_us, ..
            } => Some(placed_within_us),
            _ => None,
        });
        // How far a removal's time may be off (0: exact, as in simulation).
        let slack_us = watched.unwrap_or(0);
        if watched.is_none() {
            return CheckResult {
                verdict: Verdict::NotJudged,
                summary: "the servers' removals were not watched".into(),
                evidence: serde_json::json!({ "judged": false }),
                timeline: Vec::new(),
            };
        }
        let need = if self.masters > 1 {
            self.masters / 2 + 1
        } else {
            1
        };
        let mut open: BTreeMap<u32, Open> = BTreeMap::new();
        let mut releases = 0u64;
        let mut lies = Vec::new();
        let mut unknown = Vec::new();
        let mut note = |f: Option<Finding>| match f {
            Some(Finding::Lie(v)) => lies.push(v),
            Some(Finding::Unknown(v)) => unknown.push(v),
            None => {}
        };
        for e in &history.events {
            // A release kept open past its client's next event is judged once the run's time
            // has passed its answer by the witness's bound.
            for (c, o) in open.iter_mut() {
                let due = o
                    .late
                    .as_ref()
                    .and_then(|l| l.answered)
                    .map(|(t, _)| t + slack_us);
                if due.is_some_and(|due| e.at_us > due) {
                    if let Some(mut l) = o.late.take() {
                        note(judge(*c, &mut l, need));
                    }
                }
            }
            if let EventKind::EntryGone {
                owner,
                owner_client,
                cause,
            } = &e.kind
            {
                // Its grant's entry, or the entry of a release kept open past the client's next
                // grant (a witness places the entry's going up to its bound late, too).
                let holds = |o: &Open| {
                    o.owner.as_deref() == Some(owner)
                        || o.late
                            .as_ref()
                            .is_some_and(|l| l.owner.as_deref() == Some(owner))
                };
                let whose =
                    owner_client.or_else(|| open.iter().find(|(_, o)| holds(o)).map(|(c, _)| *c));
                if let Some(o) = whose.and_then(|c| open.get_mut(&c)) {
                    if o.owner.as_deref() == Some(owner) {
                        o.gone = Some((e.at_us, *cause));
                    } else if let Some(l) = o.late.as_mut() {
                        if l.owner.as_deref() == Some(owner) {
                            l.gone = Some((e.at_us, *cause));
                        }
                    }
                }
                continue;
            }
            if let EventKind::EntryRemoved {
                by_client,
                owner,
                owner_client,
            } = &e.kind
            {
                let o = open.entry(*by_client).or_default();
                let mine =
                    owner_client.map_or(o.owner.as_deref() == Some(owner), |c| c == *by_client);
                if let Some(l) = o.late.as_mut() {
                    // The kept release's own entry: its grant's owner, or (as below) the
                    // client's own entry placed within the bound after that answer.
                    let answered_us = l.answered.map_or(0, |(t, _)| t);
                    let placed_late = mine && e.at_us <= answered_us.saturating_add(slack_us);
                    if l.owner.as_deref() == Some(owner.as_str()) || placed_late {
                        l.own += 1;
                        continue;
                    }
                }
                if let (true, Some((answered_us, _))) = (o.releasing, o.answered) {
                    // Past the answer: only the released grant's own entry, placed late by the
                    // witness: its value is the grant's owner, or (a client program's owner is
                    // what the program said, not the entry's value) it is the client's own entry
                    // placed within the witness's bound after the answer, since the server ran
                    // the delete before it answered. Anything else is the client's next acquire
                    // at work (Redlock's clean-up of a failed acquire removes the new grant's
                    // entries).
                    let placed_late = mine && e.at_us <= answered_us.saturating_add(slack_us);
                    if o.owner.as_deref() == Some(owner) || placed_late {
                        o.own += 1;
                    }
                } else if o.releasing {
                    if mine {
                        o.own += 1;
                    } else {
                        o.foreign.extend(*owner_client);
                    }
                } else if slack_us > 0 && mine {
                    // Placed before the release began, by a witness whose placement may be off
                    // by `slack_us`: it counts if that close to `Exit` (judged there).
                    o.early.push((e.at_us, owner.clone()));
                }
                continue;
            }
            let Some(c) = e.client() else { continue };
            let o = open.entry(c).or_default();
            let before_a_send = matches!(e.kind, EventKind::AcquireStart | EventKind::Point { .. });
            if matches!(e.kind, EventKind::Exit) {
                if let Some(mut l) = o.late.take() {
                    note(judge(c, &mut l, need));
                }
            }
            if !before_a_send {
                // Its own entry's removal may still be placed up to the witness's bound after
                // the answer: keep the release open past this event until then.
                let unseen = o.own < need;
                match o.answered {
                    Some((t, _)) if unseen && slack_us > 0 && e.at_us <= t + slack_us => {
                        o.late = Some(Box::new(Open {
                            owner: o.owner.clone(),
                            releasing: o.releasing,
                            answered: o.answered.take(),
                            own: o.own,
                            foreign: std::mem::take(&mut o.foreign),
                            early: Vec::new(),
                            gone: o.gone,
                            late: None,
                        }));
                        o.releasing = false;
                        o.own = 0;
                    }
                    _ => note(judge(c, o, need)),
                }
            }
            match &e.kind {
                EventKind::Acquired { owner, .. } => {
                    o.early.retain(|(_, entry)| entry == owner);
                    o.owner = Some(owner.clone());
                    o.gone = None;
                }
                EventKind::Exit => {
                    o.releasing = true;
                    let near = |(t, _): &&(u64, String)| e.at_us.saturating_sub(*t) <= slack_us;
                    o.own = o.early.iter().filter(near).count() as u32;
                    o.early.clear();
                    o.foreign.clear();
                }
                EventKind::Crashed { .. } => o.releasing = false,
                EventKind::ReleaseFailed { .. } if o.releasing => {
                    releases += 1;
                    o.answered = Some((e.at_us, None));
                }
                EventKind::Released { deleted } if o.releasing => {
                    releases += 1;
                    o.answered = Some((e.at_us, Some(*deleted)));
                }
                _ => {}
            }
        }
        for (c, o) in open.iter_mut() {
            if let Some(mut l) = o.late.take() {
                note(judge(*c, &mut l, need));
            }
            note(judge(*c, o, need));
        }
        let by_time = |l: &serde_json::Value| (l["at_us"].as_u64(), l["client"].as_u64());
        lies.sort_by_key(by_time);
        unknown.sort_by_key(by_time);
        let line = |l: &serde_json::Value, how: &str| {
            format!(
                "client-{} at {} ms: release {}, but the servers {}{how}",
                l["client"],
                fmt_ms(l["at_us"].as_u64().unwrap_or(0)),
                match l["said_released"].as_bool() {
                    Some(true) => "answered \"released\"",
                    Some(false) => "answered \"not released\"",
                    None => "failed",
                },
                l["servers_did"].as_str().unwrap_or("?")
            )
        };
        let mut timeline: Vec<String> = lies.iter().take(3).map(|l| line(l, "")).collect();
        timeline.extend(
            unknown
                .iter()
                .take(3)
                .map(|l| line(l, ": an unknown outcome (its replies were lost), not a lie")),
        );
        let unknown_note = if unknown.is_empty() {
            String::new()
        } else {
            format!(
                "; {} did not learn that their entry was removed (unknown outcome, not a lie)",
                unknown.len()
            )
        };
        let summary = match lies.first() {
            None => format!(
                "{releases} release(s), none answered \"released\" without removing its entry{unknown_note}"
            ),
            Some(_) => format!(
                "{} of {releases} release(s) answered \"released\" while the servers removed no entry of theirs{unknown_note}",
                lies.len()
            ),
        };
        CheckResult {
            verdict: Verdict::of(!lies.is_empty()),
            summary,
            evidence: serde_json::json!({
                "judged": true,
                "releases": releases,
                "mismatches": lies,
                "unknown": unknown,
            }),
            timeline,
        }
    }
}

/// Judges client `c`'s answered release, if one waits, against what the servers removed (`need`
/// servers for "released"): a lie, an unknown outcome, or nothing to say. Ends the release.
fn judge(c: u32, o: &mut Open, need: u32) -> Option<Finding> {
    let (at_us, deleted) = o.answered.take()?;
    o.releasing = false;
    let removed = o.own >= need;
    let lie = match deleted {
        Some(true) if !removed => true,
        Some(false) | None if removed => false,
        _ => return None,
    };
    let did = if o.own > 0 {
        format!("removed its entry on {} server(s)", o.own)
    } else if !o.foreign.is_empty() {
        format!("removed the entry of client {:?}, not its own", o.foreign)
    } else if let Some((gone_us, cause)) = o.gone {
        let how = match cause {
            GoneCause::Expired => "its lease or session expired and the servers removed it",
            _ => "the servers do not say how",
        };
        format!(
            "removed no entry: its entry had gone at {} ms ({how})",
            fmt_ms(gone_us)
        )
    } else {
        "removed no entry".to_string()
    };
    let evidence = serde_json::json!({
        "client": c,
        "at_us": at_us,
        "said_released": deleted,
        "own_removed": o.own,
        "foreign_removed": o.foreign,
        "entry_gone_us": o.gone.map(|(t, _)| t),
        "entry_gone_cause": o.gone.map(|(_, c)| c.name()),
        "servers_did": did,
    });
    Some(if lie {
        Finding::Lie(evidence)
    } else {
        Finding::Unknown(evidence)
    })
}

#[cfg(test)]
mod tests;
