//! What the nemesis's notes do to the timeline's lanes. The notes are the nemesis's own
//! sentences (simulated and real runs word them alike), so the lanes follow them rather than
//! re-deriving the faults: partitions, pauses and clock notes on any lane; on a server's lane its
//! role over time (each server starts in the role its scenario gives it, then crashes, restarts,
//! elections, promotions and demotions change it), the sessions it expired and the leases it
//! revoked. What a note means for a server is `history::ServerNote`'s to say, so nothing here
//! knows which service runs.

use super::timeline::{Lanes, Open};
use crate::history::{PartitionNote, Role, ServerNote};

/// The span kind of a server down (crashed or killed).
const DOWN: &str = "killed";

/// One server's role as the notes go.
struct Server {
    name: String,
    /// The role its scenario starts it in (what a restart may bring back).
    configured: Role,
    /// Its role now; `None` while it is down.
    now: Option<Role>,
}

/// Every server's role as the notes go, drawn as spans on its lane.
pub(super) struct Roles(Vec<Server>);

impl Roles {
    /// The servers in the roles they start the run in, each role's span opened at 0.
    pub(super) fn start(servers: &[(String, Role)], open: &mut Open) -> Roles {
        for (name, role) in servers {
            open.start(name, role.name(), 0, role.name().to_string());
        }
        Roles(
            servers
                .iter()
                .map(|(name, role)| Server {
                    name: name.clone(),
                    configured: *role,
                    now: Some(*role),
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&Server> {
        self.0.iter().find(|s| s.name == name)
    }

    /// Ends `name`'s role (or its time down) at `at` and starts `next` (`None`: down), titled
    /// `title`; nothing when it is already there (every watcher of a failover may announce the
    /// one promotion).
    fn set(&mut self, name: &str, next: Option<Role>, at: u64, title: String, to: &mut Drawn) {
        let Some(s) = self.0.iter_mut().find(|s| s.name == name) else {
            return;
        };
        if s.now == next {
            return;
        }
        to.open.close(name, kind(s.now), at, to.lanes);
        s.now = next;
        to.open.start(name, kind(next), at, title);
    }

    /// The server that decides for the deployment now: the one leading, or serving alone.
    fn deciding(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|s| matches!(s.now, Some(Role::Leader | Role::Standalone)))
            .map(|s| s.name.as_str())
    }
}

/// A role's span kind, or a server's time down.
fn kind(role: Option<Role>) -> &'static str {
    role.map_or(DOWN, Role::name)
}

/// What the notes draw on: the spans still open and the lanes.
struct Drawn<'a, 'b> {
    open: &'a mut Open,
    lanes: &'b mut Lanes,
}

/// What the nemesis note `what`, at `at`, does to the lanes.
pub(super) fn fault_note(
    what: &str,
    at: u64,
    roles: &mut Roles,
    open: &mut Open,
    lanes: &mut Lanes,
) {
    let to = &mut Drawn { open, lanes };
    let first = what.split_whitespace().next().unwrap_or("");
    if let Some(rest) = what.strip_prefix("partition: ") {
        let (who, tail) = rest.split_once(" cut off from ").unwrap_or((rest, ""));
        for n in who.split(", ") {
            to.open.start(
                n,
                "partitioned",
                at,
                format!("partitioned: cut off from {tail}"),
            );
        }
        // A cut runs between two sides: the side it names after `from` is cut off too.
        if let Some(from) = PartitionNote::parse(what).and_then(|p| p.from) {
            for n in from {
                to.open.start(
                    &n,
                    "partitioned",
                    at,
                    format!("partitioned: cut off from {who}"),
                );
            }
        }
    } else if what.starts_with("partition healed") {
        let cut: Vec<String> = to
            .open
            .0
            .keys()
            .filter(|(_, k)| *k == "partitioned")
            .map(|(n, _)| n.clone())
            .collect();
        for n in cut {
            to.open.close(&n, "partitioned", at, to.lanes);
        }
    } else if let Some(note) = ServerNote::parse(what) {
        server_note(note, what, at, roles, to);
    } else if what.contains(" clock ") {
        if let Some(l) = to.lanes.get(first) {
            if what.contains(" clock starts ") {
                l.note = what.trim_start_matches(first).trim().to_string();
            }
        }
        to.lanes
            .mark(first, "clock", at, "clock".into(), what.to_string());
    }
}

/// What a note about a server (or a client's pause) does to its lane.
fn server_note(note: ServerNote<'_>, what: &str, at: u64, roles: &mut Roles, to: &mut Drawn) {
    let titled = |role: Role| format!("{}: {what}", role.name());
    match note {
        ServerNote::Paused(n) => to.open.start(n, "paused", at, what.to_string()),
        ServerNote::Resumed(n) => to.open.close(n, "paused", at, to.lanes),
        ServerNote::Down(n) => roles.set(n, None, at, what.to_string(), to),
        ServerNote::Restarted(n) => {
            if let Some(role) = roles.get(n).map(|s| Role::after_restart(s.configured)) {
                roles.set(n, Some(role), at, titled(role), to);
            }
        }
        ServerNote::Leads(n) => {
            // Whoever led before and still runs follows now.
            let led: Vec<String> = roles
                .0
                .iter()
                .filter(|s| s.name != n && s.now == Some(Role::Leader))
                .map(|s| s.name.clone())
                .collect();
            for old in led {
                roles.set(&old, Some(Role::Follower), at, titled(Role::Follower), to);
            }
            roles.set(n, Some(Role::Leader), at, titled(Role::Leader), to);
        }
        // A leader without a quorum leads no more; it runs on, and an election may pick it again.
        ServerNote::SteppedDown(n) => {
            roles.set(n, Some(Role::Follower), at, titled(Role::Follower), to)
        }
        // The old master stays master on its lane until it is demoted: while it is cut off from
        // whoever promoted another, two masters at once are the split brain the page must show.
        ServerNote::Promoted(n) => roles.set(n, Some(Role::Master), at, titled(Role::Master), to),
        ServerNote::Demoted(n) => roles.set(n, Some(Role::Replica), at, what.to_string(), to),
        ServerNote::SessionExpired { server, .. } => {
            to.lanes
                .mark(server, "expiry", at, "expired".into(), what.to_string())
        }
        ServerNote::LeasesRevoked { by, .. } => {
            // A note that names no server leaves it to the reader: the leader revokes.
            let lane = match roles.get(by) {
                Some(s) => Some(s.name.as_str()),
                None => roles.deciding(),
            };
            if let Some(lane) = lane {
                let lane = lane.to_string();
                to.lanes
                    .mark(&lane, "revoked", at, "revoked".into(), what.to_string());
            }
        }
    }
}
