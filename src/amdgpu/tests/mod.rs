//! Tests of the backend's crate-private layers that need more than one module or a fake kernel
//! driver: GPU memory over the recording fake driver (`memory`), and the render node on a real
//! card (`render_node`). The fake driver and the committed code objects come from the
//! integration tests' `amdgpu_support`, shared by path.

#[path = "../../../tests/amdgpu_support/mod.rs"]
mod amdgpu_support;
mod memory;
mod render_node;
#[cfg(feature = "amdgpu-sim")]
mod sim_driver;
