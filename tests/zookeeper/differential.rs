//! The simulated ZooKeeper (`simzk`) against a real ZooKeeper 3.8 server that the test spawns:
//! random sequences of the requests the lock recipes send (create in every mode, delete with and
//! without a version, exists, getData, getChildren, a session closing), from two sessions, give
//! the same answers in both: the same names (sequence numbers included), the same errors, the
//! same `Stat`s, and the same ephemeral nodes gone when their session closes.
//!
//! Each sequence is also replayed on a follower (`simzk::Follower`) from the transactions the
//! engine committed: it answers every read the engine answered the same, and ends with the same
//! tree, so a follower that has caught up is the leader's state, which the real server checked.
//!
//! zxids are compared by their order within a sequence (each zxid seen is replaced by its rank
//! among the zxids the sequence saw), since the real server's zxids also count the transactions
//! of earlier sequences, and a session's owner id by which of the sequence's sessions it is.
//!
//! Cost: about 15 ms a sequence on the real server on 2 cores, so the default of 1000 sequences
//! takes about 15 s; `LOCKCHECK_ZK_DIFF_SEQUENCES=5000` runs the 5,000 (about 75 s).

use lockcheck::backend::zookeeper::engine::{Follower, Request, Response, ZkConfig, ZkEngine};
use lockcheck::backend::zookeeper::real::server::{ZooKeeper, ZooKeeperOptions};
use lockcheck::backend::zookeeper::real::RealZkClient;
use lockcheck::backend::zookeeper::seam::{CreateMode, Stat, ZkClient, ZkError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TICK_MS: u64 = 100;
const TIMEOUT_MS: u64 = 1_000;

/// What a request answered, with nothing that differs between the worlds by design.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Created(String, Stat),
    Done,
    Exists(Option<Stat>),
    Data(Vec<u8>, Stat),
    Children(Vec<String>),
    Error(Option<i32>),
}

fn answer(out: Result<Response, ZkError>) -> Answer {
    match out {
        Ok(Response::Created(name, s)) => Answer::Created(name, s),
        Ok(Response::Done) => Answer::Done,
        Ok(Response::Exists(s)) => Answer::Exists(s),
        Ok(Response::Data(d, s)) => Answer::Data(d, s),
        Ok(Response::Children(c)) => Answer::Children(c),
        Ok(other) => panic!("not drawn: {other:?}"),
        Err(e) => Answer::Error(e.code()),
    }
}

/// Replaces zxids by their rank and owners by their session's index, across a sequence.
fn normalize(answers: &mut [Answer], sessions: &[i64]) {
    let mut zxids: Vec<i64> = Vec::new();
    let mut stats: Vec<&mut Stat> = Vec::new();
    for a in answers.iter_mut() {
        match a {
            Answer::Created(_, s) | Answer::Data(_, s) | Answer::Exists(Some(s)) => stats.push(s),
            _ => {}
        }
    }
    for s in &stats {
        zxids.extend([s.czxid, s.mzxid, s.pzxid]);
    }
    zxids.sort_unstable();
    zxids.dedup();
    let rank = |z: i64| zxids.binary_search(&z).unwrap() as i64;
    for s in stats {
        s.czxid = rank(s.czxid);
        s.mzxid = rank(s.mzxid);
        s.pzxid = rank(s.pzxid);
        if s.ephemeral_owner != 0 {
            s.ephemeral_owner = sessions
                .iter()
                .position(|&id| id == s.ephemeral_owner)
                .map_or(-1, |i| i as i64 + 1);
        }
    }
}

fn draw(rng: &mut SmallRng, root: &str) -> (usize, Request) {
    let paths = [
        format!("{root}/a"),
        format!("{root}/a/b"),
        format!("{root}/e"),
        format!("{root}/n-"),
        format!("{root}/a/n-"),
        format!("{root}/missing/x"),
    ];
    let path = paths[rng.gen_range(0..paths.len())].clone();
    let who = rng.gen_range(0..2);
    let request = match rng.gen_range(0..10) {
        0..=3 => Request::Create {
            path,
            data: vec![b'x'; rng.gen_range(0..3)],
            mode: [
                CreateMode::Persistent,
                CreateMode::PersistentSequential,
                CreateMode::Ephemeral,
                CreateMode::EphemeralSequential,
            ][rng.gen_range(0..4)],
        },
        4 | 5 => Request::Delete {
            path,
            version: [None, Some(0), Some(1)][rng.gen_range(0..3)],
        },
        6 => Request::Exists { path, watch: false },
        7 => Request::GetData { path, watch: false },
        8 => Request::GetChildren {
            path: [root.to_string(), format!("{root}/a")][rng.gen_range(0..2)].clone(),
            watch: false,
        },
        _ => Request::Close,
    };
    (who, request)
}

async fn apply_real(c: &mut RealZkClient, r: &Request) -> Result<Response, ZkError> {
    Ok(match r {
        Request::Create { path, data, mode } => {
            let (name, s) = c.create(path, data, *mode).await?;
            Response::Created(name, s)
        }
        Request::Delete { path, version } => {
            c.delete(path, *version).await?;
            Response::Done
        }
        Request::Exists { path, watch } => Response::Exists(c.exists(path, *watch).await?),
        Request::GetData { path, watch } => {
            let (d, s) = c.get_data(path, *watch).await?;
            Response::Data(d, s)
        }
        Request::GetChildren { path, watch } => {
            Response::Children(c.get_children(path, *watch).await?)
        }
        Request::Close => {
            c.close().await?;
            Response::Done
        }
        other => panic!("not drawn: {other:?}"),
    })
}

