//! A failover (`kind = "failover"`): the master of a group dies and, once the failure is
//! detected (`failover_detect_ms`), its first replica is promoted. Whatever the master had not
//! yet replicated is lost: the lease a client holds may vanish with it.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::{FailoverShape, FaultKind, KeyError, Nemesis, Refused, Table, Written};

/// `kind = "failover"`.
pub const WRITTEN: Written = Written {
    name: "failover",
    keys: &["master", "client"],
    parse,
};

fn parse(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let f = t.raw;
    let s = t.setting;
    if s.failover == FailoverShape::Leader {
        // An ensemble's failover: its leader dies and the others elect a new one (whether the
        // deployment is an ensemble is its backend's check, at the fault's kind).
        if let Some(m) = f.master.as_ref().filter(|m| *m.get_ref() != 0) {
            return Err(t.err(
                m.span(),
                format!(
                    "a {} failover is of the ensemble's leader: `master` is 0 or left out",
                    s.service
                ),
            ));
        }
        return Ok(FaultKind::Failover { master: 0 });
    }
    Ok(FaultKind::Failover {
        master: group_with_replica(t, "a `failover`")?,
    })
}

/// The `master` key (0 when left out) of a fault that promotes that group's replica: a group the
/// scenario has, with a replica. `what` names the fault in the message.
pub(super) fn group_with_replica(t: &Table<'_>, what: &str) -> Result<u32, KeyError> {
    let s = t.setting;
    let master = t.raw.master.as_ref().map(|m| *m.get_ref()).unwrap_or(0);
    group_there(t, master)?;
    if s.replicas == 0 {
        return Err(t.err(
            t.span.clone(),
            format!("{what} needs a replica to promote: set `[redis] replicas = 1` or more"),
        ));
    }
    Ok(master)
}

/// `master`, the table's `master` key (or its default), is a group the scenario has.
pub(super) fn group_there(t: &Table<'_>, master: u32) -> Result<(), KeyError> {
    if master < t.setting.masters {
        return Ok(());
    }
    let span = t.raw.master.as_ref().map_or(t.span.clone(), |m| m.span());
    Err(t.err(
        span,
        format!(
            "`master = {master}` but the scenario has {} master(s)",
            t.setting.masters
        ),
    ))
}

/// Refuses a fault only a Redis Cluster carries out (`does`: what it does, for the message)
/// on a service without master groups.
pub(super) fn needs_master_groups(t: &Table<'_>, does: &str) -> Result<(), KeyError> {
    if t.setting.failover == super::FailoverShape::MasterGroup {
        return Ok(());
    }
    Err(t.err(
        t.raw.kind.span(),
        format!(
            "`{}` is {does}; {} has none",
            t.raw.kind.get_ref(),
            t.setting.service
        ),
    ))
}

pub(super) fn write(master: u32, t: &mut toml_edit::Table) {
    t["master"] = toml_edit::value(i64::from(master));
}

pub(super) fn label() -> String {
    "failover".to_string()
}

/// How explore draws a failover: of one of `masters` groups.
pub fn draw(masters: u32) -> BoxedStrategy<FaultKind> {
    (0..masters)
        .prop_map(|master| FaultKind::Failover { master })
        .boxed()
}

pub(super) fn fire<N: Nemesis + ?Sized>(n: &N, master: u32) -> Result<(), Refused> {
    n.fail_over(master)
}
