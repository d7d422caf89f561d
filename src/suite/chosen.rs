//! The spec a suite problem runs with on a device ([`chosen_spec`]): the variant `sparkle tune`
//! stored for the device's GPU, else the device class's default.
//!
//! It is asked on every placed run ([`Placement::run_case`](crate::Placement::run_case)) and by
//! callers that pick a spec per dispatch, so what a tuning file says is remembered per file:
//! read and parsed once, and the spec each problem resolves to kept beside it. Each call checks
//! the file's size and modification time (one `stat`), so a choice stored by another process is
//! picked up as before. Read afresh on every call, a tuned sgemm 64 took 0.61 ms to choose on
//! llvmpipe (resolving the choice builds every variant of the kernel), longer than it runs;
//! saxpy 0.03 ms, conv2d 0.014 ms (reading and parsing the file).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use super::tuning::{key, Tuning};
use super::{takes, Case};
use crate::kernel::KernelSpec;
use crate::runtime::Runtime;

/// Problems remembered per tuning file, at most: past it the file's memo starts again (a caller
/// sweeping shapes must not grow it without bound).
const MAX_PROBLEMS: usize = 1024;

/// The spec `case` runs on `backend`: the tuned winner for this GPU and problem if `sparkle
/// tune` stored one, else the device class's default — either only if the backend takes its
/// source language (the tuned variants are GLSL), else the portable [`Case::spec`].
pub fn chosen_spec(backend: &Runtime, case: &dyn Case) -> KernelSpec {
    tuned_spec(backend, case)
        .or_else(|| Some(case.default_spec(backend.info())))
        .filter(|spec| takes(backend, spec))
        .unwrap_or_else(|| case.spec())
}

/// Forgets what was remembered of the tuning file at `path` (after this process wrote it: a
/// rewrite within the file system's time resolution, of the same size, would look unchanged).
pub(crate) fn forget(path: &Path) {
    memo().lock().unwrap_or_else(PoisonError::into_inner).remove(path);
}

/// What one tuning file said when it was last read.
struct Remembered {
    /// Its size and modification time then.
    stamp: Stamp,
    /// Its contents (`None`: unreadable or not valid; [`Tuning::load`] warned).
    tuning: Option<Tuning>,
    /// Per problem key, the tuned spec it resolved to (`None`: no choice, or one no longer
    /// offered).
    specs: HashMap<String, Option<KernelSpec>>,
}

/// A file's size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: SystemTime,
}

fn memo() -> &'static Mutex<HashMap<PathBuf, Remembered>> {
    static MEMO: OnceLock<Mutex<HashMap<PathBuf, Remembered>>> = OnceLock::new();
    MEMO.get_or_init(Mutex::default)
}

/// The tuned spec for `case` on `backend`, if its GPU's tuning file holds one that is offered.
fn tuned_spec(backend: &Runtime, case: &dyn Case) -> Option<KernelSpec> {
    let path = Tuning::path(backend)?;
    let stamp = match std::fs::metadata(&path) {
        Ok(meta) => meta.modified().ok().map(|modified| Stamp { len: meta.len(), modified }),
        // No tuning (the common case): nothing to remember.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => None,
    };
    // Without a stamp (a file system without modification times, or a file that cannot be
    // asked), nothing is remembered: read as before, every time.
    let Some(stamp) = stamp else {
        return Tuning::load(backend).and_then(|tuning| tuning.spec_for(backend, case));
    };
    let mut memo = memo().lock().unwrap_or_else(PoisonError::into_inner);
    let remembered = match memo.get_mut(&path) {
        Some(remembered) if remembered.stamp == stamp && remembered.specs.len() < MAX_PROBLEMS => remembered,
        _ => {
            // Read now: a writer that replaced the file since the stamp leaves a newer stamp,
            // and the next call reads again.
            let fresh = Remembered { stamp, tuning: Tuning::load(backend), specs: HashMap::new() };
            memo.insert(path.clone(), fresh);
            memo.get_mut(&path)?
        }
    };
    let problem = key(case);
    if let Some(spec) = remembered.specs.get(&problem) {
        return spec.clone();
    }
    let spec = remembered.tuning.as_ref().and_then(|tuning| tuning.spec_for(backend, case));
    remembered.specs.insert(problem, spec.clone());
    spec
}
