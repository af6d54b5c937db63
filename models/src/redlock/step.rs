//! Which steps a state of the redlock model enables and what each does:
//! stateright's [`Model`], with the transitions only it uses.

use super::action::RedlockAction;
use super::state::{Client, Node, Phase, RedlockState, IDLE, MAX_CLIENTS, MAX_NODES};
use super::{ClientClock, Redlock};
use crate::key::{self, Key};
use crate::properties::Storage;
use crate::runner::needs_writes;
use stateright::Model;

impl Redlock {
    fn majority(&self) -> u32 {
        self.nodes as u32 / 2 + 1
    }

    fn drop_expired(&self, s: &mut RedlockState) {
        for n in 0..self.nodes as usize {
            let now = self.node_clock(s, n);
            key::expire(&mut s.nodes[n].key, now);
            if s.nodes[n].refuse_until != 0 && now >= s.nodes[n].refuse_until {
                s.nodes[n].refuse_until = 0;
            }
        }
    }

    fn unlock_all(&self, s: &mut RedlockState, i: u8) {
        for n in 0..self.nodes as usize {
            key::release(&mut s.nodes[n].key, i);
        }
    }

    fn finish(&self, c: &mut Client) {
        let cycles = c.cycles + 1;
        *c = Client {
            phase: if cycles >= self.cycles {
                Phase::Done
            } else {
                Phase::Idle
            },
            cycles,
            clock: c.clock,
            ..IDLE
        };
    }
}

impl Model for Redlock {
    type State = RedlockState;
    type Action = RedlockAction;

    fn init_states(&self) -> Vec<RedlockState> {
        let node = Node {
            key: None,
            jumped: 0,
            refuse_until: 0,
        };
        vec![RedlockState {
            t: 0,
            nodes: [node; MAX_NODES],
            clients: [IDLE; MAX_CLIENTS],
            grants: 0,
            pauses: 0,
            jumps: 0,
            crashes: 0,
            storage: Storage::default(),
        }]
    }

    fn actions(&self, s: &RedlockState, out: &mut Vec<RedlockAction>) {
        use RedlockAction::*;
        for i in 0..self.clients {
            let c = &s.clients[i as usize];
            if self.client_clock == ClientClock::Lag && c.clock < s.t {
                out.push(ClockAdvance(i));
            }
            if c.paused {
                out.push(Resume(i));
                continue;
            }
            // Only holders pause: time already passes freely between the
            // steps of an acquisition (a slow network or a pause there
            // needs no fault), and a pause before acquiring only delays.
            let can_pause = s.pauses < self.pauses && Self::holding(c);
            match c.phase {
                Phase::Idle => out.push(Lock(i)),
                Phase::Acquiring if c.next < self.nodes => out.push(Lock(i)),
                Phase::Acquiring => out.push(Finish(i)),
                // A validity check only ends a holding early, and a write
                // only changes the storage: runs that do not look at the
                // storage leave both out.
                Phase::Holding => {
                    if needs_writes(self.property) {
                        if self.check_validity_before_write {
                            out.push(Check(i));
                        } else {
                            out.push(Write(i));
                        }
                    }
                    out.push(Release(i));
                }
                Phase::Checked => {
                    out.push(Write(i));
                    out.push(Release(i));
                }
                Phase::Done => {}
            }
            if can_pause {
                out.push(Pause(i));
            }
        }
        for n in 0..self.nodes {
            let node = &s.nodes[n as usize];
            // A jump matters only to a key or a refusal it shortens: keys set
            // later expire relative to the jumped clock. Jumping an idle
            // node changes nothing but the clock's reading, so skip it.
            if s.jumps < self.jumps && (node.key.is_some() || node.refuse_until > 0) {
                out.push(ClockJump(n));
            }
            // Crashing a node that holds no key only makes it refuse grants
            // (or changes nothing): it cannot break safety, so skip it.
            if s.crashes < self.crashes && node.key.is_some() {
                out.push(Crash(n));
            }
        }
        if s.t < self.time_bound {
            out.push(Tick);
        }
    }

    fn next_state(&self, last: &RedlockState, action: RedlockAction) -> Option<RedlockState> {
        use RedlockAction::*;
        let mut s = *last;
        match action {
            Tick => {
                s.t += 1;
                self.drop_expired(&mut s);
                for i in 0..self.clients as usize {
                    let now = self.client_clock(&s, i);
                    let c = &mut s.clients[i];
                    if Self::holding(c) && !c.paused && now >= c.valid_until {
                        self.finish(c); // validity ran out on its clock
                    }
                }
            }
            Lock(i) => {
                if s.clients[i as usize].phase == Phase::Idle {
                    let now = self.client_clock(&s, i as usize);
                    let c = &mut s.clients[i as usize];
                    c.phase = Phase::Acquiring;
                    c.start = now;
                    c.next = 0;
                    c.got = 0;
                }
                let n = s.clients[i as usize].next as usize;
                let now = self.node_clock(&s, n);
                let node = &mut s.nodes[n];
                if node.key.is_none() && node.refuse_until == 0 {
                    node.key = Some(Key {
                        holder: i,
                        expires: now + self.ttl,
                    });
                    s.clients[i as usize].got |= 1 << n;
                }
                s.clients[i as usize].next += 1;
            }
            Finish(i) => {
                let now = self.client_clock(&s, i as usize);
                let c = s.clients[i as usize];
                let valid_until = (c.start + self.ttl).saturating_sub(self.allowance);
                let majority = c.got.count_ones() >= self.majority();
                let in_time = !self.recheck_after_acquire || now < valid_until;
                if majority && in_time {
                    s.grants += 1;
                    let c = &mut s.clients[i as usize];
                    c.phase = Phase::Holding;
                    c.valid_until = valid_until;
                    c.grant = s.grants;
                } else {
                    self.unlock_all(&mut s, i);
                    let c = &mut s.clients[i as usize];
                    let attempts = c.attempts + 1;
                    *c = Client {
                        phase: if attempts > self.retries {
                            Phase::Done
                        } else {
                            Phase::Idle
                        },
                        cycles: c.cycles,
                        attempts,
                        clock: c.clock,
                        ..IDLE
                    };
                }
            }
            Check(i) => {
                let now = self.client_clock(&s, i as usize);
                let c = &mut s.clients[i as usize];
                if now < c.valid_until {
                    c.phase = Phase::Checked;
                } else {
                    self.finish(c);
                }
            }
            Write(i) => {
                let c = &mut s.clients[i as usize];
                if c.phase == Phase::Checked {
                    c.phase = Phase::Holding;
                }
                let g = c.grant;
                s.storage.accept(g, 0);
            }
            Release(i) => {
                self.unlock_all(&mut s, i);
                self.finish(&mut s.clients[i as usize]);
            }
            Pause(i) => {
                s.clients[i as usize].paused = true;
                s.pauses += 1;
            }
            Resume(i) => s.clients[i as usize].paused = false,
            ClockAdvance(i) => s.clients[i as usize].clock += 1,
            ClockJump(n) => {
                s.nodes[n as usize].jumped += self.jump;
                s.jumps += 1;
                self.drop_expired(&mut s);
            }
            Crash(n) => {
                let now = self.node_clock(&s, n as usize);
                let node = &mut s.nodes[n as usize];
                node.key = None;
                if self.restart_delay {
                    node.refuse_until = now + self.ttl;
                }
                s.crashes += 1;
            }
        }
        (s != *last).then_some(s)
    }

    crate::runner::checked_by_runner!();
}
