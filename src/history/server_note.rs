//! A server's role in its deployment, and what the nemesis's notes say happened to a server.
//!
//! The worlds do not record a server's role as an event of its own: a role change is a fault
//! note (`redis-0-replica-0 promoted to master of group 0`, `zookeeper-1 leads (...)`,
//! `etcd-1 elected leader (...)`), worded alike in both worlds, and those notes are part of every
//! golden trace hash, so a new event kind would change every hash. This is the one place that
//! reads the notes back as what they mean for a server: down, back, leading, promoted, demoted,
//! a session it expired, leases it revoked. Its code matches verbs, never a service's name, so
//! whoever reads it (the HTML timeline) need not name one either.

use serde::Serialize;

/// A server's part in its deployment at one time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Takes its group's writes by configuration (or a failover's promotion), not by election.
    Master,
    /// Copies a master; becomes one only when promoted.
    Replica,
    /// Elected by its peers to order every write (a raft or Zab leader).
    Leader,
    /// A peer that follows the leader and may be elected when it falls.
    Follower,
    /// A server with no peers: it serves alone, with no role to lose.
    Standalone,
}

impl Role {
    /// Its name: the class of its span on a timeline lane.
    pub fn name(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Replica => "replica",
            Role::Leader => "leader",
            Role::Follower => "follower",
            Role::Standalone => "standalone",
        }
    }

    /// The role a server comes back in after a restart, `configured` being the one it started
    /// the run in. A configured role comes back with the configuration (a restarted master is a
    /// master again until someone demotes it: the split brain a failover risks); an elected one
    /// does not: a restarted peer rejoins as a follower, and leads again only when elected.
    pub fn after_restart(configured: Role) -> Role {
        match configured {
            Role::Leader | Role::Follower => Role::Follower,
            other => other,
        }
    }
}

