//! Node clocks at the start of a run: what a scenario's `[clocks]` table draws for each node.
//!
//! Both worlds draw the same way (node order, offset then drift, uniform in the ranges) from
//! their own seeded source, and record the same line per node; they differ only in how they
//! set a clock (a simulated clock, a client's `RealEnv`, a server's libfaketime).

use crate::scenario::ClocksSpec;

/// One node's clock as the run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartClock {
    /// The node's name (`redis-0`, `client-1`).
    pub node: String,
    /// How far it starts from true time (ms; negative: behind).
    pub offset_ms: i64,
    /// Its rate error in parts per million.
    pub drift_ppm: i64,
}

impl StartClock {
    /// The line the history records for it, so a report shows what the seed drew.
    pub fn describe(&self) -> String {
        format!(
            "{} clock starts {:+} ms off true time, drifting {:+} ppm",
            self.node, self.offset_ms, self.drift_ppm
        )
    }
}

/// Draws the start clock of every node of `names` that `spec` applies to, in `names` order,
/// with `uniform([low, high])` (inclusive). Draws nothing when every clock is perfect, so an
/// empty `[clocks]` table changes no history.
pub fn draw(
    spec: &ClocksSpec,
    names: &[String],
    mut uniform: impl FnMut([i64; 2]) -> i64,
) -> Vec<StartClock> {
    if spec.is_perfect() {
        return Vec::new();
    }
    spec.applies_to(names)
        .into_iter()
        .map(|node| {
            let offset_ms = uniform(spec.offset_ms);
            let drift_ppm = uniform(spec.drift_ppm);
            StartClock {
                node,
                offset_ms,
                drift_ppm,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_clocks_draw_nothing_and_others_draw_in_node_order() {
        let names: Vec<String> = ["redis-0", "client-0"].map(String::from).to_vec();
        let mut calls = 0;
        assert!(draw(&ClocksSpec::default(), &names, |_| {
            calls += 1;
            0
        })
        .is_empty());
        assert_eq!(calls, 0);
        let spec = ClocksSpec {
            offset_ms: [-5, 5],
            drift_ppm: [100, 100],
            nodes: None,
        };
        let mut next = [3, 100, -4, 100].into_iter();
        let drawn = draw(&spec, &names, |_| next.next().unwrap());
        assert_eq!(drawn[1].node, "client-0");
        assert_eq!((drawn[1].offset_ms, drawn[1].drift_ppm), (-4, 100));
        assert_eq!(
            drawn[0].describe(),
            "redis-0 clock starts +3 ms off true time, drifting +100 ppm"
        );
    }
}
