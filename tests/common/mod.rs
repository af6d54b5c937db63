//! Helpers every test binary shares: loading a bundled scenario, judging a simulated run, and
//! running the `lockcheck` command. Each binary includes this file with
//! `#[path = "../common/mod.rs"] mod common;` and uses only some of it.
#![allow(dead_code)]

use lockcheck::{Mode, Outcome, Scenario};
use std::path::Path;
use std::process::Command;

/// The bundled scenario `scenarios/<name>.toml` (`name` with or without `.toml`).
pub fn bundled(name: &str) -> Scenario {
    let file = if name.ends_with(".toml") {
        name.to_string()
    } else {
        format!("{name}.toml")
    };
    Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `s` in simulation with `seed` and judges it.
pub fn judge_sim(s: &Scenario, seed: u64) -> Outcome {
    let run = lockcheck::Registry::new().run_sim(s, seed);
    Outcome::judge(s, Mode::Sim, seed, run.history)
}

/// Runs the `lockcheck` binary in the crate's directory: (exit code, stdout, stderr).
pub fn lockcheck(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run lockcheck");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The nemesis's fault lines of a history (`EventKind::Fault`'s text), in order: what a test
/// reads to check that a fault really fired, and how.
pub fn fault_lines(history: &lockcheck::history::History) -> Vec<String> {
    history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            lockcheck::history::EventKind::Fault { what } => Some(what.clone()),
            _ => None,
        })
        .collect()
}

/// Serializes the tests of one binary that spawn real servers. Real runs are timing-sensitive on
/// a 2-core machine, and a test that counts the process's live children (none may outlive a
/// run) can only do so while no other real run is in flight.
pub fn real_servers_one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A proptest configuration for the random differential tests: `cases` cases drawn from a fixed
/// seed, so a suite that passed once passes again on the same code (CI must not go red by the
/// draw), and no failure persistence file. `PROPTEST_RNG_SEED=<n>` (which `Config::default`
/// reads) draws other cases, to look further.
pub fn fixed_seed_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, RngSeed};
    let mut config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    if matches!(config.rng_seed, RngSeed::Random) {
        config.rng_seed = RngSeed::Fixed(20261124);
    }
    config
}

/// How long after a service lost its quorum a grant may still land: one answer already on its
/// way (a read the leader answered before the loss), at most a round trip and a thread's wake-up
/// on a loaded machine.
pub const IN_FLIGHT_US: u64 = 200_000;

/// Runs `s` once in simulation (`real`: on spawned servers) and judges it.
pub fn judge_in(s: &Scenario, real: bool, seed: u64) -> Outcome {
    if !real {
        return judge_sim(s, seed);
    }
    let history = lockcheck::Registry::new()
        .run_real(s, seed)
        .unwrap_or_else(|e| panic!("{} on spawned servers: {e}", s.name));
    Outcome::judge(s, Mode::Real, seed, history)
}

/// When the nemesis noted the `n`th crash (from 1) of a server whose name starts with `servers`
/// (`zookeeper-`, `etcd-`): a note `<server> crashed ...` (simulation) or `<server> killed ...`
/// (spawned servers), in µs of true time.
pub fn nth_server_crash_us(o: &Outcome, servers: &str, n: usize) -> u64 {
    o.history
        .events
        .iter()
        .filter(|e| {
            matches!(&e.kind, lockcheck::history::EventKind::Fault { what }
                if what.starts_with(servers)
                    && what.split_whitespace().nth(1).is_some_and(|w| w == "crashed" || w == "killed"))
        })
        .nth(n - 1)
        .unwrap_or_else(|| panic!("no crash #{n} of a {servers}* server\n{}", o.history.render()))
        .at_us
}

/// The grants (`acquired`) and critical sections entered (`enter`) of `client` (every client:
/// `None`) within true time `from_us..to_us`, as `at_us node kind` lines.
pub fn grants_within(o: &Outcome, client: Option<u32>, from_us: u64, to_us: u64) -> Vec<String> {
    o.history
        .events
        .iter()
        .filter(|e| (from_us..to_us).contains(&e.at_us))
        .filter(|e| client.is_none() || e.node.client() == client)
        .filter(|e| {
            matches!(
                e.kind,
                lockcheck::history::EventKind::Acquired { .. }
                    | lockcheck::history::EventKind::Enter
            )
        })
        .map(|e| format!("{} {} {:?}", e.at_us, e.node, e.kind))
        .collect()
}

