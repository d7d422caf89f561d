//! The crate's one error type: a backend-neutral [`ErrorKind`] a program can act on, a message
//! that names the thing and the fix, and the layer's own error (a backend's, the cache's, a
//! kernel check's) as its source.

use std::fmt;
use std::sync::Arc;

use crate::cache::CacheError;
use crate::kernel::KernelError;

/// What kind of failure an [`Error`] is, whatever backend produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The backend, device or a driver feature is not there (no GPU, no EGL, an unknown
    /// `SPARKLE_BACKEND`, a kernel language this backend does not take).
    Unavailable,
    /// The kernel spec is wrong, or disagrees with what the compiled program declares.
    InvalidKernel,
    /// A call's argument is wrong: a dispatch's arguments or grid, a buffer range, a setting.
    InvalidArgument,
    /// The compiler rejected the kernel; the message carries its log.
    Compile,
    /// The device or the host ran out of memory.
    OutOfMemory,
    /// Work did not finish within the time allowed.
    Timeout,
    /// The device stopped working (reset, context lost, worker thread gone).
    DeviceLost,
    /// A file or folder could not be read or written.
    Io,
}

impl ErrorKind {
    /// The kind in words, as messages show it (`"invalid kernel"`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::InvalidKernel => "invalid kernel",
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::Compile => "compile error",
            ErrorKind::OutOfMemory => "out of memory",
            ErrorKind::Timeout => "timeout",
            ErrorKind::DeviceLost => "device lost",
            ErrorKind::Io => "I/O error",
        }
    }
}

type Detail = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a Sparkle call can fail with. `Display` is the whole message (detail included);
/// [`std::error::Error::source`] gives the layer's own typed error for programs that inspect it.
/// Cheap to clone: one compile error is handed to every thread that waited on it.
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Detail>,
}

impl Error {
    /// An error with no underlying source.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    /// An error whose message is `detail`'s, kept as the source.
    pub fn from_detail(kind: ErrorKind, detail: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self { kind, message: detail.to_string(), source: Some(Arc::new(detail)) }
    }

    /// What kind of failure this is: what a caller can match on.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The source as a concrete type, if it is one (`err.detail::<GlError>()`).
    pub fn detail<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.source.as_deref().and_then(|source| source.downcast_ref::<T>())
    }

    /// The same error with `context` in front of its message.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("kind", &self.kind).field("message", &self.message).finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl From<KernelError> for Error {
    fn from(err: KernelError) -> Self {
        let kind = match &err {
            KernelError::MissingSource { .. } => ErrorKind::Unavailable,
            KernelError::InvalidSpec { .. } | KernelError::Interface { .. } => ErrorKind::InvalidKernel,
            KernelError::ExceedsLimit { .. } => ErrorKind::InvalidKernel,
            KernelError::ArgumentCount { .. }
            | KernelError::ArgumentType { .. }
            | KernelError::Argument { .. }
            | KernelError::Grid { .. } => ErrorKind::InvalidArgument,
        };
        Error::from_detail(kind, err)
    }
}

impl From<CacheError> for Error {
    fn from(err: CacheError) -> Self {
        let kind = match &err {
            CacheError::InvalidEnv { .. } => ErrorKind::InvalidArgument,
            _ => ErrorKind::Io,
        };
        Error::from_detail(kind, err)
    }
}

/// The `Result` of every fallible Sparkle call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
