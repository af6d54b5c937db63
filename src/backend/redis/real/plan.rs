//! Real-mode plans for spawned `redis-server`s: whether a Redis scenario has a real-mode recipe
//! for every fault, which client connections a partition cuts (with or without sentinels), and
//! how each master's and client's clock starts. Everything here is decided before a process is
//! spawned, so an unsupported scenario fails fast with the reason.

use rand::{Rng, SeedableRng};

use super::recipes::RedisRecipes;
use crate::fault::{Direction, Refused};
use crate::real::client_programs::client_program_launch::fake_time;
use crate::real::nemesis::plan::{client_index, scenario_links, unsupported};
use crate::real::nemesis::recipes::{ask, ClockSetting, ClockSettings};
use crate::real::servers::faketime::FakeTime;
use crate::real::RealError;
use crate::scenario::Scenario;
use crate::schedule::clocks;

/// Checks that every fault of a Redis scenario has a real-mode recipe on spawned
/// `redis-server`s (each backend's real world checks its own: `backend::Backend::real_check`).
pub(crate) fn check_redis(s: &Scenario) -> Result<(), RealError> {
    let sentinels = s.redis.sentinels > 0;
    if s.redis.min_replicas_to_write > 0 && !sentinels && s.redis.replicas > 0 {
        return Err(unsupported(format!(
            "`{}` sets min-replicas-to-write without sentinels: real mode's failover recipe cuts \
             the replica off from the start, which a real master would count against it; add \
             sentinels or run it in simulation (without --real)",
            s.name
        )));
    }
    if s.redis.replicas > 1 && !sentinels {
        return Err(unsupported(format!(
            "real mode runs at most 1 replica per master without sentinels; `{}` asks for {}",
            s.name, s.redis.replicas
        )));
    }
    for f in &s.faults {
        let recipes = RedisRecipes {
            s,
            trigger: &f.trigger,
        };
        match ask(&recipes, f) {
            Ok(()) => {}
            Err(Refused::Because(why)) => return Err(unsupported(why)),
            Err(Refused::Lacking) => {
                // The fault as the scenario file writes it, so the reader can find it there.
                let shown = crate::fault::fault_table(f).into_inline_table();
                return Err(unsupported(format!(
                    "fault {shown} has no real-mode recipe yet; run it in simulation (without --real)"
                )));
            }
        }
    }
    Ok(())
}

/// A master named in a clock fault: it must be `redis-<m>` of a group without replicas.
pub(crate) fn faked_master(s: &Scenario, node: &str, what: &str) -> Result<usize, RealError> {
    match master_index(s, node) {
        Some(m) if s.redis.replicas == 0 => Ok(m),
        _ => Err(unsupported(format!(
            "{what} on `{node}`: real mode fakes the clocks of clients and of masters without \
             replicas only (replicated groups: run it in simulation, without --real)"
        ))),
    }
}

/// A Redis server node (master or replica) -> its node index.
pub(crate) fn server_index(s: &Scenario, node: &str) -> Option<usize> {
    node.starts_with("redis-")
        .then(|| s.node_names().iter().position(|n| n == node))
        .flatten()
}

/// The directed links (node indices) a partition cuts in a Sentinel run, or why it cannot: a
/// client program's connections do not come from its node address (it is no process of
/// lockcheck's to bind), so a partition may not cut them.
pub(crate) fn sentinel_links(
    s: &Scenario,
    nodes: &[String],
    from: &[String],
    direction: Direction,
) -> Result<Vec<(usize, usize)>, RealError> {
    let (names, links) = scenario_links(s, nodes, from, direction);
    if s.lock.kind.is_client_program() {
        for &(a, b) in &links {
            for n in [a, b] {
                let other = if n == a { b } else { a };
                if client_index(s, &names[n]).is_some() && client_index(s, &names[other]).is_none()
                {
                    return Err(unsupported(format!(
                        "partition cutting {} -> {}: in a Sentinel run real mode cuts the links of \
                         servers, sentinels and lockcheck's own clients, not a client program's; \
                         run it in simulation, without --real",
                        names[a], names[b]
                    )));
                }
            }
        }
    }
    Ok(links)
}