/// Waits until the real server has applied a session's close: its ephemeral nodes (as the
/// engine had them) are gone, seen from `observer`.
async fn settle_close(observer: &mut RealZkClient, ephemerals: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    for path in ephemerals {
        while observer.exists(path, false).await.unwrap().is_some() {
            assert!(
                Instant::now() < deadline,
                "{path} outlived its closed session"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

#[test]
fn simulated_zookeeper_matches_a_real_server() {
    let _turn = crate::zookeeper_turn();
    let sequences: u64 = std::env::var("LOCKCHECK_ZK_DIFF_SEQUENCES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let server = ZooKeeper::spawn(ZooKeeperOptions {
        tick_ms: TICK_MS as u32,
        session_timeout_ms: (2 * TICK_MS as u32, 20 * TICK_MS as u32),
        ..Default::default()
    })
    .unwrap();
    let connect = server.connect_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let clock: Arc<dyn Fn() -> u64 + Send + Sync> =
        Arc::new(move || start.elapsed().as_millis() as u64);
    rt.block_on(async {
        let timeout = Duration::from_millis(TIMEOUT_MS);
        let mut admin = RealZkClient::new(&connect, timeout, clock.clone());
        admin.reconnect().await.unwrap();
        let mut checked = 0;
        let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
        for i in 0..sequences {
            let mut rng = SmallRng::seed_from_u64(i);
            let root = format!("/d{i}");
            // The engine: a fresh service whose admin session makes the sequence's root.
            let mut engine = ZkEngine::new(ZkConfig::with_tick(TICK_MS));
            engine.record_commits();
            let mut follower = Follower::new();
            let (engine_admin, _) = engine.connect(0, TIMEOUT_MS);
            let mut sim = vec![answer(engine.request(
                0,
                engine_admin,
                Request::Create {
                    path: root.clone(),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                },
            ))];
            let mut real = vec![answer(
                admin
                    .create(&root, b"", CreateMode::Persistent)
                    .await
                    .map(|(n, s)| Response::Created(n, s)),
            )];
            let sim_sessions: Vec<i64> = (0..2).map(|_| engine.connect(0, TIMEOUT_MS).0).collect();
            let mut clients = Vec::new();
            for _ in 0..2 {
                let mut c = RealZkClient::new(&connect, timeout, clock.clone());
                c.reconnect().await.unwrap();
                clients.push(c);
            }
            let real_sessions: Vec<i64> = clients.iter().map(|c| c.session_id()).collect();
            let mut ops = Vec::new();
            for _ in 0..8 {
                let (who, request) = draw(&mut rng, &root);
                let owned: Vec<String> = engine
                    .dump()
                    .into_iter()
                    .filter(|(_, s)| s.ephemeral_owner == sim_sessions[who])
                    .map(|(p, _)| p)
                    .collect();
                let out = engine.request(0, sim_sessions[who], request.clone());
                for c in engine.take_committed() {
                    follower.receive(0, c);
                }
                follower.apply_due(0);
                if let (true, Ok(answered)) = (request.is_read(), &out) {
                    assert_eq!(
                        follower.read(sim_sessions[who], request.clone()).as_ref(),
                        Ok(answered),
                        "sequence {i}: the follower's read differs from the leader's; {request:?}"
                    );
                }
                sim.push(answer(out));
                real.push(answer(apply_real(&mut clients[who], &request).await));
                if request == Request::Close {
                    settle_close(&mut admin, &owned).await;
                }
                ops.push((who, request));
            }
            for a in &sim {
                let what = match a {
                    Answer::Created(name, s) if s.ephemeral_owner != 0 && name.ends_with('0') => {
                        "ephemeral sequential"
                    }
                    Answer::Created(_, s) if s.ephemeral_owner != 0 => "ephemeral",
                    Answer::Created(..) => "persistent",
                    Answer::Done => "deleted or closed",
                    Answer::Exists(Some(_)) => "exists",
                    Answer::Exists(None) => "does not exist",
                    Answer::Data(..) => "data",
                    Answer::Children(c) if c.is_empty() => "no children",
                    Answer::Children(_) => "children",
                    Answer::Error(Some(-101)) => "NONODE",
                    Answer::Error(Some(-110)) => "NODEEXISTS",
                    Answer::Error(Some(-111)) => "NOTEMPTY",
                    Answer::Error(Some(-103)) => "BADVERSION",
                    Answer::Error(Some(-112)) => "SESSIONEXPIRED",
                    Answer::Error(Some(-108)) => "NOCHILDRENFOREPHEMERALS",
                    Answer::Error(_) => "another error",
                };
                *seen.entry(what).or_insert(0u64) += 1;
            }
            assert_eq!(
                follower.dump(),
                engine.dump(),
                "sequence {i}: the follower's tree"
            );
            normalize(&mut sim, &sim_sessions);
            normalize(&mut real, &real_sessions);
            assert_eq!(
                sim, real,
                "sequence {i} diverged (simulated left, real right); requests: {ops:#?}"
            );
            for mut c in clients {
                let _ = c.close().await;
            }
            checked += 1;
        }
        let per = start.elapsed() / checked.max(1) as u32;
        eprintln!(
            "{checked} sequences agreed in {:?} ({per:?} each): {seen:?}",
            start.elapsed()
        );
        // Not vacuous: the sequences met every answer the recipes can get.
        if sequences >= 100 {
            for what in [
                "ephemeral sequential",
                "ephemeral",
                "persistent",
                "deleted or closed",
                "exists",
                "does not exist",
                "children",
                "NONODE",
                "NODEEXISTS",
                "NOTEMPTY",
                "BADVERSION",
                "SESSIONEXPIRED",
                "NOCHILDRENFOREPHEMERALS",
            ] {
                assert!(seen.contains_key(what), "no sequence met {what}: {seen:?}");
            }
            assert!(!seen.contains_key("another error"), "{seen:?}");
        }
    });
}
