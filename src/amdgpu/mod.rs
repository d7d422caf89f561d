//! The experimental `amdgpu` backend: direct submission of PM4 command buffers to AMD RDNA2/RDNA3
//! GPUs through their DRM render node, and (feature `amdgpu-sim`) the same device code over a
//! simulated gfx1100 (`sim.rs`).
//!
//! Most programs never name this module: [`Runtime::from_env`](crate::Runtime::from_env) opens
//! the backend `SPARKLE_BACKEND` names. What is here is for opening a device with options of
//! one's own and wrapping it in a runtime ([`Runtime::from_device`](crate::Runtime::from_device)):
//! [`AmdgpuDevice`] with its [`DeviceOptions`] (where kernels' printf output goes, [`PrintfSink`];
//! CU or WGP mode; prebuilt code objects or OpenCL C first, [`SourcePreference`]; the OpenCL C
//! [`Compiler`]), the backend's types for the runtime seam ([`Amdgpu`], [`AmdgpuApi`],
//! [`Flavor`]), its program types ([`AmdgpuProgram`], [`AmdgpuSource`]), its error
//! ([`AmdgpuError`], which a [`crate::Error`] carries as its detail), and the kernel-driver
//! interface a device runs over ([`kmd`], from the `sparkle-amdgpu-kmd` crate; a driver of one's
//! own also needs that crate's raw `uapi` structs, which [`kmd::KernelDriver`] answers in).
//!
//! The layers below are not public API. The kernel-driver layer (raw uapi, the
//! [`kmd::KernelDriver`] trait) is the `sparkle-amdgpu-kmd` crate; code objects (the compiler
//! driver, ELF and metadata parsing, kernel descriptors, kernel arguments, printf's buffer) are
//! the `sparkle-amdgpu-codeobj` crate; the simulated GPU is the `sparkle-amdgpu-sim` crate.
//!
//! Files by role. The roles and their file names are the same in `gl/`, so a reader who knows
//! one backend finds their way in the other:
//!
//! | role | file | here |
//! |---|---|---|
//! | device | `device.rs` | [`AmdgpuDevice`] on the runtime seam ([`hal::Device`](crate::hal::Device)), [`Amdgpu`]/[`AmdgpuApi`]/[`Flavor`] |
//! | device info | `device_info.rs` | DEV_INFO and HW_IP_INFO → gfx target, limits, the cache's `GpuId` |
//! | discovery | `discovery.rs` | which render node: `renderD*` nodes, their drivers, `SPARKLE_AMDGPU_NODE` |
//! | memory | `memory.rs` | GEM buffers, GPU and CPU mappings (and `va_allocator.rs`: GPU addresses) |
//! | program | `program.rs` | OpenCL C or a prebuilt code object → a loaded kernel and its interface |
//! | submit | `submit.rs` | the queue: CS submissions, fences, WAIT_CS, scratch (and [`ib`]: one submission's command buffer) |
//! | error | `error.rs` | [`AmdgpuError`] → [`ErrorKind`](crate::ErrorKind) |
//!
//! Backend-specific files: `render_node.rs` (the real kernel driver: ioctls on the render node)
//! and `sim.rs` (the simulated driver behind `amdgpu-sim`).

mod device;
mod device_info;
mod discovery;
mod error;
#[doc(hidden)]
pub mod ib;
mod memory;
mod program;
mod render_node;
#[cfg(feature = "amdgpu-sim")]
pub mod sim;
mod submit;
#[cfg(test)]
mod tests;
mod va_allocator;

// The code-object layer, by the names the modules here use.
use sparkle_amdgpu_codeobj::{
    codeobj, compile, descriptor, gfx_target, kernarg, metadata, options, printf, workgroups,
};
use sparkle_amdgpu_kmd::uapi;

pub use sparkle_amdgpu_kmd::kmd;

pub use device::{Amdgpu, AmdgpuApi, AmdgpuDevice, DeviceOptions, Flavor, Hardware};
pub use error::{AmdgpuError, Result};
pub use program::{AmdgpuProgram, AmdgpuSource, SourcePreference};
pub use sparkle_amdgpu_codeobj::compile::Compiler;
pub use sparkle_amdgpu_codeobj::printf::{PrintfOutput, PrintfSink};
