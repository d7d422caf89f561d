//! What the placement places and where: a [`Workload`] (a kernel and its size, told apart by
//! [`SizeClass`]), and a device as the decision rule sees it ([`ModelDevice`]: a label and the
//! heuristic's [`DeviceCosts`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::hal::DeviceClass;
use crate::kernel::KernelSpec;

/// One problem of one kernel, as the placement tells problems apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The kernel's key: its name (variants of one kernel share it).
    pub kernel: String,
    /// Floating-point operations of one run (a fused multiply-add counts 2).
    pub flops: f64,
    /// Bytes the run must move to and from the device (inputs uploaded, outputs read back).
    pub bytes: f64,
}

impl Workload {
    /// A workload of `kernel` doing `flops` operations over `bytes` bytes.
    pub fn new(kernel: impl Into<String>, flops: f64, bytes: f64) -> Workload {
        Workload { kernel: kernel.into(), flops: flops.max(0.0), bytes: bytes.max(0.0) }
    }

    /// A workload of the kernel `spec` describes.
    pub fn for_kernel(spec: &KernelSpec, flops: f64, bytes: f64) -> Workload {
        Workload::new(spec.name.clone(), flops, bytes)
    }

    /// The size class its history is kept under: the power-of-two buckets of its operations
    /// and bytes (`f20.b23`), so that problems of about the same size share what was learned.
    pub fn size_class(&self) -> SizeClass {
        SizeClass { flops: bucket(self.flops), bytes: bucket(self.bytes) }
    }
}

/// A workload's size class: the power-of-two buckets of its operations and bytes, written
/// `f20.b23` (⌊log2⌋ + 1 of each, 0 below one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SizeClass {
    /// The bucket of its floating-point operations.
    pub flops: u32,
    /// The bucket of its bytes.
    pub bytes: u32,
}

impl fmt::Display for SizeClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "f{}.b{}", self.flops, self.bytes)
    }
}

impl std::str::FromStr for SizeClass {
    type Err = String;

    fn from_str(text: &str) -> Result<SizeClass, String> {
        let parsed =
            text.strip_prefix('f').and_then(|rest| rest.split_once(".b")).and_then(|(flops, bytes)| {
                Some(SizeClass { flops: flops.parse().ok()?, bytes: bytes.parse().ok()? })
            });
        parsed.ok_or_else(|| format!("`{text}` is no size class (f<bucket>.b<bucket>)"))
    }
}

fn bucket(value: f64) -> u32 {
    if value < 1.0 {
        0
    } else {
        value.log2().floor() as u32 + 1
    }
}

/// What a device's work costs by the heuristic, before anything was measured for a workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeviceCosts {
    /// Seconds from submitting a tiny dispatch to having its result (submission, fence, read).
    pub launch_s: f64,
    /// Floating-point operations per second.
    pub flops_per_s: f64,
    /// Bytes per second moved to or from the device.
    pub bytes_per_s: f64,
}

impl DeviceCosts {
    /// Rough costs of a device of `class`, for when nothing was measured on it yet.
    pub fn for_class(class: DeviceClass) -> DeviceCosts {
        match class {
            DeviceClass::Gpu => DeviceCosts { launch_s: 50e-6, flops_per_s: 5e12, bytes_per_s: 10e9 },
            DeviceClass::Cpu => DeviceCosts { launch_s: 150e-6, flops_per_s: 20e9, bytes_per_s: 5e9 },
            DeviceClass::Simulator => DeviceCosts { launch_s: 2e-3, flops_per_s: 20e6, bytes_per_s: 200e6 },
        }
    }

    /// The predicted seconds to result of `workload`.
    pub fn predict(&self, workload: &Workload) -> f64 {
        self.launch_s
            + workload.flops / self.flops_per_s.max(1.0)
            + workload.bytes / self.bytes_per_s.max(1.0)
    }
}

/// A device as the model sees it: its label and heuristic costs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDevice {
    /// The device's label.
    pub label: String,
    /// Its heuristic costs.
    pub costs: DeviceCosts,
}
