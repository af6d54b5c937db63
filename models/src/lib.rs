#![warn(missing_docs)]
//! Stateright models of the Redis lock designs lockcheck tests.
//!
//! Each model is a plain [`stateright::Model`] with explicit discrete time:
//! true time advances by a `Tick` action (up to a time bound), every node's
//! clock is a function of true time (offset, drift, jumps), leases expire on
//! the server's clock and clients compute their validity on their own clock.
//! The checker searches every interleaving of client steps, ticks and
//! faults for a state that breaks a property.
//!
//! | model | design | what it finds |
//! |---|---|---|
//! | [`lease`] | one Redis, `SET NX PX`, optional fencing tokens | a GC pause or a server clock jump gives two holders; fencing keeps the storage safe |
//! | [`failover`] | master + lagging replica, failover, optional `WAIT` | the promoted replica grants the lock again; `WAIT` narrows but does not close the window |
//! | [`redlock`] | Redlock over 3 or 5 masters | holds with drift inside the allowance; breaks with a clock jump, a pause, or a restart without the delay |
//! | [`redisson`] | Redisson's hash lock with watchdog renewal | a pause longer than the lease stops the watchdog too |
//! | [`fencing`] | fencing tokens from `INCR` on a replicated master | the counter goes back on failover and the storage accepts a stale write |
//! | [`pg_pooler`] | PostgreSQL session advisory locks behind PgBouncer | in transaction mode the next client lent the holder's server connection acquires at once (session locks stack): two holders in two steps; session mode and the transaction-level lock hold |
//! | [`zk_session`] | ZooKeeper's lock recipe (ephemeral sequential znode, session expiry) | a paused or cut-off holder's session expires and the next waiter holds; a listener closes the partition window, not the pause's; the node's `czxid` as a fencing token keeps the storage safe |
//!
//! Every model has the properties `mutual_exclusion` (at most one client in
//! its critical section; a paused client that believes it holds the lock is
//! in it) and `no_stale_write` (the storage never accepts a write from an
//! older lease after one from a newer lease, "older" meaning the true order
//! of grants, which the model tracks as ghost state), plus a `sometimes`
//! property (`handover`: a second lease is granted) that catches a vacuous
//! model; `fencing` adds `tokens_increase` and `redisson` adds `reentered`.
//! A run checks exactly one property: stateright stops when every
//! registered property has a discovery and a later discovery can overwrite
//! an earlier one, so registering several would lose the shortest trace.
//!
//! The three shared properties and the protected storage live in
//! [`properties`], the string lock key that four of the designs set in
//! [`key`], and what every counterexample scenario shares in
//! [`scenario`] (the file format) and `counterexample.rs` (the base a
//! model's scenario starts from), so each model holds only its design.
//!
//! Threads: [`RunOptions::threads`] `0` runs DFS proofs on every core and
//! BFS on one, because only a single-threaded BFS guarantees the shortest
//! counterexample.
//!
//! Each model declares the verdict it expects for its configuration
//! ([`ModelReport::expected`]); [`ModelReport::matches_expectation`]
//! compares it with the checker's. [`model_info`] lists a model's
//! parameters and properties for the CLI's help. Counterexamples become
//! scenario files as [`scenario`] describes (1 tick = 100 ms by default).
//!
//! ```
//! use lockcheck_models::{run, Expectation, RunOptions, Strategy};
//!
//! // A client pauses (GC) while it holds a SET NX PX lease: BFS finds the
//! // shortest trace in which a second client acquires the expired lease.
//! let opts = RunOptions {
//!     property: Some("mutual_exclusion".into()),
//!     strategy: Strategy::Bfs,
//!     max_depth: None,
//!     params: vec![("pauses".into(), "1".into())],
//!     threads: 1,
//! };
//! let report = run("lease", &opts).unwrap();
//! assert_eq!(report.outcome.verdict(), Some(Expectation::Violated));
//! assert!(report.matches_expectation());
//! println!("{}", report.to_text());
//! // The trace as a scenario the simulator replays.
//! let toml = report.to_scenario_toml().unwrap();
//! assert!(toml.contains("kind = \"pause\""));
//! ```

pub mod clock;
mod counterexample;
pub mod failover;
pub mod fencing;
pub mod key;
pub mod lease;
mod lock_model;
mod params;
pub mod pg_pooler;
pub mod properties;
pub mod redisson;
pub mod redlock;
pub mod report;
mod runner;
pub mod scenario;
#[cfg(test)]
mod test_util;
mod zk_replay;
pub mod zk_session;

