//! Plain GL on a context of its own, for the benchmarks to compare the gl backend with: the
//! overhead baseline (`sparkle bench-overhead`, `baseline.rs`) and the driver study
//! (`sparkle bench-transfer --study`, `study.rs`). It is part of the command, not of the
//! library: it calls glow and glutin directly and needs from Sparkle only the GLSL text the gl
//! backend would compile ([`sparkle::gl::driver_glsl`]).

mod baseline;
mod beside;
mod context;
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
