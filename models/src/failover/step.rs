//! Which steps a state of the failover model enables and what each does:
//! stateright's [`Model`], with the transitions only it uses.

use super::action::FailoverAction;
use super::state::{Client, FailoverState, Node, Op, Phase, IDLE, MAX_CLIENTS, NODES};
use super::Failover;
use crate::key::{self, Key};
use crate::properties::Storage;
use crate::runner::needs_writes;
use stateright::Model;

impl Failover {
    fn drop_expired(&self, s: &mut FailoverState) {
        for n in 0..self.nodes() {
            let now = self.clock(s, n);
            key::expire(&mut s.nodes[n].key, now);
        }
    }

    /// The master writes `op`: it becomes every live replica's pending
    /// write. Collapsing a replica's backlog to its last write drops only
    /// states in which a replica briefly holds the key of a client that has
    /// already released it or given up, which can only block other clients.
    fn append(&self, s: &mut FailoverState, op: Op) {
        let m = s.master as usize;
        for n in 0..self.nodes() {
            if n != m && s.nodes[n].up {
                s.nodes[n].pending = Some(op);
            }
        }
    }

    fn finish(&self, c: &mut Client) {
        c.cycles += 1;
        *c = Client {
            phase: if c.cycles >= self.cycles {
                Phase::Done
            } else {
                Phase::Idle
            },
            cycles: c.cycles,
            ..IDLE
        };
    }

    /// After `WAIT`: hold the lock, unless the lease already ran out on the
    /// client's clock while it waited.
    fn proceed(&self, s: &mut FailoverState, i: u8) {
        if s.t >= s.clients[i as usize].acquired_at + self.ttl {
            let c = &mut s.clients[i as usize];
            *c = Client {
                cycles: c.cycles,
                ..IDLE
            };
        } else {
            s.clients[i as usize].phase = Phase::Holding;
        }
    }

    fn release_key(&self, s: &mut FailoverState, i: u8) {
        let m = s.master as usize;
        if key::release(&mut s.nodes[m].key, i) {
            self.append(s, Op::Del);
        }
    }
}

impl Model for Failover {
    type State = FailoverState;
    type Action = FailoverAction;

    fn init_states(&self) -> Vec<FailoverState> {
        let node = Node {
            up: true,
            key: None,
            pending: None,
        };
        let mut nodes = [node; NODES];
        for n in nodes.iter_mut().skip(self.nodes()) {
            n.up = false;
        }
        vec![FailoverState {
            t: 0,
            master: 0,
            failed_over: false,
            nodes,
            grants: 0,
            clients: [IDLE; MAX_CLIENTS],
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &FailoverState, out: &mut Vec<FailoverAction>) {
        use FailoverAction::*;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            match c.phase {
                Phase::Idle => out.push(Acquire(i)),
                Phase::Waiting => {
                    if c.master != s.master {
                        // The master it wrote to died (it may have rejoined
                        // since, as a replica): the connection is gone.
                        out.push(WaitError(i));
                    } else if c.acks.count_ones() >= self.wait as u32 {
                        out.push(WaitOk(i));
                    } else if s.t >= c.acquired_at + self.wait_timeout {
                        out.push(WaitTimeout(i));
                    }
                }
                Phase::Holding => {
                    if needs_writes(self.property) {
                        out.push(Write(i));
                    }
                    out.push(Release(i));
                }
                Phase::Done => {}
            }
        }
        let m = s.master as usize;
        for n in 0..self.nodes() {
            if n != m && s.nodes[n].up && s.nodes[n].pending.is_some() {
                out.push(Replicate(n as u8));
            }
        }
        if !s.failed_over {
            for n in 0..self.nodes() {
                if n != m && s.nodes[n].up {
                    out.push(Failover(n as u8));
                }
            }
        }
        for n in 0..self.nodes() {
            if s.failed_over && !s.nodes[n].up {
                out.push(Rejoin(n as u8));
            }
        }
        // WAIT returns by its timeout: time cannot pass a waiting client's deadline.
        let wait_due = s.clients[..self.clients as usize]
            .iter()
            .any(|c| c.phase == Phase::Waiting && s.t >= c.acquired_at + self.wait_timeout);
        if s.t < self.time_bound && !wait_due {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &FailoverState, action: FailoverAction) -> Option<FailoverState> {
        use FailoverAction::*;
        let mut s = *last;
        let m = s.master as usize;
        match action {
            Tick => {
                s.t += 1;
                self.drop_expired(&mut s);
                for c in s.clients.iter_mut().take(self.clients as usize) {
                    if c.phase == Phase::Holding && s.t >= c.acquired_at + self.ttl {
                        self.finish(c); // the lease ran out on the client's clock
                    }
                }
            }
            Acquire(i) => {
                if s.nodes[m].key.is_some() {
                    return None;
                }
                let key = Key {
                    holder: i,
                    expires: self.clock(&s, m) + self.ttl,
                };
                s.nodes[m].key = Some(key);
                self.append(&mut s, Op::Set(key));
                s.grants += 1;
                let c = &mut s.clients[i as usize];
                c.acquired_at = s.t;
                c.master = m as u8;
                c.acks = 0;
                c.grant = s.grants;
                c.phase = if self.wait > 0 {
                    Phase::Waiting
                } else {
                    Phase::Holding
                };
            }
            WaitOk(i) => self.proceed(&mut s, i),
            WaitTimeout(i) => {
                if self.proceed_on_timeout {
                    self.proceed(&mut s, i);
                } else {
                    // Give up: release, and try again later.
                    self.release_key(&mut s, i);
                    let c = &mut s.clients[i as usize];
                    *c = Client {
                        cycles: c.cycles,
                        ..IDLE
                    };
                }
            }
            WaitError(i) => {
                let c = &mut s.clients[i as usize];
                *c = Client {
                    cycles: c.cycles,
                    ..IDLE
                };
            }
            Write(i) => {
                let g = s.clients[i as usize].grant;
                s.storage.accept(g, 0);
            }
            Release(i) => {
                self.release_key(&mut s, i);
                self.finish(&mut s.clients[i as usize]);
            }
            Replicate(n) => {
                let n = n as usize;
                let op = s.nodes[n].pending.take().expect("pending write");
                match op {
                    Op::Set(k) => {
                        s.nodes[n].key = Some(k);
                        let c = &mut s.clients[k.holder as usize];
                        if c.phase == Phase::Waiting && c.master as usize == m {
                            c.acks |= 1 << n;
                        }
                    }
                    Op::Del => s.nodes[n].key = None,
                }
                self.drop_expired(&mut s);
            }
            Failover(n) => {
                let n = n as usize;
                s.failed_over = true;
                s.nodes[m] = Node {
                    up: false,
                    key: None,
                    pending: None,
                };
                s.master = n as u8;
                s.nodes[n].pending = None; // what had not arrived is lost
                let key = s.nodes[n].key;
                for r in 0..self.nodes() {
                    if r != n && s.nodes[r].up {
                        // The other replicas resync from the new master.
                        s.nodes[r].key = key;
                        s.nodes[r].pending = None;
                    }
                }
                self.drop_expired(&mut s);
            }
            Rejoin(n) => {
                let key = s.nodes[m].key;
                s.nodes[n as usize] = Node {
                    up: true,
                    key,
                    pending: None,
                };
                self.drop_expired(&mut s);
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
}
