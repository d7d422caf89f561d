//! AMDHSA code objects for Sparkle's amdgpu backend: everything between OpenCL C and a kernel a
//! GPU can launch, without a GPU. [`compile`] drives clang and ld.lld (with the [`printf`],
//! [`subgroups`] and [`workgroups`] device code it adds) on the [`options`] a kernel passes; [`codeobj`] parses the ELF they produce and decides
//! whether the backend can run each kernel; [`descriptor`] reads a kernel's 64-byte descriptor,
//! [`metadata`] its `amdhsa.kernels` MessagePack note, and [`kernarg`] lays out and fills its
//! kernel-argument segment. [`gfx_target`] names the GPU generations (`gfx1100`) and which are
//! supported; [`aot`] is the plan and manifest of the suite's ahead-of-time code objects
//! (`shaders/aot/`); [`printf`] also turns a dispatch's printf buffer into text.
//!
//! The crate sits above `sparkle-amdgpu-kmd` (whose [`AmdgpuError`] it reports) and below the
//! `sparkle` library, which loads the kernels into GPU memory and submits them; nothing here
//! touches a device.
#![warn(missing_docs)]

pub mod aot;
pub mod codeobj;
pub mod compile;
pub mod descriptor;
pub mod gfx_target;
pub mod kernarg;
pub mod metadata;
pub mod options;
pub mod printf;
pub mod subgroups;
pub mod workgroups;

pub use sparkle_amdgpu_kmd::{AmdgpuError, Result};
