//! Counts of the GL buffer and program names this process owns through `GlBuffer` and
//! `GlProgram`: made when a wrapper takes a name, deleted when the GL thread runs the deletion
//! that dropping the wrapper queued. Their difference is what is still alive, so long runs can
//! show that no name leaks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static BUFFERS_MADE: AtomicU64 = AtomicU64::new(0);
static BUFFERS_DELETED: AtomicU64 = AtomicU64::new(0);
static PROGRAMS_MADE: AtomicU64 = AtomicU64::new(0);
static PROGRAMS_DELETED: AtomicU64 = AtomicU64::new(0);

/// GL names made and deleted so far in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveObjects {
    /// GL buffer names taken by a `GlBuffer`.
    pub buffers_made: u64,
    /// GL buffer names the GL thread deleted.
    pub buffers_deleted: u64,
    /// GL program names taken by a `GlProgram`.
    pub programs_made: u64,
    /// GL program names the GL thread deleted.
    pub programs_deleted: u64,
}

impl LiveObjects {
    /// Buffers not deleted yet.
    pub fn buffers(&self) -> u64 {
        self.buffers_made - self.buffers_deleted
    }

    /// Programs not deleted yet.
    pub fn programs(&self) -> u64 {
        self.programs_made - self.programs_deleted
    }
}

/// A snapshot of the counts. Deletions run on the GL thread after the drop that queued them.
pub fn live_objects() -> LiveObjects {
    LiveObjects {
        buffers_deleted: BUFFERS_DELETED.load(Relaxed),
        programs_deleted: PROGRAMS_DELETED.load(Relaxed),
        buffers_made: BUFFERS_MADE.load(Relaxed),
        programs_made: PROGRAMS_MADE.load(Relaxed),
    }
}

pub(crate) fn buffer_made() {
    BUFFERS_MADE.fetch_add(1, Relaxed);
}

pub(crate) fn buffer_deleted() {
    BUFFERS_DELETED.fetch_add(1, Relaxed);
}

pub(crate) fn program_made() {
    PROGRAMS_MADE.fetch_add(1, Relaxed);
}

pub(crate) fn program_deleted() {
    PROGRAMS_DELETED.fetch_add(1, Relaxed);
}
