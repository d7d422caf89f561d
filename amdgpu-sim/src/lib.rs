//! A simulated amdgpu kernel driver that runs the real gfx1100 or gfx1030 ISA on the CPU, for Sparkle's
//! tests and its `amdgpu-sim` backend: [`SimDriver`] implements
//! [`KernelDriver`](sparkle_amdgpu_kmd::kmd::KernelDriver) with host memory (`buffers`), a GPU
//! VA space enforcing its mappings (`vm`), a PM4 command processor (`cp`) that names the kernels
//! it runs (`kernel_names`), contexts and fences on a worker thread (`queue`), the device
//! identity it reports ([`identity`], [`SimGpu`]), and the RDNA3/RDNA2 (wave32 and wave64)
//! interpreter ([`isa`]).
//!
//! Public are what the library and the tests use: the driver and its options, the identity's
//! constants, and the interpreter's entry points (decode, check, run a dispatch against a
//! [`GlobalMemory`](isa::GlobalMemory) of the caller's).
//!
//! Layering: this crate depends on `sparkle-amdgpu-kmd` (the raw uapi layouts, the
//! kernel-driver trait and its error type) and on `pm4` (the packets it decodes), never on the
//! `sparkle` library. The library depends on this crate only for its `amdgpu-sim` backend
//! (feature `amdgpu-sim`, part of its default features), which runs the amdgpu backend's own
//! device code over a [`SimDriver`]; the backend's name and its place among the backends stay in
//! the library's registry. A build without that feature does not compile the simulator.
#![warn(missing_docs)]

mod buffers;
mod cp;
mod driver;
mod errno;
pub mod identity;
pub mod isa;
mod kernel_names;
mod queue;
mod vm;

pub use driver::{MappedRange, SimDriver, SimOptions};
pub use identity::SimGpu;
