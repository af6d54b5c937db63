//! The proptest [`Strategy`] whose values are explore cases: a fault schedule, the workload knobs
//! and a simulation seed.
//!
//! The value is built from proptest's own combinators (`vec`, unions, ranges, tuples) so that
//! proptest's shrinking does the minimising: the schedule loses faults first, then each fault
//! fires earlier and lasts less, then there are fewer clients and cycles, shorter critical
//! sections, and last a smaller seed. Client and node choices are drawn as slots and mapped onto
//! the case's own client count, so shrinking the clients never makes a fault invalid. Only the
//! fault kinds that apply to the cluster are drawn, from ranges `Space::of` checked non-empty.

use crate::fault::draw::{Cast, Deployment};
use crate::fault::{clock, crash, failover, partition, pause, server_pause, terminate};
use crate::history::Role;
use crate::scenario::Space;
use crate::scenario::{Fault, FaultKind, Scenario, Trigger};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

/// When a drawn fault fires.
#[derive(Clone, Debug, PartialEq)]
pub enum When {
    /// At a named point, at or after `after_ms`.
    Point {
        /// Index into the space's points.
        point: usize,
        /// True time before which passing the point does not fire the fault (ms).
        after_ms: u64,
    },
    /// At a true time.
    At(u64),
}

/// One explore case: everything proptest draws and shrinks.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The fault schedule, each fault with its trigger. Each fault as its family drew it, its clients and nodes still slots
    /// ([`FaultKind::place`] puts them on the case's).
    pub faults: Vec<(When, FaultKind)>,
    /// Clients in the workload.
    pub clients: u32,
    /// Cycles per client.
    pub cycles: u32,
    /// Critical-section length range (ms).
    pub hold_ms: [u64; 2],
    /// The simulation seed: shrinks last, since a different seed is a different run altogether.
    pub seed: u64,
    /// Nested acquires inside each critical section. Drawn after the seed, so the cases of a
    /// space whose `nested` range is one value are the cases it had before this dimension.
    pub nested: u32,
}

/// The strategy for the cases of `space`.
pub fn cases(space: &Space) -> BoxedStrategy<Case> {
    let faults = if space.max_faults == 0 || space.faults.is_empty() {
        Just(Vec::new()).boxed()
    } else {
        let budget = space.max_total_pause_ms;
        // On real servers every case has a fault: the fault-free run is the scenario itself,
        // which `lockcheck run --real` checks, and a real case costs a second.
        let fewest = usize::from(space.real);
        prop::collection::vec(fault(space), fewest..=space.max_faults)
            .prop_map(move |faults| super::pause_budget::within(faults, budget))
            .boxed()
    };
    let [h0, h1] = space.hold_ms;
    // On real servers the seed does not fix the run, so every case keeps the scenario's.
    let seed = if space.real {
        Just(space.seed).boxed()
    } else {
        (0..=u64::from(u32::MAX)).boxed()
    };
    (
        faults,
        space.clients[0]..=space.clients[1],
        space.cycles[0]..=space.cycles[1],
        (h0..=h1, h0..=h1),
        seed,
        space.nested[0]..=space.nested[1],
    )
        .prop_map(|(faults, clients, cycles, (a, b), seed, nested)| Case {
            faults,
            clients,
            cycles,
            hold_ms: [a.min(b), a.max(b)],
            seed,
            nested,
        })
        .boxed()
}

fn at_point(space: &Space) -> BoxedStrategy<When> {
    let n = space.points.len();
    let [low, high] = space.after_ms();
    (0..n, low..=high)
        .prop_map(|(point, after_ms)| When::Point { point, after_ms })
        .boxed()
}

fn at_time(space: &Space) -> BoxedStrategy<When> {
    (0..=space.duration_ms).prop_map(When::At).boxed()
}

/// When a server or network fault fires: at a named point or at a time in simulation; at a time
/// on real servers, where a named point is a client's own (real mode stops a process there, but
/// does not crash a server on its behalf).
fn when(space: &Space) -> BoxedStrategy<When> {
    if space.real {
        return at_time(space);
    }
    Union::new(vec![at_point(space), at_time(space)]).boxed()
}

/// When a clock starts drifting: at any time in simulation; from the start on real servers, where
/// libfaketime sets a server's rate when it starts.
fn drift_when(space: &Space) -> BoxedStrategy<When> {
    if space.real {
        return Just(When::At(0)).boxed();
    }
    when(space)
}