/// Asserts what a service that lost its quorum at `lost_us` must show: it served before (some
/// grant), nobody is granted the lock or enters a critical section after it (but for an
/// answer already on its way, [`IN_FLIGHT_US`]), and the verdict is liveness violated with
/// mutual exclusion and the resource safe: the waiters time out, nothing unsafe happens.
pub fn assert_nothing_granted_after(o: &Outcome, lost_us: u64, what: &str) {
    let render = || o.history.render();
    assert!(
        grants_within(o, None, 0, lost_us).len() >= 2,
        "{what}: the service granted nothing before it lost its quorum, so the test shows \
         nothing\n{}",
        render()
    );
    let late = grants_within(o, None, lost_us + IN_FLIGHT_US, u64::MAX);
    assert!(
        late.is_empty(),
        "{what}: granted after the quorum was lost at {lost_us} µs: {late:?}\n{}",
        render()
    );
    for (check, want) in [
        ("mutual_exclusion", lockcheck::Verdict::Safe),
        ("resource", lockcheck::Verdict::Safe),
        ("liveness", lockcheck::Verdict::Violation),
    ] {
        assert_eq!(
            o.checks[check].verdict,
            want,
            "{what}: {check}: {}\n{}",
            o.checks[check].summary,
            render()
        );
    }
}

/// A `[workload]` table: two clients taking the lock in turn, 30 short critical sections each
/// (more than a run of a few seconds holds).
pub const TWO_CLIENTS_IN_TURN: &str =
    "[workload]\nclients = 2\ncycles = 30\nhold_ms = [100, 200]\nthink_ms = [0, 20]\n";

/// The `[[faults]]` tables that crash `servers` one after the other, 100 ms apart from 900 ms
/// on, none restarting within any run (`restart_after_ms` of 10^8): with a majority of three
/// among them, the second crash, at 1000 ms, takes the quorum.
pub fn crashes_for_good(servers: &[&str]) -> String {
    servers
        .iter()
        .enumerate()
        .map(|(i, node)| {
            format!(
                "\n[[faults]]\nkind = \"crash\"\nnode = \"{node}\"\nat_ms = {}\n\
                 restart_after_ms = 100000000\n",
                900 + 100 * i
            )
        })
        .collect()
}

/// For each set of `majorities` (server names, crashed in that order by [`crashes_for_good`]
/// into `scenario`'s `[[faults]]`), runs the scenario in one world (five seeds in simulation,
/// one run on spawned servers) and asserts [`assert_nothing_granted_after`] the second crash,
/// then `more` (given the outcome and what ran).
pub fn assert_crashed_majorities_grant_nothing(
    scenario: impl Fn(&str) -> Scenario,
    majorities: &[&[&str]],
    real: bool,
    more: impl Fn(&Outcome, &str),
) {
    for servers in majorities {
        let s = scenario(&crashes_for_good(servers));
        // `zookeeper-`, `etcd-`: whose crash notes count.
        let prefix = &servers[0][..=servers[0].rfind('-').expect("a server's name")];
        let seeds = if real { 1..=1 } else { 1..=5 };
        for seed in seeds {
            let o = judge_in(&s, real, seed);
            let what = format!("{servers:?} crashed, seed {seed}, real {real}");
            assert_nothing_granted_after(&o, nth_server_crash_us(&o, prefix, 2), &what);
            more(&o, &what);
        }
    }
}

