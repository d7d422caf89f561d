//! Tuning: timing every variant of a suite kernel for one problem on one GPU and keeping the
//! winner in the GPU's cache folder (`tuning.json`, next to its program cache entries), so that
//! later runs in any process pick it without tuning. The folder is per `GpuId`, so a new driver
//! or GPU starts untuned. Writes replace the file atomically and merge with what other
//! processes stored meanwhile.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{timing, verify_sampled, Case, DISPATCH_TIMEOUT};
use crate::kernel::KernelSpec;
use crate::runtime::Runtime;
use crate::{Error, ErrorKind, Result};

/// The file in each GPU's cache folder.
pub const FILE_NAME: &str = "tuning.json";

/// Output elements each variant is checked at before it may win.
const CHECKED_OUTPUTS: usize = 4096;

/// The winner for one kernel and problem.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Choice {
    /// The variant's label, as [`Case::variants`] names it.
    pub variant: String,
    /// Its median time per dispatch, in milliseconds.
    pub ms: f64,
    /// `gpu` (timer queries) or `wall` (dispatch + wait).
    pub timer: String,
    /// Variants timed.
    pub candidates: usize,
}

/// Every stored choice of one GPU, keyed `kernel shape` (`sgemm 4096x4096x4096`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tuning {
    /// The device's name the choices were measured on.
    pub device: String,
    /// The chosen variant per `kernel shape` key.
    pub choices: BTreeMap<String, Choice>,
}

/// What [`tune`] found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The `kernel shape` key it was stored under.
    pub key: String,
    /// The fastest correct variant.
    pub choice: Choice,
    /// (label, median ms) of every variant that ran correctly, fastest first.
    pub timings: Vec<(String, f64)>,
    /// (label, reason) of variants that failed to compile or computed a wrong result.
    pub rejected: Vec<(String, String)>,
}

/// How hard [`tune`] tries.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Timed runs per variant (at least).
    pub runs: usize,
    /// Time spent timing each variant beyond `runs`.
    pub budget: Duration,
    /// Continuous work before the first variant is timed.
    pub warm_up: Duration,
    /// Time only the first this many candidates (tests on slow devices).
    pub max_candidates: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            runs: 5,
            budget: Duration::from_millis(60),
            warm_up: Duration::from_millis(500),
            max_candidates: None,
        }
    }
}

/// `kernel shape`, the key of a problem in the file.
pub fn key(case: &dyn Case) -> String {
    format!("{} {}", case.spec().name, case.shape_key())
}

impl Tuning {
    /// The tuning file of `backend`'s GPU; `None` when the cache is memory-only.
    pub fn path(backend: &Runtime) -> Option<PathBuf> {
        backend.cache_dir().map(|dir| dir.join(FILE_NAME))
    }

