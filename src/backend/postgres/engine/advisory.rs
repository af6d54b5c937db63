//! PostgreSQL's advisory lock table, as the lock manager keeps it: per key, which sessions hold
//! it in which mode and scope and how many times, and who waits, first come first served.
//!
//! The rules the simulation keeps (PostgreSQL 15, "Advisory Locks" in the manual and
//! `src/backend/storage/lmgr/lock.c`):
//! - a `bigint` key and a pair of `int` keys are separate key spaces (`1` and `(0, 1)` are two
//!   locks);
//! - exclusive conflicts with everything another session holds, shared only with exclusive; a
//!   session never conflicts with itself (it may hold both modes);
//! - holds stack: a session that locks twice must unlock twice, and each scope (session,
//!   transaction) counts on its own; `pg_advisory_unlock` gives back one *session* hold of its
//!   mode and answers `f` (with a WARNING) when there is none;
//! - a new request waits behind earlier conflicting waiters, unless its session already holds
//!   the key in some mode (the lock manager then checks only the holders), so a writer is not
//!   starved by a stream of readers.

use std::collections::BTreeMap;

/// A client session of the simulated server.
pub type SessionId = u64;

/// An advisory lock's key: `pg_advisory_lock(bigint)` or `pg_advisory_lock(int, int)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// The one-`bigint` form.
    Big(i64),
    /// The two-`int` form.
    Pair(i32, i32),
}

/// The lock mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// `pg_advisory_lock`: conflicts with every other session's hold.
    Exclusive,
    /// `pg_advisory_lock_shared`: conflicts with other sessions' exclusive holds.
    Shared,
}

impl Mode {
    fn conflicts(self, other: Mode) -> bool {
        self == Mode::Exclusive || other == Mode::Exclusive
    }
}

/// How long a hold lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Until unlocked or the session ends (a rollback does not release it).
    Session,
    /// Until the transaction ends (commit or rollback); cannot be unlocked.
    Xact,
}

/// A waiting request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Who waits.
    pub session: SessionId,
    /// What for.
    pub key: Key,
    /// In which mode.
    pub mode: Mode,
    /// And which scope the hold will have.
    pub scope: Scope,
}

/// Every advisory hold and wait of the server.
#[derive(Clone, Debug, Default)]
pub struct LockTable {
    /// Hold counts per key, per (session, mode, scope).
    held: BTreeMap<Key, BTreeMap<(SessionId, Mode, Scope), u32>>,
    /// Waiting requests in arrival order.
    queue: Vec<Request>,
}

impl LockTable {
    /// Whether `session` holds `key` in any mode or scope.
    fn holds_any(&self, session: SessionId, key: Key) -> bool {
        self.held
            .get(&key)
            .is_some_and(|h| h.keys().any(|(s, _, _)| *s == session))
    }

    /// Whether `session` may take `key` in `mode` now. `ahead` are the waiters queued before
    /// it (all of them for a new request).
    fn grantable(&self, session: SessionId, key: Key, mode: Mode, ahead: &[Request]) -> bool {
        let holders_ok = self.held.get(&key).is_none_or(|h| {
            h.keys()
                .all(|(s, m, _)| *s == session || !mode.conflicts(*m))
        });
        if !holders_ok {
            return false;
        }
        self.holds_any(session, key)
            || ahead
                .iter()
                .all(|w| w.key != key || w.session == session || !mode.conflicts(w.mode))
    }

    /// Tries to take `key`; `false`: the caller must wait (or give up, for a `pg_try_…`).
    pub fn try_take(&mut self, session: SessionId, key: Key, mode: Mode, scope: Scope) -> bool {
        if !self.grantable(session, key, mode, &self.queue) {
            return false;
        }
        self.add(session, key, mode, scope);
        true
    }

    fn add(&mut self, session: SessionId, key: Key, mode: Mode, scope: Scope) {
        *self
            .held
            .entry(key)
            .or_default()
            .entry((session, mode, scope))
            .or_insert(0) += 1;
    }

    /// Queues a request that could not be granted.
    pub fn enqueue(&mut self, request: Request) {
        self.queue.push(request);
    }

    /// Takes `session`'s request out of the queue (its wait ended without the lock).
    pub fn dequeue(&mut self, session: SessionId) {
        self.queue.retain(|w| w.session != session);
    }

    /// Grants every queued request that can go now, in queue order; returns who got theirs.
    pub fn grant_waiters(&mut self) -> Vec<Request> {
        let mut granted = Vec::new();
        let mut i = 0;
        while i < self.queue.len() {
            let w = self.queue[i].clone();
            if self.grantable(w.session, w.key, w.mode, &self.queue[..i]) {
                self.queue.remove(i);
                self.add(w.session, w.key, w.mode, w.scope);
                granted.push(w);
                // An earlier waiter may now be blocked by this one's grant only if it conflicts,
                // and earlier ones were checked first: go on from here.
            } else {
                i += 1;
            }
        }
        granted
    }

    /// `pg_advisory_unlock[_shared]`: gives back one session-level hold; `false` when the
    /// session had none in that mode.
    pub fn unlock(&mut self, session: SessionId, key: Key, mode: Mode) -> bool {
        let Some(holds) = self.held.get_mut(&key) else {
            return false;
        };
        let Some(n) = holds.get_mut(&(session, mode, Scope::Session)) else {
            return false;
        };
        *n -= 1;
        if *n == 0 {
            holds.remove(&(session, mode, Scope::Session));
            if holds.is_empty() {
                self.held.remove(&key);
            }
        }
        true
    }

