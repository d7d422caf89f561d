//! The decision rule of [`Placement`](super::Placement), kept apart from any device so that it
//! can be driven with programmable costs: which device a workload should run on, predicted from
//! a heuristic until measured times are trusted, then from what was measured.
//!
//! Per device the heuristic is `launch + flops / flop rate + bytes / byte rate` ([`DeviceCosts`],
//! defaults by [`DeviceClass`](crate::hal::DeviceClass)), scaled by how far off it has been on that device so far (an
//! exponential moving average of measured / predicted, in log space). Per (kernel key, size
//! class, device) the model keeps the measured time to result — the median of the first
//! [`FIRST_SAMPLES`] runs, then an exponential moving average, the method of the framework
//! Sparkle grew from — with its spread, the sample count and the last two samples. A device's history is trusted after [`PlacementRules::trust_after`]
//! samples (StarPU waits for 10); until then, devices whose prediction is within
//! [`PlacementRules::calibrate_within`] of the best are run in turn to calibrate them, and the
//! best trusted one then runs the workload (from then on, an untrusted device is tried only on
//! the exploration budget, so that one noisy run does not start a calibration). The workload
//! stays on its current device unless another one was faster by
//! [`PlacementRules::switch_margin`] in the *worse* of its last two runs (hipfire's 1.03× rule),
//! and every [`PlacementRules::explore_every`]-th decision re-tries a losing device so that a
//! change (clocks, load, driver) is noticed. What learning and exploring cost a stream is kept
//! small: a device whose first runs of a workload were clearly slower than another's
//! ([`PlacementRules::rule_out_factor`]) is not calibrated to the end (exploration may still try
//! it, and one that finds it faster than staying on the current device, the moves there and back
//! counted, calibrates it after all), and each exploration that finds the losing device still
//! clearly slower doubles the gap to the next one, up to
//! [`PlacementRules::explore_backoff_max`] doublings; one that finds it close starts the regular budget again. Exploration is also budgeted in time: explorations of
//! all workloads together take at most [`PlacementRules::explore_share`] of the time of the
//! settled stream's runs (of workloads a trusted device runs; [`Spent`]), an exploration costed at
//! the fastest run its device showed for the workload, else its prediction, and counted at what
//! it took — a device 100× slower cannot cost a stream more than that share. What is counted is
//! the explored runs themselves; the move back that the next run on the workload's device pays
//! is not (on the 2-core machine, llvmpipe beside the simulator, it added about half as much
//! again). Counting it too was tried: with explorations that much rarer, a shape settled on the
//! wrong device was brought back less often, and the stream was no faster (six runs each).
//! When several trusted devices are within the switch margin of the best for a new workload, it
//! goes to the one most other workloads run on: moving
//! a stream between devices for no clear gain costs the wake-up of the other device's threads
//! (measured: 15-20 µs per move between two H200s). That cost is also learned per device — how
//! much its runs right after a run elsewhere exceed those right after its own
//! ([`Moves`], in seconds and as a share of the run, a move priced at the smaller; "elsewhere"
//! as the [`Placement`](super::Placement) saw it: work on another device, through it or not,
//! [`record_after`](PlacementModel::record_after)) — and a
//! workload runs away from the device most workloads run on only when its time there plus the
//! moves there and back still wins by the margin (on llvmpipe beside the simulator, sharing two
//! cores, a move costs about 0.1 ms; a GPU left idle comes back about 10% slower). A device's
//! first stretch of work can run at another pace than the rest (llvmpipe on the 2-core machine
//! ran its first ~0.3 s of runs about twice as slow, an H200 its first small problems five
//! times), so each device also learns its [`Pace`]: how its established histories' runs compare
//! with their own first runs. Each history keeps the pace its times stand at, and a device's
//! history of a workload another device runs is judged at the device's pace now: one it stopped
//! running during a slow stretch (a workload another device won during learning) is no longer
//! held to that stretch. A history of first runs is brought to the pace when it runs again.
//! Everything here is deterministic: no clock, no random numbers.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::placement_decision::{Basis, Decision, Prediction, Reason};
use super::placement_inputs::{DeviceCosts, ModelDevice, SizeClass, Workload};
use super::placement_samples::{average_in, Moves, Pace, Samples, Spent, FIRST_SAMPLES};

/// Runs right after one on the same device that a workload's history needs before their
/// average stands for its time with the stream staying on the device (one may be a spike).
const STAYED_SAMPLES: u64 = 2;

/// Weight of one run in a device's [`Pace`]: a device runs several workloads, each of whose
/// first runs stood at its own distance from the device's pace, so one run moves it a little.
const PACE_ALPHA: f64 = 0.1;

/// Runs a device's pace is learned from before a history is judged at it.
const PACE_SAMPLES: u64 = 3;

/// At most this factor (either way) between a history's times and the same runs at its
/// device's pace now.
const PACE_LIMIT: f64 = 4.0;