    /// The stored choices of `backend`'s GPU; `None` if there are none. An unreadable file is
    /// ignored with a warning (it is re-made by the next tune).
    pub fn load(backend: &Runtime) -> Option<Tuning> {
        let path = Self::path(backend)?;
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return None,
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "cannot read the tuning file; using defaults");
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(tuning) => Some(tuning),
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "the tuning file is not valid; using defaults (run `sparkle tune --force` to remake it)");
                None
            }
        }
    }

    /// The stored choice for `case`, if any.
    pub fn choice(&self, case: &dyn Case) -> Option<&Choice> {
        self.choices.get(&key(case))
    }

    /// The spec of the stored choice for `case`, if it is still one of its variants here.
    pub fn spec_for(&self, backend: &Runtime, case: &dyn Case) -> Option<KernelSpec> {
        let choice = self.choice(case)?;
        let spec = super::variants_for(backend, case)
            .into_iter()
            .find(|(label, _)| *label == choice.variant)
            .map(|(_, spec)| spec);
        if spec.is_none() {
            tracing::warn!(variant = %choice.variant, problem = %key(case), "the tuned variant is no longer offered; using the default");
        }
        spec
    }

    /// Stores `choice` for `key` in `backend`'s tuning file, keeping the choices other processes
    /// stored meanwhile; the file is replaced atomically.
    pub fn store(backend: &Runtime, key: &str, choice: Choice) -> Result<PathBuf> {
        let path = Self::path(backend).ok_or_else(|| {
            Error::new(
                ErrorKind::Unavailable,
                "the program cache is memory-only here (no cache dir, or the driver cannot keep programs), \
                 so tuning results cannot be kept; set SPARKLE_CACHE_DIR to a writable folder",
            )
        })?;
        let mut tuning = Self::load(backend).unwrap_or_default();
        tuning.device = backend.info().name.clone();
        tuning.choices.insert(key.to_owned(), choice);
        let io = |what: &str, err: std::io::Error| {
            Error::new(ErrorKind::Io, format!("cannot {what} the tuning file {}: {err}", path.display()))
        };
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        std::fs::create_dir_all(dir).map_err(|e| io("create the folder of", e))?;
        let text = serde_json::to_string_pretty(&tuning)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot serialize tuning results: {e}")))?;
        let mut file = tempfile::NamedTempFile::new_in(dir).map_err(|e| io("write", e))?;
        file.write_all(text.as_bytes()).map_err(|e| io("write", e))?;
        file.as_file().sync_all().map_err(|e| io("write", e))?;
        file.persist(&path).map_err(|e| io("replace", e.error))?;
        Ok(path)
    }
}

/// Times every variant of `case` on `backend` (each compiled through the program cache and
/// checked against the CPU reference first) and returns the fastest; stores nothing.
pub fn tune(backend: &Runtime, case: &dyn Case, options: Options) -> Result<Outcome> {
    let mut variants = super::variants_for(backend, case);
    if let Some(max) = options.max_candidates {
        variants.truncate(max);
    }
    let copies = timing::copies_for(case);
    let sets = timing::upload_copies(backend, case, None, copies)?;
    let mut warmed = false;
    let mut timings = Vec::new();
    let mut rejected = Vec::new();
    let mut gpu_timed = true;
    // Compile them all at once where the driver compiles in parallel; if one fails, each is
    // asked for (and its failure recorded) below.
    let specs: Vec<KernelSpec> = variants.iter().map(|(_, spec)| spec.clone()).collect();
    if let Err(err) = backend.warm_up(&specs) {
        tracing::info!(error = %err, "not every variant compiles here; compiling them one by one");
    }
    for (label, spec) in &variants {
        let program = match backend.program(spec) {
            Ok(program) => program,
            Err(err) => {
                tracing::info!(variant = %label, error = %err, "variant does not compile here");
                rejected.push((label.clone(), err.to_string()));
                continue;
            }
        };
        let fresh = case.upload_for(backend, &program)?;
        case.dispatch(backend, &program, &fresh)?.wait(DISPATCH_TIMEOUT)?;
        let verdict = verify_sampled(case, &case.download(backend, &fresh)?, CHECKED_OUTPUTS);
        drop(fresh);
        if !verdict.passed() {
            rejected.push((label.clone(), verdict.to_string()));
            continue;
        }
        if !warmed {
            timing::warm(backend, &program, case, &sets, options.warm_up)?;
            warmed = true;
        } else {
            timing::warm(backend, &program, case, &sets, Duration::from_millis(20))?;
        }
        let timing = timing::time(backend, &program, case, &sets, options.runs, options.budget)?;
        gpu_timed &= timing.gpu.is_some();
        timings.push((label.clone(), timing.best().as_secs_f64() * 1e3));
    }
    timings.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some((variant, ms)) = timings.first().cloned() else {
        return Err(Error::new(
            ErrorKind::InvalidKernel,
            format!(
                "no variant of {} ran correctly on this device: {}",
                key(case),
                rejected.iter().map(|(l, r)| format!("{l}: {r}")).collect::<Vec<_>>().join("; ")
            ),
        ));
    };
    let choice = Choice {
        variant,
        ms,
        timer: if gpu_timed { "gpu" } else { "wall" }.into(),
        candidates: timings.len(),
    };
    Ok(Outcome { key: key(case), choice, timings, rejected })
}
