// Your own Rust lock, unchanged, in simulation and on real `redis-server` processes.
//
// `cargo run --release --example own_lock_both_ways` runs the lock below under two scenarios
// (no faults; a GC pause three leases long) with `lockcheck::sim::run_with` and with
// `lockcheck::backend::redis::real::world::run_with`, and prints the four verdicts. Real mode needs
// `redis-server` (`apt-get install redis-server`); lockcheck starts and stops its own servers.

use lockcheck::env::Env;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::lock::{Guard, Lock, LockConfig, LockError};
use lockcheck::scenario::Scenario;
use redis::aio::ConnectionLike;

/// `SET key owner NX PX ttl`, retried until `wait` runs out; released by a Lua
/// compare-and-delete. Correct without faults; no fencing, no lease extension.
pub struct TokenLock<C, E> {
    pub conn: C,
    pub env: E,
    pub config: LockConfig,
}

impl<C, E> Lock for TokenLock<C, E>
where
    C: ConnectionLike + Send + Sync + 'static,
    E: Env,
{
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string();
        let ttl = self.config.ttl.as_millis() as u64;
        let deadline = self.env.now_ms() + self.config.wait.as_millis() as u64;
        loop {
            let start = self.env.now_ms();
            let set: Option<String> = redis::cmd("SET")
                .arg(&self.config.key)
                .arg(&owner)
                .arg("NX")
                .arg("PX")
                .arg(ttl)
                .query_async(&mut self.conn)
                .await?;
            if set.is_some() {
                return Ok(Some(Guard {
                    owner,
                    fencing_token: None,
                    acquired_at_ms: start,
                    valid_until_ms: start + ttl,
                }));
            }
            if self.env.now_ms() >= deadline {
                return Ok(None);
            }
            self.env.sleep(self.config.retry.0).await;
        }
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        let deleted: i64 = lockcheck::lock::lease::COMPARE_AND_DELETE
            .key(&self.config.key)
            .arg(&guard.owner)
            .invoke_async(&mut self.conn)
            .await?;
        Ok(deleted == 1)
    }
}

/// Two scenarios for the lock: the same text drives both modes.
pub const SCENARIOS: [&str; 2] = [
    r#"
name = "token-lock-no-faults"
expect = "safe"
duration_ms = 5000
[lock]
kind = "set-nx-px"   # ignored: run_with builds the lock
ttl_ms = 2000
wait_ms = 3000
retry_ms = [5, 5]
[workload]
clients = 2
cycles = 10
hold_ms = [5, 15]
think_ms = [0, 10]
"#,
    r#"
name = "token-lock-gc-pause"
expect = "violation"
duration_ms = 5000
[lock]
kind = "set-nx-px"   # ignored: run_with builds the lock
ttl_ms = 500
wait_ms = 3000
retry_ms = [5, 5]
[workload]
clients = 2
cycles = 2
hold_ms = [50, 100]
think_ms = [0, 20]
# Client 1 starts 50 ms late, so client 0 takes the lock first and the pause hits a holder with
# work still to share: if client 1 won the first race and ran both its cycles before client 0
# got in, client 0's pause would overlap nobody (seen on a loaded machine in real mode).
[[faults]]
kind = "pause"
client = 1
at_ms = 0
for_ms = 50
[[faults]]
kind = "pause"
client = 0
on = "acquired"
for_ms = 1500        # three leases long
"#,
];

/// Runs `scenario` (seed 1) with [`TokenLock`] in simulation, or on spawned servers when `real`.
pub fn verdict(scenario: &Scenario, real: bool) -> Result<Outcome, lockcheck::real::RealError> {
    let seed = 1;
    Ok(if real {
        let history = lockcheck::backend::redis::real::world::run_with(
            scenario,
            seed,
            |config, mut conns, env| TokenLock {
                conn: conns.remove(0),
                env,
                config,
            },
        )?;
        Outcome::judge(scenario, Mode::Real, seed, history)
    } else {
        let run = lockcheck::sim::run_with(scenario, seed, |config, mut conns, env| TokenLock {
            conn: conns.remove(0),
            env,
            config,
        });
        Outcome::judge(scenario, Mode::Sim, seed, run.history)
    })
}

#[allow(dead_code)] // the test that includes this file has its own entry point
fn main() {
    let mut all = true;
    for text in SCENARIOS {
        let s = Scenario::parse("inline.toml", text).expect("the scenarios above parse");
        for real in [false, true] {
            let mode = if real { "real" } else { "sim " };
            match verdict(&s, real) {
                Ok(o) => {
                    let v = o.verdict();
                    all &= v == s.expect;
                    println!("{mode} {:<22} {v} (expected {})", s.name, s.expect);
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
    std::process::exit(if all { 0 } else { 1 });
}
