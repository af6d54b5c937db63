//! What every lock model provides beyond stateright's [`Model`]: the
//! [`LockModel`] trait, the [`PropInfo`] a model describes a property
//! with, and the [`Path`] of a trace.
//!
//! In a file of its own so that imports run one way: the runner (which
//! checks a model) and the counterexample helpers (which read its trace)
//! both depend on this trait, and neither on the other. The trait names
//! [`Scenario`], so the scenario file format does not name the trait back
//! (see `counterexample.rs`).

use crate::params::{ParamSpec, Params};
use crate::report::{Expectation, PropertyKind};
use crate::scenario::Scenario;
use crate::ModelError;
use stateright::{Model, Property};
use std::fmt::Debug;
use std::hash::Hash;

/// A property a model offers: its name, kind and one-sentence meaning.
pub(crate) struct PropInfo {
    pub name: &'static str,
    pub kind: PropertyKind,
    pub about: &'static str,
}

pub(crate) type Path<M> = [(<M as Model>::State, Option<<M as Model>::Action>)];
/// A representative function for symmetry reduction.
pub(crate) type Representative<M> = fn(&<M as Model>::State) -> <M as Model>::State;

/// What every model in this crate provides beyond [`Model`].
pub(crate) trait LockModel:
    Model<
        State: Clone + Debug + Hash + Eq + Send + Sync + 'static,
        Action: Clone + Debug + PartialEq + Send + Sync + 'static,
    > + Clone
    + Send
    + Sync
    + 'static
{
    const NAME: &'static str;
    const PARAMS: &'static [ParamSpec];
    /// The property checked when none is named.
    const DEFAULT_PROPERTY: &'static str;

    fn from_params(p: &Params) -> Result<Self, ModelError>;
    /// Every property with its condition; [`Model::properties`] returns only
    /// the selected one (see [`selected`](crate::runner::selected)).
    fn all_properties() -> Vec<(PropInfo, Property<Self>)>;
    /// Restrict [`Model::properties`] to one property (`""`: all of them).
    fn select(&mut self, property: &'static str);
    /// The declared verdict for `property` in this configuration.
    fn expected(&self, property: &str) -> Expectation;
    fn tick_ms(&self) -> u64;
    /// True time (ticks) of a state.
    fn tick_of(&self, s: &Self::State) -> u32;
    /// The facts of a state that a reader needs, `(subject, value)`, in a
    /// fixed order; a step prints the ones that changed.
    fn facts(&self, s: &Self::State) -> Vec<(String, String)>;
    /// The action in words, given the state it is taken in.
    fn action_text(&self, s: &Self::State, a: &Self::Action) -> String;
    /// The trace as a scenario, or a reason why the contract cannot express it.
    fn scenario(&self, property: &str, path: &Path<Self>) -> Result<Scenario, String>;
    /// A canonical representative under client symmetry, when the clients
    /// are interchangeable in this configuration. DFS uses it to skip states
    /// that differ only by a renaming of clients (BFS cannot).
    fn symmetry(&self) -> Option<Representative<Self>> {
        None
    }
}
