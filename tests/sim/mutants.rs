//! Planted bugs: a verdict is only worth something if a wrong lock always fails and a right one
//! never does.
//!
//! [`Planted`] is one correct lock (`SET key token NX PX ttl`, a random owner token, release by a
//! Lua compare-and-delete, renewal by a Lua compare-and-`PEXPIRE`, reentrancy counted on the
//! client, an optional fencing token from `INCR`) into which each [`Bug`] plants one mistake that
//! the articles behind lockcheck's locks warn about, or that a hurried engineer makes. On the
//! Redlock scenarios the lock is lockcheck's own Redlock, with its Redlock bugs planted through
//! `RedlockOptions::planted` (the others leave it correct). Every mutant runs over the same scenarios as the
//! correct lock. A scenario states what the correct lock gives there (`expect_checks`); a mutant
//! is caught when some check the correct lock passes reports a violation. The correct lock must
//! match every expectation on every seed (no false alarm), and every mutant must be caught, by
//! the check that names its mistake.
//!
//! [`CLASSES`] are the cases issue #33 reported, where a correct lock used to be flagged or a
//! broken one missed: liveness with the holder's crash before its waiters' pause, a release whose
//! reply is lost, and a paused release. Each is a scenario every mutant faces, and
//! `each_issue_33_class_holds_for_its_neighbours` tries it with other client counts, pause orders
//! and seeds: the correct lock safe on every one, the class's mutant caught on every one.

use lockcheck::env::{ClockKind, Env, NamedPoint};
use lockcheck::judge::{Mode, Outcome};
use lockcheck::lock::lease::{COMPARE_AND_DELETE, COMPARE_AND_PEXPIRE};
use lockcheck::lock::{Guard, Lock, LockConfig, LockError, Redlock, RedlockBug};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;
use std::time::Duration;

/// One planted mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    /// The correct lock.
    None,
    /// `SET key token PX ttl` without `NX`: every client "acquires".
    NoNx,
    /// `SET key token NX` without a lease: a holder that dies leaves the lock taken forever.
    NoExpiry,
    /// Release by a plain `DEL`, no owner check (the "is the Redis lock perfect" article).
    PlainDel,
    /// Every client uses the same owner token, so the compare-and-delete compares nothing.
    SharedOwner,
    /// `GET`, and `SET` if it was empty: two clients can both see the key absent.
    CheckThenSet,
    /// A nil reply to `SET NX` (someone else holds it) taken as a grant.
    NilIsGrant,
    /// The lease is a tenth of the configured one: it runs out inside the critical section.
    TtlTooShort,
    /// The release script deletes when the value is *not* ours.
    InvertedCompare,
    /// An inner (nested) release deletes the key while the outer holder still works.
    InnerReleaseDeletes,
    /// No reentrancy: a nested acquire waits for the lock its own caller holds.
    NotReentrant,
    /// The fencing token is the same for every grant.
    ConstantToken,
    /// The holder believes its lease lasts ten times longer than it asked for.
    InflatedValidity,
    /// A `SET NX` whose reply timed out is taken as a grant ("it probably went through").
    TimeoutIsGrant,
    /// Release does nothing: every holding lasts until the lease runs out.
    NeverDeletes,
    /// Release by `GET`, compare, `DEL` in two round trips: the entry can change in between.
    GetThenDel,
    /// The validity time is measured on the wall clock (`currentTimeMillis`), which an NTP step
    /// moves, instead of the monotonic clock.
    WallClockValidity,
    /// The release runs the compare-and-delete but answers "released" whatever it returned: its
    /// caller never learns that its lease ran out while it held the lock.
    ReleaseAlwaysTrue,
    /// `SET key token NX` without a lease, and a retry loop that never gives up: after a holder
    /// dies, every waiter waits until the run is cut off (seen only because the run's end is an
    /// event of the history).
    NoExpiryNeverGivesUp,
    /// The lease given in the wrong unit: milliseconds passed to `EX`, a lease a thousand times
    /// too long, so a crashed holder takes the lock with it for minutes.
    TtlWrongUnit,
    /// Fencing tokens from the client's wall clock instead of the server's counter: with skewed
    /// clocks the storage refuses legitimate writes.
    ClientClockToken,
    /// Renewal by a plain `PEXPIRE`, without the owner check: a holder whose lease ran out while
    /// it was paused extends the key of the client that was granted the lock meanwhile, believes
    /// it still holds, and writes.
    RenewWithoutOwnerCheck,
    /// Redlock counting `N / 2` masters as a majority (one of three).
    RedlockQuorumOneShort,
    /// Redlock counting its validity time from the replies instead of from before the requests:
    /// the time spent acquiring is not taken off the lease.
    RedlockValidityNotReduced,
}

