//! The `amdgpu-sim` backend: the amdgpu backend's device code, unchanged, over the
//! `sparkle-amdgpu-sim` crate's [`SimDriver`] instead of a render node — the whole path from
//! kernel to PM4 to ISA runs on the CPU, with its own backend name, cache folder and `GpuId`.
//! `auto` never picks it. The simulator itself (driver, command processor, ISA interpreter) is
//! that crate; [`SimDriver`] and [`SimOptions`] are re-exported for building a device with other
//! options.

use std::sync::Arc;

use sparkle_amdgpu_sim::isa::DEFAULT_BUDGET;
pub use sparkle_amdgpu_sim::{SimDriver, SimGpu, SimOptions};

use crate::amdgpu::{AmdgpuApi, AmdgpuDevice, DeviceOptions, Flavor};
use crate::hal::DeviceClass;
use crate::{Error, ErrorKind, Result};

/// Wave instructions one dispatch may run before the simulated GPU calls it hung.
pub const BUDGET_ENV: &str = "SPARKLE_SIM_BUDGET";
/// The GPU the simulator is: `gfx1100` (RDNA3, the default) or `gfx1030` (RDNA2).
pub const GPU_ENV: &str = "SPARKLE_SIM_GPU";

/// The simulated flavor of the amdgpu backend.
pub enum Simulated {}

impl Flavor for Simulated {
    const NAME: &'static str = "amdgpu-sim";
    const CLASS: DeviceClass = DeviceClass::Simulator;
}

/// The `amdgpu-sim` backend's types.
pub type AmdgpuSim = AmdgpuApi<Simulated>;

/// A simulated gfx1100 (or the GPU `SPARKLE_SIM_GPU` names) with the instruction budget
/// `SPARKLE_SIM_BUDGET` sets (default [`DEFAULT_BUDGET`]), taking the suite's prebuilt code
/// objects as the hardware backend does.
pub(crate) fn open() -> Result<AmdgpuDevice<Simulated>> {
    let instruction_budget = match std::env::var(BUDGET_ENV) {
        Ok(value) if !value.trim().is_empty() => value.trim().parse::<u64>().ok().filter(|&b| b > 0).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("{BUDGET_ENV}={value:?} is not a positive number of wave instructions; for example {BUDGET_ENV}=100000000"),
            )
        })?,
        _ => DEFAULT_BUDGET,
    };
    let gpu = match std::env::var(GPU_ENV) {
        Ok(value) if !value.trim().is_empty() => SimGpu::parse(value.trim()).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!("{GPU_ENV}={value:?} is not a GPU the simulator can be: gfx1100 or gfx1030"),
            )
        })?,
        _ => SimGpu::default(),
    };
    let driver = SimDriver::new(SimOptions { instruction_budget, gpu, ..SimOptions::default() });
    AmdgpuDevice::new(Arc::<SimDriver>::clone(&driver), DeviceOptions::default())
}