/// The knobs of the decision rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlacementRules {
    /// Samples after which a device's history for a workload is trusted over the heuristic.
    pub trust_after: u32,
    /// Weight of a new sample in the moving average (0 < alpha ≤ 1).
    pub alpha: f64,
    /// How much faster, in the worse of its last two runs, another device must have been for a
    /// workload to move to it.
    pub switch_margin: f64,
    /// Every this many decisions of a workload, one re-tries a losing device (0: never).
    pub explore_every: u32,
    /// Untrusted devices predicted within this factor of the best are calibrated (run until
    /// trusted); slower ones are not tried at all.
    pub calibrate_within: f64,
    /// Losing devices whose time was within this factor of the current device's are re-tried
    /// by exploration; slower ones are not.
    pub explore_within: f64,
    /// An untrusted device whose better of its last two runs of a workload was slower than this
    /// factor times another device's worse of its last two is not calibrated further (infinite:
    /// every device within [`calibrate_within`](Self::calibrate_within) is calibrated to the
    /// end). Four: on an H200 beside llvmpipe, a GPU's learning runs of a small problem took
    /// 3-5x its later ones (1.07 and 1.02 ms, then 0.19; its clocks held or not, the cause not
    /// found), and at two that ruled it out against llvmpipe's 0.4 ms.
    pub rule_out_factor: f64,
    /// At most this many doublings of the gap between explorations of a workload whose losing
    /// device keeps losing by the switch margin (0: the gap never grows).
    pub explore_backoff_max: u32,
    /// Explorations of all workloads together take at most this share of the time of the
    /// settled stream so far (the runs of workloads a trusted device runs, explorations
    /// included, calibrations not; [`Spent::settled_s`]): one is taken only when the time
    /// explorations took, plus the explored device's cost (what it measured for the workload,
    /// else its prediction), stays within it (1.0 or more: no cap beyond the counts). Counting
    /// decisions alone would let a device 100× slower cost a stream 5× its time at one
    /// exploration in 20.
    pub explore_share: f64,
    /// Each device's first runs of a workload that are not learned from: they pay for first
    /// use (buffers of a new size allocated and first touched, the driver building the
    /// variant a new state needs), which the stream's later runs do not. On an H200 beside
    /// llvmpipe such first runs kept a learned mean at 1.8 ms while the runs took 1.0-1.1 ms.
    pub warm_up_runs: u32,
}

impl Default for PlacementRules {
    fn default() -> Self {
        PlacementRules {
            trust_after: 5,
            alpha: 0.3,
            switch_margin: 1.03,
            explore_every: 20,
            calibrate_within: 8.0,
            explore_within: 4.0,
            rule_out_factor: 4.0,
            explore_backoff_max: 4,
            explore_share: 0.02,
            warm_up_runs: 1,
        }
    }
}

/// The learned state: per workload (kernel, size class) its history on each device and the
/// device running it; per device its heuristic's scale, measured costs and move costs.
/// Serialized as the placement's history file, in the first format's form (`StoredModel`).
///
/// Laid out for the placed run's path: a decision and its record right after a device run find
/// the model cold in the caches, and each string key compared costs a miss. A workload is found
/// by one hash of its kernel's name and a scan of that kernel's size classes, its devices' samples
/// side by side, and what is learned of each device in one short vector. On an H200 a decision
/// and its record right after a device run take 2.0-4.4 µs (0.44 warm); the string-keyed maps
/// this replaced took 4.6-8.5 µs (about 2 warm).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StoredModel", into = "StoredModel")]
pub struct PlacementModel {
    /// Kernel → its workloads, one per size class.
    pub(crate) workloads: HashMap<String, Vec<WorkloadState>>,
    /// What is learned of each device beside its histories, in the order of the labels.
    pub(crate) devices: Vec<DeviceState>,
    /// Kernel → the device it is pinned to (not kept across processes).
    pub(crate) pins: BTreeMap<String, String>,
    /// The device of the latest run recorded (not kept across processes).
    pub(crate) last_device: Option<String>,
    /// Decisions and samples taken, for ordering entries by age.
    pub(crate) tick: u64,
    /// Seconds of every run recorded, and of those that were explorations (a run of a workload
    /// on another device than the trusted one running it): the time budget of exploration.
    pub(crate) spent: Spent,
}

/// What the model keeps of one device beside its histories. (Side by side in one vector: a
/// decision reads all of it for each device, and a map per field cost a cold miss per key
/// compared.)
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DeviceState {
    /// The device's label.
    pub(crate) label: String,
    /// How many workloads it runs (their current device), kept as they change.
    pub(crate) homes: usize,
    /// Moving average of ln(measured / heuristic).
    pub(crate) scale: Option<f64>,
    /// Its heuristic costs as measured by [`Placement::calibrate`](super::Placement::calibrate).
    pub(crate) costs: Option<DeviceCosts>,
    /// How its runs right after a run on another device and right after one on itself differ
    /// from their learned means (what moving the stream to it costs).
    pub(crate) moves: Option<Moves>,
    /// How fast it runs now against its established histories' first runs.
    pub(crate) pace: Option<Pace>,
}

/// The state of the device labelled `label` in `devices` (kept in the order of the labels),
/// made if there is none.
fn device_in<'a>(devices: &'a mut Vec<DeviceState>, label: &str) -> &'a mut DeviceState {
    let at = match devices.iter().position(|d| d.label == label) {
        Some(at) => at,
        None => {
            let at = devices.partition_point(|d| d.label.as_str() < label);
            devices.insert(at, DeviceState { label: label.to_owned(), ..DeviceState::default() });
            at
        }
    };
    &mut devices[at]
}

/// What the model keeps for one workload: a kernel's problems of one size class.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct WorkloadState {
    /// Its size class.
    pub(crate) class: SizeClass,
    /// Per device label, its samples (in the order the devices were first sampled).
    pub(crate) samples: Vec<(String, Samples)>,
    /// The device running it, once a trusted one was chosen.
    pub(crate) current: Option<String>,
    /// Decisions taken (for exploration).
    pub(crate) decisions: u64,
    /// The decision count of its last exploration.
    pub(crate) explored_at: u64,
    /// Doublings of its exploration gap (explorations in a row that found the losing device
    /// still losing by the switch margin).
    pub(crate) backoff: u32,
}

impl WorkloadState {
    fn samples_of(&self, device: &str) -> Option<&Samples> {
        self.samples.iter().find(|(label, _)| label == device).map(|(_, samples)| samples)
    }
}

