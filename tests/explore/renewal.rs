//! Renewal under explore: the owner-checked renewal of `set-nx-px` keeps the lease over 2,000
//! cases of a space whose pauses cannot outlast a renewal interval (and without the renewal the
//! same space loses it), and a renewal by plain `PEXPIRE` is found writing stale data where the
//! owner-checked one, on the very schedule found, writes nothing.

use super::harness::search_space_fixture;
use super::{options, temp_dir};
use lockcheck::explore::search;
use lockcheck::lock::SetNxPx;
use lockcheck::scenario::{Scenario, Space};
use lockcheck::{Guard, Harness, Lock, LockConfig, LockError, Mode, NodeEnv, Outcome, Verdict};

/// The correct renewal's safety argument is the fixture's `about`: every pause of a schedule
/// adds up to 600 ms, a renewal follows every 250 ms of work, the lease is 1000 ms.
#[test]
fn the_owner_checked_renewal_keeps_the_lease_over_2000_cases() {
    let cases = 2000;
    let start = std::time::Instant::now();
    let base = Scenario::load(&search_space_fixture("renewal-short-pauses")).unwrap();
    assert!(base.workload.renew_every_ms > 0 && base.faults.is_empty());
    let space = Space::of(&base).unwrap();
    let result = search(&base, &space, &options(cases, None), &|_, _| {});
    eprintln!(
        "renewal-short-pauses: {cases} cases in {:.2?}",
        start.elapsed()
    );
    assert!(
        result.found.is_none(),
        "{:?}",
        result.found.map(|f| f.outcome.checks)
    );
    assert_eq!(result.tried, cases);
    assert!(
        result.distinct_traces * 100 > cases * 95,
        "the cases differ: {} distinct traces of {cases}",
        result.distinct_traces
    );
}

/// The same space without the renewal: holds of up to 2.5 leases lose the lease, so the search
/// above could have failed.
#[test]
fn without_the_renewal_the_same_space_loses_the_lease() {
    let path = search_space_fixture("renewal-short-pauses");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("renew_every_ms = 250", "renew_every_ms = 0");
    let base = Scenario::parse("renewal-off.toml", &text).unwrap();
    let space = Space::of(&base).unwrap();
    let result = search(&base, &space, &options(200, None), &|_, _| {});
    let found = result.found.expect("a hold longer than the lease loses it");
    assert_eq!(found.check, "mutual_exclusion");
}

/// A user's lock: `set-nx-px`, renewed by a plain `PEXPIRE` with no owner check.
struct PexpireRenewal {
    inner: SetNxPx<lockcheck::registry::Conn, NodeEnv>,
    conn: lockcheck::registry::Conn,
    env: NodeEnv,
    key: String,
    ttl_ms: u64,
}

impl Lock for PexpireRenewal {
    const RENEWS: bool = true;

    async fn acquire(&mut self) -> Result<Option<Guard>, LockError> {
        self.inner.acquire().await
    }

    async fn release(&mut self, guard: &Guard) -> Result<bool, LockError> {
        self.inner.release(guard).await
    }

    async fn renew(&mut self, guard: &mut Guard) -> Result<bool, LockError> {
        use lockcheck::Env;
        let started = self.env.monotonic_ms();
        // Whoever holds the key now gets the longer lease.
        let renewed: i64 = lockcheck::redis::cmd("PEXPIRE")
            .arg(&self.key)
            .arg(self.ttl_ms)
            .query_async(&mut self.conn)
            .await?;
        if renewed == 1 {
            guard.valid_until_ms = started + self.ttl_ms;
        }
        Ok(renewed == 1)
    }
}

pub(super) fn pexpire_renewal() -> Harness {
    Harness::new().lock(
        "pexpire-renewal",
        |config: LockConfig, conns: Vec<lockcheck::registry::Conn>, env: NodeEnv| {
            let conn = conns[0].clone();
            PexpireRenewal {
                key: config.key.clone(),
                ttl_ms: config.ttl.as_millis() as u64,
                inner: SetNxPx::new(config, conns, env.clone()),
                conn,
                env,
            }
        },
    )
}