pub use params::ParamSpec;
pub use report::{Expectation, Finding, ModelReport, PropertyKind, Step, Strategy};
pub use runner::effective_threads;

use std::fmt;

/// Call `$then!` with every model type, in the order [`model_names`] lists
/// them: the one list of models, so that a new one is added in one place.
macro_rules! every_model {
    ($then:ident $(, $($args:tt)*)?) => {
        $then!($($($args)*;)? lease::Lease, failover::Failover, redlock::Redlock, redisson::Redisson, fencing::Fencing, zk_session::ZkSession, pg_pooler::PgPooler)
    };
}

/// The models, by the name [`run`] takes.
pub fn model_names() -> &'static [&'static str] {
    macro_rules! names {
        ($($model:ty),+) => {{
            const NAMES: &[&str] = &[$(<$model as lock_model::LockModel>::NAME),+];
            NAMES
        }};
    }
    every_model!(names)
}

/// How to run a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// The property to check; `None`: the model's default
    /// (`mutual_exclusion`, or `no_stale_write` for `fencing`).
    pub property: Option<String>,
    /// Breadth-first for the shortest counterexample, depth-first for exhaustive proofs in less
    /// memory.
    pub strategy: Strategy,
    /// Check only states at most this many steps from an initial state; deeper ones are not
    /// explored, and a search that had to leave some out and found nothing is reported as
    /// [`Finding::Bounded`], not as a proof. `Some(0)`: the initial states only.
    pub max_depth: Option<usize>,
    /// `--param k=v`; unknown names are errors.
    pub params: Vec<(String, String)>,
    /// Checker threads; `0` (the default) picks them: every core
    /// ([`std::thread::available_parallelism`]) for DFS, whose exhaustive
    /// proofs visit the same unique states on any number of threads, and
    /// one for BFS, because only a single-threaded BFS guarantees the
    /// shortest counterexample (several threads finish levels out of order
    /// and may report a longer trace first). An explicit count is used as is.
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            property: None,
            strategy: Strategy::Bfs,
            max_depth: None,
            params: Vec::new(),
            threads: 0,
        }
    }
}

/// Bad input to [`run`] or [`serve_explorer`]; the message lists the valid
/// choices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelError {
    /// No model has this name.
    UnknownModel {
        /// The name asked for.
        name: String,
        /// The model names there are.
        valid: Vec<String>,
    },
    /// The model has no property of this name.
    UnknownProperty {
        /// The model asked for.
        model: String,
        /// The property asked for.
        name: String,
        /// The model's properties.
        valid: Vec<String>,
    },
    /// The model has no parameter of this name (a typo must not silently run the defaults).
    UnknownParam {
        /// The model asked for.
        model: String,
        /// The parameter given.
        name: String,
        /// The model's parameters.
        valid: Vec<String>,
    },
    /// A parameter's value does not parse or is out of range.
    BadParam {
        /// The model asked for.
        model: String,
        /// The parameter.
        name: String,
        /// The value given.
        value: String,
        /// What the parameter takes (a range, `true or false`, a list of words).
        expected: String,
    },
    /// stateright's Explorer could not be served (the address cannot be bound).
    Explorer(String),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::UnknownModel { name, valid } => {
                write!(f, "unknown model `{name}`; models: {}", valid.join(", "))
            }
            ModelError::UnknownProperty { model, name, valid } => write!(
                f,
                "model {model} has no property `{name}`; properties: {}",
                valid.join(", ")
            ),
            ModelError::UnknownParam { model, name, valid } => write!(
                f,
                "model {model} has no parameter `{name}`; parameters: {}",
                valid.join(", ")
            ),
            ModelError::BadParam {
                model,
                name,
                value,
                expected,
            } => write!(
                f,
                "model {model}: parameter {name}={value} is invalid; expected {expected}"
            ),
            ModelError::Explorer(msg) => write!(f, "explorer: {msg}"),
        }
    }
}

impl std::error::Error for ModelError {}

/// What the CLI shows for `lockcheck model <name> --help`-style listings.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The name [`run`] takes.
    pub name: &'static str,
    /// The parameters `--param` accepts, with defaults and help.
    pub params: &'static [ParamSpec],
    /// `(name, kind, meaning)`.
    pub properties: Vec<(&'static str, PropertyKind, &'static str)>,
    /// The property checked when none is named.
    pub default_property: &'static str,
}

