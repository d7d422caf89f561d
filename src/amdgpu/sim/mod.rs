//! A simulated amdgpu kernel driver that runs the real gfx1100 ISA on the CPU: [`SimDriver`]
//! implements the backend's [`KernelDriver`](crate::amdgpu::kmd::KernelDriver) with host memory
//! ([`buffers`]), a GPU VA space enforcing its mappings ([`vm`]), a PM4 command processor
//! ([`cp`]) that names the kernels it runs ([`kernel_names`]), contexts and fences on a worker
//! thread ([`queue`]), the device identity it reports ([`identity`]), and the RDNA3 (wave32 and
//! wave64) interpreter ([`isa`]); [`backend`] registers it as the `amdgpu-sim` backend.

pub mod backend;
pub mod buffers;
pub mod cp;
pub mod driver;
mod errno;
pub mod identity;
pub mod isa;
pub mod kernel_names;
pub mod queue;
pub mod vm;

pub use backend::{AmdgpuSim, Simulated};
pub use driver::{SimDriver, SimOptions};
