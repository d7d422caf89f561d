//! The one persistent program cache every backend goes through, generic over the program object
//! a backend keeps in memory (`P`).
//!
//! `get`: memory hit → handle · else, once per key however many threads ask (single flight):
//! disk hit → verify → backend loads the blob (a refusal discards the entry) · else, with a
//! remote configured, remote hit within its budget → verify → load → keep on disk · else
//! compile → publish to disk (and to the remote, in the background) → insert.

mod config;
mod disk;
mod disk_tier;
mod driver_dirs;
mod entry;
mod error;
mod files;
#[cfg(feature = "remote")]
mod fleet;
mod key;
mod memory;
mod process_flight;
mod program_cache;
pub mod recipe;
pub mod remote;
mod single_flight;
mod stats;
mod working_set;

use std::time::Duration;

pub use config::{
    parse_age_days, parse_max_size, parse_size, parse_switch, CacheConfig, DIR_ENV, MAX_AGE_ENV,
    MAX_SIZE_ENV, MIN_DISK_BYTES, READ_ONLY_ENV,
};
pub use disk::{DiskStore, EntryInfo, PruneReport, VerifyReport, GPU_DESCRIPTION};
pub use driver_dirs::{is_driver_cache_name, prepare_driver_cache, DriverCacheInfo, DRIVER_CACHES_DIR};
/// What an entry must be to be accepted; public for the fuzz targets only.
#[doc(hidden)]
pub use entry::Expect;
pub use entry::{EntryHeader, HEADER_LEN};
pub use error::CacheError;
/// Test hook: every entry write fails with an errno (a full disk) until reset.
#[doc(hidden)]
pub use files::inject_write_error;
#[cfg(feature = "remote")]
pub use fleet::{FleetCache, PullReport, PushReport, RemoteObject, RemoteStatus, RemoteVerifyReport};
pub use key::{backend_tag, CacheKey, GpuId, CACHE_FORMAT_VERSION};
pub use memory::ProgramHandle;
pub use remote::RemoteConfig;
pub use stats::{human_bytes, CacheStats};
pub use working_set::WORKING_SET_FILE;

/// A serialized program as a backend's driver produced it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// Backend-specific format tag (GL: the binaryFormat enum).
    pub format: u32,
    /// The serialized program, exactly as the driver gave it.
    pub bytes: Vec<u8>,
}

/// What a compile produced: the live program, and the blob to persist if the backend can
/// serialize it (`None`: memory tier only).
pub struct Built<P> {
    /// The program, ready to run.
    pub program: P,
    /// What to write to disk (and the remote tier), if anything.
    pub blob: Option<Blob>,
    /// How long the compile took: recorded in the entry, and counted as time saved by each
    /// later hit.
    pub compile_time: Duration,
}

/// How the cache gets a program when memory misses; one value per request.
pub trait ProgramSource<P> {
    /// A compile failure; handed to every thread waiting on the same key, hence `Clone`.
    type Error: Clone + Send + Sync + 'static;

    /// Compiles from source. Called at most once per key at a time.
    fn compile(&self) -> Result<Built<P>, Self::Error>;

    /// Compiles like [`compile`](Self::compile) while racing something else: `give_up` is asked
    /// now and then whether the result is still wanted, and `Ok(None)` means it was not and the
    /// compile's work was dropped. The cache races a compile against a remote lookup that
    /// outlived its budget (the hedge). The default cannot stop early: it compiles to the end.
    fn compile_racing(&self, give_up: &mut dyn FnMut() -> bool) -> Result<Option<Built<P>>, Self::Error> {
        let _ = give_up;
        self.compile().map(Some)
    }

    /// Loads a verified blob. [`LoadFailure::Refused`]: the driver does not take this blob (the
    /// cache discards the entry and compiles); [`LoadFailure::Failed`]: something else went wrong
    /// (out of memory, device lost) — the entry is kept and the error returned.
    fn load(&self, blob: &Blob) -> Result<P, LoadFailure<Self::Error>>;

    /// Checks a program loaded from a stored entry (disk or remote) against what this request
    /// needs — for the runtime, the program's interface against the kernel's spec. An error
    /// refuses the entry as a damaged one is refused: it is counted and reported once, a disk
    /// entry is removed, a remote one is not used, and the program is compiled. A stored entry
    /// can hold another program than its key names (a store anyone may write, a re-sealed
    /// entry), and such a program must cost a compile, never a failed run. The default accepts
    /// every program.
    fn check_loaded(&self, program: &P) -> Result<(), String> {
        let _ = program;
        Ok(())
    }

    /// The kernel's name, for the spans of its compile and load in a trace (`crate::trace`).
    fn kernel_name(&self) -> &str {
        ""
    }

    /// What is needed to build this program again (`recipe`), kept beside its entry so that a
    /// driver update can rebuild the working set ahead of time; `None` (the default): nothing.
    fn recipe(&self) -> Option<Vec<u8>> {
        None
    }
}

/// Why a verified blob did not become a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadFailure<E> {
    /// The driver refused the blob itself (format, version, damage): it will never load.
    Refused(String),
    /// The load failed for a reason that says nothing about the blob.
    Failed(E),
}

pub use program_cache::ProgramCache;

/// Nanoseconds since the Unix epoch; 0 if the clock is before it.
pub(crate) fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
