//! The amdgpu backend's layers below the runtime seam: raw UAPI ([`uapi`]), the kernel-driver
//! interface and its render-node implementation ([`kmd`], [`render_node`]), device discovery and
//! identity ([`discovery`], [`gfx_target`], [`device_info`]), GPU memory ([`memory`]), AMDHSA code
//! objects ([`codeobj`], [`metadata`], [`descriptor`], [`kernarg`]) and the OpenCL C compiler
//! driver ([`compile`]).

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
pub mod uapi;
pub mod va_allocator;

pub use error::{AmdgpuError, Result};
