//! Testing your own lock: implement `Lock` against the two seams and hand it to the simulator.
//! This one checks with GET, then SETs: two clients can both see the key absent.

use lockcheck::env::Env;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::lock::{Guard, Lock, LockConfig, LockError};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use redis::aio::ConnectionLike;

struct CheckThenSet<C, E> {
    conn: C,
    env: E,
    config: LockConfig,
}

impl<C, E> Lock for CheckThenSet<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
        let ttl = self.config.ttl.as_millis() as u64;
        while self.env.monotonic_ms() < deadline {
            let start = self.env.monotonic_ms();
            let holder: Option<String> = redis::cmd("GET")
                .arg(&self.config.key)
                .query_async(&mut self.conn)
                .await?;
            if holder.is_none() {
                // The race: another client may SET between our GET and this SET.
                let _: () = redis::cmd("SET")
                    .arg(&self.config.key)
                    .arg(&owner)
                    .arg("PX")
                    .arg(ttl)
                    .query_async(&mut self.conn)
                    .await?;
                return Ok(Some(Guard {
                    owner,
                    fencing_token: None,
                    acquired_at_ms: start,
                    valid_until_ms: start + ttl,
                }));
            }
            self.env.sleep(std::time::Duration::from_millis(2)).await;
        }
        Ok(None)
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deleted: i64 = lockcheck::lock::set_nx_px::COMPARE_AND_DELETE
            .key(&self.config.key)
            .arg(&guard.owner)
            .invoke_async(&mut self.conn)
            .await?;
        Ok(deleted == 1)
    }
}

const SCENARIO: &str = r#"
name = "check-then-set"
expect = "violation"
duration_ms = 20000
[lock]
kind = "set-nx-px"   # ignored: run_with builds the lock below
ttl_ms = 5000
[workload]
clients = 3
cycles = 20
hold_ms = [5, 10]
think_ms = [0, 5]
"#;

#[test]
fn a_racy_lock_is_caught_without_any_fault() {
    let s = Scenario::parse("inline.toml", SCENARIO).unwrap();
    let mut violated = 0;
    for seed in 1..=5 {
        let run = lockcheck::sim::run_with(&s, seed, |config, mut conns, env| CheckThenSet {
            conn: conns.remove(0),
            env,
            config,
        });
        let o = Outcome::judge(&s, Mode::Sim, seed, run.history);
        if o.verdict() == Verdict::Violation {
            violated += 1;
        }
    }
    assert!(violated >= 3, "only {violated} of 5 seeds caught the race");
}

/// `examples/own_lock_both_ways.rs`: the same custom lock, unchanged, in simulation
/// (`sim::run_with`) and on spawned `redis-server` processes (`real::redis_world::run_with`).
#[path = "../../examples/own_lock_both_ways.rs"]
mod own_lock_both_ways;

#[test]
fn a_custom_lock_runs_unchanged_in_simulation_and_on_real_servers() {
    let _one_at_a_time = crate::common::real_servers_one_at_a_time();
    for text in own_lock_both_ways::SCENARIOS {
        let s = Scenario::parse("inline.toml", text).unwrap();
        for real in [false, true] {
            let o = own_lock_both_ways::verdict(&s, real)
                .unwrap_or_else(|e| panic!("{} (real: {real}): {e}", s.name));
            assert_eq!(
                o.verdict(),
                s.expect,
                "{} (real: {real}):\n{}",
                s.name,
                o.history.render()
            );
            // The lock really ran: every cycle of the no-fault run entered its section.
            let sections = &o.checks["mutual_exclusion"].evidence["sections"];
            assert!(
                sections.as_u64().unwrap_or(0) >= 2,
                "{}: {sections}",
                s.name
            );
        }
    }
    assert_eq!(lockcheck::real::registered_children(), 0);
}
