//! The glue between a model and stateright's checkers: parameter parsing,
//! one property per run, trace rendering and the scenario. The trait a
//! model implements for it is [`LockModel`], in `lock_model.rs`.

use crate::lock_model::{LockModel, Path};
use crate::params::Params;
use crate::report::{Finding, ModelReport, PropertyKind, Step, Strategy};
use crate::{ModelError, RunOptions};
use stateright::{Checker, Model, Property};
use std::time::Instant;

type PathVec<M> = Vec<(<M as Model>::State, Option<<M as Model>::Action>)>;
/// A model with its property selected, the property, and the effective parameters.
type Built<M> = (M, &'static str, Vec<(String, String)>);

/// Whether the selected property looks at the storage. Writes change only
/// the storage, so runs of the other properties leave them out (fewer
/// states, same verdicts).
pub(crate) fn needs_writes(property: &str) -> bool {
    property.is_empty() || property == "no_stale_write"
}

/// The properties to register: only the selected one, so that a discovery
/// of another property cannot end the run early or overwrite its trace.
pub(crate) fn selected<M: LockModel>(name: &'static str) -> Vec<Property<M>> {
    M::all_properties()
        .into_iter()
        .filter(|(info, _)| name.is_empty() || info.name == name)
        .map(|(_, p)| p)
        .collect()
}

/// Build a model from parameters with its property selected.
pub(crate) fn build<M: LockModel>(opts: &RunOptions) -> Result<Built<M>, ModelError> {
    let params = Params::new(M::NAME, M::PARAMS, &opts.params)?;
    let mut model = M::from_params(&params)?;
    let props = M::all_properties();
    let name = match &opts.property {
        None => M::DEFAULT_PROPERTY,
        Some(p) => props
            .iter()
            .map(|(i, _)| i.name)
            .find(|n| n == p)
            .ok_or_else(|| ModelError::UnknownProperty {
                model: M::NAME.to_string(),
                name: p.clone(),
                valid: props.iter().map(|(i, _)| i.name.to_string()).collect(),
            })?,
    };
    model.select(name);
    Ok((model, name, params.effective()))
}

fn steps<M: LockModel>(model: &M, path: &Path<M>) -> Vec<Step> {
    let mut out = Vec::new();
    for (i, w) in path.windows(2).enumerate() {
        let (s0, a) = &w[0];
        let (s1, _) = &w[1];
        let Some(a) = a else { continue };
        let before = model.facts(s0);
        let after = model.facts(s1);
        let mut changes = Vec::new();
        for (k, v1) in &after {
            match before.iter().find(|(k0, _)| k0 == k) {
                Some((_, v0)) if v0 == v1 => {}
                Some((_, v0)) => changes.push(format!("{k}: {v0} -> {v1}")),
                None => changes.push(format!("{k}: {v1}")),
            }
        }
        out.push(Step {
            index: i + 1,
            tick: model.tick_of(s0),
            action: model.action_text(s0, a),
            changes,
        });
    }
    out
}

struct Found<M: Model> {
    path: Option<PathVec<M>>,
    states: usize,
    unique: usize,
    depth: usize,
}

fn collect<M, C>(checker: C, name: &'static str) -> Found<M>
where
    M: LockModel,
    C: Checker<M>,
{
    let checker = checker.join();
    Found {
        path: checker.discovery(name).map(|p| p.into_vec()),
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
    }
}

/// stateright's `target_max_depth` for `--max-depth steps`. stateright counts an initial state
/// as depth 1 and skips (neither checks nor expands) every state whose depth is at least the
/// target, and its 0 means no limit: passing `steps` through made `--max-depth 1` check nothing
/// (the initial state was skipped) and `--max-depth 0` search without a limit. A state `steps`
/// steps from an initial one has depth `steps + 1`, so the first depth to skip is `steps + 2`,
/// and `--max-depth 0` checks the initial states only, as it says.
pub(crate) fn stateright_depth(steps: usize) -> usize {
    steps.saturating_add(2)
}

/// Whether a search with `--max-depth steps` was cut: stateright records the depth of every
/// state it takes from its queue, the skipped ones included, so a state past the limit shows as
/// `reached >= stateright_depth(steps)`; below that the limit never mattered and the search
/// covered the whole space. That record is exact on one thread only: with several, stateright
/// updates it with one compare-and-swap that may lose to another thread's and is not retried,
/// so it can stay below the depth really reached. A bounded search on several threads is
/// therefore always reported as cut, which may understate a finished search but never
/// overstates a cut one.
pub(crate) fn was_cut(max_depth: Option<usize>, reached: usize, threads: usize) -> bool {
    match max_depth {
        None => false,
        Some(steps) => threads > 1 || reached >= stateright_depth(steps),
    }
}

/// The thread count a run uses: `requested`, or for `0` every core for DFS
/// and one for BFS (see [`RunOptions::threads`]).
pub fn effective_threads(requested: usize, strategy: Strategy) -> usize {
    match (requested, strategy) {
        (0, Strategy::Bfs) => 1,
        (0, Strategy::Dfs) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        (n, _) => n,
    }
}

pub(crate) fn run<M: LockModel>(opts: &RunOptions) -> Result<ModelReport, ModelError> {
    let (model, name, params) = build::<M>(opts)?;
    let (info, _) = M::all_properties()
        .into_iter()
        .find(|(i, _)| i.name == name)
        .expect("selected property exists");
    let threads = effective_threads(opts.threads, opts.strategy);
    let mut builder = model.clone().checker().threads(threads);
    if let Some(d) = opts.max_depth {
        builder = builder.target_max_depth(stateright_depth(d));
    }
    let start = Instant::now();
    let found = match opts.strategy {
        Strategy::Bfs => collect(builder.spawn_bfs(), name),
        Strategy::Dfs => {
            if let Some(f) = model.symmetry() {
                builder = builder.symmetry_fn(f);
            }
            collect(builder.spawn_dfs(), name)
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let init = model.init_states().remove(0);
    let initial = model
        .facts(&init)
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let mut witness = None;
    let mut scenario = None;
    let mut scenario_note = None;
    let cut = was_cut(opts.max_depth, found.depth, threads);
    // Steps from an initial state to the deepest state checked (stateright's depth counts the
    // initial state as 1, and a cut search records the skipped level past the limit too).
    let depth_reached = match opts.max_depth {
        Some(steps) => found.depth.saturating_sub(1).min(steps),
        None => found.depth.saturating_sub(1),
    };
    let outcome = match (info.kind, &found.path) {
        // Nothing found, and states past the limit were never checked: no verdict.
        (PropertyKind::Always, None) | (PropertyKind::Sometimes, None) if cut => Finding::Bounded {
            max_depth: opts.max_depth.unwrap_or_default(),
            states: found.states,
            unique_states: found.unique,
            secs,
        },
        (PropertyKind::Always, None) => Finding::Holds {
            states: found.states,
            unique_states: found.unique,
            secs,
        },
        (PropertyKind::Always, Some(path)) => {
            match model.scenario(name, path) {
                Ok(sc) => scenario = Some(sc.to_toml()),
                Err(why) => scenario_note = Some(why),
            }
            Finding::Violated {
                trace: steps(&model, path),
                secs,
                states: found.states,
            }
        }
        (PropertyKind::Sometimes, Some(path)) => {
            witness = Some(steps(&model, path));
            Finding::Holds {
                states: found.states,
                unique_states: found.unique,
                secs,
            }
        }
        (PropertyKind::Sometimes, None) => Finding::Violated {
            trace: Vec::new(),
            secs,
            states: found.states,
        },
    };
    Ok(ModelReport {
        model: M::NAME.to_string(),
        property: name.to_string(),
        property_kind: info.kind,
        property_about: info.about.to_string(),
        params,
        strategy: opts.strategy,
        threads,
        max_depth: opts.max_depth,
        depth_reached,
        expected: model.expected(name),
        outcome,
        unique_states: found.unique,
        witness,
        initial,
        tick_ms: model.tick_ms(),
        scenario_note,
        scenario,
    })
}

pub(crate) fn serve<M: LockModel>(opts: &RunOptions, addr: &str) -> Result<(), ModelError> {
    let (mut model, _, _) = build::<M>(opts)?;
    if opts.property.is_none() {
        model.select("");
    }
    // stateright's Explorer panics if it cannot bind; check first so the
    // caller gets an error instead.
    std::net::TcpListener::bind(addr)
        .map_err(|e| ModelError::Explorer(format!("cannot listen on {addr}: {e}")))?;
    let mut builder = model
        .checker()
        .threads(effective_threads(opts.threads, Strategy::Dfs));
    if let Some(d) = opts.max_depth {
        builder = builder.target_max_depth(stateright_depth(d));
    }
    let _checker = builder.serve(addr);
    loop {
        std::thread::park();
    }
}

/// The [`Model`] methods every lock model shares, for its `impl Model`:
/// register only the selected property (see [`selected`]) and show steps
/// in the Explorer with [`format_step`].
macro_rules! checked_by_runner {
    () => {
        fn properties(&self) -> Vec<stateright::Property<Self>> {
            $crate::runner::selected(self.property)
        }

        fn format_step(&self, last: &Self::State, action: Self::Action) -> Option<String> {
            $crate::runner::format_step(self, last, action)
        }
    };
}
pub(crate) use checked_by_runner;

/// The [`LockModel`] methods that read what every model keeps in fields of
/// the same names, for its `impl LockModel`: the selected property in
/// `property`, the scenario's tick length in `tick_ms`, and true time in
/// its state's `t`.
macro_rules! common_fields {
    () => {
        fn select(&mut self, property: &'static str) {
            self.property = property;
        }

        fn tick_ms(&self) -> u64 {
            self.tick_ms
        }

        fn tick_of(&self, s: &Self::State) -> u32 {
            s.t as u32
        }
    };
}
pub(crate) use common_fields;

/// The Explorer's view of a step: the action in words, then the facts of
/// the state it leads to.
pub(crate) fn format_step<M: LockModel>(
    m: &M,
    last: &M::State,
    action: M::Action,
) -> Option<String> {
    let text = m.action_text(last, &action);
    let next = m.next_state(last, action)?;
    let mut out = format!("{text}\n(true time {})\n", m.tick_of(&next));
    for (k, v) in m.facts(&next) {
        out.push_str(&format!("{k}: {v}\n"));
    }
    Some(out)
}

/// The properties of a model: name, kind, meaning.
pub(crate) fn property_list<M: LockModel>() -> Vec<(&'static str, PropertyKind, &'static str)> {
    M::all_properties()
        .into_iter()
        .map(|(i, _)| (i.name, i.kind, i.about))
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::report::{Expectation, Finding};
    use crate::test_util::opts;
    use crate::{run, Strategy};

    /// `--max-depth 1` used to check one state and print HOLDS: a cut search is now its own
    /// finding, says so in its headline, and matches no expectation.
    #[test]
    fn a_search_cut_by_its_depth_limit_is_bounded_not_a_proof() {
        for strategy in [Strategy::Bfs, Strategy::Dfs] {
            let mut o = opts("mutual_exclusion", &[("pauses", "0")], strategy);
            o.max_depth = Some(1);
            let r = run("zk-session", &o).unwrap();
            assert!(
                matches!(r.outcome, Finding::Bounded { max_depth: 1, .. }),
                "{}",
                r.to_text()
            );
            assert!(r.is_bounded());
            assert!(!r.matches_expectation());
            assert_eq!(r.outcome.verdict(), None);
            assert_eq!(r.depth_reached, 1);
            let text = r.to_text();
            assert!(!text.contains("HOLDS"), "{text}");
            assert!(
                text.contains("NO COUNTEREXAMPLE WITHIN DEPTH 1 (bounded: not a proof)"),
                "{text}"
            );
            assert_eq!(r.to_json()["verdict"], "bounded");
            assert_eq!(r.to_json()["bounded"], true);
        }
    }

    /// `--max-depth 0` used to mean "no limit"; it now checks the initial states only.
    #[test]
    fn max_depth_zero_checks_the_initial_states_only() {
        let unique = |max_depth: Option<usize>| {
            let mut o = opts("mutual_exclusion", &[("pauses", "0")], Strategy::Bfs);
            o.max_depth = max_depth;
            let r = run("zk-session", &o).unwrap();
            (r.unique_states, r)
        };
        let (zero, r) = unique(Some(0));
        assert!(r.is_bounded(), "{}", r.to_text());
        assert_eq!(r.depth_reached, 0);
        // Unique states count the level generated past the limit: the initial state and its
        // successors, fewer than one step further, far fewer than the whole space.
        let (one, _) = unique(Some(1));
        let (all, r) = unique(None);
        assert!(!r.is_bounded());
        assert!(zero < one && one < all, "{zero} {one} {all}");
        // A reachability property with no example that near is not called vacuous either.
        let mut o = opts("handover", &[("pauses", "0")], Strategy::Bfs);
        o.max_depth = Some(0);
        let r = run("zk-session", &o).unwrap();
        assert!(r.is_bounded(), "{}", r.to_text());
        assert!(r.to_text().contains("NO EXAMPLE WITHIN DEPTH 0"));
    }

    /// A limit the search never reaches leaves a proof a proof (on one thread, where stateright's
    /// depth record is exact), and a counterexample within the limit is still a violation.
    #[test]
    fn a_limit_the_search_never_reaches_still_proves_and_violations_are_found_within_it() {
        let mut o = opts("mutual_exclusion", &[("pauses", "0")], Strategy::Bfs);
        o.max_depth = Some(10_000);
        let r = run("zk-session", &o).unwrap();
        assert!(
            matches!(r.outcome, Finding::Holds { .. }),
            "{}",
            r.to_text()
        );
        assert!(r.matches_expectation());
        assert!(r.depth_reached < 10_000);
        let mut o = opts("mutual_exclusion", &[], Strategy::Bfs);
        o.max_depth = Some(8);
        let r = run("zk-session", &o).unwrap();
        assert_eq!(
            r.outcome.verdict(),
            Some(Expectation::Violated),
            "{}",
            r.to_text()
        );
        // Seven steps are one short of the shortest counterexample (eight steps).
        o.max_depth = Some(7);
        let r = run("zk-session", &o).unwrap();
        assert!(r.is_bounded(), "{}", r.to_text());
    }
}