/// The history file's form of a [`PlacementModel`]: maps keyed by `kernel|size class` and
/// `kernel|size class|device`, as the format's first version wrote them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct StoredModel {
    /// `kernel|size class|device` → samples.
    entries: BTreeMap<String, Samples>,
    /// `kernel|size class` → the device running it.
    current: BTreeMap<String, String>,
    /// `kernel|size class` → decisions taken.
    decisions: BTreeMap<String, u64>,
    /// `kernel|size class` → the decision count of its last exploration.
    #[serde(default)]
    explored_at: BTreeMap<String, u64>,
    /// `kernel|size class` → doublings of its exploration gap.
    #[serde(default)]
    backoff: BTreeMap<String, u32>,
    scale: BTreeMap<String, f64>,
    #[serde(default)]
    costs: BTreeMap<String, DeviceCosts>,
    #[serde(default)]
    moves: BTreeMap<String, Moves>,
    #[serde(default)]
    paces: BTreeMap<String, Pace>,
    tick: u64,
    #[serde(default)]
    spent: Spent,
}

impl From<PlacementModel> for StoredModel {
    fn from(model: PlacementModel) -> StoredModel {
        let mut stored = StoredModel { tick: model.tick, spent: model.spent, ..StoredModel::default() };
        for device in model.devices {
            let label = device.label;
            if let Some(scale) = device.scale {
                stored.scale.insert(label.clone(), scale);
            }
            if let Some(costs) = device.costs {
                stored.costs.insert(label.clone(), costs);
            }
            if let Some(moves) = device.moves {
                stored.moves.insert(label.clone(), moves);
            }
            if let Some(pace) = device.pace {
                stored.paces.insert(label, pace);
            }
        }
        for (kernel, states) in model.workloads {
            for state in states {
                let key = format!("{kernel}|{}", state.class);
                for (device, samples) in state.samples {
                    stored.entries.insert(format!("{key}|{device}"), samples);
                }
                if let Some(current) = state.current {
                    stored.current.insert(key.clone(), current);
                }
                if state.decisions > 0 {
                    stored.decisions.insert(key.clone(), state.decisions);
                }
                if state.explored_at > 0 {
                    stored.explored_at.insert(key.clone(), state.explored_at);
                }
                if state.backoff > 0 {
                    stored.backoff.insert(key, state.backoff);
                }
            }
        }
        stored
    }
}

impl TryFrom<StoredModel> for PlacementModel {
    type Error = String;

    fn try_from(stored: StoredModel) -> Result<PlacementModel, String> {
        let mut model =
            PlacementModel { tick: stored.tick, spent: stored.spent, ..PlacementModel::default() };
        for (label, scale) in stored.scale {
            device_in(&mut model.devices, &label).scale = Some(scale);
        }
        for (label, costs) in stored.costs {
            device_in(&mut model.devices, &label).costs = Some(costs);
        }
        for (label, moves) in stored.moves {
            device_in(&mut model.devices, &label).moves = Some(moves);
        }
        for (label, pace) in stored.paces {
            device_in(&mut model.devices, &label).pace = Some(pace);
        }
        fn made<'a>(
            workloads: &'a mut HashMap<String, Vec<WorkloadState>>,
            kernel: &str,
            class: SizeClass,
        ) -> Result<&'a mut WorkloadState, String> {
            PlacementModel::state_mut(workloads, kernel, class)
                .ok_or_else(|| format!("no room for `{kernel}|{class}`"))
        }
        let workload = |key: &str| -> Result<(String, SizeClass), String> {
            let (kernel, class) =
                key.rsplit_once('|').ok_or_else(|| format!("`{key}` names no size class"))?;
            Ok((kernel.to_owned(), class.parse()?))
        };
        for (key, samples) in stored.entries {
            let (workload_key, device) =
                key.rsplit_once('|').ok_or_else(|| format!("`{key}` names no device"))?;
            let (kernel, class) = workload(workload_key)?;
            made(&mut model.workloads, &kernel, class)?.samples.push((device.to_owned(), samples));
        }
        for (key, current) in stored.current {
            let (kernel, class) = workload(&key)?;
            made(&mut model.workloads, &kernel, class)?.current = Some(current);
        }
        for (key, decisions) in stored.decisions {
            let (kernel, class) = workload(&key)?;
            made(&mut model.workloads, &kernel, class)?.decisions = decisions;
        }
        for (key, explored_at) in stored.explored_at {
            let (kernel, class) = workload(&key)?;
            made(&mut model.workloads, &kernel, class)?.explored_at = explored_at;
        }
        for (key, backoff) in stored.backoff {
            let (kernel, class) = workload(&key)?;
            made(&mut model.workloads, &kernel, class)?.backoff = backoff;
        }
        model.count_homes();
        Ok(model)
    }
}

/// The factor between times taken at the pace `from_ln` and the same runs at `to_ln`, within
/// [`PACE_LIMIT`] either way.
fn pace_change(from_ln: f64, to_ln: f64) -> f64 {
    let limit = PACE_LIMIT.ln();
    (to_ln - from_ln).clamp(-limit, limit).exp()
}

/// What a decision changes in its workload's state besides counting itself.
enum Change {
    /// Nothing more.
    Counted,
    /// The decision is an exploration.
    Explored,
    /// The device of this index in the decision's devices runs the workload from now on.
    Runs(usize),
    /// The workload switched to the device of this index: its exploration gap starts again.
    Switched(usize),
}

impl PlacementModel {
    /// An empty model.
    pub fn new() -> PlacementModel {
        PlacementModel::default()
    }

    /// Runs `kernel` on the device labelled `device` whatever was measured.
    pub fn pin(&mut self, kernel: &str, device: &str) {
        self.pins.insert(kernel.to_owned(), device.to_owned());
    }