const BUGS: &[Bug] = &[
    Bug::NoNx,
    Bug::NoExpiry,
    Bug::PlainDel,
    Bug::SharedOwner,
    Bug::CheckThenSet,
    Bug::NilIsGrant,
    Bug::TtlTooShort,
    Bug::InvertedCompare,
    Bug::InnerReleaseDeletes,
    Bug::NotReentrant,
    Bug::ConstantToken,
    Bug::InflatedValidity,
    Bug::TimeoutIsGrant,
    Bug::NeverDeletes,
    Bug::GetThenDel,
    Bug::WallClockValidity,
    Bug::ReleaseAlwaysTrue,
    Bug::NoExpiryNeverGivesUp,
    Bug::TtlWrongUnit,
    Bug::ClientClockToken,
    Bug::RenewWithoutOwnerCheck,
    Bug::RedlockQuorumOneShort,
    Bug::RedlockValidityNotReduced,
];

/// The named point the planted lock declares: a release that reads and then deletes passes it
/// between its two round trips.
const PLANTED_POINTS: &[NamedPoint] = &[NamedPoint::new(
    "between_get_and_del",
    "the release read its own value; the DEL goes next",
)];

/// The lock under mutation.
struct Planted<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
    bug: Bug,
    fencing: bool,
    /// Nesting depth of the current holding (client-side reentrancy, as the Lettuce article does).
    depth: u32,
    held: Option<Guard>,
}

impl<C, E> Planted<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    async fn try_once(&mut self, owner: &str, ttl_ms: u64) -> Result<bool, LockError> {
        let key = &self.config.key;
        let granted = match self.bug {
            Bug::NoNx => {
                let _: () = redis::cmd("SET")
                    .arg(key)
                    .arg(owner)
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut self.conn)
                    .await?;
                true
            }
            Bug::NoExpiry | Bug::NoExpiryNeverGivesUp => {
                let r: Option<String> = redis::cmd("SET")
                    .arg(key)
                    .arg(owner)
                    .arg("NX")
                    .query_async(&mut self.conn)
                    .await?;
                r.is_some()
            }
            Bug::CheckThenSet => {
                let current: Option<String> = redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut self.conn)
                    .await?;
                if current.is_some() {
                    false
                } else {
                    let _: () = redis::cmd("SET")
                        .arg(key)
                        .arg(owner)
                        .arg("PX")
                        .arg(ttl_ms)
                        .query_async(&mut self.conn)
                        .await?;
                    true
                }
            }
            _ => {
                // The wrong unit: milliseconds passed where `EX` takes seconds.
                let unit = if self.bug == Bug::TtlWrongUnit {
                    "EX"
                } else {
                    "PX"
                };
                let r: Result<Option<String>, _> = redis::cmd("SET")
                    .arg(key)
                    .arg(owner)
                    .arg("NX")
                    .arg(unit)
                    .arg(ttl_ms)
                    .query_async(&mut self.conn)
                    .await;
                match r {
                    Ok(r) => r.is_some() || self.bug == Bug::NilIsGrant,
                    Err(e) if lockcheck::lock::is_transient(&e) => self.bug == Bug::TimeoutIsGrant,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        Ok(granted)
    }

    async fn token(&mut self) -> Result<Option<u64>, LockError> {
        if !self.fencing {
            return Ok(None);
        }
        let counter = format!("{}:token", self.config.key);
        let t: u64 = match self.bug {
            Bug::ConstantToken => 1,
            // The client's own clock as the token: clients whose clocks disagree hand the storage
            // tokens out of grant order.
            Bug::ClientClockToken => self.env.now_ms(),
            _ => {
                redis::cmd("INCR")
                    .arg(&counter)
                    .query_async(&mut self.conn)
                    .await?
            }
        };
        Ok(Some(t))
    }
}

