//! What the placement measured: per (kernel, size class, device) the [`Samples`] of its runs —
//! the first runs' median, then a moving average, with the spread and the last two — and, per
//! model, the time runs and explorations took ([`Spent`]), what moving the stream to a device
//! costs ([`Moves`]) and how fast each device runs now against its histories' first runs
//! ([`Pace`]).

use serde::{Deserialize, Serialize};

/// What was measured for one (kernel, size class, device).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// Moving average of the seconds to result.
    pub mean_s: f64,
    /// Moving average of the squared deviation from the mean.
    pub var_s2: f64,
    /// How many samples were taken.
    pub count: u64,
    /// The latest sample, then the one before (0 while there is none).
    pub last_s: [f64; 2],
    /// The model's decision counter when it was last sampled (older entries go first).
    pub seen: u64,
    /// Moving average of the runs right after a run on another device, and their count.
    #[serde(default)]
    pub moved_s: (f64, u64),
    /// Moving average of the runs right after a run on the same device, and their count.
    #[serde(default)]
    pub stayed_s: (f64, u64),
    /// First runs taken as warm-up, not learned from ([`PlacementRules::warm_up_runs`](super::PlacementRules::warm_up_runs)).
    #[serde(default)]
    pub warm_ups: u32,
    /// The first samples learned from (up to [`FIRST_SAMPLES`]), in the order taken: until
    /// there are more, the mean is their median.
    #[serde(default)]
    pub first_s: [f64; FIRST_SAMPLES],
    /// The [`Pace`] of its device (ln) that its times stand at: while it holds only first
    /// samples, the pace they were taken or brought to; after, a moving average of the device's
    /// pace at its runs, as its mean is of their times (0: the device's first runs, before any
    /// pace was learned).
    #[serde(default)]
    pub pace_ln: f64,
    /// The pace its first samples stand at (what its later runs are set against to learn the
    /// device's pace).
    #[serde(default)]
    pub first_pace_ln: f64,
}

/// How many first samples of a history set its mean by their median before the moving average
/// takes over.
pub const FIRST_SAMPLES: usize = 8;

impl Samples {
    /// The spread: the square root of the moving variance, in seconds.
    pub fn spread_s(&self) -> f64 {
        self.var_s2.max(0.0).sqrt()
    }

    /// The worse of the last two samples (`None` with fewer than two).
    pub fn worst_of_two(&self) -> Option<f64> {
        (self.count >= 2).then(|| self.last_s[0].max(self.last_s[1]))
    }

    /// The better of the last two samples (`None` with fewer than two).
    pub fn best_of_two(&self) -> Option<f64> {
        (self.count >= 2).then(|| self.last_s[0].min(self.last_s[1]))
    }

    /// The fastest run kept: of the first [`FIRST_SAMPLES`] and the last two (`None` before any).
    pub fn best_s(&self) -> Option<f64> {
        let first = &self.first_s[..(self.count as usize).min(FIRST_SAMPLES)];
        let last = &self.last_s[..(self.count as usize).min(2)];
        first.iter().chain(last).copied().min_by(f64::total_cmp)
    }

    /// The median of the first samples (the mean while there are no more than
    /// [`FIRST_SAMPLES`]; `None` before any).
    pub fn first_median_s(&self) -> Option<f64> {
        let n = (self.count as usize).min(FIRST_SAMPLES);
        (n > 0).then(|| {
            let mut first = self.first_s;
            median(&mut first[..n])
        })
    }

    /// Multiplies every time kept by `factor`: the device's pace changed by that much since
    /// they were taken.
    pub(crate) fn rescale(&mut self, factor: f64) {
        let n = (self.count as usize).min(FIRST_SAMPLES);
        for value in &mut self.first_s[..n] {
            *value *= factor;
        }
        for value in &mut self.last_s {
            *value *= factor;
        }
        self.mean_s *= factor;
        self.var_s2 *= factor * factor;
        self.moved_s.0 *= factor;
        self.stayed_s.0 *= factor;
    }

    /// Learns one more sample. The first [`FIRST_SAMPLES`] set the mean by their median and the
    /// spread by their median absolute deviation; later ones move a moving average. A moving
    /// average started from its first sample carries it for many runs (after five samples at
    /// alpha 0.3 it still weighs a quarter): an H200's runs of saxpy n=16384 took 1.25 ms,
    /// then 0.25-0.38, and that average said 0.48 ms, which kept the workload on llvmpipe's 0.31.
    pub(crate) fn add(&mut self, seconds: f64, alpha: f64, tick: u64) {
        let n = self.count as usize;
        if n < FIRST_SAMPLES {
            self.first_s[n] = seconds;
            let mut first = self.first_s;
            let mean = median(&mut first[..=n]);
            let mut deviations = [0.0; FIRST_SAMPLES];
            for (deviation, value) in deviations.iter_mut().zip(&self.first_s[..=n]) {
                *deviation = (value - mean).abs();
            }
            // The median absolute deviation, scaled to a normal spread.
            let spread = 1.4826 * median(&mut deviations[..=n]);
            self.mean_s = mean;
            self.var_s2 = spread * spread;
        } else {
            // One run far above the rest (another process took the machine for a moment) moves
            // the average as a run of twice the mean (or three spreads above it) would: a
            // lasting slowdown is still learned, a few runs later.
            let ceiling = (2.0 * self.mean_s).max(self.mean_s + 3.0 * self.var_s2.max(0.0).sqrt());
            let seconds = seconds.min(ceiling);
            let delta = seconds - self.mean_s;
            self.mean_s += alpha * delta;
            self.var_s2 = (1.0 - alpha) * (self.var_s2 + alpha * delta * delta);
        }
        self.last_s = [seconds, self.last_s[0]];
        self.count += 1;
        self.seen = tick;
    }
}

