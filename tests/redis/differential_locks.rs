//! Differential test of every lock's and the storage's scripts and commands: each step runs on a
//! spawned `redis-server` and on the simulated engine, and the replies (as `redis::Value`) must be
//! equal; a PTTL may differ by the time between the two executions. Scripts go through the same
//! paths the locks use: `SCRIPT LOAD` + `EVALSHA` (Lettuce), `EVAL`, and `redis::Script`'s
//! `EVALSHA` with its `NOSCRIPT` fallback (everything else), plus pub/sub deliveries from
//! Redisson's release.

use lockcheck::backend::redis::lock::{fenced, lettuce_reentrant, redisson};
use lockcheck::lock::lease;
use lockcheck::real::{RedisServer, ServerOptions};
use lockcheck::resource;
use lockcheck::simredis::{Engine, Role};
use redis::aio::ConnectionLike;
use redis::{Cmd, RedisResult, Value};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Pub/sub deliveries seen by the engine: (subscriber, channel, payload).
type Deliveries = Arc<Mutex<Vec<(u64, Vec<u8>, Vec<u8>)>>>;

/// The simulated engine behind a `ConnectionLike`, on the system clock (so PTTLs compare).
#[derive(Clone)]
struct EngineConn {
    engine: Arc<Mutex<Engine>>,
    id: u64,
    delivered: Deliveries,
}

fn args_of(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => unreachable!("no cursor arguments here"),
        })
        .collect()
}

impl ConnectionLike for EngineConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        let out = self
            .engine
            .lock()
            .unwrap()
            .execute(now_ms(), self.id, &args_of(cmd));
        self.delivered.lock().unwrap().extend(out.messages);
        Box::pin(async move { Ok(out.reply) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _: &'a redis::Pipeline,
        _: usize,
        _: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        unreachable!("no pipelines here")
    }

    fn get_db(&self) -> i64 {
        0
    }
}

/// A reply as compared: a server error by its text (the client turns some into `Err`).
fn norm(r: RedisResult<Value>) -> Result<Value, String> {
    match r {
        Ok(Value::ServerError(e)) => Err(format!("{} {}", e.code(), e.details().unwrap_or(""))),
        Ok(v) => Ok(v),
        Err(e) => Err(format!(
            "{} {}",
            e.code().unwrap_or("?"),
            e.detail().unwrap_or("")
        )),
    }
}

/// A real server and an engine, fed the same steps.
struct Pair {
    _server: RedisServer,
    real: redis::aio::MultiplexedConnection,
    sim: EngineConn,
    steps: usize,
}

impl Pair {
    async fn new() -> Pair {
        let server = RedisServer::spawn(ServerOptions::default()).expect("redis-server");
        let real = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        Pair {
            _server: server,
            real,
            sim: EngineConn {
                engine: Arc::new(Mutex::new(Engine::new(Role::Master))),
                id: 1,
                delivered: Arc::default(),
            },
            steps: 0,
        }
    }

    /// Runs `cmd` on both and requires equal replies; returns the reply.
    async fn same(&mut self, cmd: Cmd) -> Result<Value, String> {
        self.close(cmd, 0).await
    }

    /// Runs `cmd` on both; integers may differ by `tolerance` (a PTTL).
    async fn close(&mut self, cmd: Cmd, tolerance: i64) -> Result<Value, String> {
        self.steps += 1;
        let real = norm(self.real.req_packed_command(&cmd).await);
        let sim = norm(self.sim.req_packed_command(&cmd).await);
        match (&real, &sim) {
            (Ok(Value::Int(a)), Ok(Value::Int(b))) if tolerance > 0 => {
                assert!(
                    (a - b).abs() <= tolerance,
                    "step {}: {:?}: real {a}, sim {b}",
                    self.steps,
                    args_of(&cmd)
                        .iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                );
            }
            _ => assert_eq!(
                real,
                sim,
                "step {}: {:?}",
                self.steps,
                args_of(&cmd)
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
            ),
        }
        real
    }

    /// Invokes a `redis::Script` on both (EVALSHA, and on NOSCRIPT: SCRIPT LOAD + EVALSHA).
    async fn invoke(&mut self, inv: &redis::ScriptInvocation<'_>) -> Result<Value, String> {
        self.steps += 1;
        let real = norm(inv.invoke_async::<Value>(&mut self.real).await);
        let sim = norm(inv.invoke_async::<Value>(&mut self.sim).await);
        assert_eq!(real, sim, "step {}: script invocation", self.steps);
        real
    }

    async fn flush_scripts(&mut self) {
        self.same(redis::cmd("SCRIPT").arg("FLUSH").clone())
            .await
            .unwrap();
    }
}

