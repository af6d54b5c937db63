// A lock of your own under lockcheck's harness: the GET-then-SET lock of docs/own-lock.md,
// written as a user writes it in their own crate.
//
// ```text
// cargo build --release --example check_then_set
// target/release/examples/check_then_set explore examples/check_then_set.toml --out found.toml
// target/release/examples/check_then_set run found.toml
// ```
//
// The binary has every command of `lockcheck` (`run`, `explore`, `table`, `list`, `--real`,
// `--seeds`, `--jobs`, `--junit`, `--report`), and its scenarios say
// `[lock] kind = "check-then-set"`.

use lockcheck::redis::{self, aio::ConnectionLike};
use lockcheck::{Env, Guard, Lock, LockConfig, LockError};
use std::time::Duration;

/// The lock's own settings, from the scenario's `[lock.params]` table.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// How long to wait before looking again when the lock is taken (default 2 ms).
    #[serde(default = "two")]
    pub poll_ms: u64,
}

fn two() -> u64 {
    2
}

/// Checks with `GET` whether the key is free, then `SET`s it: two clients can both see the key
/// absent, and both believe they hold the lock.
pub struct CheckThenSet<C, E> {
    conn: C,
    env: E,
    config: LockConfig<Params>,
}

impl<C, E> CheckThenSet<C, E> {
    /// One client's lock: the connection to the first master, the client's environment.
    pub fn new(config: LockConfig<Params>, mut conns: Vec<C>, env: E) -> Self {
        CheckThenSet {
            conn: conns.remove(0),
            env,
            config,
        }
    }
}

impl<C: ConnectionLike + Send + Sync + 'static, E: Env> Lock for CheckThenSet<C, E> {
    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        let owner = self.env.uuid().to_string(); // reproducible in simulation
        let ttl = self.config.ttl.as_millis() as u64;
        let deadline = self.env.monotonic_ms() + self.config.wait.as_millis() as u64;
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
            let poll = Duration::from_millis(self.config.params.poll_ms);
            self.env.sleep(poll).await;
        }
        Ok(None)
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        // Delete the key only while it still holds our token (compare-and-delete in Lua).
        let deleted: i64 = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        )
        .key(&self.config.key)
        .arg(&guard.owner)
        .invoke_async(&mut self.conn)
        .await?;
        Ok(deleted == 1)
    }
}

/// The harness with this lock registered: `main` runs it, and a test can search with it.
pub fn harness() -> lockcheck::Harness {
    lockcheck::Harness::new().lock("check-then-set", CheckThenSet::new)
}

#[allow(dead_code)] // the tests that include this file have their own entry point
fn main() -> std::process::ExitCode {
    harness().main()
}
