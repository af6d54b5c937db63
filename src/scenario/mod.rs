//! Scenario files: the TOML contract that says which lock runs, on what Redis topology, under
//! which workload and faults, and what verdict the run must reach.
//!
//! The keys are a contract (tests outside this repository write these files), so parsing is strict:
//! an unknown key, lock kind, fault kind or node name is an error that names the file, line and
//! column and lists the valid choices. Nothing is silently ignored, because a typo in a fault would
//! otherwise turn a "violation" scenario into a vacuous "safe" one.
//!
//! - [`spec`]: the file format (serde types, defaults);
//! - [`fault`]: a `[[faults]]` table's kind and trigger, checked (each kind's keys are its
//!   family's, in `crate::fault`);
//! - `validate`: the checks serde cannot make;
//! - [`error`]: errors that point into the file.

pub mod backend;
pub mod database;
pub mod error;
pub mod etcd;
#[cfg(test)]
mod expect_tests;
pub mod explore;
pub mod fault;
pub mod input;
pub mod own;
mod own_tables;
mod plain;
mod servers;
mod service;
pub mod spec;
#[cfg(test)]
mod tests;
mod validate;
pub mod zookeeper;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::env::NamedPoint;

use error::Ctx;
use spec::RawScenario;

use crate::check::Verdict;
pub use crate::fault::{fault_table, ClientRef, Direction, Fault, FaultKind, Trigger, FAULT_KINDS};
pub use backend::{BackendDecl, Catalog, FailoverShape, Invalid};
pub use error::ScenarioError;
pub use explore::{ExploreSpec, Space};
pub use own::OwnKind;
pub use spec::{
    ChecksSpec, ClocksSpec, LockSpec, RedisSpec, WorkloadKind, WorkloadSpec,
    DEFAULT_WATCHDOG_TIMEOUT_MS, WORKLOAD_POINTS,
};
pub use zookeeper::ZkConnect;

/// A parsed, validated scenario: everything a world needs to run it and a judge needs to say
/// whether the run went as expected. Only [`Scenario::parse`] and [`Scenario::load`] make one,
/// so every value here has passed the checks.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name in reports and tables.
    pub name: String,
    /// One line on what the scenario shows (printed under the verdict).
    pub about: String,
    /// The expected mutual-exclusion verdict.
    pub expect: Verdict,
    /// Optional per-check expectations (check name -> verdict).
    pub expect_checks: BTreeMap<String, Verdict>,
    /// The seed a plain `lockcheck run` uses, so the file alone replays its finding.
    pub seed: u64,
    /// How long the run lasts in true time; clients stop starting cycles after it.
    pub duration_ms: u64,
    /// `[lock]`: the lock under test.
    pub lock: LockSpec,
    /// `[redis]`: the topology it runs against.
    pub redis: RedisSpec,
    /// `[workload]`: what each client does.
    pub workload: WorkloadSpec,
    /// Node clocks at the start of the run (offsets and drifts; faults change them later).
    pub clocks: ClocksSpec,
    /// `[database]`: the MySQL locks' server (docs/mysql.md).
    pub database: database::DatabaseSpec,
    /// `[etcd]`: the etcd locks' cluster.
    pub etcd: etcd::EtcdSpec,
    /// `[zookeeper]`: the ZooKeeper locks' service.
    pub zookeeper: zookeeper::ZooKeeperSpec,
    /// `[[faults]]`: the fault schedule, in file order.
    pub faults: Vec<Fault>,
    /// `[checks]`: the checkers' settings (liveness bound, minimum throughput).
    pub checks: ChecksSpec,
    /// Named points declared by a lock of the user's own ([`Scenario::parse_with_locks`],
    /// [`Scenario::parse_with_points`]), besides the workload's and the lock kind's.
    pub lock_points: Vec<NamedPoint>,
    /// `[explore]`: the space `lockcheck explore` searches (validated when parsed).
    pub explore: Option<ExploreSpec>,
    /// Where it was read from (for messages and the replay command).
    pub path: Option<PathBuf>,
    /// What backends that read their own table read from it ([`Scenario::table`]).
    pub(crate) tables: own_tables::OwnTables,
    /// The declaration of the backend its clients talk to (`backend::BACKENDS`), which answers
    /// what depends on the service: its servers, the faults its worlds carry out.
    pub(crate) backend: &'static dyn BackendDecl,
    /// What the parser found legal but likely not meant, each `file:line:col: message` (a fault
    /// whose trigger is ambiguous); the commands print them to standard error.
    pub warnings: Vec<String>,
}

