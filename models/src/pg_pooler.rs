//! # `pg-pooler`: PostgreSQL session advisory locks behind a transaction pooler
//!
//! A session advisory lock (`pg_advisory_lock`) belongs to the server session that ran it, and
//! session locks stack: a session that locks twice holds twice. Behind PgBouncer in
//! transaction mode a client is lent a server connection for one transaction only, and each
//! statement outside a transaction block is one; so the lock stays on the server connection
//! that ran `pg_advisory_lock`, that connection goes back to the pool, and the next client lent
//! it "acquires" at once, while the first still holds. The unlock may land on another connection
//! and answer `f`, leaving the lock stranded (pgbouncer#102, #418, #617; rails#32622;
//! goauthentik/authentik#23876). In session mode a client keeps its connection, so the lock
//! behaves as without a pooler; the transaction-level lock (`BEGIN; pg_advisory_xact_lock; …;
//! COMMIT`) keeps one connection for the whole transaction and is safe in either mode.
//!
//! ## The model
//! * `conns` server connections, each with the number of session holds it has on the one key
//!   (and whether the transaction open on it holds the key at transaction level).
//! * A client's statement runs on a connection the pooler lends it: in transaction mode any
//!   free one (PgBouncer's choice is not modelled: every free connection is a branch), in
//!   session mode the one it was lent first. A lock is granted when no other connection holds
//!   the key; a connection that holds it already is granted again (the stack).
//! * `xact`: a client's `BEGIN` borrows a connection until its `COMMIT`, which releases the
//!   transaction-level hold.
//! * No faults: the pooler's failure needs none.
//!
//! ## Parameters
//! `clients` (2), `conns` (2), `mode` (`transaction`), `xact` (false), `cycles` (1).
//!
//! ## Results (tests below)
//! * transaction mode, session lock: `mutual_exclusion` violated in two steps (client-0 locks
//!   on a connection, client-1 is lent the same connection and locks: the stack grants it);
//! * session mode, or the transaction-level lock: holds exhaustively.

use crate::lock_model::{LockModel, Path, PropInfo};
use crate::params::{self, ParamSpec, Params};
use crate::properties;
use crate::report::Expectation;
use crate::scenario::Scenario;
use crate::ModelError;
use stateright::{Model, Property};

/// Clients and connections are fixed-size arrays so states stay `Copy` and cheap to hash.
pub const MAX: usize = 3;

/// The model's configuration (see the module docs).
#[derive(Clone, Debug)]
pub struct PgPooler {
    /// Clients competing for the lock.
    pub clients: u8,
    /// PgBouncer's server connections (`default_pool_size`).
    pub conns: u8,
    /// `pool_mode = transaction` (else `session`).
    pub transaction_mode: bool,
    /// The transaction-level lock instead of the session lock.
    pub xact: bool,
    /// Acquisitions per client.
    pub cycles: u8,
    /// Simulated milliseconds per tick (the scenario's unit; this model has no time).
    pub tick_ms: u64,
    /// The one registered property.
    pub property: &'static str,
}

impl Default for PgPooler {
    fn default() -> Self {
        PgPooler {
            clients: 2,
            conns: 2,
            transaction_mode: true,
            xact: false,
            cycles: 1,
            tick_ms: 100,
            property: "mutual_exclusion",
        }
    }
}

/// One client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Between acquiring and releasing.
    pub holding: bool,
    /// Acquisitions completed.
    pub cycles: u8,
    /// The connection lent to it (session mode: from its first statement on; `xact`: from
    /// `BEGIN` to `COMMIT`), plus one; 0: none.
    pub conn: u8,
    /// Which grant the current hold is (ghost state).
    pub grant: u8,
}

/// One server connection (a backend session).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Conn {
    /// Session-level holds of the key (they stack).
    pub holds: u8,
    /// The transaction open on it holds the key at transaction level.
    pub xact_hold: bool,
    /// Lent to a client for longer than a statement (its session, or its transaction).
    pub lent: bool,
}

/// A state of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PgState {
    /// Steps taken (the model has no time; kept for the trace's tick column).
    pub t: u8,
    /// Grants so far.
    pub grants: u8,
    /// The clients.
    pub clients: [Client; MAX],
    /// The server connections.
    pub conns: [Conn; MAX],
    /// The protected storage.
    pub storage: properties::Storage,
}