fn unknown(name: &str) -> ModelError {
    ModelError::UnknownModel {
        name: name.to_string(),
        valid: model_names().iter().map(|s| s.to_string()).collect(),
    }
}

/// Evaluate `$body` with `$m` standing for the model named `$name`, or
/// return the unknown-model error.
macro_rules! dispatch {
    ($name:expr, $m:ident => $body:expr) => {
        every_model!(dispatch_to, $name, $m, $body)
    };
}

/// [`dispatch`]'s expansion over the list of models.
macro_rules! dispatch_to {
    ($name:expr, $m:ident, $body:expr; $($model:ty),+) => {{
        let name: &str = $name;
        $(if name == <$model as lock_model::LockModel>::NAME {
            type $m = $model;
            $body
        } else)+ {
            Err(unknown(name))
        }
    }};
}

/// The parameters and properties of a model.
pub fn model_info(name: &str) -> Result<ModelInfo, ModelError> {
    use lock_model::LockModel;
    dispatch!(name, M => Ok(ModelInfo {
        name: M::NAME,
        params: M::PARAMS,
        properties: runner::property_list::<M>(),
        default_property: M::DEFAULT_PROPERTY,
    }))
}

/// Check one property of one model: BFS gives the shortest counterexample
/// (on one thread), DFS proves a property within the model's time bound
/// with less memory.
pub fn run(name: &str, opts: &RunOptions) -> Result<ModelReport, ModelError> {
    dispatch!(name, M => runner::run::<M>(opts))
}