/// The median of `values` (sorted in place; 0 for none).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let half = values.len() / 2;
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[half],
        _ => 0.5 * (values[half - 1] + values[half]),
    }
}

/// How fast a device runs now against the first runs of the histories it keeps running: a
/// moving average, over the runs of its established histories (more than [`FIRST_SAMPLES`]
/// samples) that stayed on it, of ln(run / the history's first samples' median) plus the pace
/// those first samples were taken at. A device's first stretch of work can run at another pace
/// than the rest: on the 2-core machine llvmpipe ran every run of the placement's first 14
/// passes (its first ~0.3 s of work after its programs were built) about twice as slow as
/// later; an H200's first runs of small problems took 1 ms against 0.2 later. A history learned
/// then and not run since (a workload another device won) keeps those times; judged at the
/// device's pace now, it is compared with what the winner does now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pace {
    /// The moving average (natural log; 0 is the pace of the device's first runs).
    pub ln: f64,
    /// Runs it was learned from.
    pub samples: u64,
}

/// The time of the runs a model learned from, and how much of it exploring took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Seconds of every run recorded.
    pub runs_s: f64,
    /// Seconds of the runs that were explorations.
    pub exploring_s: f64,
    /// Seconds of the runs of workloads that a trusted device already ran: the settled
    /// stream, explorations included, calibrations not. The exploration budget is a share of
    /// this: calibrating a slow device (llvmpipe's first runs of a large problem take hundreds
    /// of milliseconds) must not bank exploration time that the settled stream then pays.
    #[serde(default)]
    pub settled_s: f64,
}

impl Spent {
    /// Whether an exploration predicted to take `seconds` keeps explorations within `share`
    /// of the settled stream's time.
    pub fn allows(&self, seconds: f64, share: f64) -> bool {
        share >= 1.0 || self.exploring_s + seconds <= share * self.settled_s
    }
}

/// What a run on one device costs more right after a run on another device than right after one
/// on itself: moving averages over its workloads of the difference of the two kinds of run's
/// averages, in seconds and as a share of the run after its own device, with the number of
/// samples.
///
/// Both, because a move costs some runs a fixed time (the device's threads wake) and others a
/// share of the run (a GPU left idle while llvmpipe ran 150 ms comes back at lower clocks:
/// +0.5 ms on a 15 ms run, +0.03 ms on a 0.7 ms one). A workload's move is priced at the smaller
/// of the two: in seconds alone, the largest workloads' differences priced the moves of small
/// ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Moves {
    /// Moving average of the difference.
    pub cost_s: f64,
    /// Samples of it.
    pub samples: u64,
    /// Moving average of the difference as a share of the run after one on the same device.
    #[serde(default)]
    pub share: f64,
}

/// Samples before a device's move cost is believed.
const MOVE_SAMPLES: u64 = 3;

impl Moves {
    /// What moving the stream to the device costs its next run (0 until three
    /// samples were taken).
    pub fn cost_s(&self) -> f64 {
        if self.samples < MOVE_SAMPLES {
            return 0.0;
        }
        self.cost_s.max(0.0)
    }

    /// What moving the stream to the device costs its next run when that run takes `run_s`
    /// after one of its own: the smaller of the learned time and the learned share of `run_s`
    /// (0 until three samples were taken).
    pub fn cost_of_s(&self, run_s: f64) -> f64 {
        self.cost_s().min(self.share.max(0.0) * run_s.max(0.0))
    }

    /// The inverse of [`cost_of_s`](Self::cost_of_s): what a run that took `moved_s` right
    /// after a run on another device takes right after one on this device — the time `t` with
    /// `t + cost_of_s(t) = moved_s` (`moved_s` itself until three samples were taken). Never
    /// below zero: subtracting the move priced at the moved run itself instead left a workload
    /// "staying" on the simulator at -0.24 ms on the 2-core machine.
    pub fn stayed_of_s(&self, moved_s: f64) -> f64 {
        let moved_s = moved_s.max(0.0);
        // Priced at the smaller of the two, so the run is the larger of the two inverses.
        (moved_s - self.cost_s()).max(moved_s / (1.0 + self.share.max(0.0)))
    }
}

/// Adds `value` to the moving average `average` of `count` samples.
pub(crate) fn average_in(average: &mut (f64, u64), value: f64, alpha: f64) {
    if average.1 == 0 {
        average.0 = value;
    } else {
        average.0 += alpha * (value - average.0);
    }
    average.1 += 1;
}

#[cfg(test)]
mod tests {
    use super::Moves;

    #[test]
    fn a_moved_run_less_its_move_is_the_run_whose_move_it_prices() {
        for moves in [
            Moves { cost_s: 441e-6, samples: 5, share: 2.1 },
            Moves { cost_s: 30e-6, samples: 5, share: 0.2 },
            Moves { cost_s: -50e-6, samples: 5, share: -0.1 },
        ] {
            for moved in [50e-6, 205e-6, 1e-3, 20e-3] {
                let stayed = moves.stayed_of_s(moved);
                assert!(stayed > 0.0 && stayed <= moved, "{moves:?} {moved} -> {stayed}");
                let back = stayed + moves.cost_of_s(stayed);
                assert!((back - moved).abs() < 1e-12, "{moves:?} {moved} -> {stayed} -> {back}");
            }
        }
        // Not believed before three samples.
        let early = Moves { cost_s: 100e-6, samples: 2, share: 0.5 };
        assert_eq!(early.stayed_of_s(1e-3), 1e-3);
    }
}
