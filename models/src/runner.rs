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
        builder = builder.target_max_depth(d);
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
    let outcome = match (info.kind, &found.path) {
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
        depth_reached: found.depth,
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
        builder = builder.target_max_depth(d);
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
