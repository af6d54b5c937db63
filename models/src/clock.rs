//! Node clocks as functions of true time.
//!
//! True time `t` is the model's global tick counter. A node's clock reads
//! `t + offset + drift(t) + jumped`, where `drift(t)` gains (fast clock) or
//! loses (slow clock) one tick every `drift_period` ticks of true time, and
//! `jumped` is the sum of the step jumps the trace has applied so far (a
//! state variable). Keeping the clock a function of `t` (rather than a free
//! state variable) keeps states small: only jumps add state.

/// A clock's fixed shape: offset and drift rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Clock {
    /// Ticks added at true time 0.
    pub offset: i16,
    /// +1: the clock runs fast, -1: slow, 0: exact.
    pub drift: i8,
    /// One tick gained or lost per this many ticks of true time (≥ 2).
    pub drift_period: u8,
}

impl Clock {
    /// True time: no offset, no drift, no jumps.
    pub const EXACT: Clock = Clock {
        offset: 0,
        drift: 0,
        drift_period: 0,
    };

    /// A clock that gains (`drift = 1`) or loses (`drift = -1`) one tick per
    /// `period` ticks.
    pub fn drifting(drift: i8, period: u8) -> Clock {
        if drift == 0 || period == 0 {
            return Clock::EXACT;
        }
        Clock {
            offset: 0,
            drift: drift.signum(),
            drift_period: period,
        }
    }

    /// The clock's reading at true time `t` after `jumped` ticks of jumps.
    #[inline]
    pub fn at(&self, t: u8, jumped: i16) -> i16 {
        let d = if self.drift == 0 || self.drift_period == 0 {
            0
        } else {
            self.drift as i16 * (t as i16 / self.drift_period as i16)
        };
        t as i16 + self.offset + d + jumped
    }

    /// The drift rate in parts per million, for a scenario's `clock_drift`.
    pub fn ppm(&self) -> i64 {
        if self.drift == 0 || self.drift_period == 0 {
            0
        } else {
            self.drift as i64 * 1_000_000 / self.drift_period as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_and_jumps() {
        let fast = Clock::drifting(1, 4);
        assert_eq!(
            (0..9).map(|t| fast.at(t, 0)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 5, 6, 7, 8, 10]
        );
        let slow = Clock::drifting(-1, 4);
        assert_eq!(slow.at(8, 0), 6);
        assert_eq!(Clock::EXACT.at(3, 5), 8);
        assert_eq!(fast.ppm(), 250_000);
    }
}
