//! Helpers the models' tests share: run one property of one model with
//! fixed options and read the actions of its trace.

use crate::{run, ModelReport, RunOptions, Strategy};

/// The options of a test run: one property, no depth bound, one thread
/// (so BFS traces are the shortest and counts are reproducible).
pub(crate) fn opts(property: &str, params: &[(&str, &str)], strategy: Strategy) -> RunOptions {
    RunOptions {
        property: Some(property.to_string()),
        strategy,
        max_depth: None,
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        threads: 1,
    }
}

/// Run `property` of `model` and assert the verdict is the declared one.
pub(crate) fn check(
    model: &str,
    property: &str,
    params: &[(&str, &str)],
    strategy: Strategy,
) -> ModelReport {
    let r = run(model, &opts(property, params, strategy)).unwrap();
    assert!(r.matches_expectation(), "{}", r.to_text());
    r
}

/// The actions of a counterexample, in words.
pub(crate) fn actions(r: &ModelReport) -> Vec<String> {
    r.trace()
        .expect("a counterexample")
        .iter()
        .map(|s| s.action.clone())
        .collect()
}
