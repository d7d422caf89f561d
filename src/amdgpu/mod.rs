//! The amdgpu backend: direct submission to AMD RDNA GPUs, and its simulated kernel driver.

pub mod sim;
