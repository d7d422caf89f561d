//! The gl backend on the machine's GL driver (Mesa's llvmpipe where there is no GPU): the seam's
//! operations, the suite and its variants, texel buffers, large transfers, devices, the program
//! cache, and the driver's own cache. One test binary; a module per area. Tests that change or
//! count what belongs to the whole process run in a process of their own (`isolated`), and so do
//! the tests that compile dozens of variants ([`compiles_apart`]).

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

/// Runs the test `function` of `module` (pass `module_path!()`) in a process of its own and
/// returns true once it passed there; in that process it returns false and the test's body runs.
/// For the tests that compile dozens of variants: a process has one GL thread per device, shared
/// by every runtime in it, so the binary's tests would queue their compiles (llvmpipe builds a
/// kernel on that thread, on one core) behind each other. Apart, two of them compile on two cores.
fn compiles_apart(module: &str, function: &str) -> bool {
    isolated::ran_in_own_process(module, function, &[])
}
