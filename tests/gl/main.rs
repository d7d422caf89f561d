//! The gl backend on the machine's GL driver (Mesa's llvmpipe where there is no GPU): the seam's
//! operations, the suite and its variants, texel buffers, large transfers, devices, the program
//! cache, and the driver's own cache. One test binary; a module per area. Tests that change or
//! count what belongs to the whole process run in a process of their own (`isolated`).

#[path = "../support/cache/faults.rs"]
mod faults;
#[path = "../support/gl.rs"]
mod gl_support;
#[path = "../support/isolated.rs"]
mod isolated;
#[path = "../support/shared_driver_cache.rs"]
mod shared_driver_cache;

mod cache;
mod devices;
mod driver_cache;
mod driver_change;
mod seam;
mod suite;
mod texels;
mod trace;
mod transfers;
mod variants;
mod winograd;
