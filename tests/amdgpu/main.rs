//! The amdgpu backend without the simulator: its layers over a recording fake of the kernel
//! driver (`amdgpu_support`: submissions, memory, code objects), and, ignored unless asked for,
//! the tests of a real RDNA2/RDNA3 card (`hardware`, which says how to run them).

#[path = "../support/amdgpu_common/mod.rs"]
mod amdgpu_common;
#[path = "../amdgpu_support/mod.rs"]
mod amdgpu_support;

mod backend;
mod hardware;