fn cmd(args: &[&str]) -> Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

fn evalsha(sha: &str, keys: &[&str], args: &[&str]) -> Cmd {
    let mut c = redis::cmd("EVALSHA");
    c.arg(sha).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    for a in args {
        c.arg(*a);
    }
    c
}

fn eval(script: &str, keys: &[&str], args: &[&str]) -> Cmd {
    let mut c = redis::cmd("EVAL");
    c.arg(script).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    for a in args {
        c.arg(*a);
    }
    c
}

/// How far the real and simulated PTTLs may differ (ms). Both run on the wall clock, the real
/// server's command first, so a thread held back between the two for a moment (other tests of
/// this binary spawn servers meanwhile) shows up as a gap: 202 ms was seen on an idle machine. A
/// second is still far below what the comparison is for: a TTL in seconds read as milliseconds,
/// or a key left without one (-1).
const PTTL_TOLERANCE: i64 = 1000;

#[tokio::test]
async fn lettuce_scripts_by_sha() {
    let mut p = Pair::new().await;
    let lock = p
        .same(cmd(&["SCRIPT", "LOAD", lettuce_reentrant::LOCK_SCRIPT]))
        .await
        .unwrap();
    let unlock = p
        .same(cmd(&["SCRIPT", "LOAD", lettuce_reentrant::UNLOCK_SCRIPT]))
        .await
        .unwrap();
    let (Value::BulkString(lock), Value::BulkString(unlock)) = (lock, unlock) else {
        panic!("SCRIPT LOAD answers the sha")
    };
    let (lock, unlock) = (
        String::from_utf8(lock).unwrap(),
        String::from_utf8(unlock).unwrap(),
    );
    // Free: acquired (nil).
    assert_eq!(
        p.same(evalsha(&lock, &["k"], &["5000", "A"])).await,
        Ok(Value::Nil)
    );
    // Contended: the holder's PTTL.
    let pttl = p
        .close(evalsha(&lock, &["k"], &["5000", "B"]), PTTL_TOLERANCE)
        .await;
    assert!(matches!(pttl, Ok(Value::Int(t)) if t > 4000 && t <= 5000));
    p.close(cmd(&["PTTL", "k"]), PTTL_TOLERANCE).await.unwrap();
    // Not ours: nil; ours: 1 and the key is gone.
    assert_eq!(
        p.same(evalsha(&unlock, &["k"], &["B"])).await,
        Ok(Value::Nil)
    );
    assert_eq!(
        p.same(evalsha(&unlock, &["k"], &["A"])).await,
        Ok(Value::Int(1))
    );
    assert_eq!(p.same(cmd(&["EXISTS", "k"])).await, Ok(Value::Int(0)));
    // A key without expiry (left by a crashed SETNX client): PTTL -1.
    p.same(cmd(&["SET", "k", "X"])).await.unwrap();
    assert_eq!(
        p.same(evalsha(&lock, &["k"], &["5000", "A"])).await,
        Ok(Value::Int(-1))
    );
    // A lease given as a fraction is truncated by tonumber/PEXPIRE the same way... or refused
    // the same way.
    p.same(cmd(&["DEL", "k"])).await.unwrap();
    p.same(evalsha(&lock, &["k"], &["12.5", "A"])).await.ok();
    // After SCRIPT FLUSH (or on a promoted replica, which never got SCRIPT LOAD): NOSCRIPT.
    p.flush_scripts().await;
    let e = p.same(evalsha(&lock, &["k"], &["5000", "A"])).await;
    assert!(matches!(&e, Err(t) if t.starts_with("NOSCRIPT")), "{e:?}");
}

