//! Which service a scenario's clients talk to, and so which world runs it: the service of its
//! lock kind, or, for a client program (`kind = "client-program"`, a lock in any language that
//! may speak to any of them), the service whose table the scenario has: `[zookeeper]` makes it a
//! ZooKeeper scenario, `[etcd]` an etcd one, neither a Redis one (as client programs always
//! were). The table is what already makes a scenario of the built-in locks a ZooKeeper or an
//! etcd one (their servers, timeouts and faults), so a client program's scenario reads the same
//! way, and nothing else needs to be said.

use super::error::{Ctx, ScenarioError};
use super::spec::RawScenario;
use super::{BackendDecl, Catalog};

/// The backend `raw`'s clients talk to, or the error at the key that contradicts it: two
/// services' tables for one client program, or the first backend's table (`[redis]`) beside
/// another service's. A built-in kind's service is its own; whether its scenario may have a
/// table is its backend's declaration to say (`BackendDecl::validate`).
pub(super) fn of(
    ctx: &Ctx<'_>,
    raw: &RawScenario,
    catalog: Catalog<'_>,
) -> Result<&'static dyn BackendDecl, ScenarioError> {
    let backends = catalog.backends;
    let Some((default, _)) = backends.split_first() else {
        panic!("no backend is declared: backend::BACKENDS lists them");
    };
    if let Some(service) = raw.lock.kind.service() {
        return Ok(catalog.backend(service));
    }
    let mut tables: Vec<&'static dyn BackendDecl> = backends
        .iter()
        .copied()
        .filter(|b| b.client_programs_select_by_table() && ctx.spans.at(&[b.table()]) != (0..0))
        .collect();
    // The one written later is the one to point at.
    tables.sort_by_key(|b| ctx.spans.at(&[b.table()]).start);
    let kind = raw.lock.kind.name();
    match tables.as_slice() {
        [] => Ok(*default),
        [first, second, ..] => Err(ctx.err(
            ctx.spans.at(&[second.table()]),
            format!(
                "`[{}]` after `[{}]`: a `{kind}` lock speaks to one service, the one whose \
                 table the scenario has; drop one of them",
                second.table(),
                first.table()
            ),
        )),
        [backend] => {
            let at = ctx.spans.at(&[default.table()]);
            if at != (0..0) {
                return Err(ctx.err(
                    at,
                    format!(
                        "`[{}]` configures the {} servers, but this `{kind}` lock speaks to {} \
                         (the scenario has `[{}]`); drop one of them",
                        default.table(),
                        default.name(),
                        backend.name(),
                        backend.table()
                    ),
                ));
            }
            Ok(*backend)
        }
    }
}