impl<C, E> Lock for Planted<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    const RENEWS: bool = true;

    const POINTS: &'static [NamedPoint] = PLANTED_POINTS;

    fn validity_clock(&self) -> ClockKind {
        if self.bug == Bug::WallClockValidity {
            ClockKind::Wall
        } else {
            ClockKind::Monotonic
        }
    }

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        if let (Some(g), false) = (&self.held, self.bug == Bug::NotReentrant) {
            self.depth += 1;
            return Ok(Some(g.clone()));
        }
        let owner = if self.bug == Bug::SharedOwner {
            "owner".to_string()
        } else {
            self.env.uuid().to_string()
        };
        let mut ttl_ms = self.config.ttl.as_millis() as u64;
        if self.bug == Bug::TtlTooShort {
            ttl_ms = (ttl_ms / 10).max(1);
        }
        let clock = self.validity_clock();
        let deadline = clock.read(&self.env) + self.config.wait.as_millis() as u64;
        loop {
            let started = clock.read(&self.env);
            if self.try_once(&owner, ttl_ms).await? {
                let fencing_token = self.token().await?;
                let believed = if self.bug == Bug::InflatedValidity {
                    ttl_ms * 10
                } else {
                    ttl_ms
                };
                let g = Guard {
                    owner,
                    fencing_token,
                    acquired_at_ms: started,
                    valid_until_ms: started + believed,
                };
                if self.held.is_none() {
                    self.held = Some(g.clone());
                    self.depth = 1;
                } else {
                    self.depth += 1;
                }
                return Ok(Some(g));
            }
            if clock.read(&self.env) >= deadline && self.bug != Bug::NoExpiryNeverGivesUp {
                return Ok(None);
            }
            self.env.sleep(Duration::from_millis(5)).await;
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        if self.depth > 1 {
            self.depth -= 1;
            if self.bug != Bug::InnerReleaseDeletes {
                return Ok(false);
            }
        } else {
            self.depth = 0;
            self.held = None;
        }
        let key = &self.config.key;
        let deleted: i64 = match self.bug {
            Bug::NeverDeletes => return Ok(true),
            Bug::GetThenDel => {
                let current: Option<String> = redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut self.conn)
                    .await?;
                if current.as_deref() != Some(guard.owner.as_str()) {
                    return Ok(false);
                }
                self.env.point("between_get_and_del").await;
                redis::cmd("DEL").arg(key).query_async(&mut self.conn).await?
            }
            Bug::PlainDel | Bug::InnerReleaseDeletes => {
                redis::cmd("DEL").arg(key).query_async(&mut self.conn).await?
            }
            Bug::InvertedCompare => {
                redis::Script::new(
                    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
                )
                .key(key)
                .arg(&guard.owner)
                .invoke_async(&mut self.conn)
                .await?
            }
            _ => {
                COMPARE_AND_DELETE
                    .key(key)
                    .arg(&guard.owner)
                    .invoke_async(&mut self.conn)
                    .await?
            }
        };
        Ok(deleted == 1 || self.bug == Bug::ReleaseAlwaysTrue)
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        let key = &self.config.key;
        let ttl_ms = self.config.ttl.as_millis() as u64;
        let started = self.validity_clock().read(&self.env);
        let renewed: i64 = if self.bug == Bug::RenewWithoutOwnerCheck {
            // Whoever holds the key now gets the longer lease.
            redis::cmd("PEXPIRE")
                .arg(key)
                .arg(ttl_ms)
                .query_async(&mut self.conn)
                .await?
        } else {
            COMPARE_AND_PEXPIRE
                .key(key)
                .arg(&guard.owner)
                .arg(ttl_ms)
                .invoke_async(&mut self.conn)
                .await?
        };
        if renewed == 1 {
            guard.valid_until_ms = started + ttl_ms;
        }
        Ok(renewed == 1)
    }
}

