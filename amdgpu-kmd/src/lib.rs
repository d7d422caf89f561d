//! The lowest layer of Sparkle's amdgpu backend, shared by the library and the simulator:
//! [`uapi`] holds the raw `#[repr(C)]` mirrors of the amdgpu DRM driver's structs and ioctl
//! numbers, [`kmd`] the safe kernel-driver interface built on them (the [`kmd::KernelDriver`]
//! trait: buffers, VA mappings, contexts, submissions, fences), and [`error`] the one error type
//! both speak.
//!
//! The split follows drm-rs's raw/safe one and exists so that nothing above it is needed below
//! it: the `sparkle` library implements [`kmd::KernelDriver`] with ioctls on a render node and
//! runs the backend over any implementation of it; the `sparkle-amdgpu-sim` crate implements it
//! with host memory and an ISA interpreter. Both depend on this crate and neither on the other's
//! internals, so the simulator does not depend on `sparkle` and `sparkle` depends on the
//! simulator only for its `amdgpu-sim` backend. Nothing here issues an ioctl or allocates GPU
//! memory.
#![warn(missing_docs)]

pub mod error;
pub mod kmd;
// The raw mirrors keep the kernel header's names one-to-one (`drm_amdgpu_info_device::family`,
// `AMDGPU_GEM_DOMAIN_VRAM`) and are documented in Sparkle's own words: what each item holds, its
// unit or flag set, and whether it goes into the ioctl or comes back out.
pub mod uapi;

pub use error::{AmdgpuError, Result};
