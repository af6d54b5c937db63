//! Clock faults: a node's clocks jump (`clock_jump`: wall and monotonic), its wall clock alone
//! jumps (`wall_clock_jump`: an NTP step; Redis expires keys on its wall clock), or its clock runs
//! at a wrong rate (`clock_drift`, in parts per million).

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use super::draw::{slot, SLOTS};
use super::{FaultKind, KeyError, Nemesis, Refused, Table, Written};

/// `kind = "clock_jump"`.
pub const JUMP: Written = Written {
    name: "clock_jump",
    keys: &["node", "by_ms", "client"],
    parse: parse_jump,
};

/// `kind = "wall_clock_jump"`.
pub const WALL_JUMP: Written = Written {
    name: "wall_clock_jump",
    keys: &["node", "by_ms", "client"],
    parse: parse_jump,
};

/// `kind = "clock_drift"`.
pub const DRIFT: Written = Written {
    name: "clock_drift",
    keys: &["node", "ppm", "client"],
    parse: parse_drift,
};

/// `clock_jump` (both clocks) or `wall_clock_jump` (the wall clock alone).
fn parse_jump(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let node = t.required_node()?;
    let by_ms = *t.required("by_ms", &t.raw.by_ms)?;
    Ok(if t.kind == WALL_JUMP.name {
        FaultKind::WallClockJump { node, by_ms }
    } else {
        FaultKind::ClockJump { node, by_ms }
    })
}

fn parse_drift(t: &Table<'_>) -> Result<FaultKind, KeyError> {
    let ppm = t.raw.ppm.as_ref().ok_or_else(|| t.need("ppm"))?;
    if *ppm.get_ref() <= -1_000_000 {
        return Err(t.err(
            ppm.span(),
            "`ppm` must stay above -1000000 (a clock that stands still or runs backwards)",
        ));
    }
    Ok(FaultKind::ClockDrift {
        node: t.required_node()?,
        ppm: *ppm.get_ref(),
    })
}

pub(super) fn write_jump(node: &str, by_ms: i64, t: &mut toml_edit::Table) {
    t["node"] = toml_edit::value(node);
    t["by_ms"] = toml_edit::value(by_ms);
}

pub(super) fn write_drift(node: &str, ppm: i64, t: &mut toml_edit::Table) {
    t["node"] = toml_edit::value(node);
    t["ppm"] = toml_edit::value(ppm);
}

pub(super) fn jump_label(wall_only: bool) -> String {
    if wall_only {
        "wall-clock jump"
    } else {
        "clock jump"
    }
    .to_string()
}

pub(super) fn drift_label() -> String {
    "clock drift".to_string()
}

/// How explore draws a clock jump (both clocks, or the wall clock alone): a node slot and a step
/// in `by_ms`.
pub fn draw_jump(by_ms: [i64; 2], wall_only: bool) -> BoxedStrategy<FaultKind> {
    (0..SLOTS, by_ms[0]..=by_ms[1])
        .prop_map(move |(n, by_ms)| {
            let node = slot(n);
            if wall_only {
                FaultKind::WallClockJump { node, by_ms }
            } else {
                FaultKind::ClockJump { node, by_ms }
            }
        })
        .boxed()
}

/// How explore draws a clock drift: a node slot and a rate in `ppm`.
pub fn draw_drift(ppm: [i64; 2]) -> BoxedStrategy<FaultKind> {
    (0..SLOTS, ppm[0]..=ppm[1])
        .prop_map(|(n, ppm)| FaultKind::ClockDrift { node: slot(n), ppm })
        .boxed()
}

pub(super) fn fire_jump<N: Nemesis + ?Sized>(
    n: &N,
    node: &str,
    by_ms: i64,
    wall_only: bool,
) -> Result<(), Refused> {
    n.jump_clock(node, by_ms, wall_only)
}

pub(super) fn fire_drift<N: Nemesis + ?Sized>(n: &N, node: &str, ppm: i64) -> Result<(), Refused> {
    n.drift_clock(node, ppm)
}
