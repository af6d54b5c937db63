//! Which service a scenario's clients talk to, and so which world runs it: the service of its
//! lock kind, or, for a client program (`kind = "client-program"`, a lock in any language that
//! may speak to any of them), the service whose table the scenario has: `[zookeeper]` makes it a
//! ZooKeeper scenario, `[etcd]` an etcd one, neither a Redis one (as client programs always
//! were). The table is what already makes a scenario of the built-in locks a ZooKeeper or an
//! etcd one (their servers, timeouts and faults), so a client program's scenario reads the same
//! way, and nothing else needs to be said.

use super::error::{Ctx, ScenarioError};
use super::spec::RawScenario;
use crate::lock::Service;

/// The service `raw`'s clients talk to, or the error at the key that contradicts it: two
/// services' tables for one client program, or `[redis]` beside another service's table. A
/// built-in kind's service is its own; whether its scenario may have a table is `etcd.rs`'s and
/// `zookeeper.rs`'s to say.
pub(super) fn of(ctx: &Ctx<'_>, raw: &RawScenario) -> Result<Service, ScenarioError> {
    if let Some(service) = raw.lock.kind.service() {
        return Ok(service);
    }
    let mut tables: Vec<(&str, Service, &str)> = [
        ("etcd", raw.etcd.is_some(), Service::Etcd, "etcd"),
        (
            "zookeeper",
            raw.zookeeper.is_some(),
            Service::ZooKeeper,
            "ZooKeeper",
        ),
    ]
    .into_iter()
    .filter(|&(_, present, _, _)| present)
    .map(|(table, _, service, name)| (table, service, name))
    .collect();
    // The one written later is the one to point at.
    tables.sort_by_key(|(table, _, _)| ctx.spans.at(&[table]).start);
    let kind = raw.lock.kind.name();
    match tables.as_slice() {
        [] => Ok(Service::Redis),
        [(first, ..), (second, ..), ..] => Err(ctx.err(
            ctx.spans.at(&[second]),
            format!(
                "`[{second}]` after `[{first}]`: a `{kind}` lock speaks to one service, the one \
                 whose table the scenario has; drop one of them"
            ),
        )),
        [(table, service, name)] => {
            let redis = ctx.spans.at(&["redis"]);
            if redis != (0..0) {
                return Err(ctx.err(
                    redis,
                    format!(
                        "`[redis]` configures the Redis servers, but this `{kind}` lock speaks \
                         to {name} (the scenario has `[{table}]`); drop one of them"
                    ),
                ));
            }
            Ok(*service)
        }
    }
}
