//! Reliability: damaged cache entries on every backend, backend faults, full and vanishing
//! filesystems, hostile entries and folders, processes and threads sharing one cache folder, a
//! loom model of the memory tier, and soaks. One test binary; a module per area. Tests that
//! change or count what belongs to the whole process run in a process of their own
//! (`isolated`).

#[cfg(feature = "amdgpu")]
#[path = "../amdgpu_support/mod.rs"]
mod amdgpu_support;
#[path = "../support/cache/mod.rs"]
mod cache_support;
#[cfg(any(feature = "gl", feature = "amdgpu-sim"))]
#[path = "../support/cache/faults.rs"]
mod faults;
#[cfg(feature = "gl")]
#[path = "../support/gl.rs"]
mod gl_support;
#[path = "../support/isolated.rs"]
mod isolated;
#[path = "../support/shared_driver_cache.rs"]
mod shared_driver_cache;

#[cfg(feature = "amdgpu")]
mod amdgpu_codeobj;
#[cfg(feature = "amdgpu-sim")]
mod amdgpu_sim_faults;
#[cfg(feature = "gl")]
mod backend_faults;
#[cfg(any(feature = "gl", feature = "amdgpu"))]
mod concurrency;
mod fs;
#[cfg(feature = "gl")]
mod gl_faults;
mod loom_model;
mod security;
#[cfg(any(feature = "gl", feature = "amdgpu"))]
mod soak;
