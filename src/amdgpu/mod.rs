//! The amdgpu backend's layers below the runtime seam, drm-rs style: raw UAPI ([`uapi`]); the
//! kernel-driver interface ([`kmd`]) and its render-node implementation ([`render_node`]);
//! device discovery and identity ([`discovery`], [`gfx_target`], [`device_info`]); GPU memory
//! ([`memory`], [`va_allocator`]); AMDHSA code objects ([`codeobj`], [`descriptor`],
//! [`metadata`], [`kernarg`]); OpenCL printf's buffer, formats and output ([`printf`]); the
//! sub-group built-ins libclc lacks ([`subgroups`]); the OpenCL C compiler driver ([`compile`])
//! and the suite's ahead-of-time code objects ([`aot`]); a simulated GPU for tests ([`sim`]). Errors: [`error`].
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
pub mod kmd;
pub mod memory;
pub mod metadata;
pub mod printf;
pub mod program;
pub mod render_node;
pub mod sim;
pub mod subgroups;
mod submit;
pub mod uapi;
pub mod va_allocator;

pub use backend::{Amdgpu, AmdgpuApi, AmdgpuDevice, DeviceOptions, Flavor, Hardware};
pub use error::{AmdgpuError, Result};
pub use program::{AmdgpuProgram, AmdgpuSource, SourcePreference};
