//! The crate's top-level error and `Result` alias. Each layer (cache, kernel validation, each
//! backend) has its own enum; this one only gathers them and adds backend selection.

use crate::{cache::CacheError, gl::GlError, kernel::KernelError};

/// Everything a Sparkle call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `SPARKLE_BACKEND` holds a value that names no backend.
    #[error("SPARKLE_BACKEND={value:?} names no backend; valid values are: {valid}")]
    UnknownBackend { value: String, valid: String },
    /// The requested backend exists but cannot run on this machine.
    #[error("backend `{backend}` is not available on this machine: {reason}")]
    BackendUnavailable { backend: String, reason: String },
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Gl(#[from] GlError),
}

/// The `Result` of every fallible Sparkle call.
pub type Result<T, E = Error> = std::result::Result<T, E>;