    /// Drops every hold of `session` in `scope` (`pg_advisory_unlock_all` and `DISCARD ALL`
    /// for the session scope, the end of a transaction for the transaction scope).
    pub fn release_scope(&mut self, session: SessionId, scope: Scope) {
        for holds in self.held.values_mut() {
            holds.retain(|(s, _, sc), _| *s != session || *sc != scope);
        }
        self.held.retain(|_, h| !h.is_empty());
    }

    /// The session ended: all its holds and its wait go.
    pub fn drop_session(&mut self, session: SessionId) {
        self.release_scope(session, Scope::Session);
        self.release_scope(session, Scope::Xact);
        self.dequeue(session);
    }

    /// The sessions holding `key` in any mode, in id order.
    pub fn holders(&self, key: Key) -> Vec<SessionId> {
        let mut v: Vec<SessionId> = self
            .held
            .get(&key)
            .map(|h| h.keys().map(|(s, _, _)| *s).collect())
            .unwrap_or_default();
        v.dedup();
        v
    }

    /// The sessions `session`'s wait waits for: holders of a conflicting mode and conflicting
    /// waiters ahead of it (the edges of the wait-for graph the deadlock check walks).
    pub fn waits_for(&self, session: SessionId) -> Vec<SessionId> {
        let Some(pos) = self.queue.iter().position(|w| w.session == session) else {
            return Vec::new();
        };
        let w = &self.queue[pos];
        let mut out: Vec<SessionId> = self
            .held
            .get(&w.key)
            .map(|h| {
                h.keys()
                    .filter(|(s, m, _)| *s != session && w.mode.conflicts(*m))
                    .map(|(s, _, _)| *s)
                    .collect()
            })
            .unwrap_or_default();
        if !self.holds_any(session, w.key) {
            out.extend(
                self.queue[..pos]
                    .iter()
                    .filter(|o| o.key == w.key && o.session != session && w.mode.conflicts(o.mode))
                    .map(|o| o.session),
            );
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether `session`'s wait closes a cycle of waits.
    pub fn in_deadlock(&self, session: SessionId) -> bool {
        let mut seen = Vec::new();
        let mut stack = self.waits_for(session);
        while let Some(s) = stack.pop() {
            if s == session {
                return true;
            }
            if !seen.contains(&s) {
                seen.push(s);
                stack.extend(self.waits_for(s));
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_stack_and_one_unlock_leaves_the_lock_held() {
        let mut t = LockTable::default();
        assert!(t.try_take(1, Key::Big(7), Mode::Exclusive, Scope::Session));
        assert!(t.try_take(1, Key::Big(7), Mode::Exclusive, Scope::Session));
        assert!(!t.try_take(2, Key::Big(7), Mode::Exclusive, Scope::Session));
        assert!(t.unlock(1, Key::Big(7), Mode::Exclusive));
        assert_eq!(t.holders(Key::Big(7)), vec![1]);
        assert!(t.unlock(1, Key::Big(7), Mode::Exclusive));
        assert!(!t.unlock(1, Key::Big(7), Mode::Exclusive));
        assert!(t.try_take(2, Key::Big(7), Mode::Exclusive, Scope::Session));
    }

    #[test]
    fn the_two_key_spaces_are_apart_and_shared_holds_share() {
        let mut t = LockTable::default();
        assert!(t.try_take(1, Key::Big(1), Mode::Exclusive, Scope::Session));
        assert!(t.try_take(2, Key::Pair(0, 1), Mode::Exclusive, Scope::Session));
        assert!(t.try_take(1, Key::Big(2), Mode::Shared, Scope::Session));
        assert!(t.try_take(2, Key::Big(2), Mode::Shared, Scope::Xact));
        assert!(!t.try_take(3, Key::Big(2), Mode::Exclusive, Scope::Session));
        // An unlock of the wrong scope or mode gives nothing back.
        assert!(!t.unlock(2, Key::Big(2), Mode::Shared));
        assert!(!t.unlock(1, Key::Big(2), Mode::Exclusive));
        t.release_scope(2, Scope::Xact);
        assert_eq!(t.holders(Key::Big(2)), vec![1]);
    }

    #[test]
    fn a_reader_waits_behind_a_queued_writer_and_waiters_go_in_order() {
        let mut t = LockTable::default();
        assert!(t.try_take(1, Key::Big(1), Mode::Shared, Scope::Session));
        assert!(!t.try_take(2, Key::Big(1), Mode::Exclusive, Scope::Session));
        t.enqueue(Request {
            session: 2,
            key: Key::Big(1),
            mode: Mode::Exclusive,
            scope: Scope::Session,
        });
        // Compatible with the holder, but a writer waits ahead of it.
        assert!(!t.try_take(3, Key::Big(1), Mode::Shared, Scope::Session));
        // The holder itself may stack another shared hold.
        assert!(t.try_take(1, Key::Big(1), Mode::Shared, Scope::Session));
        t.drop_session(1);
        let granted = t.grant_waiters();
        assert_eq!(granted.len(), 1);
        assert_eq!(granted[0].session, 2);
    }

    #[test]
    fn two_sessions_waiting_on_each_other_are_a_deadlock() {
        let mut t = LockTable::default();
        assert!(t.try_take(1, Key::Big(1), Mode::Exclusive, Scope::Session));
        assert!(t.try_take(2, Key::Big(2), Mode::Exclusive, Scope::Session));
        for (s, k) in [(1, 2), (2, 1)] {
            t.enqueue(Request {
                session: s,
                key: Key::Big(k),
                mode: Mode::Exclusive,
                scope: Scope::Session,
            });
        }
        assert!(t.in_deadlock(1));
        t.dequeue(1);
        assert!(!t.in_deadlock(2));
    }
}
