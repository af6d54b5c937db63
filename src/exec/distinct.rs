//! Counting distinct trace hashes in fixed memory.
//!
//! How many different histories a run over many seeds produced says how much of the space it
//! covered, but remembering every hash would grow with the seeds. Linear counting (a bitmap of
//! 2^20 bits, 128 KiB, and the share of bits still zero) counts exactly in practice up to a few
//! thousand and within about 1 % up to millions, whatever the count.

/// Bits in the bitmap.
const BITS: usize = 1 << 20;

/// A distinct counter of 64-bit hashes.
#[derive(Clone, Debug)]
pub struct DistinctCount {
    bits: Vec<u64>,
    set: u64,
}

impl Default for DistinctCount {
    fn default() -> Self {
        DistinctCount {
            bits: vec![0; BITS / 64],
            set: 0,
        }
    }
}

impl DistinctCount {
    /// Adds one hash. The hash is mixed first (the splitmix64 finalizer) so that inputs whose
    /// low bits are structured still spread over the whole bitmap.
    pub fn add(&mut self, hash: u64) {
        let bit = (mix(hash) % BITS as u64) as usize;
        let (word, mask) = (bit / 64, 1u64 << (bit % 64));
        if self.bits[word] & mask == 0 {
            self.bits[word] |= mask;
            self.set += 1;
        }
    }

    /// The estimated number of distinct hashes added.
    pub fn count(&self) -> u64 {
        let zero = (BITS as u64 - self.set).max(1) as f64;
        let m = BITS as f64;
        (m * (m / zero).ln()).round() as u64
    }
}

/// The splitmix64 finalizer: a bijection on u64 whose output bits each depend on every input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_small_sets_exactly_and_large_ones_closely() {
        let mut c = DistinctCount::default();
        // Sequential integers: the worst case for a bitmap indexed by low bits, unless mixed.
        let hash = |i: u64| i;
        for i in 0..1000 {
            c.add(hash(i));
            c.add(hash(i));
        }
        // A collision or two among a thousand hashes in 2^20 bits is expected; the estimate
        // corrects for most of it.
        assert!(c.count().abs_diff(1000) <= 2, "{}", c.count());
        for i in 1000..200_000 {
            c.add(hash(i));
        }
        let n = c.count() as f64;
        assert!((n - 200_000.0).abs() < 2_000.0, "{n}");
    }
}