impl Scenario {
    /// How many critical sections the workload could complete with a perfect lock (free
    /// hand-overs, no faults), at least 1: the throughput check's yardstick, and the size a
    /// run's history is reserved for.
    pub fn capacity(&self) -> u64 {
        let w = &self.workload;
        let mean = |[lo, hi]: [u64; 2]| (lo as f64 + hi as f64) / 2.0;
        let hold = mean(w.hold_ms);
        let think = mean(w.think_ms);
        let duration = self.duration_ms as f64;
        let mut cap = w.clients as f64 * w.cycles as f64;
        if hold > 0.0 {
            // One critical section at a time, each started before the duration ends.
            cap = cap.min((duration / hold).floor() + 1.0);
        }
        if hold + think > 0.0 {
            cap = cap.min(w.clients as f64 * ((duration / (hold + think)).floor() + 1.0));
        }
        (cap as u64).max(1)
    }

    /// A scenario file's text: a regular file, of bounded size, in UTF-8 (`input::read_file`),
    /// or the error naming the file (and where the bad byte is).
    pub fn read(path: &Path) -> Result<String, ScenarioError> {
        let file = path.display().to_string();
        input::read_file(path).map_err(|e| match e {
            input::ReadError::Io(message) => ScenarioError {
                file: file.clone(),
                line: 0,
                column: 0,
                message,
            },
            input::ReadError::Utf8 {
                before,
                offset,
                byte,
            } => {
                let (line, column) = error::line_col(&before, offset);
                ScenarioError {
                    file: file.clone(),
                    line,
                    column,
                    message: format!(
                        "invalid UTF-8 (byte 0x{byte:02x} at byte offset {offset}): a scenario file is UTF-8 text"
                    ),
                }
            }
        })
    }

    /// Parses and validates scenario text against `catalog` (every backend's declaration, the
    /// lock kinds a program registered) and the named points a lock of the user's own declares;
    /// `file` is only used in messages. [`Scenario::parse`] and its siblings are this with
    /// `backend::BACKENDS`, assembled where that list is.
    pub fn parse_in(
        catalog: Catalog<'_>,
        file: &str,
        text: &str,
        lock_points: &[NamedPoint],
    ) -> Result<Scenario, ScenarioError> {
        Scenario::parse_inner(catalog, file, text, lock_points)
    }

    /// [`Scenario::read`] and [`Scenario::parse_in`], with the path kept for messages and the
    /// replay command.
    pub fn load_in(catalog: Catalog<'_>, path: &Path) -> Result<Scenario, ScenarioError> {
        let text = Scenario::read(path)?;
        let mut s = Scenario::parse_in(catalog, &path.display().to_string(), &text, &[])?;
        s.path = Some(path.to_path_buf());
        Ok(s)
    }

