//! The one error type of the amdgpu layers, with variants neutral enough to map one-to-one onto
//! the crate's error when the backend is wired in.

/// Result alias of the amdgpu layers.
pub type Result<T, E = AmdgpuError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum AmdgpuError {
    /// No usable device: no render node, only other drivers' nodes, no permission, an unsupported
    /// GPU, a missing compiler. The message says what was found and how to fix it; the runtime
    /// names the backend when it reports it, so the message does not.
    #[error("{0}")]
    Unavailable(String),
    /// A kernel (source or code object) the backend cannot run; names the kernel and the reason.
    #[error("kernel `{kernel}` cannot run on amdgpu: {reason}")]
    InvalidKernel { kernel: String, reason: String },
    /// The compiler refused the source; `log` is its complete output.
    #[error("compiling `{what}` failed:\n{log}")]
    Compile { what: String, log: String },
    /// GEM allocation or VA space ran out.
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    /// The GPU did not finish in time.
    #[error("the GPU did not finish in {ms} ms{detail}")]
    Timeout { ms: u64, detail: String },
    /// The GPU was reset or the context is unusable.
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl AmdgpuError {
    /// An `Io` error for `what` (a sentence naming the operation and its object).
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }

    /// An `Io` error about a file.
    pub fn file(action: &str, path: &std::path::Path, source: std::io::Error) -> Self {
        Self::io(format!("{action} {}", path.display()), source)
    }

    pub fn invalid_kernel(kernel: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidKernel { kernel: kernel.into(), reason: reason.into() }
    }
}

impl From<AmdgpuError> for crate::Error {
    /// Each variant has its own kind; the message is the variant's and the variant stays the
    /// source (`err.detail::<AmdgpuError>()`).
    fn from(err: AmdgpuError) -> Self {
        use crate::ErrorKind;
        let kind = match &err {
            AmdgpuError::Unavailable(_) => ErrorKind::Unavailable,
            AmdgpuError::InvalidKernel { .. } => ErrorKind::InvalidKernel,
            AmdgpuError::Compile { .. } => ErrorKind::Compile,
            AmdgpuError::OutOfMemory(_) => ErrorKind::OutOfMemory,
            AmdgpuError::Timeout { .. } => ErrorKind::Timeout,
            AmdgpuError::DeviceLost(_) => ErrorKind::DeviceLost,
            AmdgpuError::Io { .. } => ErrorKind::Io,
        };
        crate::Error::from_detail(kind, err)
    }
}
