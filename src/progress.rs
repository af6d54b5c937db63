//! Progress of long work (`explore`, `run --seeds`, one long run) on standard error: on a terminal
//! a bar (items, rate, violations so far, ETA) that redraws in place; anywhere else (a CI log, a
//! pipe) a plain line every few seconds with the same figures and an estimate of what is left,
//! so that a job that runs for minutes is seen to be alive. Work that ends within the first
//! interval prints nothing extra.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How often a plain progress line is printed when standard error is not a terminal.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// `LOCKCHECK_PROGRESS_EVERY_MS=<ms>`: print the plain lines this often instead (a test's way to
/// see them without a run of many seconds).
pub const EVERY_VAR: &str = "LOCKCHECK_PROGRESS_EVERY_MS";

/// How often a plain line is printed: [`PLAIN_EVERY`], or [`EVERY_VAR`] when set.
pub fn every() -> Duration {
    std::env::var(EVERY_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(PLAIN_EVERY, Duration::from_millis)
}

/// Progress over `total` items of one unit ("cases", "seeds", "events").
pub struct Progress {
    bar: ProgressBar,
    /// Plain lines instead of the bar: standard error is not a terminal.
    plain: Option<Plain>,
}

/// The state of the plain lines.
struct Plain {
    what: String,
    unit: String,
    total: u64,
    every: Duration,
    start: Instant,
    next: Cell<Instant>,
}

/// Progress over `total` items of `unit` ("cases", "seeds"), with `what` naming the work in the
/// plain lines ("explore gc-pause").
pub fn bar(total: u64, unit: &str, what: &str) -> Progress {
    if !std::io::stderr().is_terminal() {
        let every = every();
        let start = Instant::now();
        return Progress {
            bar: ProgressBar::hidden(),
            plain: Some(Plain {
                what: what.to_string(),
                unit: unit.to_string(),
                total,
                every,
                start,
                next: Cell::new(start + every),
            }),
        };
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{per_sec}}  {{msg}}  ETA {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    Progress { bar, plain: None }
}

/// No progress shown (a single short run).
pub fn hidden() -> Progress {
    Progress {
        bar: ProgressBar::hidden(),
        plain: None,
    }
}

impl Progress {
    /// Moves to `done` items with `violating` of them violating (`None`: the work has no
    /// verdicts yet, as the events of one run).
    pub fn tick(&self, done: u64, violating: Option<u64>) {
        self.tick_counting(done, violating.map(|v| ("violations", v)));
    }

    /// Moves to `done` items with a count of its own (`("kept", 3)` for a shrink's kept steps).
    pub fn tick_counting(&self, done: u64, count: Option<(&str, u64)>) {
        self.bar.set_position(done);
        if let Some((label, v)) = count.filter(|&(_, v)| v > 0 || done == 1) {
            self.bar.set_message(format!("{label}: {v}"));
        }
        let Some(p) = &self.plain else { return };
        let now = Instant::now();
        if now < p.next.get() {
            return;
        }
        p.next.set(now + p.every);
        eprintln!("{}", p.line(done, count, now));
    }

    /// Removes the bar (plain lines stay in the log).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Plain {
    /// `progress: explore x: 1200/2000 cases (60 %), 240 cases/s, violations: 0, about 3 s left`;
    /// under 10 a second, the time per item instead (`5.0 s per step`).
    fn line(&self, done: u64, count: Option<(&str, u64)>, now: Instant) -> String {
        let secs = now.duration_since(self.start).as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let share = 100.0 * done as f64 / self.total.max(1) as f64;
        let left = if done == 0 || done >= self.total {
            "end not yet estimated".to_string()
        } else {
            let s = (self.total - done) as f64 / rate;
            format!("about {} left", crate::progress::duration(s))
        };
        let count = count.map_or(String::new(), |(l, v)| format!(", {l}: {v}"));
        let per = if done == 0 {
            "none done yet".to_string()
        } else if rate >= 10.0 {
            format!("{rate:.0} {}/s", self.unit)
        } else {
            format!(
                "{:.1} s per {}",
                1.0 / rate.max(1e-9),
                self.unit.trim_end_matches('s')
            )
        };
        format!(
            "progress: {}: {done}/{} {} ({share:.0} %), {per}{count}, {left}",
            self.what, self.total, self.unit
        )
    }
}

/// `s` seconds as a reader takes them in: seconds, minutes, hours or days.
pub fn duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.0} h", s / 3600.0)
    } else {
        format!("{:.0} days", s / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_has_the_figures_and_what_is_left() {
        let start = Instant::now();
        let p = Plain {
            what: "explore x".into(),
            unit: "cases".into(),
            total: 2000,
            every: PLAIN_EVERY,
            start,
            next: Cell::new(start),
        };
        let line = p.line(
            1200,
            Some(("violations", 0)),
            start + Duration::from_secs(5),
        );
        assert_eq!(
            line,
            "progress: explore x: 1200/2000 cases (60 %), 240 cases/s, violations: 0, about 3 s left"
        );
        let line = p.line(0, None, start + Duration::from_secs(5));
        assert!(line.ends_with("end not yet estimated"), "{line}");
        // Slow work (shrink steps of seconds) reads per item, not as "0 steps/s".
        let slow = Plain {
            unit: "steps".into(),
            total: 32,
            ..p
        };
        let line = slow.line(4, Some(("kept", 2)), start + Duration::from_secs(20));
        assert_eq!(
            line,
            "progress: explore x: 4/32 steps (12 %), 5.0 s per step, kept: 2, about 2 min left"
        );
        assert_eq!(duration(90_000.0), "25 h");
    }
}
