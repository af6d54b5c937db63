//! A scenario's `[[faults]]` tables, checked: the kind, the trigger (`at_ms`, `on` with
//! `after_ms`), which client's point sets a node fault off, and no key of another kind. The keys
//! of each kind are checked by its family in `fault/`; this file only locates their errors in the
//! file.

use std::ops::Range;
use toml::Spanned;

use super::error::{quoted, Ctx, ScenarioError};
use super::Scenario;
use crate::fault::{self, Fault, FaultKind, KeyError, RawFault, Setting, Table, Trigger};

/// Checks one `[[faults]]` table against its kind's keys and the topology. Returns the fault and,
/// when its trigger is ambiguous ([`ambiguous_trigger`]), a warning at its `on` key.
pub(super) fn convert(
    ctx: &Ctx<'_>,
    f: Spanned<RawFault>,
    nodes: &[String],
    scenario: &Scenario,
) -> Result<(Fault, Option<ScenarioError>), ScenarioError> {
    let span = f.span();
    let raw = f.into_inner();
    let kind = raw.kind.get_ref().as_str();
    let Some(written) = fault::written(kind) else {
        return Err(ctx.err(
            raw.kind.span(),
            format!(
                "unknown fault kind `{kind}`, expected one of {}",
                quoted(fault::FAULT_KINDS)
            ),
        ));
    };
    let located = |e: KeyError| ctx.err(e.span, e.message);
    reject_foreign_keys(ctx, &raw, kind, written.keys)?;
    let trigger = trigger(ctx, &raw, span.clone(), kind, scenario)?;
    let points = scenario.points();
    #[allow(deprecated)] // `sentinels`, filled for code that still reads it
    let setting = Setting {
        nodes,
        clients: scenario.workload.clients,
        masters: scenario.redis.masters,
        replicas: scenario.redis.replicas,
        sentinels: scenario.redis.sentinels,
        service: scenario.backend.name(),
        pauses_servers: scenario.backend.pauses_servers(),
        failover: scenario.backend.failover(),
        points: &points,
    };
    let table = Table {
        raw: &raw,
        span,
        kind,
        setting: &setting,
        trigger: &trigger,
    };
    let kind = (written.parse)(&table).map_err(located)?;
    let by_client = by_client(&table, &kind).map_err(located)?;
    let fault = Fault {
        trigger,
        kind,
        by_client,
    };
    let warning = ambiguous_trigger(&fault, raw.client.is_some(), scenario)
        .map(|m| ctx.err(raw.on.as_ref().map_or(0..0, |on| on.span()), m));
    Ok((fault, warning))
}

/// Why a fault's trigger is ambiguous, if it is: it fires at a point of the lock's own, names no
/// client, and the scenario has more than one. The workload's points (`acquired`, `after_read`,
/// `before_write`, `before_release`) are reached only by the holder, so "the first client to
/// reach it" is whoever holds the lock. A lock's own point may sit inside `acquire`, where every
/// client that tries reaches it, holder or not: which one comes first is up to the run's timing,
/// and a scenario written with one client in mind may be testing another.
fn ambiguous_trigger(fault: &Fault, client_written: bool, scenario: &Scenario) -> Option<String> {
    let Trigger::Point { point, .. } = &fault.trigger else {
        return None;
    };
    let clients = scenario.workload.clients;
    if clients < 2 || client_written || super::WORKLOAD_POINTS.iter().any(|p| p.name == point) {
        return None;
    }
    fault.kind.ambiguous_at(point, clients)
}

/// `client = N` on a fault that hits a node: whose reaching of the named point sets it off.
/// Only with `on` (a fixed time is nobody's), and only an index (`"holder"` names a victim,
/// which a node fault does not have).
fn by_client(t: &Table<'_>, kind: &FaultKind) -> Result<Option<u32>, KeyError> {
    if let (true, Some(c)) = (kind.crashes_a_client(), &t.raw.client) {
        return Err(t.err(
            c.span(),
            "a client crash names its client with `node = \"client-<c>\"`; `client` is not used",
        ));
    }
    let Some(c) = t.raw.client.as_ref().filter(|_| !kind.aims_at_client()) else {
        return Ok(None);
    };
    if t.trigger.point().is_none() {
        return Err(t.err(
            c.span(),
            "`client` on this fault says whose named point sets it off; it needs `on = \"<point>\"`",
        ));
    }
    let clients = t.setting.clients;
    match c.get_ref() {
        toml::Value::Integer(i) if *i >= 0 && (*i as u64) < clients as u64 => Ok(Some(*i as u32)),
        other => Err(t.err(
            c.span(),
            format!(
                "`client` on a `{}` fault is the client index 0..{clients} whose point sets it off, got {}",
                t.kind,
                other.to_string().chars().take(40).collect::<String>()
            ),
        )),
    }
}

/// A key of another fault kind is an error, so a fault cannot silently ignore it.
fn reject_foreign_keys(
    ctx: &Ctx<'_>,
    f: &RawFault,
    kind: &str,
    allowed: &[&str],
) -> Result<(), ScenarioError> {
    for (key, span) in f.present() {
        if let Some(span) = span {
            if !allowed.contains(&key) {
                return Err(ctx.err(
                    span,
                    format!(
                        "fault kind `{kind}` has no key `{key}`; its keys are `kind`, `on`, `after_ms`, `at_ms`, {}",
                        quoted(allowed)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `at_ms = <ms>`, or `on = "<point>"` with an optional `after_ms`.
fn trigger(
    ctx: &Ctx<'_>,
    f: &RawFault,
    span: Range<usize>,
    kind: &str,
    scenario: &Scenario,
) -> Result<Trigger, ScenarioError> {
    match (&f.on, &f.at_ms) {
        (Some(_), Some(at)) => {
            Err(ctx.err(at.span(), "a fault fires either `at_ms` or `on`, not both"))
        }
        (None, Some(at)) => {
            if let Some(a) = &f.after_ms {
                return Err(ctx.err(a.span(), "`after_ms` goes with `on`, not with `at_ms`"));
            }
            Ok(Trigger::At(*at.get_ref()))
        }
        (Some(on), None) => {
            let after_ms = f.after_ms.as_ref().map(|a| *a.get_ref()).unwrap_or(0);
            let points = scenario.points();
            let point = on.get_ref().as_str();
            if points.contains(&point) {
                Ok(Trigger::on_point(point, after_ms))
            } else {
                Err(ctx.err(
                    on.span(),
                    format!(
                        "unknown named point `{point}`, expected one of {} (the workload's and those declared by lock kind `{}`)",
                        quoted(&points),
                        scenario.lock.kind.name()
                    ),
                ))
            }
        }
        (None, None) => Err(ctx.err(
            span,
            format!("fault `{kind}` needs a trigger: `at_ms = <ms>` or `on = \"acquired\"`"),
        )),
    }
}
