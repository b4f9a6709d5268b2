//! Running the checker on one property: breadth first, so the first
//! counterexample found is a shortest one.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use std::fmt::Debug;
use std::hash::Hash;

use stateright::{Checker, HasDiscoveries, Model};

use crate::model::{Action, LeaseModel};

/// A model whose check can be narrowed to one of its properties: the lease
/// model, the delete protocol's ([`crate::IdModel`]) and the listing's
/// ([`crate::ListingModel`]).
pub trait Focus: Model + Clone + Send + Sync + 'static {
    /// The model checking only the property `name`.
    #[must_use]
    fn only(self, name: &'static str) -> Self;
}

impl Focus for LeaseModel {
    fn only(self, name: &'static str) -> Self {
        LeaseModel::only(self, name)
    }
}

/// The discoveries of [`check_all`], by property name: a path to each.
pub type Discoveries<A> = Vec<(&'static str, Vec<A>)>;

/// What checking one property found.
#[derive(Debug, Clone)]
pub struct Run<A = Action> {
    /// The property.
    pub property: &'static str,
    /// Distinct states visited.
    pub states: usize,
    /// States generated, repeats included.
    pub generated: usize,
    /// The deepest level reached.
    pub depth: usize,
    /// Wall time of the check.
    pub elapsed: Duration,
    /// The path to the first discovery: a counterexample for a safety
    /// property, an example for a reachability one. `None` when the whole
    /// space was explored without one.
    pub discovery: Option<Vec<A>>,
}

impl<A> Run<A> {
    /// The number of steps of the discovery, if any.
    pub fn discovery_len(&self) -> Option<usize> {
        self.discovery.as_ref().map(Vec::len)
    }
}

/// Checks `property` of `model` exhaustively, breadth first on one thread,
/// stopping at its first discovery (which is then a shortest path to it).
///
/// # Panics
/// When `model` has no property named `property`.
pub fn check<M>(model: &M, property: &'static str) -> Run<M::Action>
where
    M: Focus,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    // A name the model does not have would check nothing and pass.
    assert!(
        model.properties().iter().any(|p| p.name == property),
        "the model has no property named {property:?}"
    );
    let started = Instant::now();
    let checker = model
        .clone()
        .only(property)
        .checker()
        .threads(1)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    let elapsed = started.elapsed();
    Run {
        property,
        states: checker.unique_state_count(),
        generated: checker.state_count(),
        depth: checker.max_depth(),
        elapsed,
        discovery: checker.discovery(property).map(|p| p.into_actions()),
    }
}

/// Checks every property of `model` in one exploration (faster than one
/// [`check`] each). Returns the run and each discovery by property name,
/// sorted: a counterexample for a broken safety property, an example for a
/// reachable one.
pub fn check_all<M>(model: &M) -> (Run<M::Action>, Discoveries<M::Action>)
where
    M: Focus,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let started = Instant::now();
    let checker = model.clone().checker().threads(1).spawn_bfs().join();
    let elapsed = started.elapsed();
    let mut found: Discoveries<M::Action> = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| (name, path.into_actions()))
        .collect();
    found.sort_by_key(|(name, _)| *name);
    let run = Run {
        property: "all",
        states: checker.unique_state_count(),
        generated: checker.state_count(),
        depth: checker.max_depth(),
        elapsed,
        discovery: None,
    };
    (run, found)
}
