//! The progress bar of long runs (`explore`, `run --seeds`): cases or seeds, rate, violations so
//! far and ETA on standard error, drawn only when standard error is a terminal so that logs and
//! pipes get nothing extra.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A bar over `total` items of `unit` ("cases", "seeds"); hidden when stderr is not a terminal.
pub fn bar(total: u64, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let template = format!("{{bar:30}} {{pos}}/{{len}} {unit}  {{per_sec}}  {{msg}}  ETA {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// Moves the bar to `done` items with `violating` of them violating.
pub fn tick(bar: &ProgressBar, done: u64, violating: u64) {
    bar.set_position(done);
    if violating > 0 || done == 1 {
        bar.set_message(format!("violations: {violating}"));
    }
}
