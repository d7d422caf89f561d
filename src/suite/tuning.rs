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

/// The fastest variants of the one-dispatch ranking that are timed again back to back before
/// one is chosen, at most.
const LEADERS: usize = 4;

/// How far behind the fastest a variant may rank and still be timed again: one-dispatch times
/// of close variants vary between tunes by more than the variants differ (split products on an
/// H100 by up to 45%).
const LEADER_SPREAD: f64 = 1.5;

/// How much faster than the untuned default (back to back) a variant must be to be chosen.
const DEFAULT_MARGIN: f64 = 0.02;

/// How long each leader runs before it is timed again, as the bench warms the kernel it times.
const LEADER_WARM_UP: Duration = Duration::from_millis(600);

/// The winner for one kernel and problem.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Choice {
    /// The variant's label, as [`Case::variants`] names it.
    pub variant: String,
    /// Its median time per dispatch, in milliseconds.
    pub ms: f64,
    /// `gpu back-to-back` (timer queries around a batch of dispatches), `gpu` (around one) or
    /// `wall` (dispatch + wait).
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
    /// (label, median ms) of every variant that ran correctly, fastest first: one timed dispatch
    /// at a time.
    pub timings: Vec<(String, f64)>,
    /// (label, GPU ms per dispatch back to back) of the leaders of `timings` and of the untuned
    /// default, timed again before the choice: the choice first (the default unless a leader
    /// beats it by 2%), then fastest first; empty where the device cannot time back to back.
    pub leaders: Vec<(String, f64)>,
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
        super::chosen::forget(&path);
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
        let verdict = verify_sampled(case, program.spec(), &case.download(backend, &fresh)?, CHECKED_OUTPUTS);
        drop(fresh);
        if !verdict.passed() {
            rejected.push((label.clone(), verdict.to_string()));
            continue;
        }
        if !warmed {
            timing::warm(backend, &program, case, &sets, options.warm_up)?;
            warmed = true;
        } else {
            // The check above left the GPU idle (a Winograd conv2d's reference takes 0.2-0.5 s
            // on one core).
            timing::warm_until_steady(backend, &program, case, &sets, LEADER_WARM_UP)?;
        }
        let timing = timing::time(backend, &program, case, &sets, options.runs, options.budget)?;
        gpu_timed &= timing.gpu.is_some();
        tracing::debug!(variant = %label, gpu = ?timing.gpu, wall = ?timing.wall, runs = timing.runs, "variant timed");
        timings.push((label.clone(), timing.best().as_secs_f64() * 1e3));
    }
    timings.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut leaders =
        if gpu_timed { retime_leaders(backend, case, &variants, &sets, &timings)? } else { Vec::new() };
    if !leaders.is_empty() {
        keep_default_unless_beaten(backend, case, &variants, &sets, &timings, &mut leaders)?;
    }
    let (best, timer) = match leaders.first() {
        Some(leader) => (Some(leader.clone()), "gpu back-to-back"),
        None => (timings.first().cloned(), if gpu_timed { "gpu" } else { "wall" }),
    };
    let Some((variant, ms)) = best else {
        return Err(Error::new(
            ErrorKind::InvalidKernel,
            format!(
                "no variant of {} ran correctly on this device: {}",
                key(case),
                rejected.iter().map(|(l, r)| format!("{l}: {r}")).collect::<Vec<_>>().join("; ")
            ),
        ));
    };
    let choice = Choice { variant, ms, timer: timer.into(), candidates: timings.len() };
    Ok(Outcome { key: key(case), choice, timings, rejected, leaders })
}

/// Times the leaders of the one-dispatch ranking `timings` (at most [`LEADERS`], within
/// [`LEADER_SPREAD`] of the fastest) again, back to back as the bench times them; fastest first.
/// Empty where there is no choice to make or the device cannot time back to back.
fn retime_leaders(
    backend: &Runtime,
    case: &dyn Case,
    variants: &[(String, KernelSpec)],
    sets: &[Vec<crate::runtime::Buffer>],
    timings: &[(String, f64)],
) -> Result<Vec<(String, f64)>> {
    let contenders = contenders(timings);
    if contenders.len() < 2 {
        return Ok(Vec::new());
    }
    let mut leaders = Vec::new();
    for (label, ms) in contenders {
        let Some((_, spec)) = variants.iter().find(|(l, _)| l == label) else { continue };
        match time_again(backend, case, spec, sets, *ms)? {
            Some(per_dispatch) => leaders.push((label.clone(), per_dispatch)),
            None => return Ok(Vec::new()),
        }
    }
    leaders.sort_by(|a, b| a.1.total_cmp(&b.1));
    Ok(leaders)
}

