//! A placement's choice for one run and why: each device's [`Prediction`] (heuristic or learned),
//! the [`Reason`], and what was weighed, printed by `sparkle run … --explain`.

use std::fmt;

use super::placement_inputs::SizeClass;
use super::placement_samples::Samples;

/// Where a device's prediction came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The heuristic (too few samples to trust).
    Heuristic,
    /// The measured history.
    Learned,
}

/// One device's prediction for a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The device's label (`gl`, `amdgpu-sim`, …).
    pub device: String,
    /// Predicted seconds to result.
    pub seconds: f64,
    /// Where the prediction came from.
    pub basis: Basis,
    /// The history, if any sample was taken.
    pub samples: Option<Samples>,
    /// The factor the history's times were multiplied by to stand at its device's pace now
    /// (1: none; see [`Pace`](super::Pace)).
    pub pace: f64,
}

/// Why a device was chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// The user pinned the kernel to it.
    Pinned,
    /// It is being measured until its history is trusted.
    Calibrating,
    /// It was the best prediction and nothing ran the workload before.
    Best,
    /// It already runs the workload and no other device was clearly faster.
    Kept,
    /// Another device was faster by the margin in the worse of its last two runs.
    Switched {
        /// The device the workload ran on before.
        from: String,
    },
    /// A losing device re-tried, to notice a change.
    Exploring,
    /// The only device.
    Only,
}

/// The choice for one workload, with every device's prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Index of the chosen device in the placement's device list.
    pub device: usize,
    /// Why.
    pub reason: Reason,
    /// Every device's prediction, in the placement's order.
    pub predictions: Vec<Prediction>,
    /// The workload's size class.
    pub size_class: SizeClass,
    /// Per device, in the placement's order, what the choice weighed where it weighed learned
    /// times: the device's time with the stream staying on it, and what moving the stream there
    /// and back costs (empty for a pinned kernel, a single device or a calibration).
    pub weighed: Vec<(f64, f64)>,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "size class {}", self.size_class)?;
        for (i, p) in self.predictions.iter().enumerate() {
            let mark = if i == self.device { "*" } else { " " };
            let basis = match p.basis {
                Basis::Heuristic => "heuristic",
                Basis::Learned => "learned",
            };
            write!(f, "{mark} {:<12} predicted {:>12} ({basis})", p.device, seconds(p.seconds))?;
            match &p.samples {
                // Only warm-up runs so far: nothing learned yet.
                Some(s) if s.count == 0 => writeln!(
                    f,
                    ", no samples yet ({} warm-up run{} not learned from)",
                    s.warm_ups,
                    if s.warm_ups == 1 { "" } else { "s" }
                )?,
                Some(s) => writeln!(
                    f,
                    ", {} sample(s), mean {} ± {}, last two {} / {}",
                    s.count,
                    seconds(s.mean_s),
                    seconds(s.spread_s()),
                    seconds(s.last_s[0]),
                    if s.count >= 2 { seconds(s.last_s[1]) } else { "-".into() }
                )?,
                None => writeln!(f, ", no samples")?,
            }
            // A history the device keeps running stands within a hair of the pace: said only
            // where the factor shows in the two decimals printed.
            if (p.pace - 1.0).abs() >= 0.005 {
                writeln!(
                    f,
                    "               learned at another pace of its device: its times x{:.2} now",
                    p.pace
                )?;
            }
            if let Some((staying, moves)) = self.weighed.get(i).filter(|_| p.basis == Basis::Learned) {
                writeln!(
                    f,
                    "               staying on it {}, moving there and back {}",
                    seconds(*staying),
                    seconds(*moves)
                )?;
            }
        }
        let chosen = self.predictions.get(self.device).map_or("?", |p| p.device.as_str());
        let why = match &self.reason {
            Reason::Pinned => "pinned by the user".to_owned(),
            Reason::Calibrating => "calibrating (too few samples to trust)".to_owned(),
            Reason::Best => "best prediction".to_owned(),
            Reason::Kept => "already runs it; no device clearly faster".to_owned(),
            Reason::Switched { from } => {
                format!("switched from {from}: faster by the margin in the worse of two runs")
            }
            Reason::Exploring => "exploring: re-trying a losing device".to_owned(),
            Reason::Only => "the only device".to_owned(),
        };
        write!(f, "choice: {chosen} ({why})")
    }
}

fn seconds(value: f64) -> String {
    if value >= 1.0 {
        format!("{value:.3} s")
    } else if value >= 1e-3 {
        format!("{:.3} ms", value * 1e3)
    } else {
        format!("{:.1} µs", value * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::placement_samples::FIRST_SAMPLES;

    fn samples(count: u64, warm_ups: u32) -> Samples {
        Samples {
            mean_s: 1e-3,
            var_s2: 0.0,
            count,
            last_s: [1e-3, 1e-3],
            seen: 1,
            moved_s: (0.0, 0),
            stayed_s: (0.0, 0),
            warm_ups,
            first_s: [1e-3; FIRST_SAMPLES],
            pace_ln: 0.0,
            first_pace_ln: 0.0,
        }
    }

    #[test]
    fn an_explanation_says_when_a_device_ran_only_warm_ups() {
        let prediction = |device: &str, samples| Prediction {
            device: device.into(),
            seconds: 1e-3,
            basis: Basis::Heuristic,
            samples: Some(samples),
            pace: 1.0,
        };
        let decision = Decision {
            device: 0,
            reason: Reason::Calibrating,
            predictions: vec![prediction("gl", samples(0, 1)), prediction("amdgpu-sim", samples(2, 1))],
            size_class: SizeClass { flops: 11, bytes: 14 },
            weighed: Vec::new(),
        };
        let text = decision.to_string();
        assert!(
            text.contains("gl           predicted")
                && text.contains("no samples yet (1 warm-up run not learned from)"),
            "{text}"
        );
        assert!(text.contains("2 sample(s), mean 1.000 ms"), "{text}");
        assert!(!text.contains("0 sample(s)"), "{text}");
        assert!(!text.contains("pace"), "{text}");
    }

    #[test]
    fn an_explanation_says_when_a_history_is_judged_at_its_device_s_pace_now() {
        let prediction = |device: &str, pace| Prediction {
            device: device.into(),
            seconds: 1e-3 * pace,
            basis: Basis::Learned,
            samples: Some(samples(6, 0)),
            pace,
        };
        let decision = Decision {
            device: 0,
            reason: Reason::Kept,
            predictions: vec![prediction("gl", 1.0), prediction("amdgpu-sim", 0.5)],
            size_class: SizeClass { flops: 11, bytes: 14 },
            weighed: vec![(1e-3, 0.0), (0.5e-3, 0.2e-3)],
        };
        let text = decision.to_string();
        assert_eq!(text.matches("learned at another pace").count(), 1, "{text}");
        assert!(text.contains("its times x0.50 now"), "{text}");
    }
}
