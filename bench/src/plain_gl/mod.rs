//! Plain GL on a context of its own, for the benchmarks to compare the gl backend with: the
//! overhead baseline (`sparkle-bench bench-overhead`, `baseline.rs`) and the driver study
//! (`sparkle-bench bench-transfer --study`, `study.rs`). It calls glow directly, on a context the
//! library opens exactly as the gl backend opens its own ([`sparkle::gl::PlainContext`]: same
//! device choice, same context version), and compiles the GLSL text the backend would compile
//! ([`sparkle::gl::driver_glsl`]); nothing else of Sparkle runs on that context.

mod baseline;
mod beside;
pub mod compile_contexts;
mod error;
mod overlap;
pub mod study;
mod watched;

pub use baseline::{Baseline, BaselineKernel, RoundTripSteps, SaxpyInputs};
pub use error::PlainGlError;
pub use overlap::OverlapPlan;

/// The barrier bits the gl backend issues after every dispatch (`ALL_BARRIERS` of
/// `src/gl/submit.rs`); the plain loop issues the same.
const ALL_BARRIERS: u32 =
    glow::SHADER_STORAGE_BARRIER_BIT | glow::BUFFER_UPDATE_BARRIER_BIT | glow::UNIFORM_BARRIER_BIT;
