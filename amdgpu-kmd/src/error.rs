//! The one error type of the amdgpu layers, with variants neutral enough to map one-to-one onto
//! the `sparkle` library's error kinds (the library holds that mapping).

/// Result alias of the amdgpu layers.
pub type Result<T, E = AmdgpuError> = std::result::Result<T, E>;

/// What went wrong in an amdgpu layer: the kernel driver, the simulator or the backend above them.
#[derive(Debug, thiserror::Error)]
pub enum AmdgpuError {
    /// No usable device: no render node, only other drivers' nodes, no permission, an unsupported
    /// GPU, a missing compiler. The message says what was found and how to fix it; the runtime
    /// names the backend when it reports it, so the message does not.
    #[error("{0}")]
    Unavailable(String),
    /// A kernel (source or code object) the backend cannot run; names the kernel and the reason.
    #[error("kernel `{kernel}` cannot run on amdgpu: {reason}")]
    InvalidKernel {
        /// The kernel's name.
        kernel: String,
        /// Why it cannot run, in a user's terms.
        reason: String,
    },
    /// The compiler refused the source; `log` is its complete output.
    #[error("compiling `{what}` failed:\n{log}")]
    Compile {
        /// What was compiled (a kernel or file name).
        what: String,
        /// The compiler's complete output.
        log: String,
    },
    /// GEM allocation or VA space ran out.
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    /// The GPU did not finish in time.
    #[error("the GPU did not finish in {ms} ms{detail}")]
    Timeout {
        /// How long was waited, in milliseconds.
        ms: u64,
        /// What was running, appended to the message (empty, or starting with a separator).
        detail: String,
    },
    /// The GPU was reset or the context is unusable.
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// A system call or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// The operation and its object.
        what: String,
        /// The system's error.
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

    /// An `InvalidKernel` error: `kernel` cannot run because of `reason`.
    pub fn invalid_kernel(kernel: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidKernel { kernel: kernel.into(), reason: reason.into() }
    }
}