/// What a nemesis note says happened to a server, named by the note's first word. The caller
/// knows which names are servers: a client's crash reads as [`ServerNote::Down`] too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerNote<'a> {
    /// It stopped: crashed, or killed (`SIGKILL`).
    Down(&'a str),
    /// It runs again after a crash.
    Restarted(&'a str),
    /// It won an election: it leads, and whoever led before does not.
    Leads(&'a str),
    /// It stopped leading for want of a quorum: it runs on, as a follower of nobody yet.
    SteppedDown(&'a str),
    /// It was promoted to master: by a failover, or by the sentinels (`+switch-master old ->
    /// new`, which each sentinel announces: a master promoted again stays one).
    Promoted(&'a str),
    /// It was demoted to a replica (`+convert-to-slave`).
    Demoted(&'a str),
    /// It stopped (`SIGSTOP`, a stalled process) for a while.
    Paused(&'a str),
    /// It goes on after a pause.
    Resumed(&'a str),
    /// It expired a client's session (whose ephemeral nodes went with it): the session's id.
    SessionExpired {
        /// The server that expired it.
        server: &'a str,
        /// The session's id, as the note gives it.
        session: &'a str,
    },
    /// Leases revoked because they expired, with their keys; `by` is the note's first word,
    /// which is the deployment's name rather than a server's when the note leaves to the reader
    /// that the leader revokes.
    LeasesRevoked {
        /// The note's first word: a server, or the deployment as a whole.
        by: &'a str,
        /// The leases, as the note lists them.
        leases: &'a str,
    },
}

impl<'a> ServerNote<'a> {
    /// What the nemesis note `what` says happened to a server, if anything.
    pub fn parse(what: &'a str) -> Option<ServerNote<'a>> {
        if let Some((_, moved)) = what.split_once(": +switch-master ") {
            let (_, new) = moved.split_once(" -> ")?;
            return Some(ServerNote::Promoted(new.split_whitespace().next()?));
        }
        let node = what.split_whitespace().next()?;
        let rest = &what[node.len()..];
        let rest = rest.strip_prefix(" (the leader)").unwrap_or(rest);
        let word = |w: &str| {
            rest.strip_prefix(w)
                .is_some_and(|tail| tail.is_empty() || tail.starts_with([' ', ';', ',', '(']))
        };
        let note = if word(" crashed") || word(" killed") {
            ServerNote::Down(node)
        } else if word(" restarted") {
            ServerNote::Restarted(node)
        } else if word(" leads") || word(" elected leader") {
            ServerNote::Leads(node)
        } else if rest.starts_with(" steps down") {
            ServerNote::SteppedDown(node)
        } else if word(" promoted to master") {
            ServerNote::Promoted(node)
        } else if word(" demoted to a replica") {
            ServerNote::Demoted(node)
        } else if rest.starts_with(" paused for ") {
            ServerNote::Paused(node)
        } else if word(" resumed") {
            ServerNote::Resumed(node)
        } else if let Some(tail) = rest.strip_prefix(" expired session ") {
            ServerNote::SessionExpired {
                server: node,
                session: tail.split_whitespace().next()?,
            }
        } else if let Some(tail) = rest.strip_prefix(" revoked expired lease(s) ") {
            ServerNote::LeasesRevoked {
                by: node,
                leases: tail.split(" (").next()?,
            }
        } else {
            return None;
        };
        Some(note)
    }
}

#[cfg(test)]
mod tests {
    use super::ServerNote::*;
    use super::*;

    /// Every server note either world writes, read back (the sentences are the worlds' own).
    #[test]
    fn the_notes_of_both_worlds_read_back() {
        let cases = [
            ("redis-0 killed (SIGKILL)", Some(Down("redis-0"))),
            ("redis-0 killed", Some(Down("redis-0"))),
            (
                "redis-1-replica-0 promoted to master of group 1 (cluster election, epoch 4)",
                Some(Promoted("redis-1-replica-0")),
            ),
            (
                "redis-1 demoted to a replica (follows redis-1-replica-0)",
                Some(Demoted("redis-1")),
            ),
            ("cluster: redis-1 cluster state fail", None),
            (
                "etcd-0 crashed (it was the leader)",
                Some(Down("etcd-0")),
            ),
            (
                "zookeeper-0 (the leader) crashed; the ensemble elects a new leader",
                Some(Down("zookeeper-0")),
            ),
            (
                "zookeeper-0 (the leader) killed (SIGKILL, pid Some(7)); the ensemble elects a new leader",
                Some(Down("zookeeper-0")),
            ),
            (
                "mysql-0 restarted (InnoDB crash recovery)",
                Some(Restarted("mysql-0")),
            ),
            ("etcd-2 restarted", Some(Restarted("etcd-2"))),
            ("redis-0 restart failed: gone", None),
            (
                "zookeeper-1 leads (a new epoch; every session's timeout starts again)",
                Some(Leads("zookeeper-1")),
            ),
            (
                "etcd-1 elected leader (every lease extended by an election timeout)",
                Some(Leads("etcd-1")),
            ),
            (
                "zookeeper-0 (the leader) steps down: 1 of 3 servers run and reach it, no quorum",
                Some(SteppedDown("zookeeper-0")),
            ),
            (
                "etcd-0 (the leader) steps down: 1 of 3 members run, no quorum",
                Some(SteppedDown("etcd-0")),
            ),
            ("no ZooKeeper leader elected: at most 1 of 3 servers run", None),
            ("no etcd leader: a majority of members is down", None),
            (
                "redis-0-replica-0 promoted to master of group 0",
                Some(Promoted("redis-0-replica-0")),
            ),
            (
                "sentinel-1: +switch-master redis-0 -> redis-0-replica-0",
                Some(Promoted("redis-0-replica-0")),
            ),
            (
                "redis-0 demoted to a replica (+convert-to-slave): its dataset is replaced",
                Some(Demoted("redis-0")),
            ),
            (
                "zookeeper-0 paused for 500 ms (answers nothing; its session tracker stands still)",
                Some(Paused("zookeeper-0")),
            ),
            ("mysql-0 resumed (SIGCONT)", Some(Resumed("mysql-0"))),
            ("zookeeper-0 resumed", Some(Resumed("zookeeper-0"))),
            (
                "zookeeper-0 expired session 0x100000000000001 (its ephemeral nodes are deleted)",
                Some(SessionExpired {
                    server: "zookeeper-0",
                    session: "0x100000000000001",
                }),
            ),
            (
                "etcd revoked expired lease(s) 1a, 2b (their keys deleted)",
                Some(LeasesRevoked {
                    by: "etcd",
                    leases: "1a, 2b",
                }),
            ),
            ("sentinel-0: +sdown master redis-0", None),
            ("partition healed", None),
            ("client-3 killed-ish", None),
        ];
        for (what, want) in cases {
            assert_eq!(ServerNote::parse(what), want, "{what}");
        }
    }

    #[test]
    fn an_elected_role_is_not_kept_over_a_restart_and_a_configured_one_is() {
        assert_eq!(Role::after_restart(Role::Leader), Role::Follower);
        assert_eq!(Role::after_restart(Role::Follower), Role::Follower);
        assert_eq!(Role::after_restart(Role::Master), Role::Master);
        assert_eq!(Role::after_restart(Role::Replica), Role::Replica);
        assert_eq!(Role::after_restart(Role::Standalone), Role::Standalone);
        assert_eq!(Role::Standalone.name(), "standalone");
    }
}
