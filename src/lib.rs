//! Sparkle: a GPU compute runtime that never pays for the same compile twice.
//!
//! A [`Runtime`] opens one backend's device (`SPARKLE_BACKEND=gl|auto`) and owns everything
//! backend-neutral: checking kernels and dispatches, the persistent program cache keyed by the
//! GPU a program was compiled for, and asynchronous submissions. Backends implement the small
//! [`hal`] seam: the `gl` backend (OpenGL 4.3+ compute over headless EGL) today.
//!
//! ```no_run
//! use std::time::Duration;
//! use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};
//! # fn main() -> sparkle::Result<()> {
//! let runtime = Runtime::from_env()?;
//! let kernel = KernelSpec::new("double", [64, 1, 1])
//!     .glsl("layout(std430, binding = 0) buffer Data { float v[]; };
//!            uniform uint n;
//!            void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= 2.0; }")
//!     .storage("v", Access::ReadWrite)
//!     .scalar("n", ScalarType::U32);
//! let data = runtime.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut)?;
//! let program = runtime.program(&kernel)?;                  // memory, disk, or compile — once
//! let done = runtime.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [1, 1, 1])?;
//! done.wait(Duration::from_secs(10))?;                      // or poll done.is_done()
//! assert_eq!(runtime.download::<f32>(&data)?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```

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

pub use error::{Error, ErrorKind, Result};
pub use hal::{BufferUsage, DeviceClass, DeviceInfo, Limits};
pub use kernel::{Access, Binding, KernelError, KernelSource, KernelSpec, ScalarType, SourceLanguage};
pub use runtime::{
    Arg, BackendChoice, BatchError, Buffer, Commands, Feeder, Pipeline, Program, Results, Runtime, Stage,
    Submission, BACKEND_ENV,
};
