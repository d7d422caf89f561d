//! What can go wrong on the plain-GL side.

/// A failure of the plain GL loop or the study, with the GL call it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainGlError {
    #[error(
        "libEGL.so.1 could not be loaded: install an EGL loader and a GL driver \
         (Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri)"
    )]
    EglMissing,
    #[error("the plain GL loop has no OpenGL 4.3+ core context: {0}")]
    NoContext(String),
    #[error("the plain GL loop's kernel failed to compile:\n{0}")]
    Compile(String),
    #[error("the plain GL loop's kernel failed to link:\n{0}")]
    Link(String),
    #[error("GL error {name} (0x{code:04x}) during {operation}")]
    Driver { operation: String, code: u32, name: &'static str },
    #[error("could not create a {size}-byte buffer: {reason}")]
    BufferCreation { size: u64, reason: String },
    #[error("the plain GL thread has stopped")]
    ThreadGone,
    #[error("a plain GL call panicked")]
    JobPanicked,
}

/// The name of a `glGetError` code.
pub fn error_name(code: u32) -> &'static str {
    match code {
        glow::INVALID_ENUM => "GL_INVALID_ENUM",
        glow::INVALID_VALUE => "GL_INVALID_VALUE",
        glow::INVALID_OPERATION => "GL_INVALID_OPERATION",
        glow::INVALID_FRAMEBUFFER_OPERATION => "GL_INVALID_FRAMEBUFFER_OPERATION",
        glow::OUT_OF_MEMORY => "GL_OUT_OF_MEMORY",
        glow::STACK_UNDERFLOW => "GL_STACK_UNDERFLOW",
        glow::STACK_OVERFLOW => "GL_STACK_OVERFLOW",
        glow::CONTEXT_LOST => "GL_CONTEXT_LOST",
        glow::WAIT_FAILED => "GL_WAIT_FAILED",
        _ => "unknown GL error",
    }
}

/// Drains `glGetError` and fails with the first error seen, naming `operation`. The context
/// must be current on this thread (the plain GL thread).
pub fn driver_error(gl: &glow::Context, operation: &str) -> Result<(), PlainGlError> {
    let mut first = None;
    for _ in 0..16 {
        // SAFETY: per this function's contract the context is current on this thread.
        let code = unsafe { glow::HasContext::get_error(gl) };
        if code == glow::NO_ERROR {
            break;
        }
        first.get_or_insert(code);
    }
    match first {
        None => Ok(()),
        Some(code) => {
            Err(PlainGlError::Driver { operation: operation.to_owned(), code, name: error_name(code) })
        }
    }
}