/// Serve stateright's Explorer (a web UI to step through the model) on
/// `addr`; blocks for as long as the process runs. With no property
/// selected, every property is registered.
pub fn serve_explorer(name: &str, opts: &RunOptions, addr: &str) -> Result<(), ModelError> {
    dispatch!(name, M => runner::serve::<M>(opts, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threads_means_all_cores_for_dfs_and_one_for_bfs() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(effective_threads(0, Strategy::Dfs), cores);
        assert_eq!(effective_threads(0, Strategy::Bfs), 1);
        assert_eq!(effective_threads(3, Strategy::Bfs), 3);
        let opts = RunOptions {
            property: Some("mutual_exclusion".into()),
            strategy: Strategy::Dfs,
            params: vec![("pauses".into(), "0".into())],
            ..RunOptions::default()
        };
        let r = run("lease", &opts).unwrap();
        assert_eq!(r.threads, cores);
        // An exhaustive proof visits the same unique states on any number
        // of threads (the figures table shows 132 on one).
        assert_eq!(r.unique_states, 132);
    }

    #[test]
    fn errors_list_the_valid_choices() {
        let e = run("redlok", &RunOptions::default()).unwrap_err();
        assert!(e
            .to_string()
            .contains("lease, failover, redlock, redisson, fencing"));
        let opts = RunOptions {
            property: Some("safety".into()),
            ..RunOptions::default()
        };
        let e = run("lease", &opts).unwrap_err().to_string();
        assert!(
            e.contains("mutual_exclusion") && e.contains("no_stale_write"),
            "{e}"
        );
        let opts = RunOptions {
            params: vec![("nodes".into(), "3".into())],
            ..RunOptions::default()
        };
        let e = run("lease", &opts).unwrap_err().to_string();
        assert!(e.contains("`nodes`") && e.contains("ttl"), "{e}");
        for name in model_names() {
            let info = model_info(name).unwrap();
            assert!(info.properties.iter().any(|p| p.0 == "mutual_exclusion"));
            assert!(info.properties.iter().any(|p| p.0 == "no_stale_write"));
            assert!(info
                .properties
                .iter()
                .any(|p| p.1 == PropertyKind::Sometimes));
        }
    }

    /// Every counterexample a test configuration produces becomes a
    /// scenario with only the keys, fault kinds and node names of the
    /// contract in docs/design.md ("Scenario files").
    #[test]
    fn scenarios_follow_the_contract() {
        type Case = (
            &'static str,
            &'static str,
            &'static [(&'static str, &'static str)],
        );
        let cases: &[Case] = &[
            ("lease", "mutual_exclusion", &[]),
            ("lease", "no_stale_write", &[("fencing", "false")]),
            (
                "lease",
                "mutual_exclusion",
                &[("pauses", "0"), ("jump", "2")],
            ),
            ("failover", "mutual_exclusion", &[]),
            ("failover", "no_stale_write", &[("wait", "1")]),
            (
                "failover",
                "mutual_exclusion",
                &[
                    ("wait", "1"),
                    ("on_wait_timeout", "give-up"),
                    ("replica_skew", "2"),
                ],
            ),
            ("fencing", "no_stale_write", &[("failover", "true")]),
            ("redlock", "mutual_exclusion", &[("jumps", "1")]),
            ("redlock", "mutual_exclusion", &[("crashes", "1")]),
            ("redlock", "mutual_exclusion", &[("pauses", "1")]),
            (
                "redlock",
                "mutual_exclusion",
                &[
                    ("drift_period", "4"),
                    ("fast_nodes", "3"),
                    ("allowance", "0"),
                ],
            ),
            ("redisson", "mutual_exclusion", &[]),
        ];
        let top = [
            "name",
            "about",
            "expect",
            "expect_checks",
            "seed",
            "duration_ms",
            "lock",
            "redis",
            "workload",
            "faults",
        ];
        let kinds = ["set-nx-px", "redlock", "fenced", "redisson"];
        for (model, property, params) in cases {
            let opts = RunOptions {
                property: Some(property.to_string()),
                params: params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..RunOptions::default()
            };
            let r = run(model, &opts).unwrap();
            assert!(r.matches_expectation(), "{}", r.to_text());
            let text = r
                .to_scenario_toml()
                .unwrap_or_else(|| panic!("{}", r.to_text()));
            let v: toml::Table = toml::from_str(&text).unwrap();
            for k in v.keys() {
                assert!(top.contains(&k.as_str()), "{model}: unknown key {k}");
            }
            assert_eq!(v["expect"].as_str(), Some("violation"));
            let keys =
                |t: &str| -> Vec<String> { v[t].as_table().unwrap().keys().cloned().collect() };
            assert_eq!(keys("lock"), ["kind", "ttl_ms", "wait_ms"]);
            assert_eq!(
                keys("redis"),
                [
                    "failover_detect_ms",
                    "masters",
                    "replicas",
                    "replication_lag_ms",
                    "request_timeout_ms"
                ]
            );
            assert_eq!(
                keys("workload"),
                ["clients", "cycles", "hold_ms", "think_ms"]
            );
            assert!(kinds.contains(&v["lock"]["kind"].as_str().unwrap()));
            let masters = v["redis"]["masters"].as_integer().unwrap();
            let replicas = v["redis"]["replicas"].as_integer().unwrap();
            let node_ok = |n: &str| -> bool {
                (0..masters).any(|m| {
                    n == format!("redis-{m}")
                        || (0..replicas).any(|r| n == format!("redis-{m}-replica-{r}"))
                }) || n.starts_with("client-")
            };
            let mut last_at = 0;
            for f in v["faults"].as_array().unwrap() {
                let f = f.as_table().unwrap();
                let at = f["at_ms"].as_integer().unwrap();
                assert!(at >= last_at, "faults in time order");
                last_at = at;
                let mut fk: Vec<&str> = f.keys().map(|k| k.as_str()).collect();
                fk.sort();
                match f["kind"].as_str().unwrap() {
                    "failover" => assert_eq!(fk, ["at_ms", "kind"]),
                    "pause" => {
                        assert_eq!(fk, ["at_ms", "client", "for_ms", "kind"]);
                        let c = f["client"].as_str().unwrap();
                        assert!(c == "holder" || node_ok(c), "{c}");
                    }
                    "clock_jump" => {
                        assert_eq!(fk, ["at_ms", "by_ms", "kind", "node"]);
                        assert!(node_ok(f["node"].as_str().unwrap()));
                    }
                    "clock_drift" => {
                        assert_eq!(fk, ["at_ms", "kind", "node", "ppm"]);
                        assert!(node_ok(f["node"].as_str().unwrap()));
                    }
                    "crash" => {
                        assert_eq!(fk, ["at_ms", "kind", "node", "restart_after_ms"]);
                        assert!(node_ok(f["node"].as_str().unwrap()));
                    }
                    other => panic!("{model}: fault kind {other}"),
                }
            }
            // The holder's critical section is shorter than the lease.
            let hold = v["workload"]["hold_ms"].as_array().unwrap()[1]
                .as_integer()
                .unwrap();
            let ttl = v["lock"]["ttl_ms"].as_integer().unwrap();
            assert!(hold <= ttl, "{model}: hold {hold} ttl {ttl}");
        }
    }
}