#[test]
fn a_renewal_without_the_owner_check_is_found_writing_stale_data() {
    let start = std::time::Instant::now();
    let dir = temp_dir("renewal-pexpire");
    let path = dir.join("renewal-long-pauses.toml");
    std::fs::copy(search_space_fixture("renewal-long-pauses"), &path).unwrap();
    let found = pexpire_renewal()
        .explore(&path)
        .check("resource")
        .cases(1000)
        .run()
        .expect("a paused holder's PEXPIRE extends the next holder's key, and it writes");
    assert_eq!(found.check, "resource", "{found}");
    // The holder the pause outlasted renewed successfully after another client was granted
    // the lock: what it extended was not its own.
    let renewed_after_loss = found.outcome.history.events.iter().any(|e| {
        matches!(e.kind, lockcheck::history::EventKind::Renewed { .. })
            && found
                .outcome
                .history
                .events
                .iter()
                .rev()
                .filter(|g| g.at_us < e.at_us)
                .find(|g| matches!(g.kind, lockcheck::history::EventKind::Acquired { .. }))
                .is_some_and(|g| g.client() != e.client())
    });
    assert!(renewed_after_loss, "{found}");

    // The very schedule, with the owner-checked renewal: the paused holder learns it lost the
    // lock at its next renewal and skips its write.
    let correct = Scenario::parse(
        "correct.toml",
        &found
            .text
            .replace("kind = \"pexpire-renewal\"", "kind = \"set-nx-px\""),
    )
    .unwrap();
    let run = lockcheck::Registry::new().run_sim(&correct, correct.seed);
    let o = Outcome::judge(&correct, Mode::Sim, correct.seed, run.history);
    assert_eq!(
        o.checks["resource"].verdict,
        Verdict::Safe,
        "{}",
        found.text
    );
    assert!(
        o.history.events.iter().any(|e| matches!(
            e.kind,
            lockcheck::history::EventKind::RenewalFailed { lost: true, .. }
        )),
        "the correct renewal answered `no longer yours`"
    );
    eprintln!(
        "pexpire renewal: found and replayed in {:.2?}",
        start.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `renew_every_ms` needs a lock with a renewal: a kind without one is refused at the key, with
/// the kinds that have one.
#[test]
fn renew_every_ms_on_a_lock_without_renewal_is_refused_at_the_key() {
    let text = "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"set-ex-nx-del\"\nttl_ms = 100\n[workload]\nrenew_every_ms = 30\n";
    let e = Scenario::parse("t.toml", text).unwrap_err();
    assert_eq!((e.line, e.column), (8, 18), "{e}");
    assert!(
        e.message
            .contains("lock kind `set-ex-nx-del` has no renewal")
            && e.message.contains("`set-nx-px`, `redisson`, `fenced`"),
        "{e}"
    );
    let ok = Scenario::parse("t.toml", &text.replace("set-ex-nx-del", "set-nx-px")).unwrap();
    assert_eq!(ok.workload.renew_every_ms, 30);
}

/// A lock of the user's own that does not override `Lock::renew` declares no renewal (the
/// default `Lock::RENEWS` is no), so a scenario asking it for renewals is refused at the key
/// instead of running with every renewal failing; one that declares it is accepted.
#[test]
fn renew_every_ms_on_a_registered_lock_without_renewal_is_refused_at_the_key() {
    let text = "name = \"t\"\nexpect = \"safe\"\nduration_ms = 1000\n[lock]\nkind = \"plain-del\"\nttl_ms = 100\n[workload]\nrenew_every_ms = 30\n";
    let harness = Harness::new().lock(
        "plain-del",
        |config: LockConfig, conns: Vec<lockcheck::registry::Conn>, env: NodeEnv| {
            lockcheck::lock::SetExNxDel::new(config, conns, env)
        },
    );
    let e = harness.registry().parse("t.toml", text).unwrap_err();
    assert_eq!((e.line, e.column), (8, 18), "{e}");
    assert!(
        e.message.contains("lock kind `plain-del` has no renewal")
            && e.message.contains("const RENEWS: bool = true"),
        "{e}"
    );
    let ok = pexpire_renewal()
        .registry()
        .parse("t.toml", &text.replace("plain-del", "pexpire-renewal"))
        .unwrap();
    assert_eq!(ok.workload.renew_every_ms, 30);
}