    /// Lets the model choose for `kernel` again.
    pub fn unpin(&mut self, kernel: &str) {
        self.pins.remove(kernel);
    }

    /// What is learned of the device labelled `label` beside its histories, if anything.
    fn device(&self, label: &str) -> Option<&DeviceState> {
        self.devices.iter().find(|d| d.label == label)
    }

    /// The measured heuristic costs of `device`, if it was calibrated.
    pub fn measured_costs(&self, device: &str) -> Option<DeviceCosts> {
        self.device(device)?.costs
    }

    /// Keeps `costs` as the measured heuristic costs of `device`.
    pub fn set_measured_costs(&mut self, device: &str, costs: DeviceCosts) {
        device_in(&mut self.devices, device).costs = Some(costs);
    }

    /// The time of the runs recorded, and of the explorations among them.
    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// What moving the stream to `device` costs its next run, as measured (0 while unknown).
    pub fn move_cost(&self, device: &str) -> f64 {
        self.moves_of(device).map_or(0.0, |moves| moves.cost_s())
    }

    /// What was learned of moving the stream to `device`, if anything.
    pub fn moves_of(&self, device: &str) -> Option<Moves> {
        self.device(device)?.moves
    }

    /// What moving the stream to `device` costs a next run there of `run_s` (see [`Moves`]).
    pub fn move_cost_of(&self, device: &str, run_s: f64) -> f64 {
        self.moves_of(device).map_or(0.0, |moves| moves.cost_of_s(run_s))
    }

    /// How fast `device` runs now against its established histories' first runs, if that was
    /// learned ([`Pace`]).
    pub fn pace_of(&self, device: &str) -> Option<Pace> {
        self.device(device)?.pace
    }

    /// The factor that brings `samples` of `device` to the device's pace now: e^(pace now -
    /// pace of its times), within [`PACE_LIMIT`] either way; 1 while the pace is not learned,
    /// and for the device running the workload (`running`): its runs keep its history at the
    /// pace, and a pace learned off (a device's first runs of a workload mix in the moves of
    /// calibration) must not make the device running it look faster than it runs.
    fn pace_factor(&self, device: &str, samples: &Samples, running: bool) -> f64 {
        if running {
            return 1.0;
        }
        pace_change(samples.pace_ln, self.pace_now(device))
    }

    /// The pace `device` runs at now (ln): 0, the pace of its first runs, until it was learned
    /// from [`PACE_SAMPLES`] runs (a history's times stand at 0 until then too).
    fn pace_now(&self, device: &str) -> f64 {
        self.pace_of(device).filter(|pace| pace.samples >= PACE_SAMPLES).map_or(0.0, |pace| pace.ln)
    }

    /// How many (kernel, size class, device) histories are kept.
    pub fn len(&self) -> usize {
        self.workloads.values().flatten().map(|state| state.samples.len()).sum()
    }

    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples of `workload` on `device`, if any.
    pub fn samples(&self, workload: &Workload, device: &str) -> Option<Samples> {
        self.state(&workload.kernel, workload.size_class())?.samples_of(device).copied()
    }

    /// The state of `kernel`'s workload of size class `class`, if there is one.
    fn state(&self, kernel: &str, class: SizeClass) -> Option<&WorkloadState> {
        self.workloads.get(kernel)?.iter().find(|state| state.class == class)
    }