/// A step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PgAction {
    /// Client `c`'s lock statement runs on connection `p` and is granted.
    Lock(u8, u8),
    /// Client `c`'s unlock (or `COMMIT`) runs on connection `p`.
    Unlock(u8, u8),
}

const CLIENT: Client = Client {
    holding: false,
    cycles: 0,
    conn: 0,
    grant: 0,
};

impl PgPooler {
    /// The connections client `c`'s next statement may run on.
    fn lendable(&self, s: &PgState, c: usize) -> Vec<u8> {
        let cl = &s.clients[c];
        if cl.conn > 0 {
            return vec![cl.conn - 1];
        }
        (0..self.conns)
            .filter(|&p| !s.conns[p as usize].lent)
            .collect()
    }

    /// Whether a lock on connection `p` is granted now: no other connection holds the key.
    fn grantable(&self, s: &PgState, p: u8) -> bool {
        (0..self.conns)
            .filter(|&q| q != p)
            .all(|q| s.conns[q as usize].holds == 0 && !s.conns[q as usize].xact_hold)
    }

    /// Whether a connection stays lent past a statement.
    fn sticky(&self) -> bool {
        !self.transaction_mode || self.xact
    }
}

impl Model for PgPooler {
    type State = PgState;
    type Action = PgAction;

    fn init_states(&self) -> Vec<PgState> {
        vec![PgState {
            t: 0,
            grants: 0,
            clients: [CLIENT; MAX],
            conns: [Conn::default(); MAX],
            storage: properties::Storage::default(),
        }]
    }

    fn actions(&self, s: &PgState, out: &mut Vec<PgAction>) {
        for c in 0..self.clients {
            let cl = &s.clients[c as usize];
            if cl.cycles >= self.cycles {
                continue;
            }
            for p in self.lendable(s, c as usize) {
                if cl.holding {
                    out.push(PgAction::Unlock(c, p));
                } else if self.grantable(s, p) {
                    out.push(PgAction::Lock(c, p));
                }
            }
        }
    }

    fn next_state(&self, last: &PgState, action: PgAction) -> Option<PgState> {
        let mut s = *last;
        s.t += 1;
        match action {
            PgAction::Lock(c, p) => {
                s.grants += 1;
                let conn = &mut s.conns[p as usize];
                if self.xact {
                    conn.xact_hold = true;
                } else {
                    conn.holds += 1;
                }
                if self.sticky() {
                    conn.lent = true;
                    s.clients[c as usize].conn = p + 1;
                }
                let cl = &mut s.clients[c as usize];
                cl.holding = true;
                cl.grant = s.grants;
            }
            PgAction::Unlock(c, p) => {
                let conn = &mut s.conns[p as usize];
                if self.xact {
                    conn.xact_hold = false;
                } else {
                    // `pg_advisory_unlock` answers `f` on a connection that holds nothing.
                    conn.holds = conn.holds.saturating_sub(1);
                }
                let cl = &mut s.clients[c as usize];
                cl.holding = false;
                cl.cycles += 1;
                cl.grant = 0;
                // A transaction's connection goes back at COMMIT; a session's when the client
                // leaves, which is after its last cycle.
                if self.xact || cl.cycles >= self.cycles {
                    cl.conn = 0;
                    conn.lent = false;
                }
            }
        }
        Some(s)
    }

    crate::runner::checked_by_runner!();

    fn within_boundary(&self, _: &PgState) -> bool {
        true
    }
}

properties::lock_state!(PgState, |c: &Client| c.holding);

const PARAMS: &[ParamSpec] = &[
    params::CLIENTS,
    ParamSpec {
        name: "conns",
        default: "2",
        help: "PgBouncer's server connections (default_pool_size)",
    },
    ParamSpec {
        name: "mode",
        default: "transaction",
        help: "PgBouncer's pool_mode: transaction or session",
    },
    ParamSpec {
        name: "xact",
        default: "false",
        help: "the transaction-level lock (BEGIN; pg_advisory_xact_lock; COMMIT) instead of the session lock",
    },
    params::CYCLES,
    params::TICK_MS,
];

impl LockModel for PgPooler {
    const NAME: &'static str = "pg-pooler";
    const PARAMS: &'static [ParamSpec] = PARAMS;
    const DEFAULT_PROPERTY: &'static str = "mutual_exclusion";