    fn parse_inner(
        catalog: Catalog<'_>,
        file: &str,
        text: &str,
        lock_points: &[NamedPoint],
    ) -> Result<Scenario, ScenarioError> {
        // Before the document parses there are no spans to name a key by: the key is read
        // from the line the error is on.
        let located = |e: input::InputError| {
            let at = e.span.unwrap_or(0..0).start;
            let (line, column) = error::line_col(text, at);
            let key = error::key_on_line(text, at);
            let key = key.as_ref().map(|(k, p)| (k.as_str(), p.as_str()));
            ScenarioError {
                file: file.to_string(),
                line,
                column,
                message: input::short_message(&plain::plain(&e.message, key)),
            }
        };
        // Syntax and the numbers' ranges first, from the parser's spans: an out-of-range number
        // gets its allowed range, not a type's overflow message.
        let spans = input::Spans::parse(text).map_err(located)?;
        spans.check_limits().map_err(located)?;
        let ctx = Ctx {
            file,
            text,
            spans,
            builtins: catalog.builtins,
        };
        // A table a backend reads itself is blanked out of what serde reads (positions kept).
        let masked = own_tables::masked(text, &ctx.spans, catalog.backends);
        let mut raw: RawScenario =
            toml::from_str(masked.as_deref().unwrap_or(text)).map_err(|e| {
                let span = e.span().unwrap_or(0..0);
                let key = ctx.spans.key_at(span.start);
                let key = key.as_ref().map(|(k, p)| (k.as_str(), p.as_str()));
                ctx.err(span.clone(), plain::plain(e.message(), key))
            })?;
        let lock_points = lock_points.to_vec();
        raw.lock.kind = validate::lock_kind(&ctx, &raw.lock, catalog.own)?;
        let backend = service::of(&ctx, &raw, catalog)?;
        raw.lock.service = backend.service();
        let mut scenario = Scenario {
            name: raw.name,
            about: raw.about,
            expect: raw.expect,
            expect_checks: validate::expect_checks(&ctx, raw.expect, raw.expect_checks)?,
            seed: raw.seed,
            duration_ms: raw.duration_ms,
            lock: raw.lock,
            redis: raw.redis,
            workload: raw.workload,
            clocks: raw.clocks,
            database: raw.database.clone().unwrap_or_default(),
            etcd: raw.etcd.clone().unwrap_or_default(),
            zookeeper: raw.zookeeper.clone().unwrap_or_default(),
            faults: Vec::new(),
            checks: raw.checks,
            lock_points,
            explore: raw.explore.as_ref().map(|e| e.get_ref().clone()),
            path: None,
            tables: own_tables::OwnTables::default(),
            backend,
            warnings: Vec::new(),
        };
        // The whole file as a table, once, when a backend's own table is in it.
        let whole: Option<toml::Table> = masked.as_ref().and_then(|_| toml::from_str(text).ok());
        for b in catalog.backends.iter().filter(|b| b.reads_own_table()) {
            let path = b.own_table_path();
            let table = path.iter().try_fold(None::<&toml::Value>, |at, key| {
                let next = match at {
                    None => whole.as_ref().and_then(|t| t.get(*key)),
                    Some(v) => v.get(*key),
                };
                next.map(Some).ok_or(())
            });
            let read = b.read_table(table.ok().flatten()).map_err(|(key, m)| {
                let mut at = path.clone();
                at.extend(key);
                ctx.err(ctx.spans.at(&at), m)
            })?;
            scenario.tables.0.insert(b.table(), read);
        }
        scenario.lock.service_lease_ms = backend.lease_ms(&scenario);
        validate::numbers(&ctx, &scenario)?;
        // Every backend checks its own keys, so each refuses its table in a scenario whose
        // clients talk to another service.
        let written = |key: &str| validate::at(&ctx, key) != (0..0);
        for b in catalog.backends {
            b.validate(&scenario, ctx.spans.at(&[b.table()]) != (0..0))
                .and_then(|()| b.validate_written(&scenario, &written))
                .map_err(|(key, m)| ctx.err(key.map_or(0..0, |k| validate::at(&ctx, k)), m))?;
        }
        let nodes = scenario.node_names();
        validate::clock_nodes(&ctx, &scenario, &nodes)?;
        let mut faults = Vec::new();
        let mut warnings = Vec::new();
        for (i, f) in raw.faults.into_iter().enumerate() {
            let (fault, warning) = fault::convert(&ctx, f, &nodes, &scenario)?;
            backend
                .check_fault(&scenario, &fault)
                .map_err(|m| ctx.err(ctx.spans.fault(i, "kind"), m))?;
            warnings.extend(warning.map(|w| w.to_string()));
            // A fault that cannot fire before the run ends would make a vacuous verdict.
            if let Some((key, message)) =
                input::fires_after_end(&fault.trigger, scenario.duration_ms)
            {
                return Err(ctx.err(ctx.spans.fault(i, key), message));
            }
            faults.push(fault);
        }
        let scenario = Scenario {
            faults,
            warnings,
            ..scenario
        };
        if let Some(table) = &raw.explore {
            Space::of(&scenario).map_err(|e| {
                let at = e
                    .key
                    .map_or(table.span(), |k| ctx.spans.at(&["explore", k]));
                ctx.err(at, e.message)
            })?;
        }
        Ok(scenario)
    }