    /// The state of `kernel`'s workload of size class `class` in `workloads`, made if there is
    /// none (`None` only if the map lost what it was just given). The kernel's name is copied
    /// only when it is new.
    fn state_mut<'a>(
        workloads: &'a mut HashMap<String, Vec<WorkloadState>>,
        kernel: &str,
        class: SizeClass,
    ) -> Option<&'a mut WorkloadState> {
        let classes = if workloads.contains_key(kernel) {
            workloads.get_mut(kernel)?
        } else {
            workloads.entry(kernel.to_owned()).or_default()
        };
        let at = match classes.iter().position(|state| state.class == class) {
            Some(at) => at,
            None => {
                classes.push(WorkloadState { class, ..WorkloadState::default() });
                classes.len() - 1
            }
        };
        classes.get_mut(at)
    }

    /// Counts again how many workloads each device runs.
    pub(crate) fn count_homes(&mut self) {
        for device in &mut self.devices {
            device.homes = 0;
        }
        for state in self.workloads.values().flatten() {
            if let Some(current) = &state.current {
                device_in(&mut self.devices, current).homes += 1;
            }
        }
    }

    /// Each device's prediction for `workload`, without deciding anything.
    pub fn predict(
        &self,
        workload: &Workload,
        devices: &[ModelDevice],
        rules: &PlacementRules,
    ) -> Vec<Prediction> {
        self.predict_in(workload, self.state(&workload.kernel, workload.size_class()), devices, rules)
    }

    /// [`predict`](Self::predict) from the workload's state, found once.
    fn predict_in(
        &self,
        workload: &Workload,
        state: Option<&WorkloadState>,
        devices: &[ModelDevice],
        rules: &PlacementRules,
    ) -> Vec<Prediction> {
        devices
            .iter()
            .map(|d| {
                let samples = state.and_then(|state| state.samples_of(&d.label)).copied();
                match samples {
                    Some(s) if s.count >= u64::from(rules.trust_after.max(1)) => {
                        let running =
                            state.and_then(|state| state.current.as_deref()) == Some(d.label.as_str());
                        let pace = self.pace_factor(&d.label, &s, running);
                        Prediction {
                            device: d.label.clone(),
                            seconds: s.mean_s * pace,
                            basis: Basis::Learned,
                            samples,
                            pace,
                        }
                    }
                    _ => {
                        let factor = self.device(&d.label).and_then(|d| d.scale).map_or(1.0, f64::exp);
                        Prediction {
                            device: d.label.clone(),
                            seconds: d.costs.predict(workload) * factor,
                            basis: Basis::Heuristic,
                            samples,
                            pace: 1.0,
                        }
                    }
                }
            })
            .collect()
    }

    /// Chooses the device for the next run of `workload` (and counts the decision).
    pub fn choose(
        &mut self,
        workload: &Workload,
        devices: &[ModelDevice],
        rules: &PlacementRules,
    ) -> Decision {
        let class = workload.size_class();
        let state = self.state(&workload.kernel, class);
        let predictions = self.predict_in(workload, state, devices, rules);
        // What the decision reads of the workload's state: its count, its last exploration, the
        // doublings of its gap and the index of the device running it.
        let (decisions, last, backoff, running) = state.map_or((0, 0, 0, None), |s| {
            let running =
                s.current.as_deref().and_then(|label| devices.iter().position(|d| d.label == label));
            (s.decisions, s.explored_at, s.backoff, running)
        });
        let decision =
            |device: usize, reason: Reason, predictions: Vec<Prediction>, weighed: Vec<(f64, f64)>| {
                Decision { device, reason, predictions, size_class: class, weighed }
            };
        if let Some(pinned) = self.pins.get(&workload.kernel) {
            if let Some(i) = devices.iter().position(|d| &d.label == pinned) {
                return decision(i, Reason::Pinned, predictions, Vec::new());
            }
        }
        if devices.len() <= 1 {
            return decision(0, Reason::Only, predictions, Vec::new());
        }
        self.tick += 1;
        let count = decisions + 1;
        let (device, reason, weighed, change) =
            self.weigh(&predictions, devices, rules, (count, last, backoff, running));
        self.settle(&workload.kernel, class, devices, count, change);
        decision(device, reason, predictions, weighed)
    }

    /// Counts a decision of the workload of `kernel` and `class` and applies what it changes.
    fn settle(
        &mut self,
        kernel: &str,
        class: SizeClass,
        devices: &[ModelDevice],
        count: u64,
        change: Change,
    ) {
        let Some(state) = Self::state_mut(&mut self.workloads, kernel, class) else { return };
        state.decisions = count;
        let runs = match change {
            Change::Counted => None,
            Change::Explored => {
                state.explored_at = count;
                None
            }
            Change::Runs(i) => Some(i),
            Change::Switched(i) => {
                state.backoff = 0;
                Some(i)
            }
        };
        let Some(label) = runs.and_then(|i| devices.get(i)).map(|d| d.label.as_str()) else { return };
        if state.current.as_deref() == Some(label) {
            return;
        }
        if let Some(before) = state.current.take() {
            let before = device_in(&mut self.devices, &before);
            before.homes = before.homes.saturating_sub(1);
        }
        state.current = Some(label.to_owned());
        device_in(&mut self.devices, label).homes += 1;
    }

    /// The rule itself: for a workload's `predictions` on `devices` and what its state says —
    /// `(count, last, backoff, running)`: this decision's count, that of its last exploration,
    /// the doublings of its exploration gap and the device running it — the device, why, what
    /// was weighed and what the decision changes.
    fn weigh(
        &self,
        predictions: &[Prediction],
        devices: &[ModelDevice],
        rules: &PlacementRules,
        (count, last, backoff, running): (u64, u64, u32, Option<usize>),
    ) -> (usize, Reason, Vec<(f64, f64)>, Change) {
        let best = predictions.iter().map(|p| p.seconds).fold(f64::INFINITY, f64::min);
        let learned = |i: usize| predictions[i].samples.filter(|_| predictions[i].basis == Basis::Learned);
        let incumbent = running.filter(|&i| learned(i).is_some());
        // The device most workloads run on (then the first), and what running this workload
        // elsewhere costs besides its own time: moving the stream there and back.
        // What is learned of each device, found once.
        let known: Vec<Option<&DeviceState>> = devices.iter().map(|d| self.device(&d.label)).collect();
        let home_count = |i: usize| known[i].map_or(0, |k| k.homes);
        let home = (0..devices.len()).min_by_key(|&i| (std::cmp::Reverse(home_count(i)), i)).unwrap_or(0);
        // A device's time for this workload with the stream staying on it: the runs right after
        // one of its own where there were some (the mean mixes in what moves cost). Never more
        // than the mean: a device that runs a workload only right after others keeps the
        // average of the runs it stayed for from its first runs (0.59 ms, against the 0.2 it
        // then ran in, in a test shaped on an H200's learning runs). Where its runs came right
        // after other devices' (calibration alternates them), the mean less what moving to the
        // device costs a run: an H200 whose learning runs of saxpy n=16384 all came right after
        // llvmpipe's averaged 0.34 ms, and ran it in 0.13 in the settled stream. Else the
        // prediction. Each at the device's pace now.
        let moves = |i: usize| known[i].and_then(|k| k.moves);
        let settled: Vec<f64> = (0..devices.len())
            .map(|i| {
                let pace = predictions[i].pace;
                match predictions[i].samples {
                    Some(s) if predictions[i].basis == Basis::Learned && s.stayed_s.1 >= STAYED_SAMPLES => {
                        s.stayed_s.0.min(s.mean_s) * pace
                    }
                    Some(s) if predictions[i].basis == Basis::Learned && s.moved_s.1 > 0 => {
                        moves(i).map_or(s.mean_s * pace, |moves| moves.stayed_of_s(s.mean_s * pace))
                    }
                    _ => predictions[i].seconds,
                }
            })
            .collect();
        let settled = |i: usize| settled[i];
        // Moving there, then back home (this workload's time at home stands in for the next run
        // there, which is not known).
        let move_cost = |i: usize| moves(i).map_or(0.0, |moves| moves.cost_of_s(settled(i)));
        let weighed: Vec<(f64, f64)> = (0..devices.len())
            .map(|i| {
                let away =
                    if i == home || home_count(home) == 0 { 0.0 } else { move_cost(i) + move_cost(home) };
                (settled(i), away)
            })
            .collect();
        let away = |i: usize| weighed[i].1;
        let Some(incumbent) = incumbent else {
            // Calibration: the untrusted devices worth measuring, fewest samples first; one whose
            // first runs were clearly slower than another device's is left to exploration.
            let beaten_by = |i: usize| {
                let mine = predictions[i].samples.and_then(|s| s.best_of_two())?;
                predictions
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .filter_map(|(_, p)| p.samples.and_then(|s| s.worst_of_two()))
                    .find(|&other| mine > other * rules.rule_out_factor)
            };
            let calibrate = predictions
                .iter()
                .enumerate()
                .filter(|(_, p)| p.basis == Basis::Heuristic && p.seconds <= best * rules.calibrate_within)
                .filter(|&(i, _)| beaten_by(i).is_none())
                .min_by_key(|(i, p)| (p.samples.map_or(0, |s| s.count), *i));
            if let Some((i, _)) = calibrate {
                return (i, Reason::Calibrating, Vec::new(), Change::Counted);
            }
            // The best trusted device (there is one unless every device left was ruled out or
            // predicted far slower: then the best measured one, else the best prediction).
            // Among trusted devices within the switch margin of the best, the one most other
            // workloads run on (then the first): a stream that moves between devices for no
            // clear gain pays for waking the other device's threads each time.
            let measured = |i: usize| predictions[i].samples.map(|s| s.mean_s);
            let best_learned = (0..predictions.len())
                .filter(|&i| learned(i).is_some())
                .map(|i| settled(i) + away(i))
                .fold(f64::INFINITY, f64::min);
            let candidate = (0..predictions.len())
                .filter(|&i| {
                    learned(i).is_some() && settled(i) + away(i) <= best_learned * rules.switch_margin
                })
                .min_by_key(|&i| (std::cmp::Reverse(home_count(i)), i))
                .or_else(|| {
                    (0..predictions.len())
                        .filter_map(|i| measured(i).map(|m| (i, m)))
                        .min_by(|a, b| a.1.total_cmp(&b.1))
                        .map(|(i, _)| i)
                })
                .unwrap_or_else(|| predictions.iter().position(|p| p.seconds <= best).unwrap_or(0));
            return (candidate, Reason::Best, weighed, Change::Runs(candidate));
        };
        // An untrusted device whose latest run (an exploration) beat staying on the current
        // device by the margin is calibrated until trusted: its first runs may have been slow
        // for reasons that passed (an H200's learning runs of a small problem took 1 ms against
        // 0.2 later), and exploration alone, one run in many, would take hundreds of decisions
        // to move its average. A fluke costs a run or two: once its latest run loses again,
        // calibration stops. Staying and going are each weighed with the moves there and back,
        // as a switch is. In a test shaped on an H200 beside llvmpipe (saxpy n=262144 0.79 ms
        // on the GPU, 0.83 on llvmpipe, the moves 0.17), a GPU back at 0.82 ms after a slow
        // stretch had sent the workload to llvmpipe never beat llvmpipe's time alone by the
        // margin, and came home only when its average fell, one exploration in many.
        let staying = settled(incumbent) + away(incumbent);
        let promising = (0..predictions.len())
            .filter(|&i| i != incumbent && predictions[i].basis == Basis::Heuristic)
            .filter(|&i| {
                predictions[i]
                    .samples
                    .is_some_and(|s| s.count > 0 && (s.last_s[0] + away(i)) * rules.switch_margin <= staying)
            })
            .min_by_key(|&i| (predictions[i].samples.map_or(0, |s| s.count), i));
        if let Some(i) = promising {
            return (i, Reason::Calibrating, weighed, Change::Counted);
        }
        // Once a device runs the workload, other devices are tried on the exploration budget
        // only: trusted ones that were close, untrusted ones whose prediction became close
        // (a noisy run of the current device does not start a calibration at once).
        let backoff = backoff.min(rules.explore_backoff_max).min(16);
        let gap = u64::from(rules.explore_every) << backoff;
        // Due by the count, but taken only within the time budget: otherwise the next decision
        // asks again. Its cost is what was measured there where something was: a device ruled
        // out after two runs is still predicted by the heuristic, which its runs of other
        // workloads may have made optimistic for this one (or pessimistic: an H200's scale,
        // learned from slow learning runs, priced its explorations at 2.6 ms against the 1 ms
        // it measured). Of what was measured, the fastest run kept: an exploration asks whether
        // the device now runs as it did at its best, and the budget then counts what it took.
        // Priced at its mean, a device whose learning runs were slow for a while (an H200's
        // saxpy n=16384: 0.22-1.4 ms, median 0.53, against 0.16 in a stream of its own) was
        // never re-tried in a short stream: the budget held less than that mean.
        let cost =
            |i: usize| predictions[i].samples.and_then(|s| s.best_s()).unwrap_or(predictions[i].seconds);
        if rules.explore_every > 0 && count >= last + gap {
            let current = predictions[incumbent].seconds;
            let loser = (0..predictions.len())
                .filter(|&i| {
                    i != incumbent
                        && match predictions[i].basis {
                            Basis::Learned => predictions[i].seconds <= current * rules.explore_within,
                            // By its best run where it has one: a device ruled out by slow first
                            // runs is predicted by a heuristic that such runs (of this and other
                            // workloads) scaled up. An H200's 2.1 ms for saxpy n=16384, more than
                            // eight times llvmpipe's 0.25, kept it from ever being re-tried; its
                            // best run was 1.1 ms, and it ran the workload in 0.13.
                            Basis::Heuristic => cost(i) <= current * rules.calibrate_within,
                        }
                })
                .min_by_key(|&i| predictions[i].samples.map_or(0, |s| s.seen));
            if let Some(loser) = loser.filter(|&i| self.spent.allows(cost(i), rules.explore_share)) {
                return (loser, Reason::Exploring, weighed, Change::Explored);
            }
        }
        // Kept, unless a trusted device whose better of its last two runs beat staying on the
        // current device by the margin (moves weighed as above) can be re-tried within the time
        // budget: its mean
        // lost, but a run of it did not (an H200's runs of a small problem took 1 ms in its
        // first ~100 ms of use in a process, 0.2 after), and waiting for the count, or for a
        // budget that prices it at that mean, would leave a short stream no time to notice.
        let hopeful = (0..predictions.len())
            .filter(|&i| i != incumbent && rules.explore_every > 0)
            .filter(|&i| {
                predictions[i].basis == Basis::Learned
                    && predictions[i]
                        .samples
                        .and_then(|s| s.best_of_two())
                        .is_some_and(|best| (best + away(i)) * rules.switch_margin <= staying)
            })
            // Costed at the run it hopes for: the mean is what it doubts.
            .filter(|&i| {
                let hoped = predictions[i].samples.and_then(|s| s.best_of_two()).unwrap_or_else(|| cost(i));
                self.spent.allows(hoped, rules.explore_share)
            })
            .min_by_key(|&i| predictions[i].samples.map_or(0, |s| s.seen));
        let kept = match hopeful {
            Some(device) => (device, Reason::Exploring, Change::Explored),
            None => (incumbent, Reason::Kept, Change::Counted),
        };
        let Some(candidate) = (0..predictions.len())
            .filter(|&i| learned(i).is_some())
            .min_by(|&a, &b| (settled(a) + away(a)).total_cmp(&(settled(b) + away(b))))
        else {
            return (kept.0, kept.1, weighed, kept.2);
        };
        if candidate != incumbent {
            // Without moves to weigh, the candidate must win in the worse of its last two runs;
            // with them, on its settled time plus the moves.
            let worst = learned(candidate).and_then(|s| s.worst_of_two());
            let moving = if away(candidate) > 0.0 || away(incumbent) > 0.0 {
                Some(settled(candidate) + away(candidate))
            } else {
                worst
            };
            if let Some(moving) = moving {
                if staying >= moving * rules.switch_margin {
                    let from = devices[incumbent].label.clone();
                    return (candidate, Reason::Switched { from }, weighed, Change::Switched(candidate));
                }
            }
        }
        (kept.0, kept.1, weighed, kept.2)
    }

    /// Records that `workload` took `seconds` to result on `device` (whose heuristic costs are
    /// `costs`), right after a run on another device if the run this model recorded last was
    /// on another one.
    pub fn record(
        &mut self,
        workload: &Workload,
        device: &str,
        costs: &DeviceCosts,
        seconds: f64,
        rules: &PlacementRules,
    ) {
        let moved = self.last_device.as_deref().map(|last| last != device);
        self.record_after(workload, device, costs, seconds, rules, moved);
    }

    /// [`record`](Self::record) for a caller that knows what ran right before: `moved` says
    /// whether work on another device came after this device's last (`None`: not known). A
    /// [`Placement`](super::Placement) asks its devices, since work that does not go through it
    /// moves the machine between devices too.
    pub fn record_after(
        &mut self,
        workload: &Workload,
        device: &str,
        costs: &DeviceCosts,
        seconds: f64,
        rules: &PlacementRules,
        moved: Option<bool>,
    ) {
        if !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        let Some(state) = Self::state_mut(&mut self.workloads, &workload.kernel, workload.size_class())
        else {
            return;
        };
        // A run on another device than the one running the workload (an exploration): if it
        // lost by the switch margin, the next exploration waits twice as long; if not, the
        // regular budget starts again.
        let trusted = state
            .current
            .as_deref()
            .and_then(|current| Some((current, state.samples_of(current)?)))
            .filter(|(_, s)| s.count >= u64::from(rules.trust_after.max(1)));
        let incumbent = trusted.filter(|(current, _)| *current != device).map(|(_, s)| s.mean_s);
        self.spent.runs_s += seconds;
        if trusted.is_some() {
            self.spent.settled_s += seconds;
        }
        if incumbent.is_some() {
            self.spent.exploring_s += seconds;
        }
        let at = state.samples.iter().position(|(label, _)| label == device);
        let warming = rules.warm_up_runs > 0
            && at.is_none_or(|at| {
                let s = &state.samples[at].1;
                s.count == 0 && s.warm_ups < rules.warm_up_runs
            });
        // A warm-up run says nothing of whether the explored device lost.
        if let Some(incumbent) = incumbent.filter(|_| !warming) {
            state.backoff = if seconds >= incumbent * rules.switch_margin {
                (state.backoff + 1).min(rules.explore_backoff_max).min(16)
            } else {
                0
            };
        }
        if self.last_device.as_deref() != Some(device) {
            self.last_device = Some(device.to_owned());
        }
        let empty = Samples {
            mean_s: 0.0,
            var_s2: 0.0,
            count: 0,
            last_s: [0.0; 2],
            seen: 0,
            moved_s: (0.0, 0),
            stayed_s: (0.0, 0),
            warm_ups: 0,
            first_s: [0.0; FIRST_SAMPLES],
            pace_ln: 0.0,
            first_pace_ln: 0.0,
        };
        let at = match at {
            Some(at) => at,
            None => {
                state.samples.push((device.to_owned(), empty));
                state.samples.len() - 1
            }
        };
        let samples = &mut state.samples[at].1;
        if warming {
            // Its time is spent (counted above) and the device ran last, but nothing is learned.
            samples.warm_ups += 1;
            samples.seen = tick;
            return;
        }
        // An exploration that found a trusted device clearly faster than both the device running
        // the workload and its own history: that history is from a time the device ran slower
        // (a GPU's first ~100 ms of use in a process ran a small problem in 1 ms, later in 0.2).
        // It starts again from this run, so that it is calibrated afresh (`choose` calibrates an
        // untrusted device whose latest run wins) instead of one exploration in many moving its
        // average a step.
        let stale = incumbent.is_some_and(|current| {
            samples.count >= u64::from(rules.trust_after.max(1))
                && seconds * rules.switch_margin <= current.min(samples.mean_s)
        });
        if stale {
            *samples = Samples { warm_ups: samples.warm_ups, ..empty };
        }
        // A history still made of first runs (its mean is their median) is brought to its
        // device's pace now before this run joins it, so that its first samples stand at one
        // pace, the one it then keeps: the next runs' moving average starts from the median at
        // that pace, not from the one a slow first stretch left.
        let known = device_in(&mut self.devices, device);
        let pace = known.pace.unwrap_or_default();
        let pace_now = if pace.samples >= PACE_SAMPLES { pace.ln } else { 0.0 };
        if samples.count <= FIRST_SAMPLES as u64 {
            if samples.count > 0 && pace_now != samples.pace_ln {
                samples.rescale(pace_change(samples.pace_ln, pace_now));
            }
            samples.pace_ln = pace_now;
            samples.first_pace_ln = pace_now;
        }
        // One run far off (another process took the machine) counts as twice the mean.
        let bounded = if samples.count > 0 { seconds.min(2.0 * samples.mean_s) } else { seconds };
        // An established history's run that stayed on the device says how fast the device runs
        // now against that history's first runs (a moved run would count the move too).
        let established = samples.count >= FIRST_SAMPLES as u64;
        if established && moved != Some(true) {
            if let Some(first) = samples.first_median_s().filter(|&first| first > 0.0 && bounded > 0.0) {
                let observed = (bounded / first).ln() + samples.first_pace_ln;
                let mut average = (pace.ln, pace.samples);
                average_in(&mut average, observed, PACE_ALPHA);
                let learned = Pace { ln: average.0, samples: average.1 };
                known.pace = Some(learned);
            }
        }
        samples.add(seconds, rules.alpha, tick);
        if established {
            // Its moving average now holds this run, taken at the pace now, with that weight.
            samples.pace_ln += rules.alpha * (pace_now - samples.pace_ln);
        }
        // The same workload on the same device, right after a run elsewhere and right after one
        // here, kept apart: the time of a run with the stream staying on the device, and the
        // contrast below.
        match moved {
            Some(true) => average_in(&mut samples.moved_s, bounded, rules.alpha),
            Some(false) => average_in(&mut samples.stayed_s, bounded, rules.alpha),
            None => {}
        }
        // A run right after one elsewhere is one sample of what moving here costs: its time
        // against this workload's runs after one of this device's own. Only such a run is new
        // evidence; a run that stayed says nothing of moves (re-adding the two averages'
        // difference at every run kept the contrast of a workload's first, erratic runs alive
        // as long as it ran without moving). The runs it is set against are those `weigh`
        // takes for the device's time with the stream staying on it: two stayed runs at least,
        // never more than the mean. Against one stayed run, an H200's saxpy n=16384 learned
        // from a 1.35 ms spike among its 0.2-0.3 ms runs: every later run that moved there
        // said a move *saved* 1.1 ms, and the GPU's move cost stayed below zero (-0.08 to
        // -1.26 ms) for the whole stream.
        if moved == Some(true) && samples.stayed_s.1 >= STAYED_SAMPLES {
            let stayed = samples.stayed_s.0.min(samples.mean_s);
            let contrast = bounded - stayed;
            let moves = known.moves.unwrap_or_default();
            let mut average = (moves.cost_s, moves.samples);
            average_in(&mut average, contrast, rules.alpha);
            let mut share = (moves.share, moves.samples);
            if stayed > 0.0 {
                average_in(&mut share, contrast / stayed, rules.alpha);
            }
            known.moves = Some(Moves { cost_s: average.0, samples: average.1, share: share.0 });
        }
        let predicted = costs.predict(workload);
        if predicted > 0.0 && seconds > 0.0 {
            let ratio = (seconds / predicted).ln();
            known.scale = Some(match known.scale {
                Some(scale) => scale + rules.alpha * (ratio - scale),
                None => ratio,
            });
        }
    }

    /// Keeps at most `max` histories, dropping those sampled longest ago, and forgets the
    /// current devices and counters of workloads with no history left.
    pub fn bound(&mut self, max: usize) {
        let total = self.len();
        if total > max {
            // (when sampled, kernel, size class, device) of every history, oldest first.
            let mut ages: Vec<(u64, String, SizeClass, String)> = self
                .workloads
                .iter()
                .flat_map(|(kernel, states)| {
                    states.iter().flat_map(move |state| {
                        state
                            .samples
                            .iter()
                            .map(move |(device, s)| (s.seen, kernel.clone(), state.class, device.clone()))
                    })
                })
                .collect();
            ages.sort();
            for (_, kernel, class, device) in ages.into_iter().take(total - max) {
                if let Some(state) = self
                    .workloads
                    .get_mut(&kernel)
                    .and_then(|states| states.iter_mut().find(|s| s.class == class))
                {
                    state.samples.retain(|(label, _)| *label != device);
                }
            }
        }
        for states in self.workloads.values_mut() {
            states.retain(|state| !state.samples.is_empty());
        }
        self.workloads.retain(|_, states| !states.is_empty());
        self.count_homes();
    }
}
