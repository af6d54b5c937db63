//! Black-box lock clients (`[lock] kind = "client-program"`) on real `redis-server` processes, and
//! on spawned ZooKeeper servers and etcd members (kazoo's and npm etcd3's locks): the
//! client-library scenarios reach their expected verdicts, faults reach the client programs
//! (SIGSTOP/SIGCONT, SIGKILL, libfaketime, held forwarders) and no program outlives a run, even a
//! failing one or a SIGKILLed lockcheck; a missing library is exit 2 saying what to install. Also
//! `--redis URL`: a user's own Redis keeps its keys.
//!
//! Needs the pinned client libraries: `scripts/install-clients.sh` (`.ci/run` runs it).

use crate::common::fault_lines;
use lockcheck::history::EventKind;
use lockcheck::judge::{Mode, Outcome};
use lockcheck::real::{ClientCommand, ClientProgram, FakeTime, RedisServer, ServerOptions};
use lockcheck::scenario::Scenario;
use lockcheck::Verdict;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// Client-program runs one at a time, and never beside another real test that takes the same
/// turn: their timing matters, and the leftover checks must not see another test's live programs.
fn serial() -> MutexGuard<'static, ()> {
    crate::common::real_servers_one_at_a_time()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn require_client_libraries() {
    let python = root().join(".venv-clients/bin/python");
    let node = root().join("clients/node/node_modules/redlock");
    let etcd3 = root().join("clients/node/node_modules/etcd3");
    let advisory = root().join("clients/node/node_modules/advisory-lock");
    let kazoo = Command::new(&python)
        .args(["-c", "import kazoo, psycopg"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        python.exists() && node.exists() && etcd3.exists() && advisory.exists() && kazoo,
        "the client libraries are not installed: run scripts/install-clients.sh ({} with kazoo \
         and psycopg \
         / {} / {})",
        python.display(),
        node.display(),
        etcd3.display()
    );
}

/// A lock key no other run uses, so that [`programs_with_key`] sees only this test's programs.
fn unique_key(tag: &str) -> String {
    format!("clients-test:{}:{tag}", std::process::id())
}

/// Live processes whose environment has `LOCKCHECK_KEY=<key>` (a client program and anything it
/// forked; on ZooKeeper the variable is the key's znode path, `/lockcheck/<key>`), as (pid,
/// command line).
fn programs_with_key(key: &str) -> Vec<(u32, String)> {
    let needle = format!("LOCKCHECK_KEY={key}");
    let zk_needle = format!("LOCKCHECK_KEY=/lockcheck/{key}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|v| v == needle.as_bytes() || v == zk_needle.as_bytes())
        {
            let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    found
}

/// Waits up to `within` for `cond`; whether it became true.
fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if cond() {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each grant's fencing token, in the order granted.
fn grant_tokens(o: &Outcome) -> Vec<Option<u64>> {
    o.history
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Acquired { fencing_token, .. } => Some(*fencing_token),
            _ => None,
        })
        .collect()
}

fn sections(o: &Outcome) -> u64 {
    o.checks["mutual_exclusion"].evidence["sections"]
        .as_u64()
        .unwrap_or(0)
}

/// Runs `s` on real processes under a unique key and checks that none of its programs remain.
fn run_real(mut s: Scenario, tag: &str) -> Outcome {
    // A library that writes under a prefix of its own keeps it: pottery's scenarios name the
    // key pottery writes (`redlock:<key>`), and its adapter strips the prefix.
    let prefix = if s.lock.key.starts_with("redlock:") {
        "redlock:"
    } else {
        ""
    };
    // On a Redis Cluster the scenario's key decides the master its slot is on (the one its
    // faults hit): the unique key keeps that slot through a hash tag of the original key.
    let tag_of_slot = match s.name.contains("-cluster-") {
        true => format!("{{{}}}", s.lock.key),
        false => String::new(),
    };
    s.lock.key = format!("{prefix}{tag_of_slot}{}", unique_key(tag));
    let history = lockcheck::Registry::new()
        .run_real(&s, 1)
        .unwrap_or_else(|e| panic!("{} could not run: {e}", s.name));
    let left = programs_with_key(&s.lock.key);
    assert!(
        left.is_empty(),
        "{}: client programs outlived the run: {left:?}",
        s.name
    );
    Outcome::judge(&s, Mode::Real, 1, history)
}

#[test]
fn every_client_library_scenario_reaches_its_expected_verdict() {
    require_client_libraries();
    let _serial = serial();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("scenarios/clients"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 27, "{files:?}");
    let mut wrong = Vec::new();
    for f in &files {
        let s = Scenario::load(f).unwrap();
        let name = s.name.clone();
        // One run each, no reruns: each scenario's fault is placed so that its verdict does not
        // depend on how the machine schedules the programs (see the clock-jump scenarios'
        // comment on why their jumps are timed rather than fired at `acquired`).
        let o = run_real(s.clone(), &name);
        let faults = fault_lines(&o.history);
        println!(
            "{name}: {} ({} sections) {faults:?}",
            o.verdict(),
            sections(&o)
        );
        if o.verdict() != s.expect {
            wrong.push(format!(
                "{name}: {} (expected {})\n{}",
                o.verdict(),
                s.expect,
                o.history.render()
            ));
            continue;
        }
        // The verdict has the expected cause, and the program really did the work.
        let has = |text: &str| faults.iter().any(|l| l.contains(text));
        if name.ends_with("no-faults") {
            let want = u64::from(s.workload.clients * s.workload.cycles);
            assert_eq!(sections(&o), want, "{name}: every cycle holds the lock");
        } else if name.ends_with("-pause") {
            assert!(has("SIGSTOP of program pid"), "{name}: {faults:?}");
            assert!(has("SIGCONT of program pid"), "{name}: {faults:?}");
        } else if name.ends_with("-failover") && name.contains("-cluster-") {
            // The cluster elected the replica by itself; the program followed the new slot map.
            assert!(has("redis-1 killed"), "{name}: {faults:?}");
            assert!(has("(cluster election, epoch"), "{name}: {faults:?}");
        } else if name.ends_with("-failover") {
            assert!(has("promoted"), "{name}: {faults:?}");
        } else if name.ends_with("-sentinel") {
            // The sentinels failed the master over, and the program found the new one itself.
            assert!(
                has("+switch-master redis-0 -> redis-0-replica-0"),
                "{name}: {faults:?}"
            );
            assert!(
                !has("promoted"),
                "{name}: lockcheck promotes nothing: {faults:?}"
            );
        } else if name.ends_with("-clock-jump") && s.lock.service != lockcheck::lock::Service::Redis
        {
            // A client program's own clock, on a service that times leases on its servers.
            assert!(has("program clock jumped by"), "{name}: {faults:?}");
        } else if name.ends_with("-clock-jump") {
            assert!(has("redis-0 clock jumped"), "{name}: {faults:?}");
            assert!(has("redis-1 clock jumped"), "{name}: {faults:?}");
        } else if name.ends_with("-terminate") {
            assert!(has("pg_terminate_backend"), "{name}: {faults:?}");
        } else if name.ends_with("-partition") {
            assert!(has("forwarders hold every byte"), "{name}: {faults:?}");
            assert!(has("partition healed"), "{name}: {faults:?}");
        }
        // kazoo and etcd3 report the service's own fencing token (the lock node's sequence, the
        // lock key's create revision) with every grant, and each later grant's is higher.
        if name.starts_with("kazoo-") || name.starts_with("etcd3-") {
            let tokens = grant_tokens(&o);
            assert!(
                tokens.len() >= 2 && tokens.iter().all(Option::is_some),
                "{name}: {tokens:?}"
            );
            assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{name}: {tokens:?}");
        }
        if s.expect == Verdict::Violation {
            assert_eq!(
                o.checks["mutual_exclusion"].verdict,
                Verdict::Violation,
                "{name}: two holders at once"
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// A client-library scenario with `extra` appended, its command paths made absolute.
fn inline_scenario(file: &str, replace: &[(&str, &str)], extra: &str) -> Scenario {
    let mut text = std::fs::read_to_string(root().join("scenarios/clients").join(file)).unwrap();
    text = text.replace("../../", &format!("{}/", root().display()));
    for (a, b) in replace {
        assert!(text.contains(a), "{a}");
        text = text.replace(a, b);
    }
    text.push_str(extra);
    Scenario::parse("inline.toml", &text).unwrap()
}

/// The servers' witness places each removal by the server's clock: a jump of that clock in the
/// middle of the run (the nemesis's `clock_jump` on `redis-0`) is made between two ties of the
/// witness, so a correct release's removal stays between its `Exit` and its answer. Without the
/// ties, `explore --real` read redis-py's correct releases as lies within 6 cases (removals placed
/// after the answers). Three runs, each judged and each safe, with the jump in the history.
#[test]
fn a_server_clock_jump_does_not_turn_correct_releases_into_lies() {
    require_client_libraries();
    let _serial = serial();
    let extra =
        "\n[[faults]]\nkind = \"clock_jump\"\nat_ms = 30\nnode = \"redis-0\"\nby_ms = 145\n";
    for round in 0..3 {
        let s = inline_scenario("redis-py-lock-no-faults.toml", &[], extra);
        let o = run_real(s, &format!("clock-jump-{round}"));
        assert!(
            fault_lines(&o.history)
                .iter()
                .any(|l| l.contains("redis-0 clock jumped by 145 ms")),
            "{:?}",
            fault_lines(&o.history)
        );
        let release = &o.checks["release"];
        assert_eq!(
            release.verdict,
            Verdict::Safe,
            "round {round}: {}\n{}",
            release.summary,
            o.history.render()
        );
        assert!(sections(&o) > 0);
    }
}

/// npm etcd3's and kazoo's `release()` answer "released" for an entry their lease's or session's
/// expiry already removed (etcd3 ignores "lease not found", kazoo `NoNodeError`): on real servers
/// the observers (etcd: revision reads and a replaying watch; ZooKeeper: the transaction logs)
/// see the entry go at the expiry, and no removal in the release, so the release check calls it
/// a lie, and judges the no-fault runs safe. The verdict does not hang on the machine's timing:
/// the pause is three lease TTLs and the partition three session timeouts, so the expiry comes
/// seconds before the release, far outside the observers' placement bounds (milliseconds). Before,
/// release truth was not judged on etcd or ZooKeeper at all.
#[test]
fn etcd3_and_kazoo_releases_after_their_expiry_are_judged_lies() {
    require_client_libraries();
    let _serial = serial();
    for (file, want) in [
        ("etcd3-lock-pause", Verdict::Violation),
        ("kazoo-lock-partition", Verdict::Violation),
        ("etcd3-lock-no-faults", Verdict::Safe),
        ("kazoo-lock-no-faults", Verdict::Safe),
    ] {
        let s = Scenario::load(&root().join(format!("scenarios/clients/{file}.toml"))).unwrap();
        let o = run_real(s.clone(), &format!("release-{file}"));
        let release = &o.checks["release"];
        assert_eq!(
            release.verdict,
            want,
            "{file}: {}\n{}",
            release.summary,
            o.history.render()
        );
        assert_eq!(s.held_to("release", release.verdict), Some(want), "{file}");
        if want == Verdict::Violation {
            let lies = release.evidence["mismatches"].as_array().unwrap();
            // The paused or cut-off holder (whichever client acquired first): its entry went
            // (the expiry) before its release answered.
            assert!(
                lies.iter().all(|l| l["entry_gone_us"]
                    .as_u64()
                    .is_some_and(|gone| Some(gone) < l["at_us"].as_u64())),
                "{file}: {lies:?}"
            );
        }
    }
}

#[test]
fn a_crashed_client_program_is_sigkilled_and_its_lease_expires() {
    require_client_libraries();
    let _serial = serial();
    let s = inline_scenario(
        "redis-py-lock-no-faults.toml",
        &[
            ("cycles = 10", "cycles = 2"),
            ("duration_ms = 3000", "duration_ms = 6000"),
        ],
        "\n[[faults]]\nkind = \"crash\"\nnode = \"client-0\"\non = \"acquired\"\n",
    );
    let o = run_real(s, "crash");
    let faults = fault_lines(&o.history);
    assert!(
        faults
            .iter()
            .any(|l| l.contains("program pid") && l.contains("killed (SIGKILL)")),
        "{faults:?}"
    );
    // The crashed holder never writes; the other client gets the lock once the lease expires.
    assert_eq!(o.verdict(), Verdict::Safe, "{}", o.history.render());
    assert!(sections(&o) >= 3, "{}", o.history.render());
}

fn shell_client(
    script: &str,
    fake: Option<&FakeTime>,
) -> (ClientProgram, impl Write, impl BufRead) {
    let cmd = ClientCommand {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: None,
        env: vec![("LOCKCHECK_KEY".into(), unique_key("shell"))],
    };
    let (p, stdin, stdout) = ClientProgram::spawn(&cmd, fake).unwrap();
    (p, stdin, BufReader::new(stdout))
}

fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

#[test]
fn pause_is_sigstop_and_sigcont_crash_is_sigkill() {
    let _serial = serial();
    let (p, mut stdin, mut stdout) = shell_client("while read l; do echo \"$l\"; done", None);
    let pid = p.pid();
    p.pause().unwrap();
    assert_eq!(state(pid), Some('T'), "stopped");
    writeln!(stdin, "hello").unwrap();
    stdin.flush().unwrap();
    p.resume().unwrap();
    assert_ne!(state(pid), Some('T'));
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "hello", "the program went on where it stopped");
    p.kill();
    assert!(eventually(Duration::from_secs(2), || state(pid).is_none()));
}

#[test]
fn a_client_programs_clock_is_libfaketime() {
    let _serial = serial();
    let (p, mut stdin, mut stdout) =
        shell_client("while read l; do date +%s; done", Some(&FakeTime::Jumpable));
    let mut now = || {
        writeln!(stdin, "t").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        line.trim().parse::<i64>().unwrap()
    };
    let true_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now() - true_now).abs() <= 5, "starts on true time");
    const DAY_MS: i64 = 86_400_000;
    p.jump_clock(10 * DAY_MS).unwrap();
    let jumped = now() - true_now;
    assert!(
        (jumped - 10 * 86_400).abs() <= 5,
        "10 days ahead, got {jumped} s"
    );
    p.jump_clock(-10 * DAY_MS).unwrap();
    assert!((now() - true_now).abs() <= 5, "back on true time");
}

#[test]
fn a_failing_client_program_does_not_outlive_the_run() {
    let _serial = serial();
    // Not a protocol reply, then a forked child that would sleep for ten minutes; a program that
    // exits at once.
    for (command, why) in [
        (
            r#"["sh", "-c", "echo not-json; sleep 600; true"]"#,
            "\"not-json\"",
        ),
        (r#"["sh", "-c", "exit 3"]"#, "exit"),
    ] {
        let key = unique_key("failing");
        let s = Scenario::parse(
            "inline.toml",
            &format!(
                "name = \"failing-client\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\n\
                 kind = \"process\"\ncommand = {command}\nkey = \"{key}\"\nttl_ms = 200\n\
                 wait_ms = 200\n[workload]\nclients = 2\ncycles = 1\n"
            ),
        )
        .unwrap();
        let err = lockcheck::Registry::new()
            .run_real(&s, 1)
            .expect_err(command)
            .to_string();
        assert!(
            err.contains(why) && err.contains("hello"),
            "{command}: {err}"
        );
        let left = programs_with_key(&key);
        assert!(
            left.is_empty(),
            "{command}: programs outlived the run: {left:?}"
        );
    }
}

#[test]
fn a_missing_client_library_is_exit_2_saying_what_to_install() {
    require_client_libraries();
    let _serial = serial();
    // The adapters away from their libraries: the virtualenv's Python without its site-packages
    // (`-S`), and copies of the Node adapter in a directory with no node_modules.
    let dir = std::env::temp_dir().join(format!("lockcheck-no-library-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["etcd3_lock.js", "lockcheck_protocol.js"] {
        std::fs::copy(root().join("clients/node").join(f), dir.join(f)).unwrap();
    }
    let python = root().join(".venv-clients/bin/python");
    let cases = [
        (
            "kazoo",
            format!(
                "[\"{}\", \"-S\", \"{}/clients/python/kazoo_lock.py\"]",
                python.display(),
                root().display()
            ),
            "[zookeeper]\ntick_ms = 100\n",
        ),
        (
            "etcd3",
            format!("[\"node\", \"{}/etcd3_lock.js\"]", dir.display()),
            "ttl_ms = 2000\n[etcd]\nservers = 1\n",
        ),
    ];
    for (library, command, rest) in cases {
        let key = unique_key(library);
        let file = dir.join(format!("{library}.toml"));
        std::fs::write(
            &file,
            format!(
                "name = \"no-{library}\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\n\
                 kind = \"client-program\"\ncommand = {command}\nkey = \"{key}\"\n{rest}"
            ),
        )
        .unwrap();
        let (code, out, err) = lockcheck(&["run", file.to_str().unwrap(), "--real"]);
        assert_eq!(code, Some(2), "{library}: {out}\n{err}");
        assert!(
            err.contains(&format!("{library} is not installed"))
                && err.contains("run scripts/install-clients.sh")
                && err.contains("did not answer `hello`"),
            "{library}: {err}"
        );
        let left = programs_with_key(&key);
        assert!(left.is_empty(), "{library}: {left:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn killing_lockcheck_kills_its_client_programs() {
    require_client_libraries();
    let _serial = serial();
    let key = unique_key("sigkill");
    let mut text =
        std::fs::read_to_string(root().join("scenarios/clients/redis-py-lock-no-faults.toml"))
            .unwrap();
    text = text.replace("../../", &format!("{}/", root().display()));
    text = text.replace("duration_ms = 3000", "duration_ms = 60000");
    text = text.replace("cycles = 10", "cycles = 100000");
    text = text.replace(
        "kind = \"client-program\"",
        &format!("kind = \"client-program\"\nkey = \"{key}\""),
    );
    let file = std::env::temp_dir().join(format!("lockcheck-sigkill-{}.toml", std::process::id()));
    std::fs::write(&file, text).unwrap();
    // Its own temp dir: a SIGKILLed lockcheck cannot remove its scratch directories.
    let tmp = std::env::temp_dir().join(format!("lockcheck-sigkill-tmp-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut lockcheck = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(["run", file.to_str().unwrap(), "--real"])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let started = eventually(Duration::from_secs(30), || {
        programs_with_key(&key).len() == 2
    });
    let seen = programs_with_key(&key);
    lockcheck.kill().unwrap();
    lockcheck.wait().unwrap();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(started, "two client programs should have started: {seen:?}");
    assert!(
        eventually(Duration::from_secs(5), || programs_with_key(&key)
            .is_empty()),
        "client programs outlived a SIGKILLed lockcheck: {:?}",
        programs_with_key(&key)
    );
}

// ---- --redis URL: a Redis lockcheck did not start ----

fn sync_conn(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

fn lockcheck(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockcheck"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn all_keys(conn: &mut redis::Connection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.sort();
    keys
}

fn commands_processed(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A fresh `redis-server` with one key of its own, `user:1 = alice`.
fn server_with_a_user_key() -> (RedisServer, String, redis::Connection) {
    let server = RedisServer::spawn(ServerOptions::default()).unwrap();
    let url = server.url();
    let mut conn = sync_conn(&url);
    let _: () = redis::cmd("SET")
        .arg("user:1")
        .arg("alice")
        .query(&mut conn)
        .unwrap();
    (server, url, conn)
}

#[test]
fn external_redis_keeps_its_keys_and_loses_lockcheck_s() {
    let _serial = serial();
    // A server this lockcheck run did not start (the test starts it). Planted keys, among them
    // one under lockcheck's own default namespace and one named like the scenario's lock key
    // without a prefix.
    let (_server, url, mut conn) = server_with_a_user_key();
    let _: () = redis::cmd("HSET")
        .arg("orders")
        .arg("o1")
        .arg("3")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockcheck:planted")
        .arg("keep")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("lockcheck:lock")
        .arg("theirs")
        .query(&mut conn)
        .unwrap();
    let planted = all_keys(&mut conn);
    let before = commands_processed(&mut conn);

    let (code, out, err) =
        lockcheck(&["run", "scenarios/set-nx-px-no-faults.toml", "--redis", &url]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("SAFE"), "{out}");
    // The replay command points at the same server, not at servers lockcheck would spawn.
    assert!(
        out.contains(&format!(
            "replay: lockcheck run scenarios/set-nx-px-no-faults.toml --seed 1 --redis {url}"
        )),
        "{out}"
    );
    let used = commands_processed(&mut conn) - before;
    assert!(
        used > 100,
        "the workload ran against this server: {used} commands"
    );

    let (code, out, err) = lockcheck(&[
        "run",
        "scenarios/set-nx-px-no-faults.toml",
        "--redis",
        &url,
        "--key-prefix",
        "mine:",
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");

    assert_eq!(all_keys(&mut conn), planted, "only the planted keys remain");
    let v: String = redis::cmd("GET").arg("user:1").query(&mut conn).unwrap();
    assert_eq!(v, "alice");
    let v: String = redis::cmd("GET")
        .arg("lockcheck:lock")
        .query(&mut conn)
        .unwrap();
    assert_eq!(v, "theirs");
    let v: String = redis::cmd("HGET")
        .arg("orders")
        .arg("o1")
        .query(&mut conn)
        .unwrap();
    assert_eq!(v, "3");
}

#[test]
fn external_redis_with_a_client_program() {
    require_client_libraries();
    let _serial = serial();
    let (_server, url, mut conn) = server_with_a_user_key();
    let (code, out, err) = lockcheck(&[
        "run",
        "scenarios/clients/redis-py-lock-no-faults.toml",
        "--redis",
        &url,
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("SAFE"), "{out}");
    assert_eq!(all_keys(&mut conn), vec!["user:1".to_string()]);
}

#[test]
fn external_redis_refuses_server_faults_and_bad_targets_with_one_line() {
    let _serial = serial();
    let (_server, url, mut conn) = server_with_a_user_key();
    let before = commands_processed(&mut conn);
    let one_line = |code: Option<i32>, err: &str, want: &str| {
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        assert!(err.contains(want), "{want:?} in {err}");
    };

    let (code, _, err) = lockcheck(&["run", "scenarios/failover-lock-loss.toml", "--redis", &url]);
    one_line(code, &err, "server faults (a failover of redis-0");
    let (code, _, err) = lockcheck(&[
        "run",
        "scenarios/redlock-kleppmann-clock-jump.toml",
        "--redis",
        &url,
    ]);
    one_line(code, &err, "server faults");
    let (code, _, err) = lockcheck(&[
        "run",
        "scenarios/redlock-bounded-drift-safe.toml",
        "--redis",
        &url,
    ]);
    assert_eq!(code, Some(2), "{err}");
    // The refusals happened before anything was sent to the server.
    let sent = commands_processed(&mut conn) - before;
    assert!(sent <= 2, "{sent} commands (only this test's INFO)");

    // Nothing listens on the port of a server that is gone.
    let gone = RedisServer::spawn(ServerOptions::default()).unwrap();
    let gone_url = gone.url();
    drop(gone);
    let (code, _, err) = lockcheck(&[
        "run",
        "scenarios/set-nx-px-no-faults.toml",
        "--redis",
        &gone_url,
    ]);
    one_line(code, &err, "cannot reach Redis at");

    // A server that wants a password.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut guarded = Command::new(lockcheck::real::redis_server_path().unwrap())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            "sesame",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let up = eventually(Duration::from_secs(5), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let results: Vec<(Option<i32>, String)> = [
        format!("redis://127.0.0.1:{port}"),
        format!("redis://:wrong@127.0.0.1:{port}"),
    ]
    .iter()
    .map(|u| {
        let (code, _, err) =
            lockcheck(&["run", "scenarios/set-nx-px-no-faults.toml", "--redis", u]);
        (code, err)
    })
    .collect();
    let (code, out, err) = lockcheck(&[
        "run",
        "scenarios/set-nx-px-no-faults.toml",
        "--redis",
        &format!("redis://:sesame@127.0.0.1:{port}"),
    ]);
    let _ = guarded.kill();
    let _ = guarded.wait();
    assert!(up);
    for (code, err) in results {
        one_line(code, &err, "refused authentication");
        assert!(!err.contains("wrong"), "the password is not printed: {err}");
    }
    assert_eq!(code, Some(0), "the right password works: {out}\n{err}");
}

#[test]
fn the_docs_example_client_works() {
    require_client_libraries();
    let _serial = serial();
    let page = std::fs::read_to_string(root().join("docs/own-lock.md")).unwrap();
    let after = page
        .split("A complete client for redis-py's `Lock`:")
        .nth(1)
        .expect("docs/own-lock.md shows the example client");
    let code = after
        .split("```python\n")
        .nth(1)
        .and_then(|c| c.split("```").next())
        .unwrap();
    assert!(code.lines().count() <= 22, "a ~20-line example:\n{code}");
    let file = std::env::temp_dir().join(format!("lockcheck-example-{}.py", std::process::id()));
    std::fs::write(&file, code).unwrap();
    let adapter = format!("{}/clients/python/redis_py_lock.py", root().display());
    let s = inline_scenario(
        "redis-py-lock-no-faults.toml",
        &[(adapter.as_str(), file.to_str().unwrap())],
        "",
    );
    let o = run_real(s, "docs-example");
    let _ = std::fs::remove_file(&file);
    assert_eq!(o.verdict(), Verdict::Safe, "{}", o.history.render());
    assert_eq!(sections(&o), 20, "{}", o.history.render());
}