/// `redis-<m>` -> m, for the scenario's masters.
pub(crate) fn master_index(s: &Scenario, node: &str) -> Option<usize> {
    let m: u32 = node.strip_prefix("redis-")?.parse().ok()?;
    (m < s.redis.masters).then_some(m as usize)
}

/// The (client, master) connections a partition cuts in real mode, or why it cannot.
pub(crate) fn client_cuts(
    s: &Scenario,
    nodes: &[String],
    from: &[String],
    direction: Direction,
) -> Result<Vec<(usize, usize)>, RealError> {
    let (names, links) = scenario_links(s, nodes, from, direction);
    let mut cuts = Vec::new();
    for &(a, b) in &links {
        let (na, nb) = (&names[a], &names[b]);
        match (client_index(s, na), master_index(s, nb)) {
            // A request that never arrives: the black hole.
            (Some(c), Some(m)) if s.redis.replicas == 0 => cuts.push((c, m)),
            _ => {
                let reply_only = client_index(s, nb).is_some()
                    && master_index(s, na).is_some()
                    && links.contains(&(b, a));
                let idle = (client_index(s, na).is_some() && client_index(s, nb).is_some())
                    || (s.redis.replicas == 0
                        && master_index(s, na).is_some()
                        && master_index(s, nb).is_some());
                // Clients never talk to each other, and independent masters do not either:
                // those cuts change nothing. A reply cut with its request cut is the black hole.
                if !(idle || reply_only) {
                    return Err(unsupported(format!(
                        "partition cutting {na} -> {nb}: real mode cuts client -> master \
                         connections of masters without replicas only (a lost reply to a request \
                         that landed needs a proxy); run it in simulation, without --real"
                    )));
                }
            }
        }
    }
    cuts.sort();
    cuts.dedup();
    Ok(cuts)
}

/// How each master's clock runs in real mode, and what to record about it.
pub(crate) struct ServerClocks {
    /// Each master's libfaketime setting, if its clock is faked.
    pub(crate) fake: Vec<Option<FakeTime>>,
    /// Start offsets to apply (jumpable servers) right after spawning.
    pub(crate) offsets: Vec<i64>,
    /// What the history records about the clocks before the run.
    pub(crate) notes: Vec<String>,
    /// Each client's start (offset ms, drift ppm).
    pub(crate) clients: Vec<(i64, i64)>,
}

/// How every master's and client's clock starts, from `[clocks]` and the clock faults.
pub(crate) fn server_clocks(s: &Scenario, seed: u64) -> Result<ServerClocks, RealError> {
    let masters = s.redis.masters as usize;
    let mut drift = vec![0i64; masters];
    let mut offsets = vec![0i64; masters];
    let mut jumps = vec![false; masters];
    let mut notes = Vec::new();
    let mut clients = vec![(0i64, 0i64); s.workload.clients as usize];
    // The same ranges and order as the simulator, drawn from the seed (not the same numbers).
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    for start in clocks::draw(&s.clocks, &s.node_names(), |[lo, hi]| {
        rng.gen_range(lo..=hi)
    }) {
        if let Some(c) = client_index(s, &start.node) {
            clients[c] = (start.offset_ms, start.drift_ppm);
        } else {
            let m = faked_master(s, &start.node, "[clocks]")?;
            offsets[m] = start.offset_ms;
            drift[m] = start.drift_ppm;
        }
        notes.push(start.describe());
    }
    for (node, setting) in ClockSettings::of(s) {
        // Client clocks are the client's `RealEnv`: set when the fault fires.
        if client_index(s, &node).is_some() {
            continue;
        }
        match setting {
            ClockSetting::Drift(ppm) => drift[faked_master(s, &node, "clock drift")?] = ppm,
            // Redis expires keys on its wall clock: a wall-clock jump of a master is a jump of
            // its libfaketime clock.
            ClockSetting::Jumps => jumps[faked_master(s, &node, "a clock jump")?] = true,
        }
    }
    let mut fake = Vec::new();
    for m in 0..masters {
        let who = format!("redis-{m}");
        fake.push(fake_time(&who, drift[m], offsets[m], jumps[m])?);
    }
    Ok(ServerClocks {
        fake,
        offsets,
        notes,
        clients,
    })
}
