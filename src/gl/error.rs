//! Errors of the gl backend, and the backend-neutral kind each one is to the runtime; and GL's
//! own error codes (`glGetError`): their names and draining them, for the backend and for code
//! that runs GL on a [`PlainContext`](super::PlainContext).

use crate::{Error, ErrorKind};

/// What can go wrong in the gl backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlError {
    /// No EGL loader on this machine.
    #[error(
        "libEGL.so.1 could not be loaded: install an EGL loader and a GL driver \
         (Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri)"
    )]
    EglMissing,
    /// No EGL device or display gave a context; what each one said.
    #[error("no OpenGL 4.3+ core context could be created: {0}")]
    NoContext(String),
    /// `SPARKLE_EGL_DEVICE` is not an index of a listed device.
    #[error("SPARKLE_EGL_DEVICE={value:?} names no EGL device; {available}")]
    BadDevice {
        /// The variable's value.
        value: String,
        /// The devices there are, or how to list them.
        available: String,
    },
    /// The driver's OpenGL is older than 4.3.
    #[error("{renderer} offers OpenGL {version}; compute shaders need OpenGL 4.3 or newer")]
    VersionTooOld {
        /// `GL_RENDERER`.
        renderer: String,
        /// `GL_VERSION`.
        version: String,
    },
    /// The driver refused to compile the kernel's GLSL.
    #[error("kernel `{kernel}` failed to compile:\n{log}")]
    Compile {
        /// The kernel's name.
        kernel: String,
        /// The driver's compile log (its line numbers are the source's own).
        log: String,
    },
    /// The driver refused to link the compiled shader (often: over a resource limit).
    #[error("kernel `{kernel}` failed to link:\n{log}")]
    Link {
        /// The kernel's name.
        kernel: String,
        /// The driver's link log.
        log: String,
    },
    /// A GL call raised an error.
    #[error("GL error {name} (0x{code:04x}) during {operation}")]
    Driver {
        /// What Sparkle was doing.
        operation: String,
        /// The `glGetError` code.
        code: u32,
        /// The code's name (`GL_OUT_OF_MEMORY`, …).
        name: &'static str,
    },
    /// The driver made no texture to read a buffer as texels through.
    #[error("could not create a buffer texture for texture unit {unit}: {reason}")]
    TextureCreation {
        /// The texture unit it was for.
        unit: u32,
        /// What the driver said.
        reason: String,
    },
    /// The driver made no buffer of this size.
    #[error("could not create a {size}-byte buffer: {reason}")]
    BufferCreation {
        /// Bytes asked for.
        size: u64,
        /// The driver's reason.
        reason: String,
    },
    /// `SPARKLE_HOLD_CLOCKS` asked for what cannot be done here, or is not a setting.
    #[error("{0}")]
    ClockHold(String),
    /// The GL thread is gone: the process is exiting.
    #[error("the GL thread has stopped (the process is exiting)")]
    ThreadGone,
    /// Work on the GL thread panicked (the panic's message); the thread goes on with other work.
    #[error("a GL call panicked on the GL thread: {0}")]
    JobPanicked(String),
}

impl From<GlError> for Error {
    fn from(err: GlError) -> Self {
        let kind = match &err {
            GlError::EglMissing
            | GlError::NoContext(_)
            | GlError::BadDevice { .. }
            | GlError::VersionTooOld { .. }
            | GlError::ClockHold(_) => ErrorKind::Unavailable,
            GlError::Compile { .. } | GlError::Link { .. } => ErrorKind::Compile,
            GlError::Driver { code: glow::OUT_OF_MEMORY, .. } => ErrorKind::OutOfMemory,
            GlError::Driver { code: glow::CONTEXT_LOST, .. }
            | GlError::ThreadGone
            | GlError::JobPanicked(_) => ErrorKind::DeviceLost,
            GlError::Driver { .. } => ErrorKind::InvalidArgument,
            GlError::BufferCreation { .. } | GlError::TextureCreation { .. } => ErrorKind::OutOfMemory,
        };
        Error::from_detail(kind, err)
    }
}

/// The name of a `glGetError` code (`GL_OUT_OF_MEMORY`, …; "unknown GL error" for a code GL
/// does not define).
pub fn gl_error_name(code: u32) -> &'static str {
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

/// Drains `glGetError` (at most 16 codes, as a context with several error flags reports one
/// per call), returning the first error seen; `None` when GL reported none.
///
/// # Safety
/// `gl`'s context must be current on the calling thread.
pub unsafe fn take_gl_error(gl: &glow::Context) -> Option<u32> {
    let mut first = None;
    for _ in 0..16 {
        // SAFETY: per this function's contract the context is current on this thread.
        let code = unsafe { glow::HasContext::get_error(gl) };
        if code == glow::NO_ERROR {
            break;
        }
        first.get_or_insert(code);
    }
    first
}

/// Drains `glGetError` ([`take_gl_error`]) and fails with [`GlError::Driver`] naming
/// `operation` and the first error seen.
///
/// # Errors
/// [`GlError::Driver`] when GL reported an error since the last drain.
///
/// # Safety
/// `gl`'s context must be current on the calling thread.
pub unsafe fn check_gl_error(gl: &glow::Context, operation: &str) -> Result<(), GlError> {
    // SAFETY: per this function's contract.
    match unsafe { take_gl_error(gl) } {
        None => Ok(()),
        Some(code) => {
            Err(GlError::Driver { operation: operation.to_owned(), code, name: gl_error_name(code) })
        }
    }
}