/// The scenarios every mutant faces, each with what the correct lock gives there.
const SCENARIOS: &[(&str, &str)] = &[
    (
        "contention",
        r#"
name = "contention"
about = "Three clients contend, no faults: the correct lock is safe on every check, with no waiter left waiting half a second for a free lock and at least half the cycles the workload could do completed."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe", liveness = "safe", foreign_release = "safe", reentrancy = "safe", throughput = "safe", release = "safe" }
duration_ms = 6000
[checks]
liveness_bound_ms = 500
min_throughput = 0.5
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 3000
[workload]
clients = 3
cycles = 15
hold_ms = [100, 200]
think_ms = [0, 10]
"#,
    ),
    (
        "crashed-holder",
        r#"
name = "crashed-holder"
about = "The holder dies inside its critical section; its lease frees the lock."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", liveness = "safe", foreign_release = "safe", release = "safe" }
duration_ms = 6000
[lock]
kind = "set-nx-px"
ttl_ms = 500
wait_ms = 3000
[workload]
clients = 3
cycles = 10
hold_ms = [10, 50]
think_ms = [0, 10]
[[faults]]
kind = "crash"
node = "client-0"
on = "acquired"
"#,
    ),
    (
        "late-release",
        r#"
name = "late-release"
about = "The holder finishes its work and stops before releasing, past its lease; another client is granted the lock; the late release must not delete the new holder's entry."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", foreign_release = "safe", resource = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
[workload]
clients = 3
cycles = 6
hold_ms = [300, 400]
think_ms = [0, 20]
[[faults]]
kind = "pause"
client = "holder"
on = "before_release"
for_ms = 1500
"#,
    ),
    (
        "slow-release",
        r#"
name = "slow-release"
about = "A holder stops inside its release, at the lock's own point between reading its entry and deleting it, past its lease; another client is granted the lock meanwhile. A release that compares and deletes in one step never stops there."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", foreign_release = "safe", resource = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
[workload]
clients = 3
cycles = 6
hold_ms = [100, 200]
think_ms = [0, 20]
[[faults]]
kind = "pause"
client = "holder"
on = "between_get_and_del"
for_ms = 1500
"#,
    ),
    (
        "short-pause",
        r#"
name = "short-pause"
about = "A pause shorter than the lease: the correct lock keeps mutual exclusion."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe", foreign_release = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
[workload]
clients = 2
cycles = 5
hold_ms = [100, 200]
think_ms = [0, 20]
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 300
"#,
    ),
    (
        "nested",
        r#"
name = "nested"
about = "Every holder takes the lock twice more inside its critical section."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", reentrancy = "safe", resource = "safe" }
duration_ms = 6000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 2000
[workload]
clients = 2
cycles = 5
nested = 2
hold_ms = [50, 100]
think_ms = [0, 10]
"#,
    ),
    (
        "fenced-pause",
        r#"
name = "fenced-pause"
about = "Kleppmann's pause: two holders, but the storage refuses the stale write when tokens are issued right."
expect = "violation"
expect_checks = { mutual_exclusion = "violation", resource = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "fenced"
ttl_ms = 1000
wait_ms = 4000
[workload]
clients = 3
cycles = 4
hold_ms = [100, 200]
think_ms = [0, 10]
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 1500
"#,
    ),
    (
        "fenced-skewed-clocks",
        r#"
name = "fenced-skewed-clocks"
about = "Fenced lock, clients whose clocks disagree by up to a second, no faults: tokens from the server's counter follow the grants, so the storage refuses nothing."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe" }
duration_ms = 6000
[checks]
max_refused_writes = 0.05
[lock]
kind = "fenced"
ttl_ms = 1000
wait_ms = 3000
[workload]
clients = 3
cycles = 10
hold_ms = [20, 50]
think_ms = [0, 20]
[clocks]
offset_ms = [-1000, 1000]
"#,
    ),
    (
        "fenced-contention",
        r#"
name = "fenced-contention"
about = "Fencing tokens under plain contention: every accepted write carries a newer token."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe" }
duration_ms = 5000
[lock]
kind = "fenced"
ttl_ms = 1000
wait_ms = 3000
[workload]
clients = 4
cycles = 10
hold_ms = [5, 20]
think_ms = [0, 2]
"#,
    ),
    (
        "validity-check",
        r#"
name = "validity-check"
about = "A holder paused past its lease checks its validity time before it writes and skips the write."
expect = "violation"
expect_checks = { mutual_exclusion = "violation", resource = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
check_validity_before_write = true
[workload]
clients = 2
cycles = 4
hold_ms = [100, 200]
think_ms = [0, 10]
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 1500
"#,
    ),
    (
        "wall-clock-jump",
        r#"
name = "wall-clock-jump"
about = "At the first grant the clients' wall clocks step back 5 s (an NTP correction), and the holder stops past its lease. A holder that measures its validity on the monotonic clock sees it ran out and skips its write."
expect = "violation"
expect_checks = { mutual_exclusion = "violation", resource = "safe", release = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
check_validity_before_write = true
[workload]
clients = 2
cycles = 4
hold_ms = [100, 200]
think_ms = [0, 10]
[[faults]]
kind = "wall_clock_jump"
node = "client-0"
on = "acquired"
by_ms = -5000
[[faults]]
kind = "wall_clock_jump"
node = "client-1"
on = "acquired"
by_ms = -5000
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 1500
"#,
    ),
    (
        "renewal-contention",
        r#"
name = "renewal-contention"
about = "Three clients contend, no faults; each works up to two and a half leases and renews every 150 ms of a 500 ms lease: the lease never runs out, so the correct lock is safe on every check."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe", liveness = "safe", foreign_release = "safe", release = "safe" }
duration_ms = 15000
[lock]
kind = "set-nx-px"
ttl_ms = 500
wait_ms = 6000
[workload]
clients = 3
cycles = 3
hold_ms = [600, 1200]
think_ms = [0, 20]
renew_every_ms = 150
"#,
    ),
    (
        "renewal-pause",
        r#"
name = "renewal-pause"
about = "A renewing holder (every 300 ms of a 1000 ms lease) stops for 1.5 s as it enters; another client is granted the lock. Its next renewal must find the entry no longer its own, so it stops and skips its write: two holders for a while, but no stale write."
expect = "violation"
expect_checks = { mutual_exclusion = "violation", resource = "safe", foreign_release = "safe", release = "safe" }
duration_ms = 8000
[lock]
kind = "set-nx-px"
ttl_ms = 1000
wait_ms = 4000
[workload]
clients = 2
cycles = 3
hold_ms = [1000, 1200]
think_ms = [0, 10]
renew_every_ms = 300
[[faults]]
kind = "pause"
client = "holder"
on = "acquired"
for_ms = 1500
"#,
    ),
    (
        "redlock-contention",
        r#"
name = "redlock-contention"
about = "Redlock on three masters, three clients contend, no faults: a strict majority (two of three) can be granted to one client only, so the correct lock is safe."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe", liveness = "safe" }
duration_ms = 6000
[lock]
kind = "redlock"
ttl_ms = 1000
wait_ms = 3000
[redis]
masters = 3
[workload]
clients = 3
cycles = 8
hold_ms = [20, 60]
think_ms = [0, 10]
"#,
    ),
    (
        "redlock-slow-acquire",
        r#"
name = "redlock-slow-acquire"
about = "Client 0's SETs land on all five masters, then it stalls 2 s (of a 3 s lease) before it handles the replies. The validity time counts from before the requests, so the holder checks it, stops at its end and skips its write before the keys expire and client 1 is granted them."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe" }
seed = 1
duration_ms = 8000
[lock]
kind = "redlock"
ttl_ms = 3000
wait_ms = 6000
node_timeout_ms = 50
check_validity_before_write = true
[redis]
masters = 5
latency_ms = [5, 5]
[workload]
clients = 2
cycles = 2
hold_ms = [2000, 2000]
think_ms = [0, 20]
[[faults]]
kind = "pause"
client = 1
at_ms = 0
for_ms = 8
[[faults]]
kind = "pause"
client = 0
at_ms = 7
for_ms = 2000
"#,
    ),
    (
        "cut-off-waiter",
        r#"
name = "cut-off-waiter"
about = "A waiting client is cut off from Redis while another holds the lock: its requests time out, and it must not take a timeout for a grant."
expect = "safe"
expect_checks = { mutual_exclusion = "safe", resource = "safe" }
duration_ms = 5000
[lock]
kind = "set-nx-px"
ttl_ms = 3000
wait_ms = 1500
[redis]
request_timeout_ms = 200
[workload]
clients = 2
cycles = 2
hold_ms = [1000, 1200]
think_ms = [0, 10]
[[faults]]
kind = "partition"
nodes = ["client-1"]
from = ["redis-0"]
at_ms = 100
for_ms = 800
"#,
    ),
];

const SEEDS: std::ops::RangeInclusive<u64> = 1..=4;

/// Runs [`Planted`] with `bug` on `scenario` for one seed.
fn run_planted(scenario: &Scenario, bug: Bug, seed: u64) -> lockcheck::sim::SimRun {
    let fencing = scenario.lock.kind.name() == "fenced";
    lockcheck::sim::run_with(scenario, seed, |config, mut conns, env| Planted {
        conn: conns.remove(0),
        env,
        config,
        bug,
        fencing,
        depth: 0,
        held: None,
    })
}

/// Runs `bug` on `scenario` for one seed and returns every check's verdict.
fn verdicts(scenario: &Scenario, bug: Bug, seed: u64) -> BTreeMap<String, Verdict> {
    let run = if scenario.lock.kind.name() == "redlock" {
        let planted = match bug {
            Bug::RedlockQuorumOneShort => Some(RedlockBug::QuorumOneShort),
            Bug::RedlockValidityNotReduced => Some(RedlockBug::ValidityNotReducedByAcquireTime),
            _ => None,
        };
        lockcheck::sim::run_with(scenario, seed, |mut config: LockConfig, conns, env| {
            config.redlock.planted = planted;
            Redlock::new(config, conns, env)
        })
    } else {
        run_planted(scenario, bug, seed)
    };
    let outcome = Outcome::judge(scenario, Mode::Sim, seed, run.history);
    outcome
        .checks
        .iter()
        .map(|(name, r)| (name.clone(), r.verdict))
        .collect()
}

/// The classes of issue #33, each a scripted case in which a correct lock used to be flagged or
/// a broken one missed: the check that judges it, and the mutant it must catch there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Liveness with the crash before the waiters' pause: the holder dies the moment it is
    /// granted, every waiter is refused and then paused while the dead holder's lease runs out.
    CrashBeforeWaiterPause,
    /// A release whose reply is lost: the releaser's inbound link is cut as it releases.
    LostReleaseReply,
    /// A paused release: the holder stops just before its release, past its lease, and wakes
    /// while the next holder works.
    PausedRelease,
}

/// Each class, the check that judges it, the mutant that check must catch there, and the client
/// counts its neighbours are tried with (the first is the one every mutant faces in
/// [`scenarios`]; for the crash class, the last is three waiters).
const CLASSES: &[(Class, &str, Bug, &[u32])] = &[
    (
        Class::CrashBeforeWaiterPause,
        "liveness",
        Bug::NoExpiry,
        &[2, 3, 4],
    ),
    (
        Class::LostReleaseReply,
        "release",
        Bug::NeverDeletes,
        &[2, 3, 4],
    ),
    (
        Class::PausedRelease,
        "foreign_release",
        Bug::PlainDel,
        &[3, 2, 4],
    ),
];

/// When the waiters of [`Class::CrashBeforeWaiterPause`] are paused, as (start, length) in ms,
/// waiter `w` (client `w + 1`) taking entry `w % len`: every pause starts after the waiter's
/// first refusal (from 5 ms) and before the dead holder's 500 ms lease runs out, and ends after
/// it; the orders differ (the first waiter paused is not the first to wake).
const WAITER_PAUSES: &[&[(u64, u64)]] = &[
    &[(20, 3500), (30, 2000), (40, 4000)],
    &[(250, 3000), (100, 1000), (450, 2200)],
];

/// The scenario of `class` with `clients` clients; `variant` picks the waiters' pauses of the
/// crash class (an index into [`WAITER_PAUSES`]; the other classes have one shape). Every class
/// runs `set-nx-px`'s table (the planted lock reads its lease and wait from it) and expects the
/// checks its mutant is not about safe.
fn class_text(class: Class, clients: u32, variant: usize) -> String {
    // (name, about, duration_ms, ttl_ms, wait_ms, cycles, hold_ms, the checks it expects safe,
    // its faults)
    let (name, about, duration, ttl, wait, cycles, hold, safe, faults) = match class {
        Class::CrashBeforeWaiterPause => {
            let pauses = WAITER_PAUSES[variant];
            let mut faults = String::from(
                "[[faults]]\nkind = \"crash\"\nnode = \"client-0\"\non = \"acquired\"\n",
            );
            for c in 1..clients {
                let (at, len) = pauses[(c as usize - 1) % pauses.len()];
                faults.push_str(&format!(
                    "[[faults]]\nkind = \"pause\"\nclient = {c}\nat_ms = 0\nfor_ms = 5\n\
                     [[faults]]\nkind = \"pause\"\nclient = {c}\nat_ms = {at}\nfor_ms = {len}\n"
                ));
            }
            (
                format!("crash-before-waiter-pause-{clients}-{variant}"),
                format!(
                    "Liveness with the crash before the pause: every waiter starts 5 ms late, so client-0 is granted first, and it dies the moment it is; each of the {} waiter(s) is refused, then paused from before the dead holder's 500 ms lease runs out until long after (up to 4 s, past the 1,500 ms bound). Only asking time counts: a waiter asked for under the lease before its pause and one retry after it, so the correct lock is live; a lock whose entry never expires leaves the first waiter to wake asking until the run's end, about 2 s.",
                    clients - 1
                ),
                6500,
                500,
                5000,
                2,
                "[10, 20]",
                "mutual_exclusion = \"safe\", liveness = \"safe\", foreign_release = \"safe\", release = \"safe\"",
                faults,
            )
        }
        Class::LostReleaseReply => (
            format!("lost-release-reply-{clients}"),
            "A release whose reply is lost: client-0 hears nothing from Redis for 300 ms from the moment it reaches a release 100 ms or more into the run (it has one left then: at most three 30 ms sections fit before, and it has four; and the first release has loaded the compare-and-delete script, so the request runs rather than answering NOSCRIPT); its compare-and-delete lands and removes its entry, the reply never arrives, and the call fails when its request times out (500 ms). Not knowing whether a release landed is not lying about it: an unknown outcome. A release that answers released having removed nothing is a lie.".to_string(),
            4000,
            1000,
            3000,
            4,
            "[30, 50]",
            "mutual_exclusion = \"safe\", resource = \"safe\", foreign_release = \"safe\", release = \"safe\"",
            "[[faults]]\nkind = \"partition\"\nnodes = [\"client-0\"]\nfrom = [\"redis-0\"]\n\
             direction = \"inbound\"\nclient = 0\non = \"before_release\"\nafter_ms = 100\n\
             for_ms = 300\n"
                .to_string(),
        ),
        Class::PausedRelease => (
            format!("paused-release-{clients}"),
            "A paused release: the first holder to finish its work (300-400 ms) stops just before its release for 800 ms, past its 1,000 ms lease, so its delete goes out 1,100-1,200 ms after its grant; by then the lease has run out and another client, granted within a retry of the expiry, holds for at least 300 ms. A plain DEL removes that client's entry; a compare-and-delete finds someone else's value and removes nothing.".to_string(),
            5000,
            1000,
            4000,
            3,
            "[300, 400]",
            "mutual_exclusion = \"safe\", resource = \"safe\", foreign_release = \"safe\", release = \"safe\"",
            "[[faults]]\nkind = \"pause\"\nclient = \"holder\"\non = \"before_release\"\nfor_ms = 800\n"
                .to_string(),
        ),
    };
    format!(
        "name = \"{name}\"\nabout = \"{about}\"\nexpect = \"safe\"\nexpect_checks = {{ {safe} }}\n\
         duration_ms = {duration}\n[lock]\nkind = \"set-nx-px\"\nttl_ms = {ttl}\nwait_ms = {wait}\n\
         [workload]\nclients = {clients}\ncycles = {cycles}\nhold_ms = {hold}\nthink_ms = [0, 10]\n\
         {faults}"
    )
}

fn parse(name: &str, text: &str) -> Scenario {
    Scenario::parse_with_points(&format!("{name}.toml"), text, PLANTED_POINTS)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Every scenario of the suite: [`SCENARIOS`], then each class of [`CLASSES`] with its first
/// client count (the crash class with three waiters too).
fn scenarios() -> Vec<Scenario> {
    let mut all: Vec<Scenario> = SCENARIOS
        .iter()
        .map(|(name, text)| parse(name, text))
        .collect();
    for &(class, _, _, clients) in CLASSES {
        all.push(parse("class", &class_text(class, clients[0], 0)));
    }
    all.push(parse(
        "class",
        &class_text(Class::CrashBeforeWaiterPause, 4, 0),
    ));
    all
}

#[test]
fn the_correct_lock_matches_every_expectation() {
    for s in scenarios() {
        for seed in SEEDS {
            let got = verdicts(&s, Bug::None, seed);
            for (check, want) in &s.expect_checks {
                assert_eq!(
                    got.get(check),
                    Some(want),
                    "false alarm: the correct lock on {} seed {seed}: {check} gave {:?}, expected {want}",
                    s.name,
                    got.get(check)
                );
            }
        }
    }
}

/// Which check must catch each mutant: the one that names its mistake.
fn expected_catcher(bug: Bug) -> &'static [&'static str] {
    match bug {
        Bug::None => &[],
        Bug::NoNx | Bug::CheckThenSet | Bug::NilIsGrant | Bug::TtlTooShort => &["mutual_exclusion"],
        Bug::NoExpiry => &["liveness"],
        Bug::PlainDel | Bug::SharedOwner | Bug::InvertedCompare => &["foreign_release"],
        Bug::InnerReleaseDeletes | Bug::NotReentrant => &["reentrancy"],
        Bug::ConstantToken | Bug::InflatedValidity => &["resource"],
        Bug::TimeoutIsGrant => &["mutual_exclusion"],
        Bug::NeverDeletes => &["liveness", "throughput", "release"],
        Bug::ReleaseAlwaysTrue => &["release"],
        Bug::NoExpiryNeverGivesUp => &["liveness"],
        Bug::TtlWrongUnit => &["liveness"],
        Bug::ClientClockToken => &["resource"],
        Bug::GetThenDel => &["foreign_release"],
        Bug::WallClockValidity => &["resource"],
        Bug::RenewWithoutOwnerCheck => &["resource"],
        Bug::RedlockQuorumOneShort | Bug::RedlockValidityNotReduced => &["mutual_exclusion"],
    }
}

#[test]
fn every_planted_bug_is_caught_by_the_check_that_names_it() {
    let scenarios = scenarios();
    let mut missed = Vec::new();
    for &bug in BUGS {
        let mut caught_by = std::collections::BTreeSet::new();
        for s in &scenarios {
            for seed in SEEDS {
                let got = verdicts(s, bug, seed);
                for (check, want) in &s.expect_checks {
                    if *want == Verdict::Safe && got.get(check) == Some(&Verdict::Violation) {
                        caught_by.insert(check.clone());
                    }
                }
            }
        }
        let want = expected_catcher(bug);
        if !want.iter().any(|c| caught_by.contains(*c)) {
            missed.push(format!(
                "{bug:?}: expected {want:?} to catch it; violated checks: {caught_by:?}"
            ));
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {} planted bugs missed:\n{}",
        missed.len(),
        BUGS.len(),
        missed.join("\n")
    );
}

/// The checks, among those the correct lock passes on `scenario`, that `bug` violates on some
/// seed.
fn caught_on(scenario: &str, bug: Bug) -> Vec<String> {
    let s = scenarios()
        .into_iter()
        .find(|s| s.name == scenario)
        .unwrap_or_else(|| panic!("no scenario {scenario}"));
    let mut caught = std::collections::BTreeSet::new();
    for seed in SEEDS {
        let got = verdicts(&s, bug, seed);
        for (check, want) in &s.expect_checks {
            if *want == Verdict::Safe && got.get(check) == Some(&Verdict::Violation) {
                caught.insert(check.clone());
            }
        }
    }
    caught.into_iter().collect()
}

/// Each of these mutants, on the scenario made for it, violates exactly the checks that name its
/// mistake, and none of the others the correct lock passes there.
#[test]
fn renewal_quorum_validity_and_timeout_mutants_fire_exactly_their_checks() {
    let cases: &[(Bug, &str, &[&str])] = &[
        // The old holder's PEXPIRE extends the new holder's key; it writes what it read before
        // the new holder's write: a stale write. Releases stay truthful and delete nothing foreign.
        (Bug::RenewWithoutOwnerCheck, "renewal-pause", &["resource"]),
        // One master of three is a "majority": two holders at once, and their read-modify-writes
        // lose updates.
        (
            Bug::RedlockQuorumOneShort,
            "redlock-contention",
            &["mutual_exclusion", "resource"],
        ),
        // The holder believes in 2 s of lease the keys no longer have and writes after the next
        // holder was granted them.
        (
            Bug::RedlockValidityNotReduced,
            "redlock-slow-acquire",
            &["mutual_exclusion", "resource"],
        ),
        // A timed-out SET NX taken as a grant: the cut-off waiter works beside the holder.
        (
            Bug::TimeoutIsGrant,
            "cut-off-waiter",
            &["mutual_exclusion", "resource"],
        ),
    ];
    for (bug, scenario, want) in cases {
        assert_eq!(
            caught_on(scenario, *bug),
            want.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
            "{bug:?} on {scenario}"
        );
    }
}

/// Seeds each neighbour of a class is tried with.
const NEIGHBOUR_SEEDS: std::ops::RangeInclusive<u64> = 1..=20;

/// Each class of [`CLASSES`] holds for its neighbours, not only on the seeds and client count
/// every mutant faces: with each of its client counts, each waiter-pause order of the crash
/// class and [`NEIGHBOUR_SEEDS`], the correct lock matches every expectation of the case and the
/// class's mutant violates the class's check on every seed. The timing of each case makes both
/// certain (each `about` says why), so a seed where either fails is a checker's mistake.
#[test]
fn each_issue_33_class_holds_for_its_neighbours() {
    let mut wrong = Vec::new();
    let mut cases = 0;
    for &(class, check, bug, clients) in CLASSES {
        let variants = match class {
            Class::CrashBeforeWaiterPause => WAITER_PAUSES.len(),
            _ => 1,
        };
        for &n in clients {
            for variant in 0..variants {
                let s = parse("class", &class_text(class, n, variant));
                for seed in NEIGHBOUR_SEEDS {
                    cases += 1;
                    let correct = verdicts(&s, Bug::None, seed);
                    for (c, want) in &s.expect_checks {
                        if correct.get(c) != Some(want) {
                            wrong.push(format!(
                                "false alarm: {} seed {seed}: {c} gave {:?}, expected {want}",
                                s.name,
                                correct.get(c)
                            ));
                        }
                    }
                    let mutant = verdicts(&s, bug, seed);
                    if mutant.get(check) != Some(&Verdict::Violation) {
                        wrong.push(format!(
                            "missed: {bug:?} on {} seed {seed}: {check} gave {:?}",
                            s.name,
                            mutant.get(check)
                        ));
                    }
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {cases} cases wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The classes are not vacuous: in the lost-reply case, on every seed and client count, a
/// correct release did not learn that its entry was removed (an unknown outcome, shown as such),
/// and in the crash case the waiters really were paused across the lease's end.
#[test]
fn the_issue_33_classes_exercise_what_they_name() {
    for clients in [2, 3, 4] {
        let lost = parse("class", &class_text(Class::LostReleaseReply, clients, 0));
        for seed in NEIGHBOUR_SEEDS {
            let run = run_planted(&lost, Bug::None, seed);
            let o = Outcome::judge(&lost, Mode::Sim, seed, run.history);
            let unknown = &o.checks["release"].evidence["unknown"];
            assert!(
                unknown.as_array().is_some_and(|u| !u.is_empty()),
                "{clients} clients, seed {seed}: no unknown outcome: {}",
                o.history.render()
            );
        }
    }
    let crash = parse("class", &class_text(Class::CrashBeforeWaiterPause, 4, 0));
    let notes = run_planted(&crash, Bug::None, 1).history.render();
    for (waiter, (_, len)) in (1..4).zip(WAITER_PAUSES[0].iter()) {
        assert!(
            notes.contains(&format!("client-{waiter} paused for {len} ms")),
            "{notes}"
        );
    }
}
