//! The checks serde cannot make: ranges that must be ordered, numbers that must be positive, keys
//! that belong to one lock kind only, and names (checks, nodes) that must exist. Each error points
//! at the key in the file.

use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;

use super::error::{quoted, Ctx, ScenarioError};
use super::spec::LockSpec;
use super::{OwnKind, Scenario};
use crate::check::{Verdict, CHECKERS, CHECK_NAMES};
use crate::lock::builtin::CLIENT_PROGRAM;
use crate::lock::redis_options::{REDISSON, REDLOCK, SET_NX_PX};
use crate::lock::{LockKind, Origin};

/// `[lock] kind` names a kind lockcheck ships (by its name or an older alias) or one registered
/// with the harness (`own`), whose `[lock.params]` must read into its parameter type; lockcheck's
/// own kinds take no `[lock.params]`.
pub(super) fn lock_kind(
    ctx: &Ctx<'_>,
    lock: &LockSpec,
    own: &[OwnKind],
) -> Result<LockKind, ScenarioError> {
    let name = lock.kind_name.get_ref().as_str();
    if let Some(kind) = ctx.builtins.iter().copied().find(|k| k.answers_to(name)) {
        if lock.params.is_some() {
            return Err(ctx.err(
                ctx.spans.at(&["lock", "params"]),
                format!(
                    "[lock.params] holds the settings of a lock of your own (registered with the harness); lock kind `{name}` takes none"
                ),
            ));
        }
        return Ok(kind);
    }
    let Some(o) = own.iter().find(|o| o.kind.answers_to(name)) else {
        let mut names: Vec<&str> = ctx.builtins.iter().map(|k| k.name()).collect();
        names.extend(own.iter().map(|o| o.kind.name()));
        return Err(ctx.err(
            lock.kind_name.span(),
            format!(
                "unknown lock kind `{name}`, expected one of {}",
                quoted(&names)
            ),
        ));
    };
    o.check_params(ctx.text)
        .map_err(|(span, m)| ctx.err(span.unwrap_or_else(|| lock.kind_name.span()), m))?;
    Ok(o.kind)
}

/// `expect_checks` names only checks lockcheck has, and says nothing `expect` contradicts.
///
/// The one check whose verdict is the run's is mutual exclusion (`check::MUTUAL_EXCLUSION`:
/// `Outcome::verdict`, the JSON `verdict`), and `expect` is the expectation of that verdict
/// (`Scenario::expected`). So `expect_checks.mutual_exclusion` states the same thing again, and a
/// different value is a contradiction: `expect_checks` won silently, and `expect = "safe"` beside
/// `mutual_exclusion = "violation"` printed "VIOLATION (as expected: expected safe)". Either
/// direction is refused, at the entry. The other checks' verdicts imply nothing about the run's:
/// `expect = "safe"` states them safe only where `expect_checks` does not name them (a lock safe
/// for mutual exclusion may still starve its waiters, and says so with `liveness =
/// "violation"`), and `expect = "violation"` states nothing of them (docs/checks.md,
/// "Expectations"), so no other entry can contradict `expect`.
pub(super) fn expect_checks(
    ctx: &Ctx<'_>,
    expect: Verdict,
    raw: BTreeMap<Spanned<String>, Verdict>,
) -> Result<BTreeMap<String, Verdict>, ScenarioError> {
    let mut expect_checks = BTreeMap::new();
    for (name, verdict) in raw {
        if !CHECK_NAMES.contains(&name.get_ref().as_str()) {
            return Err(ctx.err(
                name.span(),
                format!(
                    "unknown check `{}` in expect_checks, expected one of {}",
                    name.get_ref(),
                    quoted(CHECK_NAMES)
                ),
            ));
        }
        if name.get_ref() == crate::check::MUTUAL_EXCLUSION && verdict != expect {
            let (line, _) = super::error::line_col(ctx.text, ctx.spans.at(&["expect"]).start);
            return Err(ctx.err(
                name.span(),
                format!(
                    "`expect_checks` says `{} = \"{verdict}\"`, but `expect = \"{expect}\"` (line \
                     {line}) is the expectation of the same verdict, mutual exclusion's (the \
                     run's): they contradict. Make them agree, or drop this entry (`expect` \
                     states it)",
                    name.get_ref()
                ),
            ));
        }
        expect_checks.insert(name.into_inner(), verdict);
    }
    Ok(expect_checks)
}

