//! `CacheError`: what the cache's configuration and its maintenance commands can fail with. Each
//! variant names the path or variable involved and what to do about it. `ProgramCache::get` never
//! returns one: a cache that cannot use its disk degrades to memory-only instead.

use std::io;
use std::path::PathBuf;

/// A failure of cache configuration or of a disk-maintenance command.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// An environment variable holds a value the cache cannot use.
    #[error("{var}={value:?} is not valid: {problem}; for example {var}={example}")]
    InvalidEnv {
        /// The variable's name.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        problem: String,
        /// A valid value.
        example: &'static str,
    },

    /// A file or folder of the cache could not be read, written or removed.
    #[error("cannot {action} {path}: {source}; {fix}")]
    Io {
        /// What was being done (`read`, `remove`, …).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: io::Error,
        /// What the user can do about it.
        fix: &'static str,
    },

    /// A folder of the cache is not a private folder of this user (a link, not a folder, another
    /// user's, writable by everyone), so nothing is kept there.
    #[error("{path} is not used: {problem}; remove it (`sparkle cache verify --fix` does) or point SPARKLE_CACHE_DIR elsewhere")]
    UnusableFolder {
        /// The folder.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

impl CacheError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        let fix = match source.kind() {
            io::ErrorKind::PermissionDenied => {
                "check that the cache folder belongs to you, or point SPARKLE_CACHE_DIR elsewhere"
            }
            io::ErrorKind::NotFound => "check that the cache folder exists (SPARKLE_CACHE_DIR)",
            _ => "check the cache folder (SPARKLE_CACHE_DIR), its disk and its permissions",
        };
        CacheError::Io { action, path: path.into(), source, fix }
    }
}