/// GPU ms per dispatch of `spec` back to back, as the bench times it, for a variant that ranked
/// at `ranked_ms` one dispatch at a time; `None` where the device cannot time back to back.
fn time_again(
    backend: &Runtime,
    case: &dyn Case,
    spec: &KernelSpec,
    sets: &[Vec<crate::runtime::Buffer>],
    ranked_ms: f64,
) -> Result<Option<f64>> {
    let program = backend.program(spec)?;
    // Warmed as the bench warms a kernel before it times it back to back (with 50 ms, the H100
    // read one conv2d variant 25-150% slow in some tunes and not in others).
    timing::warm(backend, &program, case, sets, LEADER_WARM_UP)?;
    let launches = timing::launches_for(Duration::from_secs_f64(ranked_ms / 1e3));
    let per_dispatch =
        timing::back_to_back(backend, &program, case, sets, launches, Duration::from_millis(300))?;
    Ok(per_dispatch.map(|d| d.as_secs_f64() * 1e3))
}

/// Puts the untuned default first among `leaders` (timing it back to back too if it was not a
/// leader) unless the fastest leader beats it by more than [`DEFAULT_MARGIN`]: a choice must be
/// measurably faster than what runs without tuning, not faster by the noise between two
/// measurements (saxpy's variants on an H100 are within 1% of each other, and the tuner's
/// ranking and the bench's differed by 2%).
fn keep_default_unless_beaten(
    backend: &Runtime,
    case: &dyn Case,
    variants: &[(String, KernelSpec)],
    sets: &[Vec<crate::runtime::Buffer>],
    timings: &[(String, f64)],
    leaders: &mut Vec<(String, f64)>,
) -> Result<()> {
    let default = case.default_spec(backend.info());
    let Some((label, spec)) = variants.iter().find(|(_, spec)| *spec == default) else { return Ok(()) };
    // Only a default that ran correctly (it is in the ranking) may be kept.
    let Some((_, ranked_ms)) = timings.iter().find(|(l, _)| l == label) else { return Ok(()) };
    let default_ms = match leaders.iter().find(|(l, _)| l == label) {
        Some((_, ms)) => *ms,
        None => match time_again(backend, case, spec, sets, *ranked_ms)? {
            Some(ms) => {
                leaders.push((label.clone(), ms));
                ms
            }
            None => return Ok(()),
        },
    };
    prefer_default(leaders, label, default_ms);
    Ok(())
}

/// Sorts `leaders` fastest first, then moves `default` (timed at `default_ms`, one of them) to
/// the front unless the fastest beats it by more than [`DEFAULT_MARGIN`].
fn prefer_default(leaders: &mut [(String, f64)], default: &str, default_ms: f64) {
    leaders.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some((_, fastest)) = leaders.first() else { return };
    if *fastest >= default_ms * (1.0 - DEFAULT_MARGIN) {
        if let Some(at) = leaders.iter().position(|(l, _)| l == default) {
            leaders[..=at].rotate_right(1);
        }
    }
}

/// The leaders of a one-dispatch ranking (fastest first) worth timing again: at most
/// [`LEADERS`], each within [`LEADER_SPREAD`] of the fastest.
fn contenders(timings: &[(String, f64)]) -> Vec<&(String, f64)> {
    let Some((_, fastest)) = timings.first() else { return Vec::new() };
    timings.iter().take(LEADERS).take_while(|(_, ms)| *ms <= fastest * LEADER_SPREAD).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_kept_unless_a_leader_beats_it_by_the_margin() {
        let leaders = |ms: &[(&str, f64)]| ms.iter().map(|(l, m)| (l.to_string(), *m)).collect::<Vec<_>>();
        let first = |l: &[(String, f64)]| l[0].0.clone();
        // 1% faster than the default: noise, the default stays.
        let mut close = leaders(&[("b", 0.99), ("default", 1.0), ("c", 1.2)]);
        prefer_default(&mut close, "default", 1.0);
        assert_eq!(first(&close), "default");
        assert_eq!(close.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(), ["default", "b", "c"]);
        // 5% faster: a real win.
        let mut clear = leaders(&[("default", 1.0), ("b", 0.95)]);
        prefer_default(&mut clear, "default", 1.0);
        assert_eq!(first(&clear), "b");
        // The default fastest anyway.
        let mut fastest = leaders(&[("b", 1.1), ("default", 1.0)]);
        prefer_default(&mut fastest, "default", 1.0);
        assert_eq!(first(&fastest), "default");
    }

    #[test]
    fn the_leaders_timed_again_are_the_few_close_to_the_fastest() {
        let ranking =
            |ms: &[f64]| ms.iter().enumerate().map(|(i, &m)| (format!("v{i}"), m)).collect::<Vec<_>>();
        let labels = |t: &[(String, f64)]| contenders(t).iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
        assert!(contenders(&[]).is_empty());
        assert_eq!(
            labels(&ranking(&[1.0, 1.1, 1.2, 1.3, 1.4, 1.45])),
            ["v0", "v1", "v2", "v3"],
            "at most LEADERS"
        );
        assert_eq!(labels(&ranking(&[1.0, 1.4, 1.6, 1.7])), ["v0", "v1"], "only within the spread");
        assert_eq!(labels(&ranking(&[1.0, 2.0])), ["v0"], "a clear winner stands alone");
    }
}
