//! What a checker declares about itself, so that one list (`check::CHECKERS`) is all the judge,
//! the scenario's `expect_checks`, the reports and the table need to know: its name, its short
//! label, what it reads of a run and how it is built from the numbers a scenario sets.
//!
//! The judge (a layer above) reads those numbers from the scenario into [`Params`]; a checker
//! takes the ones it needs, and a checker that runs only when a scenario asks for it (throughput)
//! says so by building nothing and by [`Declaration::runs_only`], so neither the judge nor the
//! scenario's validation has a special case for any checker.

use super::Checker;

/// Every number a checker may take from a scenario. The judge fills it from the scenario once per
/// run; each checker's [`Declaration::build`] takes the fields it needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `[checks] liveness_bound_ms`, or three leases (ms).
    pub liveness_bound_ms: u64,
    /// Independent masters the lock lives on (`[redis] masters`): a quorum lock's releases are
    /// judged against the masters it really spans.
    pub masters: u32,
    /// `[checks] max_refused_writes`: the share of writes the resource may refuse before that is
    /// a violation (`None`: refusals are only reported).
    pub max_refused_writes: Option<f64>,
    /// `[checks] min_throughput`: the least share of `capacity` cycles that must complete
    /// (`None`: the throughput check does not run).
    pub min_throughput: Option<f64>,
    /// Cycles the workload could complete (`Scenario::capacity`).
    pub capacity: u64,
    /// Whether a release's answer says what it deleted: lockcheck's own locks answer from the
    /// server's reply to their delete. A client program's `released` is only what the program
    /// said (`docs/client-protocol.md`), so without the servers' word the foreign-release check
    /// cannot read a deletion into it, and does not judge.
    pub releases_report_deletion: bool,
    /// The servers the lock's data lives on (every Redis master and replica, the MySQL server,
    /// the etcd members, the ZooKeeper servers; not the sentinels, not the clients): the
    /// liveness check does not count a client a partition cuts off from all of them as asking.
    /// Empty: not known.
    pub lock_servers: Vec<String>,
}

impl Default for Params {
    /// The default liveness bound, one master, no limit on refused writes, no throughput check.
    fn default() -> Params {
        Params {
            liveness_bound_ms: super::DEFAULT_LIVENESS_BOUND_MS,
            masters: 1,
            max_refused_writes: None,
            min_throughput: None,
            capacity: 1,
            releases_report_deletion: true,
            lock_servers: Vec::new(),
        }
    }
}

/// What a checker reads of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// The history alone ([`Checker::check`]).
    History,
    /// The history and its grants ([`Checker::check_with`]): the judge computes the grants once
    /// for every checker that reads them, since a long history's grants cost as much as a
    /// checker's own pass.
    Grants,
}

/// One checker as the list declares it.
#[derive(Clone, Copy, Debug)]
pub struct Declaration {
    /// The name in `expect_checks`, the JSON `checks` object and reports.
    pub name: &'static str,
    /// A short label for narrow places (a table cell).
    pub label: &'static str,
    /// What the checker reads of a run.
    pub reads: Reads,
    /// For a checker that runs only when a scenario asks for it: what the scenario must set, in
    /// words that complete "runs only ..." (the error when `expect_checks` names it otherwise).
    /// `None`: it always runs.
    pub runs_only: Option<&'static str>,
    /// The checker for a scenario's numbers; `None` when it does not run for that scenario.
    pub build: fn(&Params) -> Option<Box<dyn Checker>>,
}
