//! When a fault fires: at a true time, or when a client reaches a named point.

/// When a fault fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// At this true time (ms since the simulation started).
    At(u64),
    /// At the first successful acquire at or after `after_ms` (by the named client, if the
    /// fault names one).
    Acquired {
        /// True time (ms) before which an acquire does not fire the fault.
        after_ms: u64,
    },
    /// The first time a client (the named one, if the fault names one) reaches the named point at
    /// or after `after_ms`.
    Point {
        /// A workload point (`after_read`, `before_release`) or one of the lock's own
        /// (`after_setnx` of `naive-setnx-expire`).
        point: String,
        /// True time (ms) before which reaching the point does not fire the fault.
        after_ms: u64,
    },
    /// When a holder, at or after `after_ms`, is about to write to the protected resource
    /// (after its validity check, if it makes one): `on = "before_write"`.
    BeforeWrite {
        /// True time (ms) before which a write does not fire the fault.
        after_ms: u64,
    },
}

impl Trigger {
    /// The trigger `on = "<point>"` with `after_ms` means, as the parser builds it (explore's
    /// schedules use it too, so a found scenario parses back to the very same trigger).
    pub fn on_point(point: &str, after_ms: u64) -> Trigger {
        match point {
            "acquired" => Trigger::Acquired { after_ms },
            "before_write" => Trigger::BeforeWrite { after_ms },
            p => Trigger::Point {
                point: p.to_string(),
                after_ms,
            },
        }
    }

    /// The named point a trigger waits for and the earliest true time (ms) it may fire there;
    /// `None` for a fixed time. The inverse of [`Trigger::on_point`].
    pub fn point(&self) -> Option<(&str, u64)> {
        match self {
            Trigger::At(_) => None,
            Trigger::Acquired { after_ms } => Some(("acquired", *after_ms)),
            Trigger::BeforeWrite { after_ms } => Some(("before_write", *after_ms)),
            Trigger::Point { point, after_ms } => Some((point, *after_ms)),
        }
    }

    /// Writes the trigger into a `[[faults]]` table as the parser reads it back: `at_ms`, or `on`
    /// with `after_ms` when it is not 0.
    pub fn write(&self, t: &mut toml_edit::Table) {
        match (self, self.point()) {
            (Trigger::At(ms), _) => t["at_ms"] = toml_edit::value(*ms as i64),
            (_, Some((point, after_ms))) => {
                t["on"] = toml_edit::value(point);
                if after_ms > 0 {
                    t["after_ms"] = toml_edit::value(after_ms as i64);
                }
            }
            (_, None) => unreachable!("only `At` has no point"),
        }
    }
}