/// When a client pause fires: at a named point or at a time in simulation; at a named point on
/// real servers, where a pause is a `SIGSTOP` (or a stopped task) sent as the client reaches it.
///
/// With `pause_between_check_and_write = false` no pause is drawn at `before_write`, the
/// workload's own point between its validity check and its write (and the run defers one that
/// fires inside that window: `Scenario::pauses_spare_writes`). A space whose points do not
/// include it draws as it always did.
fn pause_when(space: &Space) -> BoxedStrategy<When> {
    let skip = (!space.pause_between_check_and_write)
        .then(|| space.points.iter().position(|p| p == "before_write"))
        .flatten();
    let Some(skip) = skip else {
        if space.real {
            return at_point(space);
        }
        return when(space);
    };
    let others: Vec<usize> = (0..space.points.len()).filter(|&i| i != skip).collect();
    let [low, high] = space.after_ms();
    let points = if others.is_empty() {
        None
    } else {
        Some(
            (prop::sample::select(others), low..=high)
                .prop_map(|(point, after_ms)| When::Point { point, after_ms })
                .boxed(),
        )
    };
    match (points, space.real) {
        (Some(p), true) => p,
        (Some(p), false) => Union::new(vec![p, at_time(space)]).boxed(),
        (None, _) => at_time(space),
    }
}

/// One arm of the union: a family's drawn values, with when they fire.
fn arm(
    when: BoxedStrategy<When>,
    kind: BoxedStrategy<FaultKind>,
) -> BoxedStrategy<(When, FaultKind)> {
    (when, kind).boxed()
}

fn fault(space: &Space) -> BoxedStrategy<(When, FaultKind)> {
    let arms: Vec<BoxedStrategy<(When, FaultKind)>> = space
        .faults
        .iter()
        .map(|kind| match *kind {
            "pause" => arm(pause_when(space), pause::draw(space.pause_ms)),
            "failover" => arm(when(space), failover::draw(space.masters)),
            "crash" => arm(
                when(space),
                crash::draw_server(&space.servers, space.restart_ms),
            ),
            "client_crash" => arm(at_point(space), crash::draw_client()),
            "partition" if space.split_brain => Union::new(vec![
                arm(when(space), partition::draw(space.partition_ms)),
                arm(
                    when(space),
                    partition::draw_split(space.masters, space.clients[1], space.partition_ms),
                ),
            ])
            .boxed(),
            "partition" => arm(when(space), partition::draw(space.partition_ms)),
            "clock_jump" => arm(when(space), clock::draw_jump(space.clock_jump_ms, false)),
            "clock_drift" => arm(drift_when(space), clock::draw_drift(space.clock_drift_ppm)),
            "wall_clock_jump" => arm(
                when(space),
                clock::draw_jump(space.wall_clock_jump_ms, true),
            ),
            "server_pause" => arm(
                when(space),
                server_pause::draw(&space.servers, space.pause_ms),
            ),
            "terminate" => arm(when(space), terminate::draw()),
            other => unreachable!("Space::of only admits known kinds, got {other}"),
        })
        .collect();
    Union::new(arms).boxed()
}

impl Case {
    /// The scenario this case runs: `base` with the case's workload, seed and schedule.
    pub fn scenario(&self, base: &Scenario, space: &Space) -> Scenario {
        let mut s = base.clone();
        s.seed = self.seed;
        s.workload.clients = self.clients;
        s.workload.cycles = self.cycles;
        s.workload.hold_ms = self.hold_ms;
        s.workload.nested = self.nested;
        if !space.pause_between_check_and_write {
            s.explore
                .get_or_insert_with(Default::default)
                .pause_between_check_and_write = Some(false);
        }
        let nodes: Vec<String> = space
            .servers
            .iter()
            .cloned()
            .chain((0..self.clients).map(|c| format!("client-{c}")))
            .collect();
        let cast = Cast::new(self.clients, &nodes);
        // A split's master and the nodes that watch it, by the backend's own names.
        let backend = base.backend();
        let masters: Vec<String> = backend
            .servers(base)
            .into_iter()
            .filter(|(_, role)| *role == Role::Master)
            .map(|(name, _)| name)
            .collect();
        let watchers = backend.watchers(base);
        let deployment = Deployment {
            masters: &masters,
            watchers: &watchers,
        };
        s.faults = self
            .faults
            .iter()
            .map(|(w, drawn)| {
                let trigger = match w {
                    When::Point { point, after_ms } => {
                        Trigger::on_point(&space.points[*point], *after_ms)
                    }
                    When::At(ms) => Trigger::At(*ms),
                };
                let kind = drawn.place_in(&cast, &deployment);
                Fault {
                    trigger,
                    kind,
                    by_client: None,
                }
            })
            .collect();
        s
    }
}