    /// Every node name this scenario's topology has, in a fixed order: its servers
    /// ([`Scenario::servers`]), its clients, then what watches the servers (Redis's sentinels),
    /// last so the other nodes keep their places whether or not those run.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.servers().into_iter().map(|(n, _)| n).collect();
        v.extend((0..self.workload.clients).map(|c| format!("client-{c}")));
        v.extend(self.backend.watchers(self));
        v
    }

    /// What the backend with table `name` read from it ([`BackendDecl::read_table`]), if it
    /// reads its own table and its type is `T`.
    pub fn table<T: std::any::Any>(&self, name: &str) -> Option<&T> {
        self.tables.0.get(name).and_then(|t| t.downcast_ref::<T>())
    }

    /// The declaration of the backend this scenario's clients talk to.
    pub fn backend(&self) -> &'static dyn BackendDecl {
        self.backend
    }

    /// The named points a fault may fire at (`on = ...`): the workload's, then the lock kind's
    /// own, then those a lock of the user's own declared.
    pub fn points(&self) -> Vec<&'static str> {
        WORKLOAD_POINTS
            .iter()
            .chain(self.lock.kind.points())
            .chain(&self.lock_points)
            .map(|p| p.name)
            .collect()
    }

    /// The numbers the checkers take from this scenario (`[checks]`: the liveness bound, three
    /// of its leases unless set; the refused writes allowed; the throughput minimum; and the
    /// masters the lock lives on and the cycles the workload could complete).
    pub fn check_params(&self) -> crate::check::Params {
        crate::check::Params {
            liveness_bound_ms: self.checks.liveness_bound_ms(self.lock.lease_ms()),
            masters: self.backend().lock_masters(self),
            max_refused_writes: self.checks.max_refused_writes,
            min_throughput: self.checks.min_throughput,
            capacity: self.capacity(),
            releases_report_deletion: !self.lock.kind.is_client_program(),
            lock_servers: self.servers().into_iter().map(|(n, _)| n).collect(),
        }
    }

    /// Whether this scenario's pauses keep out of holders' check-to-write windows: `[explore]
    /// pause_between_check_and_write = false`, written (a search of a lock of the user's own
    /// writes it into each case and finding). A run honours it so that a finding replays what
    /// the search ran.
    pub fn pauses_spare_writes(&self) -> bool {
        self.explore
            .as_ref()
            .and_then(|e| e.pause_between_check_and_write)
            == Some(false)
    }

    /// The expectation for one check (`docs/checks.md`, "Expectations"): `expect_checks` first;
    /// `expect` is the mutual-exclusion one; and `expect = "safe"` says every other check is
    /// safe too. Why the last: a scenario that says "safe" and lets its waiters starve, or lies
    /// about a release, must fail CI; before, only mutual exclusion was held to `expect`, and a
    /// liveness violation under `expect = "safe"` exited 0. `expect = "violation"` says nothing of
    /// the other checks (a lock that lets two holders in may break any of them), so they are
    /// held only to what `expect_checks` states.
    pub fn expected(&self, check: &str) -> Option<Verdict> {
        self.expect_checks.get(check).copied().or_else(|| {
            (check == crate::check::MUTUAL_EXCLUSION || self.expect == Verdict::Safe)
                .then_some(self.expect)
        })
    }

    /// The verdict `check` is held to when it `observed` this one: [`Scenario::expected`], except
    /// that a check that could not judge is held only to an expectation the file states itself
    /// ([`Scenario::states_expectation`]). `None`: nothing to compare. The one rule every caller
    /// (the judge's exit code, the tests) compares by.
    pub fn held_to(&self, check: &str, observed: Verdict) -> Option<Verdict> {
        let expected = self.expected(check)?;
        (observed != Verdict::NotJudged || self.states_expectation(check)).then_some(expected)
    }

    /// Whether the scenario's file states the expectation for `check` itself (in
    /// `expect_checks`, or `expect` for mutual exclusion), rather than implying it by
    /// `expect = "safe"`. A check that could not be judged is held only to a stated expectation:
    /// "not judged" is never counted as safe, but a check nobody asked about that cannot look
    /// (the release check with no witness of the servers, say) does not fail the run either.
    pub fn states_expectation(&self, check: &str) -> bool {
        self.expect_checks.contains_key(check) || check == crate::check::MUTUAL_EXCLUSION
    }
}