    fn from_params(p: &Params) -> Result<Self, ModelError> {
        let transaction_mode = p.choice("mode", &["transaction", "session"])? == 0;
        Ok(PgPooler {
            clients: p.clients(MAX)?,
            conns: p.int("conns", 1, MAX as u8)?,
            transaction_mode,
            xact: p.bool("xact")?,
            cycles: p.int("cycles", 1, 3)?,
            tick_ms: p.tick_ms()?,
            property: Self::DEFAULT_PROPERTY,
        })
    }

    fn all_properties() -> Vec<(PropInfo, Property<Self>)> {
        properties::standard(properties::MUTEX_ABOUT)
    }

    crate::runner::common_fields!();

    fn expected(&self, property: &str) -> Expectation {
        let unsafe_ = self.clients >= 2 && self.transaction_mode && !self.xact;
        match property {
            "mutual_exclusion" | "no_stale_write" if unsafe_ => Expectation::Violated,
            "handover" => properties::handover_expected(self.clients, self.cycles),
            _ => Expectation::Holds,
        }
    }

    fn facts(&self, s: &PgState) -> Vec<(String, String)> {
        let mut f = Vec::new();
        for p in 0..self.conns as usize {
            let c = &s.conns[p];
            f.push((
                format!("server connection {p}"),
                format!(
                    "{} session hold(s){}{}",
                    c.holds,
                    if c.xact_hold {
                        ", a transaction-level hold"
                    } else {
                        ""
                    },
                    if c.lent { ", lent" } else { ", in the pool" }
                ),
            ));
        }
        for (i, c) in s.clients[..self.clients as usize].iter().enumerate() {
            f.push((
                format!("client-{i}"),
                if c.holding {
                    format!("HOLDS lock #{}", c.grant)
                } else {
                    format!("{} cycle(s) done", c.cycles)
                },
            ));
        }
        f
    }

    fn action_text(&self, s: &PgState, a: &PgAction) -> String {
        let lock = if self.xact {
            "BEGIN; SELECT pg_advisory_xact_lock(k)"
        } else {
            "SELECT pg_advisory_lock(k)"
        };
        match *a {
            PgAction::Lock(c, p) => {
                let stack = s.conns[p as usize].holds;
                format!(
                    "client-{c}: {lock} on server connection {p}{}",
                    if stack > 0 {
                        format!(", which holds it already ({stack}): granted at once")
                    } else {
                        ": granted".into()
                    }
                )
            }
            PgAction::Unlock(c, p) if self.xact => {
                format!("client-{c}: COMMIT on server connection {p}: the lock goes")
            }
            PgAction::Unlock(c, p) => {
                let held = s.conns[p as usize].holds > 0;
                format!(
                    "client-{c}: SELECT pg_advisory_unlock(k) on server connection {p}: {}",
                    if held {
                        "t"
                    } else {
                        "f (WARNING: not held there), the lock stays"
                    }
                )
            }
        }
    }

    /// Not written: the bundled scenario replays this trace on the simulated PgBouncer.
    fn scenario(&self, _property: &str, _path: &Path<Self>) -> Result<Scenario, String> {
        Err("replay it with `lockcheck run scenarios/pg-pgbouncer-transaction-two-holders.toml` (and `--real`, on a spawned pgbouncer)".into())
    }
}

#[cfg(test)]
mod tests {
    use crate::report::Finding;
    use crate::test_util::{actions, check};
    use crate::Strategy;

    #[test]
    fn the_next_client_lent_the_holders_connection_holds_too_in_two_steps() {
        let r = check("pg-pooler", "mutual_exclusion", &[], Strategy::Bfs);
        let a = actions(&r);
        assert_eq!(a.len(), 2, "{a:?}");
        assert!(
            a[1].contains("holds it already (1): granted at once"),
            "{a:?}"
        );
        assert!(r.to_scenario_toml().is_none());
    }

    #[test]
    fn session_pooling_and_the_transaction_level_lock_are_safe_exhaustively() {
        for p in [
            &[("mode", "session"), ("clients", "3"), ("cycles", "2")][..],
            &[("xact", "true"), ("clients", "3"), ("cycles", "2")][..],
        ] {
            let r = check("pg-pooler", "mutual_exclusion", p, Strategy::Dfs);
            let Finding::Holds { unique_states, .. } = r.outcome else {
                panic!("{}", r.to_text())
            };
            assert!(unique_states > 10, "{unique_states}");
            let r = check("pg-pooler", "handover", p, Strategy::Bfs);
            assert!(r.witness.is_some());
        }
    }
}