/// A scenario on `backend`'s table `table` (its keys, then a newline) with two clients taking
/// turns for 3 s, whose servers go down for good at 300 ms through `faults` (a crash whose
/// restart falls after the run, a pause longer than the run): every client that asks after that
/// waits with nobody holding, longer than the 1 s liveness bound.
pub fn down_for_good(name: &str, lock: &str, table: &str, faults: &str) -> Scenario {
    let text = format!(
        r#"name = "{name}"
about = "its servers go down for good at 300 ms"
expect = "safe"
expect_checks = {{ mutual_exclusion = "safe", liveness = "violation" }}
seed = 1
duration_ms = 3000

[lock]
{lock}

[checks]
liveness_bound_ms = 1000

{table}
{TWO_CLIENTS_IN_TURN}{faults}"#
    );
    Scenario::parse(&format!("{name}.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `s` once on spawned servers (in a thread of its own, so that a run that never ends fails
/// the test instead of hanging it) and asserts that it ends by its stated end: its clients and
/// its nemesis are done by `duration_ms` plus the grace period on the run's clock, the whole run
/// (spawning its servers included) within the most it can take, its up-front estimate within 10x
/// of what it took, and its verdict is the
/// liveness violation of servers down for good, not a hang.
pub fn assert_real_run_ends_in_time(s: &Scenario) -> Outcome {
    use lockcheck::history::EventKind;
    use lockcheck::world::estimate::{real_most_ms, real_run_ms, run_grace_ms};
    use std::time::{Duration, Instant};
    let estimate = Duration::from_millis(real_most_ms(s));
    let end_ms = s.duration_ms + run_grace_ms(s);
    let (tx, rx) = std::sync::mpsc::channel();
    let run = s.clone();
    let started = Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(judge_in(&run, true, 1));
    });
    let wait = estimate + Duration::from_secs(15);
    let o = rx.recv_timeout(wait).unwrap_or_else(|_| {
        panic!(
            "{}: the real run had not ended {:.1} s after it started (its estimate: {:.1} s, of \
             which duration_ms + grace {end_ms} ms): it runs past its end",
            s.name,
            wait.as_secs_f64(),
            estimate.as_secs_f64()
        )
    });
    let took = started.elapsed();
    let render = o.history.render();
    assert!(
        took <= estimate,
        "{}: the real run took {:.1} s, more than the most it can take ({:.1} s)\n{render}",
        s.name,
        took.as_secs_f64(),
        estimate.as_secs_f64()
    );
    // The up-front estimate is within 10x of what was measured, either way.
    let about = Duration::from_millis(real_run_ms(s));
    assert!(
        about <= 10 * took && took <= 10 * about,
        "{}: estimated {:.1} s up front, took {:.1} s",
        s.name,
        about.as_secs_f64(),
        took.as_secs_f64()
    );
    let run_end = o
        .history
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::RunEnd))
        .map(|e| e.at_us)
        .expect("a run records its end");
    assert!(
        run_end <= (end_ms + 500) * 1000,
        "{}: its clients were waited for until {run_end} µs, past duration_ms + grace \
         ({end_ms} ms)\n{render}",
        s.name
    );
    // After the end: the nemesis's last notes and the final state's read (2 s timeouts).
    let last = o.history.events.last().map_or(0, |e| e.at_us);
    assert!(
        last <= (end_ms + 3_000) * 1000,
        "{}: the run recorded until {last} µs, past duration_ms + grace ({end_ms} ms)\n{render}",
        s.name
    );
    let liveness = &o.checks["liveness"];
    assert_eq!(
        liveness.verdict,
        lockcheck::check::Verdict::Violation,
        "{}: servers down for good are a liveness finding: {liveness:?}\n{render}",
        s.name
    );
    o
}

/// The `[[faults]]` table of a crash of `node` at 300 ms whose restart falls after any run.
pub fn crash_at_300_for_good(node: &str) -> String {
    format!(
        "\n[[faults]]\nkind = \"crash\"\nnode = \"{node}\"\nat_ms = 300\n\
         restart_after_ms = 100000000\n"
    )
}

/// A planted bug: lock `L` whose release answers "released" whatever its delete did, as npm
/// etcd3's `release()` (it ignores "lease not found") and kazoo's (it ignores `NoNodeError`) do.
/// A holder whose entry its lease's or session's expiry removed hears "released": the release
/// check must call that a lie.
pub struct SaysReleased<L>(pub L);

impl<L: lockcheck::lock::Lock> lockcheck::lock::Lock for SaysReleased<L> {
    async fn acquire(
        &mut self,
    ) -> Result<Option<lockcheck::lock::Guard>, lockcheck::lock::LockError> {
        self.0.acquire().await
    }

    async fn release(
        &mut self,
        guard: &lockcheck::lock::Guard,
    ) -> Result<bool, lockcheck::lock::LockError> {
        let _ = self.0.release(guard).await;
        Ok(true)
    }
}

/// In simulation, a lock's run `o` (a lock that answers its releases truthfully) and `planted`,
/// the same scenario and seed with [`SaysReleased`] around the lock: the servers recorded the
/// removals with their causes (a client's, an expiry), the truthful releases and the foreign
/// releases are judged safe, and the planted lock's "released" after an expiry is a lie.
pub fn assert_release_truth_judged(o: &Outcome, planted: &Outcome) {
    assert_release_judged(o, lockcheck::Verdict::Safe);
    let foreign = &o.checks["foreign_release"];
    assert_eq!(
        foreign.verdict,
        lockcheck::Verdict::Safe,
        "{}",
        foreign.summary
    );
    let text = o.history.render();
    assert!(text.contains("entry-gone cause=expired"), "{text}");
    assert!(text.contains("entry-removed by=client-"), "{text}");
    assert_release_judged(planted, lockcheck::Verdict::Violation);
}

/// Asserts what the release check said of `o`: `want`, and for a violation that one of its lies
/// is a release after the servers expired the entry.
pub fn assert_release_judged(o: &Outcome, want: lockcheck::Verdict) {
    let r = &o.checks["release"];
    assert_eq!(r.verdict, want, "{}\n{}", r.summary, o.history.render());
    if want == lockcheck::Verdict::Violation {
        let lies = r.evidence["mismatches"].as_array().expect("mismatches");
        assert!(
            lies.iter().any(|l| l["entry_gone_cause"] == "expired"),
            "{lies:?}"
        );
    }
}

