//! Sparkle: a GPU compute runtime that never pays for the same compile twice.
//!
//! One [`Backend`] trait, implemented by the `gl` backend (OpenGL 4.3+ compute over headless EGL),
//! and one persistent [`cache::ProgramCache`] keyed by the GPU a program was compiled for.
//!
//! ```no_run
//! use sparkle::{Access, Arg, BufferUsage, KernelSpec, ScalarType};
//! # fn main() -> sparkle::Result<()> {
//! let backend = sparkle::open_from_env()?;
//! let kernel = KernelSpec::new("double", [64, 1, 1])
//!     .with_glsl("layout(std430, binding = 0) buffer Data { float v[]; };
//!                 uniform uint n;
//!                 void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= 2.0; }")
//!     .storage("v", Access::ReadWrite)
//!     .scalar("n", ScalarType::U32);
//! let data = backend.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut)?;
//! let program = backend.program(&kernel)?;
//! backend.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [1, 1, 1])?
//!     .wait(std::time::Duration::from_secs(10))?;
//! assert_eq!(backend.download::<f32>(&data)?, vec![2.0, 4.0, 6.0]);
//! # Ok(()) }
//! ```

#[cfg(feature = "amdgpu")]
pub mod amdgpu;
pub mod backend;
pub mod cache;
mod error;
pub mod gl;
pub mod kernel;
pub mod suite;

pub use backend::{
    open, open_from_env, open_with, Arg, Backend, BackendChoice, BackendKind, Buffer, BufferUsage,
    DeviceInfo, Limits, Program, Submission,
};
pub use error::{Error, Result};
pub use kernel::{Access, Binding, KernelError, KernelSpec, ScalarType, SourceLanguage};
