//! The amdgpu backend's layers below the runtime seam, drm-rs style: raw UAPI ([`uapi`]); the
//! kernel-driver interface ([`kmd`]) and its render-node implementation ([`render_node`]);
//! device discovery and identity ([`discovery`], [`gfx_target`], [`device_info`]); GPU memory
//! ([`memory`], [`va_allocator`]); AMDHSA code objects ([`codeobj`], [`descriptor`],
//! [`metadata`], [`kernarg`]); the OpenCL C compiler driver ([`compile`]) and the suite's
//! ahead-of-time code objects ([`aot`]); a simulated GPU for tests ([`sim`]). Errors: [`error`].

pub mod aot;
pub mod codeobj;
pub mod compile;
pub mod descriptor;
pub mod device_info;
pub mod discovery;
pub mod error;
pub mod gfx_target;
pub mod kernarg;
pub mod kmd;
pub mod memory;
pub mod metadata;
pub mod render_node;
pub mod sim;
pub mod uapi;
pub mod va_allocator;

pub use error::{AmdgpuError, Result};
