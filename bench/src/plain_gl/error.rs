//! What can go wrong on the plain-GL side: the library's [`GlError`] for the context and GL's
//! own error codes, and the failures of the loops and studies themselves.

use sparkle::gl::GlError;

/// A failure of the plain GL loop or the study, with the GL call it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainGlError {
    /// No context ([`sparkle::gl::PlainContext::open`] said why), or a GL error drained after a
    /// call ([`sparkle::gl::check_gl_error`]).
    #[error(transparent)]
    Gl(#[from] GlError),
    /// A thread of the plain side could not start or stopped before its context was ready.
    #[error("the plain GL side has no context: {0}")]
    NoContext(String),
    #[error("the plain GL loop's kernel failed to compile:\n{0}")]
    Compile(String),
    #[error("the plain GL loop's kernel failed to link:\n{0}")]
    Link(String),
    /// A call that failed without a `glGetError` code to drain (a fence, a wait, a wrong result).
    #[error("GL error {name} (0x{code:04x}) during {operation}")]
    Driver { operation: String, code: u32, name: &'static str },
    #[error("could not create a {size}-byte buffer: {reason}")]
    BufferCreation { size: u64, reason: String },
    #[error("the plain GL thread has stopped")]
    ThreadGone,
    #[error("a plain GL call panicked")]
    JobPanicked,
}

/// Drains `glGetError` and fails with the first error seen, naming `operation`. The context
/// must be current on this thread (the plain GL thread).
pub fn driver_error(gl: &glow::Context, operation: &str) -> Result<(), PlainGlError> {
    // SAFETY: per this function's contract the context is current on this thread.
    Ok(unsafe { sparkle::gl::check_gl_error(gl, operation) }?)
}
