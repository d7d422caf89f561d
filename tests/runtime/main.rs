//! The backend-neutral runtime and its executor: their guarantees against the fake backend
//! (`fake`, whose submissions complete only when a test says so), and the executor on the gl
//! backend. One test binary; a module per area.

mod fake;
#[path = "../support/isolated.rs"]
mod isolated;
#[path = "../support/shared_driver_cache.rs"]
mod shared_driver_cache;

mod executor;
#[cfg(feature = "gl")]
mod executor_gl;
mod placement;
#[cfg(feature = "amdgpu-sim")]
mod rebuild;
mod runtime;
