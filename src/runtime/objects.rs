//! The façade's objects: [`Buffer`] and [`Program`] hold a backend's typed object behind `Any`,
//! the token of the device that made it (checked before any driver call, so another device's
//! object is refused, never misread), and what the runtime tracks about them — the fences a
//! buffer's readers and writers wait for, a program's spec and binding plan.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::validate::Plan;
use crate::kernel::KernelSpec;
use crate::{Error, ErrorKind, Result};

pub(crate) struct BufferShared {
    pub token: u64,
    pub backend: &'static str,
    pub size: u64,
    /// Fence of the latest submission that writes the buffer: host reads wait for it.
    pub last_write: AtomicU64,
    /// Fence of the latest submission that uses the buffer at all: host writes wait for it.
    pub last_use: AtomicU64,
    pub object: Box<dyn Any + Send + Sync>,
}

/// A device buffer. Cloning shares the same memory; it is freed when the last clone drops and
/// no unfinished submission uses it.
#[derive(Clone)]
pub struct Buffer {
    pub(crate) shared: Arc<BufferShared>,
}

impl Buffer {
    pub(crate) fn new(token: u64, backend: &'static str, size: u64, object: impl Any + Send + Sync) -> Self {
        Buffer {
            shared: Arc::new(BufferShared {
                token,
                backend,
                size,
                last_write: AtomicU64::new(0),
                last_use: AtomicU64::new(0),
                object: Box::new(object),
            }),
        }
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> u64 {
        self.shared.size
    }

    /// The backend that made the buffer.
    pub fn backend(&self) -> &'static str {
        self.shared.backend
    }

    /// The backend's object, after checking that `token`'s device made this buffer.
    pub(crate) fn object<T: Any>(&self, token: u64) -> Result<&T> {
        if self.shared.token != token {
            return Err(foreign("buffer", self.shared.backend));
        }
        self.shared.object.downcast_ref::<T>().ok_or_else(|| foreign("buffer", self.shared.backend))
    }

    pub(crate) fn mark_used(&self, fence: u64, writes: bool) {
        self.shared.last_use.fetch_max(fence, Ordering::AcqRel);
        if writes {
            self.shared.last_write.fetch_max(fence, Ordering::AcqRel);
        }
    }

    /// After a host write: submissions up to `fence` no longer decide the contents.
    pub(crate) fn forget_writes_up_to(&self, fence: u64) {
        let _ = self
            .shared
            .last_write
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| (w <= fence).then_some(0));
    }

    pub(crate) fn last_write(&self) -> u64 {
        self.shared.last_write.load(Ordering::Acquire)
    }

    pub(crate) fn last_use(&self) -> u64 {
        self.shared.last_use.load(Ordering::Acquire)
    }

    /// Checks that `offset..offset + len` lies inside the buffer.
    pub(crate) fn check_range(&self, offset: u64, len: u64) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(()),
            _ => Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "bytes {offset}..{} are outside the {}-byte buffer",
                    offset.saturating_add(len),
                    self.size()
                ),
            )),
        }
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer").field("backend", &self.backend()).field("size", &self.size()).finish()
    }
}

pub(crate) struct ProgramShared {
    pub token: u64,
    pub backend: &'static str,
    pub spec: KernelSpec,
    /// `spec.name`, shared cheaply with the submissions that name the program in messages.
    pub name: Arc<str>,
    pub plan: Plan,
    /// The cache handle of the backend's program: keeps it in the memory tier while held.
    pub handle: Box<dyn Any + Send + Sync>,
}

/// A compiled kernel checked against its spec, ready to dispatch. Holding it keeps the program
/// in the cache's memory tier.
#[derive(Clone)]
pub struct Program {
    pub(crate) shared: Arc<ProgramShared>,
}

impl Program {
    /// The spec the program was built from.
    pub fn spec(&self) -> &KernelSpec {
        &self.shared.spec
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.shared.spec.name
    }

    /// The backend the program was built for.
    pub fn backend(&self) -> &'static str {
        self.shared.backend
    }

    pub(crate) fn handle<T: Any>(&self, token: u64) -> Result<&T> {
        if self.shared.token != token {
            return Err(foreign("program", self.shared.backend));
        }
        self.shared.handle.downcast_ref::<T>().ok_or_else(|| foreign("program", self.shared.backend))
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program").field("name", &self.name()).field("backend", &self.backend()).finish()
    }
}

fn foreign(what: &str, backend: &str) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!(
            "this {what} was made by another device ({backend} backend, another context or GPU); \
             pass objects only to the runtime that made them, or to one opened on the same device"
        ),
    )
}
