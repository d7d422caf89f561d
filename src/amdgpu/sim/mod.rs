//! A simulated amdgpu kernel driver that runs the real gfx1100 ISA on the CPU.

pub mod isa;
