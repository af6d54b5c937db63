//! A run's budget, checked before it starts. A valid scenario can still ask for hours of work or
//! gigabytes of history (a 2-second run whose holder renews every millisecond of a critical
//! section of days); found after the fact, that is a machine out of memory or a CI job that
//! prints nothing for a quarter of an hour. So the estimate (`world::estimate`) is compared with
//! a default budget first, and a run over it is refused with the numbers and the flag that runs
//! it anyway. A run that cannot fit in the memory the machine has is refused even with the flag:
//! the alternative is the kernel killing it halfway.

use crate::cli::run::BadInput;
use crate::progress::duration;
use crate::scenario::Scenario;
use crate::world::estimate;

/// The most wall time the runs of one scenario may be estimated to take without `--no-budget`:
/// ten minutes, longer than any bundled scenario takes by two orders of magnitude.
pub const DEFAULT_TIME_BUDGET_S: f64 = 600.0;

/// The most memory the runs of one scenario may be estimated to hold at once without
/// `--no-budget`: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

/// The flag that runs a scenario over the default budget.
pub const NO_BUDGET_FLAG: &str = "--no-budget";

/// What `runs` runs of `scenario`, `jobs` at a time (in simulation, or on real servers when
/// `real`), are estimated to cost, refused when over the budget (unless `no_budget`) or over the
/// machine's available memory (always).
pub fn check(
    scenario: &Scenario,
    runs: u64,
    jobs: usize,
    real: bool,
    no_budget: bool,
) -> Result<(), BadInput> {
    let at_once = (jobs as u64).clamp(1, runs.max(1));
    let memory = estimate::memory_estimate(scenario).saturating_mul(at_once);
    let one_s = if real {
        // A real run lasts its own time, whatever the machine, and its servers' spawn: at most
        // its duration and the grace period, where it is cut (`real::run_end`).
        estimate::real_most_ms(scenario) as f64 / 1000.0
    } else {
        estimate::time_estimate_s(scenario)
    };
    let time_s = one_s * runs.max(1).div_ceil(at_once) as f64;
    let name = scenario
        .path
        .as_ref()
        .map_or(scenario.name.clone(), |p| p.display().to_string());
    let gb = |b: u64| b as f64 / (1u64 << 30) as f64;
    let what = format!(
        "{name}: {} {} estimated to record about {} events ({} renewals) and make about {} round \
         trips that record none: about {} and {:.1} GB at the peak{}",
        runs,
        if runs == 1 { "run is" } else { "runs are" },
        estimate::expected_events(scenario),
        estimate::expected_renewals(scenario),
        estimate::silent_round_trips(scenario),
        duration(time_s),
        gb(memory),
        if at_once > 1 {
            format!(" ({at_once} at once)")
        } else {
            String::new()
        },
    );
    let lower =
        "lower `duration_ms`, `workload.cycles`, `workload.clients` or `workload.hold_ms`, \
                 or renew less often (`renew_every_ms`)";
    if let Some(available) = crate::exec::available_memory() {
        if memory > available {
            return Err(BadInput(format!(
                "{what}, more than the {:.1} GB of memory this machine has available: {lower}{}",
                gb(available),
                if at_once > 1 {
                    ", or run fewer at once with --jobs"
                } else {
                    ""
                }
            )));
        }
    }
    if no_budget || (time_s <= DEFAULT_TIME_BUDGET_S && memory <= DEFAULT_MEMORY_BUDGET) {
        return Ok(());
    }
    Err(BadInput(format!(
        "{what}, over the default budget of {} and {:.0} GB: {lower}, or add {NO_BUDGET_FLAG} to \
         run it anyway",
        duration(DEFAULT_TIME_BUDGET_S),
        gb(DEFAULT_MEMORY_BUDGET)
    )))
}
