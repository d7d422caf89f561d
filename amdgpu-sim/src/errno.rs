//! Errors shaped like the kernel's: each names the ioctl and its object and carries the errno
//! the real amdgpu driver returns in the same situation, so callers see the same error kinds
//! from the simulator as from a render node.

use sparkle_amdgpu_kmd::error::AmdgpuError;

/// An `Io` error carrying `errno`, with `what` naming the operation and a reason appended.
pub(crate) fn os_error(what: impl Into<String>, errno: i32, reason: impl std::fmt::Display) -> AmdgpuError {
    let source = std::io::Error::from_raw_os_error(errno);
    AmdgpuError::io(format!("{} ({reason})", what.into()), source)
}

pub(crate) fn einval(what: impl Into<String>, reason: impl std::fmt::Display) -> AmdgpuError {
    os_error(what, libc::EINVAL, reason)
}

pub(crate) fn enoent(what: impl Into<String>, reason: impl std::fmt::Display) -> AmdgpuError {
    os_error(what, libc::ENOENT, reason)
}
