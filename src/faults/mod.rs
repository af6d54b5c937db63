//! Faults as both worlds run them: the schedule that decides when each fault of a scenario
//! fires ([`schedule`]) and the clocks nodes start with ([`clocks`]). How a fault is carried
//! out is each world's own business (`sim::nemesis`, `real::nemesis`).

pub mod clocks;
pub mod schedule;

pub use schedule::{partition_links, Schedule};