/// `base` (a bundled scenario's name) with client 1 held back from its start for `ms` (a pause
/// at `at_ms = 0`: "a client starts late"), run once on real servers: client 1's first step
/// comes after `ms` of true time while client 0 has worked before it, and the history says when
/// it was held and when it started. A task world holds the client's task behind its closed gate
/// before the task's first step (`ClientTasks::hold_back_late_starters`).
pub fn assert_a_real_client_starts_late(base: &str, ms: u64) {
    let mut s = bundled(base);
    s.faults.push(lockcheck::fault::Fault {
        trigger: lockcheck::fault::Trigger::At(0),
        kind: lockcheck::fault::FaultKind::Pause {
            client: lockcheck::fault::ClientRef::Index(1),
            for_ms: ms,
        },
        by_client: None,
    });
    assert_eq!(s.real_mode_unsupported(), None, "{base}");
    let history = lockcheck::Registry::new()
        .run_real(&s, s.seed)
        .unwrap_or_else(|e| panic!("{base}: {e}"));
    let text = history.render();
    let first = |client: &str| {
        history
            .events
            .iter()
            .find(|e| e.node == client)
            .map(|e| e.at_us)
            .unwrap_or_else(|| panic!("{client} never ran\n{text}"))
    };
    assert!(first("client-1") >= ms * 1000, "{text}");
    assert!(first("client-0") < ms * 1000, "{text}");
    assert!(
        text.contains(&format!("client-1 starts late: held back {ms} ms")),
        "{text}"
    );
    assert!(text.contains("client-1 starts\n"), "{text}");
}

/// Server lanes of the HTML timeline (`lockcheck::report_html::timeline`), for the backends'
/// timeline tests: a scenario, a history of nemesis notes, and what a lane shows.
pub mod lanes {
    use lockcheck::history::{Event, EventKind, History};
    use lockcheck::report_html::timeline::{Span, Timeline};
    use lockcheck::Scenario;

    /// A scenario of `lock` (a `[lock]` table's body) with `table` (its service's table), 2
    /// clients.
    pub fn scenario(lock: &str, table: &str) -> Scenario {
        Scenario::parse(
            "lanes.toml",
            &format!(
                "name = \"lanes\"\nexpect = \"safe\"\nduration_ms = 5000\n[lock]\n{lock}\n{table}\n\
                 [workload]\nclients = 2\ncycles = 1\nhold_ms = [10, 10]\n"
            ),
        )
        .unwrap()
    }

    /// A history of nemesis notes `(at_us, what)`, each worded as its world writes it, ended at
    /// `end_us`.
    pub fn notes(notes: &[(u64, &str)], end_us: u64) -> History {
        let ev = |at_us, node: &str, kind| Event {
            at_us,
            node: node.into(),
            kind,
        };
        let mut events: Vec<Event> = notes
            .iter()
            .map(|&(at, what)| ev(at, "nemesis", EventKind::Fault { what: what.into() }))
            .collect();
        events.push(ev(end_us, "run", EventKind::RunEnd));
        History { events }
    }

    /// The bundled or test scenario at `file` (relative to the crate) and its simulated run
    /// with the scenario's own seed.
    pub fn simulated(file: &str) -> (Scenario, History) {
        let s =
            Scenario::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        let h = lockcheck::Registry::new().run_sim(&s, s.seed).history;
        (s, h)
    }

    /// `(kind, from, to)` of every span of `lane` on row 0 (its role), in order.
    pub fn roles(t: &Timeline, lane: &str) -> Vec<(&'static str, u64, u64)> {
        spans(t, lane, |s| s.row == 0)
    }

    /// `(kind, from, to)` of every span of `lane` that `keep` accepts, in order.
    pub fn spans(
        t: &Timeline,
        lane: &str,
        keep: impl Fn(&Span) -> bool,
    ) -> Vec<(&'static str, u64, u64)> {
        let l = t.lanes.iter().find(|l| l.name == lane).expect(lane);
        l.spans
            .iter()
            .filter(|s| keep(s))
            .map(|s| (s.kind, s.from_us, s.to_us))
            .collect()
    }

    /// `(kind, at)` of every mark of `lane`.
    pub fn marks(t: &Timeline, lane: &str) -> Vec<(&'static str, u64)> {
        let l = t.lanes.iter().find(|l| l.name == lane).expect(lane);
        l.marks.iter().map(|m| (m.kind, m.at_us)).collect()
    }

    /// `(name, kind)` of every lane, in order.
    pub fn names(t: &Timeline) -> Vec<(&str, &str)> {
        t.lanes.iter().map(|l| (l.name.as_str(), l.kind)).collect()
    }
}
