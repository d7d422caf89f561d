//! The amdgpu layers' error: [`AmdgpuError`] lives in `sparkle-amdgpu-kmd` (the simulator speaks
//! it too); this file maps each of its variants onto the crate's [`ErrorKind`](crate::ErrorKind).

pub use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

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