#[tokio::test]
async fn redisson_acquire_renew_release_and_unlock_message() {
    let mut p = Pair::new().await;
    // A real subscriber on the lock's channel; the engine's connection 99 subscribes too.
    let channel = redisson::channel("k");
    let mut sub = redis::Client::open(p._server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    sub.subscribe(&channel).await.unwrap();
    p.sim
        .engine
        .lock()
        .unwrap()
        .subscribe(99, channel.as_bytes());

    let acquire = |lease: &str, holder: &str| {
        let mut i = redisson::ACQUIRE.key("k");
        i.arg(lease).arg(holder);
        i
    };
    let renew = |holder: &str| {
        let mut i = redisson::RENEW.key("k");
        i.arg(30000).arg(holder);
        i
    };
    let release = |holder: &str| {
        let mut i = redisson::RELEASE.key("k");
        i.key(&channel)
            .arg(redisson::UNLOCK_MESSAGE)
            .arg(30000)
            .arg(holder);
        i
    };
    // First acquire goes through the NOSCRIPT fallback (nothing loaded yet).
    assert_eq!(p.invoke(&acquire("30000", "A:1")).await, Ok(Value::Nil));
    // Reentrant: the count goes to 2.
    assert_eq!(p.invoke(&acquire("30000", "A:1")).await, Ok(Value::Nil));
    assert_eq!(
        p.same(cmd(&["HGET", "k", "A:1"])).await,
        Ok(Value::BulkString(b"2".to_vec()))
    );
    // Another holder gets the PTTL.
    p.steps += 1;
    let real = norm(acquire("30000", "B:1").invoke_async(&mut p.real).await);
    let sim = norm(acquire("30000", "B:1").invoke_async(&mut p.sim).await);
    match (real, sim) {
        (Ok(Value::Int(a)), Ok(Value::Int(b))) => assert!((a - b).abs() <= PTTL_TOLERANCE),
        other => panic!("{other:?}"),
    }
    // Renewal: ours 1, not ours 0.
    assert_eq!(p.invoke(&renew("A:1")).await, Ok(Value::Int(1)));
    assert_eq!(p.invoke(&renew("B:1")).await, Ok(Value::Int(0)));
    // Release: not ours nil; ours 0 (still held once), then 1 (deleted, published).
    assert_eq!(p.invoke(&release("B:1")).await, Ok(Value::Nil));
    assert_eq!(p.invoke(&release("A:1")).await, Ok(Value::Int(0)));
    p.close(cmd(&["PTTL", "k"]), PTTL_TOLERANCE).await.unwrap();
    assert_eq!(p.invoke(&release("A:1")).await, Ok(Value::Int(1)));
    assert_eq!(p.same(cmd(&["EXISTS", "k"])).await, Ok(Value::Int(0)));
    assert_eq!(p.invoke(&release("A:1")).await, Ok(Value::Nil));
    // Both published exactly one unlock message, "0", on the lock's channel.
    use futures::StreamExt;
    let msg = tokio::time::timeout(std::time::Duration::from_secs(2), sub.on_message().next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msg.get_channel_name(), channel);
    assert_eq!(msg.get_payload_bytes(), b"0");
    let delivered = p.sim.delivered.lock().unwrap().clone();
    assert_eq!(
        delivered,
        vec![(99, channel.as_bytes().to_vec(), b"0".to_vec())]
    );
    // On a string key the script fails the same way (error text names the script and line).
    p.same(cmd(&["SET", "s", "x"])).await.unwrap();
    let mut on_string = redisson::ACQUIRE.key("s");
    on_string.arg(30000).arg("A:1");
    let e = p.invoke(&on_string).await;
    assert!(matches!(&e, Err(t) if t.contains("WRONGTYPE")), "{e:?}");
}

#[tokio::test]
async fn fenced_acquire_and_compare_and_delete() {
    let mut p = Pair::new().await;
    let counter = fenced::fencing_key("k");
    let acquire = |owner: &str| {
        let mut i = fenced::FENCED_ACQUIRE.key("k");
        i.key(&counter).arg(owner).arg(10000);
        i
    };
    assert_eq!(p.invoke(&acquire("A")).await, Ok(Value::Int(1)));
    assert_eq!(p.invoke(&acquire("B")).await, Ok(Value::Nil));
    p.close(cmd(&["PTTL", "k"]), PTTL_TOLERANCE).await.unwrap();
    let cad = |owner: &str| {
        let mut i = lease::COMPARE_AND_DELETE.key("k");
        i.arg(owner);
        i
    };
    assert_eq!(p.invoke(&cad("B")).await, Ok(Value::Int(0)));
    assert_eq!(p.invoke(&cad("A")).await, Ok(Value::Int(1)));
    assert_eq!(p.invoke(&acquire("B")).await, Ok(Value::Int(2)));
    assert_eq!(
        p.same(cmd(&["GET", &counter])).await,
        Ok(Value::BulkString(b"2".to_vec()))
    );
    // The NOSCRIPT path again, after a flush.
    p.flush_scripts().await;
    p.same(cmd(&["DEL", "k"])).await.unwrap();
    assert_eq!(p.invoke(&acquire("C")).await, Ok(Value::Int(3)));
    // EVAL of the same text agrees too.
    let e = p
        .same(eval(
            include_str!("../../src/backend/redis/lock/scripts/fenced_acquire.lua"),
            &["k2", &counter],
            &["D", "10000"],
        ))
        .await;
    assert_eq!(e, Ok(Value::Int(4)));
}

#[tokio::test]
async fn naive_and_plain_del_commands() {
    let mut p = Pair::new().await;
    // the address-book article: SETNX, EXPIRE in seconds, GET, DEL.
    assert_eq!(p.same(cmd(&["SETNX", "k", "v1"])).await, Ok(Value::Int(1)));
    assert_eq!(p.same(cmd(&["SETNX", "k", "v2"])).await, Ok(Value::Int(0)));
    assert_eq!(p.same(cmd(&["TTL", "k"])).await, Ok(Value::Int(-1)));
    assert_eq!(p.same(cmd(&["EXPIRE", "k", "5"])).await, Ok(Value::Int(1)));
    p.close(cmd(&["PTTL", "k"]), PTTL_TOLERANCE).await.unwrap();
    assert_eq!(
        p.same(cmd(&["PEXPIRE", "k", "1500"])).await,
        Ok(Value::Int(1))
    );
    assert_eq!(
        p.same(cmd(&["GET", "k"])).await,
        Ok(Value::BulkString(b"v1".to_vec()))
    );
    assert_eq!(p.same(cmd(&["DEL", "k"])).await, Ok(Value::Int(1)));
    assert_eq!(p.same(cmd(&["EXPIRE", "k", "5"])).await, Ok(Value::Int(0)));
    // the Redlock article: SET EX NX, then a plain DEL (which deletes anyone's entry).
    assert_eq!(
        p.same(cmd(&["SET", "k", "A", "EX", "1", "NX"])).await,
        Ok(Value::Okay)
    );
    assert_eq!(
        p.same(cmd(&["SET", "k", "B", "EX", "1", "NX"])).await,
        Ok(Value::Nil)
    );
    assert_eq!(p.same(cmd(&["TTL", "k"])).await, Ok(Value::Int(1)));
    assert_eq!(p.same(cmd(&["DEL", "k"])).await, Ok(Value::Int(1)));
    assert_eq!(p.same(cmd(&["DEL", "k"])).await, Ok(Value::Int(0)));
    let e = p.same(cmd(&["SET", "k", "A", "EX", "0", "NX"])).await;
    assert!(e.is_err());
}

#[tokio::test]
async fn storage_fenced_write_and_insert() {
    let mut p = Pair::new().await;
    let write = |value: u64, token: &str| {
        let mut i = resource::FENCED_WRITE.key(resource::COUNTER_KEY);
        i.key(resource::HIGHEST_TOKEN_KEY)
            .key(resource::SEQ_KEY)
            .arg(value)
            .arg(token);
        i
    };
    assert_eq!(p.invoke(&write(1, "")).await, Ok(Value::Int(1)));
    assert_eq!(p.invoke(&write(2, "33")).await, Ok(Value::Int(2)));
    assert_eq!(p.invoke(&write(3, "34")).await, Ok(Value::Int(3)));
    // Older token: refused.
    assert_eq!(p.invoke(&write(9, "33")).await, Ok(Value::Int(0)));
    // Equal token (a reused one): accepted.
    assert_eq!(p.invoke(&write(4, "34")).await, Ok(Value::Int(4)));
    assert_eq!(
        p.same(cmd(&["GET", resource::COUNTER_KEY])).await,
        Ok(Value::BulkString(b"4".to_vec()))
    );
    let insert = |id: &str, default: bool, token: &str| {
        let mut i = resource::FENCED_INSERT.key(resource::addresses_key(1));
        i.key(resource::HIGHEST_TOKEN_KEY)
            .key(resource::SEQ_KEY)
            .arg(id)
            .arg(if default { "1" } else { "0" })
            .arg(token);
        i
    };
    assert_eq!(p.invoke(&insert("a", true, "")).await, Ok(Value::Int(5)));
    assert_eq!(p.invoke(&insert("b", false, "35")).await, Ok(Value::Int(6)));
    assert_eq!(p.invoke(&insert("c", true, "1")).await, Ok(Value::Int(0)));
    assert_eq!(
        p.same(cmd(&["HLEN", &resource::addresses_key(1)])).await,
        Ok(Value::Int(2))
    );
    p.same(cmd(&["HGETALL", &resource::addresses_key(1)]))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_harness_notices_a_difference() {
    let mut p = Pair::new().await;
    p.sim.engine.lock().unwrap().execute(
        now_ms(),
        1,
        &[b"SET".to_vec(), b"only-sim".to_vec(), b"1".to_vec()],
    );
    let r = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
        p.same(cmd(&["EXISTS", "only-sim"])),
    ))
    .await;
    assert!(r.is_err(), "a differing reply must fail the comparison");
}