/// `[clocks] nodes` names only nodes of this scenario's topology.
pub(super) fn clock_nodes(
    ctx: &Ctx<'_>,
    scenario: &Scenario,
    nodes: &[String],
) -> Result<(), ScenarioError> {
    if let Some(listed) = &scenario.clocks.nodes {
        for n in listed.get_ref() {
            if !nodes.contains(n) {
                return Err(ctx.err(
                    listed.span(),
                    format!(
                        "unknown node `{n}` in [clocks] nodes; this scenario's nodes are {}",
                        quoted(&nodes.iter().map(String::as_str).collect::<Vec<_>>())
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Every number of the scenario's tables, in the order the checks always ran (the first
/// error found is the one reported).
pub(super) fn numbers(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    ranges(ctx, s)?;
    lease(ctx, s)?;
    client_program_command(ctx, s)?;
    redlock_keys(ctx, s)?;
    wait_replicas(ctx, s)?;
    renewal(ctx, s)?;
    counts(ctx, s)?;
    checks(ctx, s)
}

/// `[checks]`: a positive liveness bound, throughput and refused-write shares in [0, 1], and no
/// expectation of a check that runs only when asked (throughput) unless it runs.
fn checks(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    if let Some(t) = s.checks.min_throughput {
        if !(0.0..=1.0).contains(&t) {
            return Err(ctx.err(
                at(ctx, "min_throughput"),
                format!("`min_throughput` is a share of the cycles the workload could do, in [0, 1], got {t}"),
            ));
        }
    }
    if let Some(t) = s.checks.max_refused_writes {
        if !(0.0..=1.0).contains(&t) {
            return Err(ctx.err(
                at(ctx, "max_refused_writes"),
                format!("`max_refused_writes` is a share of the writes, in [0, 1], got {t}"),
            ));
        }
    }
    if s.checks.liveness_bound_ms == Some(0) {
        return Err(ctx.err(
            at(ctx, "liveness_bound_ms"),
            "`liveness_bound_ms` must be at least 1",
        ));
    }
    // A check that runs only when the scenario asks for it cannot be expected otherwise.
    let params = s.check_params();
    for d in CHECKERS {
        if let Some(when) = d.runs_only {
            if s.expect_checks.contains_key(d.name) && (d.build)(&params).is_none() {
                return Err(ctx.err(
                    at(ctx, "expect_checks"),
                    format!("`expect_checks` names `{}`, which runs only {when}", d.name),
                ));
            }
        }
    }
    Ok(())
}

/// Where to point for a key found after deserializing (which loses spans): its value, from the
/// parser's spans (never by searching the text, which finds comments and strings too).
pub(super) fn at(ctx: &Ctx<'_>, key: &str) -> Range<usize> {
    ctx.spans.find(key)
}

/// `[low, high]` ranges need low <= high; a clock may not stand still.
fn ranges(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let unordered = |key: &str, lo: &dyn std::fmt::Display, hi: &dyn std::fmt::Display| {
        ctx.err(
            at(ctx, key),
            format!("`{key}` is a range [low, high] and needs low <= high, got [{lo}, {hi}]"),
        )
    };
    let signed = [
        ("offset_ms", s.clocks.offset_ms),
        ("drift_ppm", s.clocks.drift_ppm),
    ];
    for (key, [lo, hi]) in signed {
        if lo > hi {
            return Err(unordered(key, &lo, &hi));
        }
    }
    if s.clocks.drift_ppm[0] <= -1_000_000 {
        return Err(ctx.err(
            at(ctx, "drift_ppm"),
            "`drift_ppm` must stay above -1000000 (a clock that stands still or runs backwards)",
        ));
    }
    let unsigned = [
        ("replication_lag_ms", s.redis.replication_lag_ms),
        ("latency_ms", s.redis.latency_ms),
        ("hold_ms", s.workload.hold_ms),
        ("think_ms", s.workload.think_ms),
        ("retry_ms", s.lock.retry_ms),
    ];
    for (key, [lo, hi]) in unsigned {
        if lo > hi {
            return Err(unordered(key, &lo, &hi));
        }
    }
    Ok(())
}

/// A lease is positive, and given unless the lock kind has one of its own (Redisson's watchdog).
fn lease(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let lock = &s.lock;
    if lock.ttl_ms == Some(0) {
        return Err(ctx.err(at(ctx, "ttl_ms"), "`ttl_ms` must be at least 1"));
    }
    if lock.ttl_ms.is_none() && !lock.kind.has_default_lease() && lock.service_lease_ms.is_none() {
        return Err(ctx.err(
            at(ctx, "kind"),
            format!(
                "lock kind `{}` needs `ttl_ms` (its lease) in [lock]",
                lock.kind.name()
            ),
        ));
    }
    if lock.watchdog_timeout_ms.is_some() && !lock.kind.has_default_lease() {
        return Err(ctx.err(
            at(ctx, "watchdog_timeout_ms"),
            format!(
                "`watchdog_timeout_ms` is the watchdog lease of {}; lock kind `{}` has no watchdog",
                quoted(
                    &ctx.builtins
                        .iter()
                        .filter(|k| k.has_default_lease())
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                ),
                lock.kind.name()
            ),
        ));
    }
    if lock.watchdog_timeout_ms == Some(0) {
        return Err(ctx.err(
            at(ctx, "watchdog_timeout_ms"),
            "`watchdog_timeout_ms` must be at least 1",
        ));
    }
    Ok(())
}

/// `command` is the client program of `kind = "client-program"`, and only of it.
fn client_program_command(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let kind = s.lock.kind;
    match (&s.lock.command, kind.is_client_program()) {
        (None, true) => Err(ctx.err(
            at(ctx, "kind"),
            format!(
                "lock kind `{}` needs `command = [\"program\", \"arg\", ...]` in [lock] (the client program to start)",
                kind.name()
            ),
        )),
        (Some(c), true) if c.is_empty() => Err(ctx.err(
            at(ctx, "command"),
            "`command` is empty: give the client program and its arguments",
        )),
        (Some(_), false) => Err(ctx.err(
            at(ctx, "command"),
            format!(
                "`command` is the client program of lock kind `{CLIENT_PROGRAM}`; lock kind `{}` does not take it",
                kind.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// Redlock's keys belong to `kind = "redlock"` and stay in range. A lock of the user's own may
/// take `node_timeout_ms` too (it reads it from `LockConfig::redlock.node_timeout`): a per-node
/// request timeout is what any lock on several nodes needs, and a user's Redlock-style lock
/// should be tunable as lockcheck's own is.
fn redlock_keys(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let lock = &s.lock;
    if lock.kind.name() != REDLOCK {
        let own = lock.kind.origin() == Origin::Own;
        if let Some((key, _)) = lock
            .redlock_keys()
            .iter()
            .find(|(key, set)| *set && !(own && *key == "node_timeout_ms"))
        {
            return Err(ctx.err(
                at(ctx, key),
                format!(
                    "`{key}` is a Redlock parameter; lock kind `{}` does not take it",
                    lock.kind.name()
                ),
            ));
        }
    }
    if let Some(f) = lock.drift_factor {
        if !(0.0..1.0).contains(&f) {
            return Err(ctx.err(
                at(ctx, "drift_factor"),
                format!("`drift_factor` is a share of the TTL in [0, 1), got {f}"),
            ));
        }
    }
    if lock.node_timeout_ms == Some(0) {
        return Err(ctx.err(
            at(ctx, "node_timeout_ms"),
            "`node_timeout_ms` must be at least 1",
        ));
    }
    redlock_validity(ctx, s)
}

/// A Redlock acquire counts as taken only while `start + ttl - drift` is still ahead of the
/// client's clock (antirez's step 3, `recheck_after_acquire`, on by default), and the clock
/// never reads earlier than `start`: with a drift allowance (`ttl * drift_factor + drift_ms`) of
/// the whole lease or more, the validity time is at most 0 before the first request is sent and
/// every acquire fails, so a run would judge an empty history safe.
fn redlock_validity(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let lock = &s.lock;
    if lock.kind.name() != REDLOCK {
        return Ok(());
    }
    let options = crate::lock::LockConfig::from_spec(lock).redlock;
    let ttl_ms = lock.lease_ms();
    let drift = options.drift_allowance_ms(ttl_ms);
    if !options.recheck_after_acquire || drift < ttl_ms {
        return Ok(());
    }
    let key = ["drift_ms", "drift_factor"]
        .into_iter()
        .find(|k| at(ctx, k) != (0..0))
        .unwrap_or("ttl_ms");
    Err(ctx.err(
        at(ctx, key),
        format!(
            "Redlock's drift allowance (`ttl_ms * drift_factor + drift_ms` = {ttl_ms} * {} + {} = \
             {drift} ms) is the whole lease (`ttl_ms = {ttl_ms}`) or more: the validity time is \
             0 before the first request is sent, so every acquire fails and no client could \
             ever take the lock; give a `ttl_ms` above {drift}, or a smaller `drift_factor` or \
             `drift_ms`",
            options.drift_factor, options.drift_ms
        ),
    ))
}

/// `wait_replicas` is `set-nx-px`'s and `redisson`'s (its `checkLockSyncedSlaves`), between 1
/// and the replicas a master has (more could never acknowledge, and every acquire would fail);
/// `wait_timeout_ms` needs it, and so does `unsynced_attempt`, which only Redisson takes.
fn wait_replicas(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let lock = &s.lock;
    let kind = lock.kind.name();
    if lock.unsynced_attempt.is_some() && kind != REDISSON {
        return Err(ctx.err(
            at(ctx, "unsynced_attempt"),
            format!(
                "`unsynced_attempt` is what a Redisson lock attempt no replica acknowledged leaves behind: an option of lock kind `redisson`; `{kind}` does not take it"
            ),
        ));
    }
    let Some(n) = lock.wait_replicas else {
        let set = [
            ("wait_timeout_ms", lock.wait_timeout_ms.is_some()),
            ("unsynced_attempt", lock.unsynced_attempt.is_some()),
        ];
        if let Some((key, _)) = set.into_iter().find(|(_, set)| *set) {
            return Err(ctx.err(
                at(ctx, key),
                format!(
                    "`{key}` is about the `WAIT` after each lock write: set `wait_replicas` too"
                ),
            ));
        }
        return Ok(());
    };
    if kind != SET_NX_PX && kind != REDISSON {
        return Err(ctx.err(
            at(ctx, "wait_replicas"),
            format!(
                "`wait_replicas` is an option of lock kinds `set-nx-px` and `redisson`; `{kind}` does not take it"
            ),
        ));
    }
    if n == 0 || n > s.redis.replicas {
        return Err(ctx.err(
            at(ctx, "wait_replicas"),
            format!(
                "`wait_replicas = {n}`: give 1 to `[redis] replicas` ({}), the replicas that can acknowledge a grant",
                s.redis.replicas
            ),
        ));
    }
    if lock.wait_timeout_ms == Some(0) {
        return Err(ctx.err(
            at(ctx, "wait_timeout_ms"),
            "`wait_timeout_ms = 0` makes `WAIT` block forever: give at least 1",
        ));
    }
    Ok(())
}

/// `renew_every_ms` needs a lock that can renew: every lock says whether it can
/// (`Lock::RENEWS`, no by default), a lock of the user's own included, so a scenario never asks
/// for renewals that would all fail.
fn renewal(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    let kind = s.lock.kind;
    if s.workload.renew_every_ms > 0 && !kind.renews() {
        return Err(ctx.err(
            at(ctx, "renew_every_ms"),
            format!(
                "lock kind `{}` has no renewal; `renew_every_ms` needs one of {} (or a lock of your own that implements `Lock::renew` and declares `const RENEWS: bool = true`): drop the key or change the kind",
                kind.name(),
                quoted(
                    &ctx.builtins
                        .iter()
                        .filter(|k| k.renews())
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                )
            ),
        ));
    }
    Ok(())
}

/// At least one master, one client, and a request timeout that lets a request be answered.
fn counts(ctx: &Ctx<'_>, s: &Scenario) -> Result<(), ScenarioError> {
    if s.redis.masters == 0 {
        return Err(ctx.err(at(ctx, "masters"), "`masters` must be at least 1"));
    }
    if s.workload.clients == 0 {
        return Err(ctx.err(at(ctx, "clients"), "`clients` must be at least 1"));
    }
    if s.redis.request_timeout_ms == 0 {
        return Err(ctx.err(
            at(ctx, "request_timeout_ms"),
            "`request_timeout_ms` must be at least 1",
        ));
    }
    Ok(())
}
