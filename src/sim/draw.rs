//! Uniform draws from a `[lo, hi]` range (latencies, replication lag), from madsim's seeded RNG
//! so the same seed draws the same numbers. The cluster and the network both draw; neither owns
//! the arithmetic.

/// Uniform in `[lo, hi]` from madsim's seeded RNG.
pub fn lo_hi_random(range: [u64; 2]) -> u64 {
    lo_hi(&mut madsim::rand::thread_rng(), range)
}

/// Uniform in `[lo, hi]` from `rng` (no draw when the range is one value).
pub fn lo_hi(rng: &mut impl rand::RngCore, [lo, hi]: [u64; 2]) -> u64 {
    if hi <= lo {
        lo
    } else {
        lo + rng.next_u64() % (hi - lo + 1)
    }
}
