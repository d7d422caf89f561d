//! Sparkle: a GPU compute runtime that never pays for the same compile twice.
//!
//! You describe a kernel with a [`KernelSpec`] — its sources (GLSL, OpenCL C, or code objects
//! built ahead of time), defines, bindings and workgroup size — and a [`Runtime`] compiles it
//! once, through one persistent program cache keyed by the GPU and driver it was compiled for,
//! checks it against what the compiler produced, checks every dispatch against it before
//! anything reaches a driver, and runs the work asynchronously.
//!
//! # A first kernel
//!
//! ```
//! use std::time::Duration;
//! use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // The test's cache goes to a folder of its own, not the user's.
//! # let cache = tempfile::tempdir()?;
//! # std::env::set_var("SPARKLE_CACHE_DIR", cache.path());
//!
//! let runtime = Runtime::from_env()?;                      // SPARKLE_BACKEND=gl|amdgpu|amdgpu-sim|auto
//! let kernel = KernelSpec::new("double", [64, 1, 1])
//!     // Each backend compiles the source in its language: GLSL on gl, OpenCL C on amdgpu.
//!     .glsl("layout(std430, binding = 0) buffer Data { float v[]; };
//!            uniform uint n;
//!            void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= 2.0; }")
//!     .opencl("twice", "__kernel void twice(__global float *v, uint n) {
//!                           uint i = get_global_id(0); if (i < n) v[i] *= 2.0f; }")
//!     .storage("v", Access::ReadWrite)
//!     .scalar("n", ScalarType::U32);
//! let data = runtime.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut)?;
//! let program = runtime.program(&kernel)?;                 // memory, disk, or compile — once
//! let done = runtime.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [1, 1, 1])?;
//! done.wait(Duration::from_secs(10))?;                     // or poll done.is_done()
//! assert_eq!(runtime.download::<f32>(&data)?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```
//!
//! More in `examples/` (`cargo run --example NAME`): `first_kernel`, `opencl_on_amdgpu_sim`,
//! `commands` (several dispatches, copies and barriers in one submission), `pipeline` (a stream
//! of batches), `cache_config` (a private cache folder, a read-only one for a fleet, the
//! statistics) and `tuned_variants` (kernel variants and `tune`).
//!
//! # Backends
//!
//! [`Runtime::from_env`] opens the backend `SPARKLE_BACKEND` names — `gl`, `amdgpu`,
//! `amdgpu-sim` or `auto` (the default: amdgpu on a supported AMD card, else gl; never the
//! simulator) — and [`Runtime::open_backend`] one named in code. A spec may carry sources in
//! several languages; each backend compiles the one it takes.
//!
//! - **`gl`**: OpenGL 4.3+ compute shaders (GLSL) on a headless EGL context, on any vendor's
//!   driver, or on Mesa's llvmpipe where there is no GPU.
//! - **`amdgpu`** (experimental): direct submission of PM4 command buffers to AMD RDNA2/RDNA3
//!   GPUs through the DRM render node, without Mesa. Kernels are OpenCL C, compiled by clang-22
//!   with libclc for the device's exact target, or code objects built ahead of time. It has not
//!   yet run on a card.
//! - **`amdgpu-sim`**: the amdgpu backend's own code over a simulated gfx1100 whose RDNA3 code
//!   is interpreted on the CPU: OpenCL C kernels anywhere, for tests and CI. It checks
//!   correctness, not speed. The simulator is its own crate (`sparkle-amdgpu-sim`), compiled
//!   only with the feature `amdgpu-sim` (opt-in in the library, on in the `sparkle` command).
//!
//! Backends implement the small [`hal`] seam; everything backend-neutral lives in the
//! [`Runtime`].
//!
//! # The program cache
//!
//! [`Runtime::program`] looks a kernel up in memory, then on disk (`SPARKLE_CACHE_DIR`, else
//! `~/.cache/sparkle`: checksummed entries that several processes share safely, bounded in size
//! and age), then — with `SPARKLE_CACHE_REMOTE` set — in a fleet tier on an S3-compatible store
//! or Redis shared by every machine, and compiles only when all of them miss, once however many
//! threads ask. [`cache::CacheConfig`] configures it (or the environment, through
//! [`cache::CacheConfig::from_env`]); a pre-seeded folder can be shipped read-only;
//! [`Runtime::cache_stats`] reports hits per tier, compiles and the time they saved. The
//! guide's cache page (`docs/guide/cache.md`, "Fleet") explains the remote tier: signed
//! entries, the wait budget that keeps a slow remote from costing more than a compile,
//! read-only machines, and prefetching a working set.
//!
//! # Main types
//!
//! - [`Runtime`]: one backend's device; buffers, programs, dispatches, submissions, cache.
//! - [`KernelSpec`] with its [`Access`] and [`ScalarType`] bindings: a kernel and how it is
//!   called.
//! - [`Buffer`] (made with a [`BufferUsage`]), [`Program`], and the dispatch arguments [`Arg`].
//! - [`Commands`]: dispatches, copies and barriers recorded for one submission;
//!   [`Submission`]: its fence, to poll or wait for with a timeout.
//! - [`Pipeline`] over a [`Stage`]: a stream of batches with uploads, GPU work and read-backs
//!   overlapped ([`Feeder`] and [`Results`] for its two ends, [`BatchError`] for its failures).
//! - [`Placement`]: several devices in one process (`SPARKLE_DEVICES`), each [`Workload`] run
//!   on the device a learned history of measured times picks; [`Placement::explain`] says why.
//! - [`Error`] with its backend-neutral [`ErrorKind`]: the one error type.
//! - [`DeviceInfo`] and [`Limits`]: what the device is and what it takes.
//! - [`suite`]: saxpy, sgemm and conv2d as ordinary kernel specs, with CPU references and
//!   tuning ([`suite::tuning`]).

// Every public item is documented; the lint keeps it so.
#![warn(missing_docs)]

#[cfg(feature = "amdgpu")]
pub mod amdgpu;
pub mod cache;
mod error;
#[cfg(feature = "gl")]
pub mod gl;
pub mod hal;
pub mod kernel;
pub mod runtime;
pub mod suite;
pub mod trace;

pub use error::{Error, ErrorKind, Result};
pub use hal::{BufferUsage, DeviceClass, DeviceInfo, Limits};
pub use kernel::{
    Access, Binding, KernelError, KernelSource, KernelSpec, ScalarType, SourceLanguage, TexelComponent,
    TexelFormat,
};
pub use runtime::{
    Arg, BackendChoice, BatchError, Buffer, Commands, Feeder, Pipeline, Placed, Placement, Program, Results,
    Runtime, Stage, Submission, Workload, BACKEND_ENV, DEVICES_ENV,
};

/// The guide's and the README's Rust examples, compiled as doc tests.
#[cfg(doctest)]
mod guide_examples {
    #[doc = include_str!("../README.md")]
    struct Readme;
    #[doc = include_str!("../docs/guide/getting-started.md")]
    struct GettingStarted;
    #[doc = include_str!("../docs/guide/kernels.md")]
    struct Kernels;
    #[doc = include_str!("../docs/guide/cache.md")]
    struct Cache;
    #[doc = include_str!("../docs/guide/performance.md")]
    struct Performance;
}
