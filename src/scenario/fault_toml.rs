//! A fault written back as the `[[faults]]` table the parser reads: what `explore` writes into
//! a found scenario, and how an error or a skip shows the fault it is about.

use super::{ClientRef, Direction, Fault, FaultKind, Trigger};
use toml_edit::{value, Array, Table};

/// One `[[faults]]` table, with the keys the scenario parser reads back to `f`.
pub fn fault_table(f: &Fault) -> Table {
    let mut t = Table::new();
    t["kind"] = value(match &f.kind {
        FaultKind::ClientCrash { .. } | FaultKind::Crash { .. } => "crash",
        FaultKind::Failover { .. } => "failover",
        FaultKind::Pause { .. } | FaultKind::ServerPause { .. } => "pause",
        FaultKind::Partition { .. } => "partition",
        FaultKind::ClockJump { .. } => "clock_jump",
        FaultKind::WallClockJump { .. } => "wall_clock_jump",
        FaultKind::ClockDrift { .. } => "clock_drift",
    });
    match &f.trigger {
        Trigger::At(ms) => t["at_ms"] = value(*ms as i64),
        Trigger::Acquired { after_ms } => on(&mut t, "acquired", *after_ms),
        Trigger::BeforeWrite { after_ms } => on(&mut t, "before_write", *after_ms),
        Trigger::Point { point, after_ms } => on(&mut t, point, *after_ms),
    }
    match &f.kind {
        FaultKind::Failover { master } => t["master"] = value(i64::from(*master)),
        FaultKind::Pause { client, for_ms } => {
            t["client"] = match client {
                ClientRef::Holder => value("holder"),
                ClientRef::Index(i) => value(i64::from(*i)),
            };
            t["for_ms"] = value(*for_ms as i64);
        }
        FaultKind::ServerPause { node, for_ms } => {
            t["node"] = value(node.as_str());
            t["for_ms"] = value(*for_ms as i64);
        }
        FaultKind::Partition {
            nodes,
            from,
            for_ms,
            direction,
        } => {
            t["nodes"] = value(names(nodes));
            if !from.is_empty() {
                t["from"] = value(names(from));
            }
            if *direction != Direction::Both {
                t["direction"] = value(direction.name());
            }
            t["for_ms"] = value(*for_ms as i64);
        }
        FaultKind::ClockJump { node, by_ms } | FaultKind::WallClockJump { node, by_ms } => {
            t["node"] = value(node.as_str());
            t["by_ms"] = value(*by_ms);
        }
        FaultKind::ClockDrift { node, ppm } => {
            t["node"] = value(node.as_str());
            t["ppm"] = value(*ppm);
        }
        FaultKind::Crash {
            node,
            restart_after_ms,
        } => {
            t["node"] = value(node.as_str());
            t["restart_after_ms"] = value(*restart_after_ms as i64);
        }
        FaultKind::ClientCrash { client } => t["node"] = value(format!("client-{client}")),
    }
    if let Some(c) = f.by_client {
        t["client"] = value(i64::from(c));
    }
    t
}

fn on(t: &mut Table, point: &str, after_ms: u64) {
    t["on"] = value(point);
    if after_ms > 0 {
        t["after_ms"] = value(after_ms as i64);
    }
}

fn names(v: &[String]) -> Array {
    v.iter().map(String::as_str).collect()
}
