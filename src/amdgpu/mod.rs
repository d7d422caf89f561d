//! The amdgpu backend's layers below the runtime seam, drm-rs style: raw UAPI ([`uapi`]) and the
//! kernel-driver interface ([`kmd`]), both from the `sparkle-amdgpu-kmd` crate that the simulator
//! shares, and the render-node implementation ([`render_node`]);
//! device discovery and identity ([`discovery`], [`gfx_target`], [`device_info`]); GPU memory
//! ([`memory`], [`va_allocator`]); AMDHSA code objects ([`codeobj`], [`descriptor`],
//! [`metadata`], [`kernarg`]); OpenCL printf's buffer, formats and output ([`printf`]); the
//! sub-group built-ins libclc lacks ([`subgroups`]); the OpenCL C compiler driver ([`compile`])
//! and the suite's ahead-of-time code objects ([`aot`]); the `amdgpu-sim` backend over the
//! simulated GPU of the `sparkle-amdgpu-sim` crate ([`sim`], feature `amdgpu-sim`). Errors:
//! [`error`].
//!
//! On the runtime seam: [`backend`] (the device), [`program`] (compiler input and loaded
//! kernels), [`ib`] (one submission's command buffer and kernel arguments) and `submit` (CS
//! submissions and their fences).

pub mod aot;
pub mod backend;
pub mod codeobj;
pub mod compile;
pub mod descriptor;
pub mod device_info;
pub mod discovery;
pub mod error;
pub mod gfx_target;
pub mod ib;
pub mod kernarg;
pub mod memory;
pub mod metadata;
pub mod printf;
pub mod program;
pub mod render_node;
#[cfg(feature = "amdgpu-sim")]
pub mod sim;
pub mod subgroups;
mod submit;
pub mod va_allocator;

pub use sparkle_amdgpu_kmd::{kmd, uapi};

pub use backend::{Amdgpu, AmdgpuApi, AmdgpuDevice, DeviceOptions, Flavor, Hardware};
pub use error::{AmdgpuError, Result};
pub use program::{AmdgpuProgram, AmdgpuSource, SourcePreference};
