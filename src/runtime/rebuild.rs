//! Rebuilding a working set after a driver update, so that the update is not a cold start.
//!
//! Every program the cache keeps on disk gets its kernel spec beside it as a recipe
//! ([`crate::cache::recipe`], the spec as JSON here). When a process opens a GPU id while a
//! folder of the same device under another driver has a working set that no rebuild into this
//! GPU id's folder went through yet (the first process after the update, or the next one after a
//! process that exited part-way), a background thread builds that working set again for the new
//! driver: in first-use order, one
//! program at a time, at the lowest priority (nice 19 and `SCHED_IDLE`, which the compiler
//! processes it starts inherit), waiting whenever a request of the user's own is loading or
//! compiling, bounded by the working set's size and [`BACKGROUND_BUDGET`], and stopped when the
//! runtime is dropped (it holds the device only for one program at a time and never delays the
//! process's exit). Each program goes through the runtime's own path (spec → prepare → key →
//! cache), so its key is the one the next process asks for, and it reaches the fleet tier when
//! one is configured. [`Runtime::rebuild_working_set`] does the same in the foreground
//! (`sparkle cache rebuild`).
//!
//! A machine with nothing local to rebuild from (its folder has no working set and no other
//! driver's folder of the device has one: a fresh machine, a new image) rebuilds from the fleet
//! tier when one is configured: the recipes that the fleet's machines published under the most
//! recent other driver of this device (`crate::cache::remote` `recipes.rs`), never fetched while
//! the device is held. Their order is the fleet's first use too: that of the fleet's working set
//! when one was pushed, otherwise when each recipe was published (its compile, the program's
//! first use in the fleet), which `recipes.rs` learns by fetching and checking them before the
//! rebuild starts; the rebuild builds from what it fetched then, and fetches the others (a
//! pushed working set's, or past its bound on bytes) one at a time.
//!
//! Bad input: a damaged recipe, one of another folder or key, or another user's is refused
//! (and a damaged one removed) and never compiled from; only the user's own GPU folders are
//! read, and from the fleet only recipes that pass the checks of every remote object (a trusted
//! signature when keys are trusted; unsigned ones only with `SPARKLE_CACHE_REMOTE_UNSIGNED`). A program whose rebuild fails is logged once and the rebuild goes on; nothing of it
//! reaches the user's requests.
//!
//! [`Runtime::rebuild_working_set`]: super::Runtime::rebuild_working_set

#[cfg(feature = "remote")]
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "remote")]
use std::sync::Mutex;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::device::DynDevice;
use crate::cache::recipe::{self, RecipeProblem};
#[cfg(feature = "remote")]
use crate::cache::remote::{Fetched, FleetPrograms, FleetRecipes};
use crate::cache::{Blob, Built, CacheKey, LoadFailure, ProgramSource};
use crate::kernel::{Access, Binding, KernelSource, KernelSpec, ScalarType, TexelFormat};
use crate::{Error, ErrorKind, Result};

/// The environment variable that turns the background rebuild off (`off`, `0`, `false`, `no`);
/// on by default. `sparkle cache rebuild` works either way.
pub const REBUILD_ENV: &str = "SPARKLE_CACHE_REBUILD";
/// The longest a background rebuild runs before it stops, whatever is left.
pub const BACKGROUND_BUDGET: Duration = Duration::from_secs(30 * 60);
/// How long the background rebuild sleeps while the user's own requests are loading or
/// compiling, before looking again.
const YIELD_POLL: Duration = Duration::from_millis(20);
/// The version of the recipe JSON this file writes and reads.
const SPEC_FORMAT: u32 = 1;
/// One request to the fleet tier for a rebuild gives up after this long.
#[cfg(feature = "remote")]
const FLEET_REQUEST: Duration = Duration::from_secs(10);

/// What became of one program of a rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildOutcome {
    /// Compiled (or fetched from the fleet tier) for this driver and kept.
    Rebuilt,
    /// This driver's cache had it already.
    Present,
    /// The program has no recipe (used before recipes were kept, or its recipe was pruned).
    NoRecipe,
    /// The recipe was refused and never compiled from; the reason.
    Refused(String),
    /// The recipe was fine but building it failed; the error.
    Failed(String),
}

/// One step of a rebuild, for a progress display.
#[derive(Debug)]
pub struct RebuildProgress<'a> {
    /// Programs done so far, this one included.
    pub done: usize,
    /// Programs in the working set being rebuilt.
    pub total: usize,
    /// The program's key in the old folder.
    pub key: CacheKey,
    /// The kernel's name, when its recipe could be read.
    pub kernel: Option<&'a str>,
    /// What became of it.
    pub outcome: &'a RebuildOutcome,
}

/// What a rebuild did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// The GPU folder whose working set was rebuilt (its name).
    pub from: String,
    /// Programs in that working set.
    pub planned: usize,
    /// Programs built for this driver now.
    pub rebuilt: usize,
    /// Programs this driver's cache held already.
    pub present: usize,
    /// Programs without a recipe.
    pub no_recipe: usize,
    /// Recipes refused: `<key>: <why>`.
    pub refused: Vec<String>,
    /// Programs whose rebuild failed: `<kernel>: <error>`.
    pub failed: Vec<String>,
    /// Whether the rebuild stopped before the end (the runtime closed, or the time budget).
    pub stopped: bool,
}

impl RebuildReport {
    fn count(&mut self, key: CacheKey, kernel: Option<&str>, outcome: &RebuildOutcome) {
        match outcome {
            RebuildOutcome::Rebuilt => self.rebuilt += 1,
            RebuildOutcome::Present => self.present += 1,
            RebuildOutcome::NoRecipe => self.no_recipe += 1,
            RebuildOutcome::Refused(why) => self.refused.push(format!("{key}: {why}")),
            RebuildOutcome::Failed(why) => self.failed.push(format!("{}: {why}", kernel.unwrap_or("?"))),
        }
    }
}

/// Where a rebuild's recipes come from.
enum Recipes {
    /// Another GPU folder of this machine.
    Local(PathBuf),
    /// A GPU folder of the fleet tier (its name), and what was fetched of it already to order
    /// it (each taken once, when its program is built).
    #[cfg(feature = "remote")]
    Fleet { folder: String, fleet: FleetRecipes, fetched: Mutex<HashMap<CacheKey, Fetched>> },
}

/// The working set to rebuild: the old folder and its programs in first-use order.
struct Plan {
    from: Recipes,
    keys: Vec<CacheKey>,
    /// This driver's GPU folder.
    into: PathBuf,
}

impl Plan {
    /// The old folder's name; `fleet:<name>` for one of the fleet tier.
    fn source_name(&self) -> String {
        match &self.from {
            Recipes::Local(dir) => {
                dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            }
            #[cfg(feature = "remote")]
            Recipes::Fleet { folder, .. } => format!("fleet:{folder}"),
        }
    }

    /// Records the figures in the new folder's ledger (`sparkle cache stats`).
    fn record(&self, report: &RebuildReport) {
        recipe::record_rebuild(
            &self.into,
            &report.from,
            report.rebuilt as u64,
            report.failed.len() as u64,
            report.refused.len() as u64,
            !report.stopped,
        );
    }
}

/// Whether `SPARKLE_CACHE_REBUILD` leaves the background rebuild on.
fn background_enabled() -> bool {
    match std::env::var(REBUILD_ENV) {
        Ok(value) => !matches!(value.trim().to_ascii_lowercase().as_str(), "off" | "0" | "false" | "no"),
        Err(_) => true,
    }
}

/// What there is to rebuild for `device`: `from` names the old GPU folder (its name, or the
/// 16 hex digits of its GPU id); `None` takes the most recently used folder of the same device
/// under another driver.
fn plan(device: &dyn DynDevice, from: Option<&str>) -> Result<Option<Plan>> {
    let gpu = &device.info().gpu_id;
    let into = match device.cache_dir() {
        Some(dir) if device.cache_writable() => dir,
        _ => {
            return Err(Error::new(
                ErrorKind::Unavailable,
                format!(
                    "the {} backend's program cache is not written to disk here (memory only or read-only), \
                     so there is nothing to rebuild into",
                    gpu.backend()
                ),
            ))
        }
    };
    let Some(root) = into.parent() else { return Ok(None) };
    let from = match from {
        None => match recipe::earlier_drivers(root, gpu).into_iter().next() {
            Some(dir) => dir,
            None => return Ok(None),
        },
        Some(name) => {
            let name = name.trim();
            let folder = if name.len() == 16 {
                format!("{}-{}", gpu.backend(), name.to_ascii_lowercase())
            } else {
                name.into()
            };
            let dir = root.join(&folder);
            let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir());
            let ours = folder.rsplit_once('-').is_some_and(|(backend, _)| backend == gpu.backend());
            if !is_dir || !ours || dir == into {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!(
                        "--from {name}: no other GPU folder of the {} backend of that name in {} \
                         (`sparkle cache stats` lists them)",
                        gpu.backend(),
                        root.display()
                    ),
                ));
            }
            dir
        }
    };
    let keys = recipe::working_set(&from);
    Ok(Some(Plan { from: Recipes::Local(from), keys, into }))
}

/// What there is to rebuild from the fleet tier into `into`: the programs with recipes of the
/// most recently filed other driver's folder of this device that has any. `None` when there is
/// none, or the remote failed (logged).
#[cfg(feature = "remote")]
fn fleet_plan(fleet: FleetRecipes, into: PathBuf) -> Option<Plan> {
    let drivers = match fleet.earlier_drivers(FLEET_REQUEST) {
        Ok(drivers) => drivers,
        Err(why) => {
            tracing::debug!("the fleet's other drivers of this device could not be listed: {why}");
            return None;
        }
    };
    for folder in drivers {
        match fleet.programs(&folder, FLEET_REQUEST) {
            Ok(FleetPrograms { keys, fetched }) if !keys.is_empty() => {
                let fetched = Mutex::new(fetched);
                return Some(Plan { from: Recipes::Fleet { folder, fleet, fetched }, keys, into });
            }
            Ok(_) => {}
            Err(why) => {
                tracing::debug!(folder, "the fleet's recipes of a GPU folder could not be listed: {why}");
                return None;
            }
        }
    }
    None
}

/// The kernel spec of `key`'s recipe, read and checked; what became of the program otherwise.
fn recipe_spec(from: &Recipes, key: CacheKey) -> Result<KernelSpec, RebuildOutcome> {
    let payload = match from {
        Recipes::Local(dir) => match recipe::read(dir, key) {
            Ok(Some(payload)) => payload,
            Ok(None) => return Err(RebuildOutcome::NoRecipe),
            Err(problem) => {
                if !matches!(problem, RecipeProblem::Foreign(_) | RecipeProblem::NotAFile) {
                    // A damaged recipe goes, as a damaged entry does; another user's file or a
                    // link is left to `sparkle cache verify`.
                    let _ = std::fs::remove_file(recipe::recipe_path(dir, key));
                }
                return Err(RebuildOutcome::Refused(problem.to_string()));
            }
        },
        // A refused remote object stays there, for `sparkle cache remote verify --fix`.
        #[cfg(feature = "remote")]
        Recipes::Fleet { folder, fleet, fetched } => {
            // Fetched already to order the rebuild, or fetched now (the lock not held meanwhile).
            let taken = fetched.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&key);
            match taken.unwrap_or_else(|| fleet.fetch(folder, key, FLEET_REQUEST)) {
                Fetched::Spec(payload) => payload,
                Fetched::Missing => return Err(RebuildOutcome::NoRecipe),
                Fetched::Refused(why) => {
                    return Err(RebuildOutcome::Refused(format!("from the fleet: {why}")))
                }
                Fetched::Failed(why) => {
                    return Err(RebuildOutcome::Failed(format!(
                        "its recipe could not be fetched from the fleet: {why}"
                    )))
                }
            }
        }
    };
    spec_from_json(&payload).map_err(RebuildOutcome::Refused)
}

/// Builds one program of a rebuild on `device`.
fn build(device: &dyn DynDevice, spec: &KernelSpec) -> RebuildOutcome {
    match device.rebuild_one(spec) {
        Ok(true) => RebuildOutcome::Rebuilt,
        Ok(false) => RebuildOutcome::Present,
        Err(err) => RebuildOutcome::Failed(err.to_string()),
    }
}

/// Rebuilds one program of `plan` on `device`.
fn step(device: &dyn DynDevice, from: &Recipes, key: CacheKey) -> (Option<String>, RebuildOutcome) {
    match recipe_spec(from, key) {
        Ok(spec) => {
            let outcome = build(device, &spec);
            (Some(spec.name), outcome)
        }
        Err(outcome) => (None, outcome),
    }
}

/// Logs a program the rebuild could not build, once (each program is visited once).
fn log_problem(from: &str, key: CacheKey, kernel: Option<&str>, outcome: &RebuildOutcome) {
    match outcome {
        RebuildOutcome::Refused(why) => tracing::warn!(
            %key, from, "a recipe kept with a cache entry is refused and not built: {why}"
        ),
        RebuildOutcome::Failed(why) => tracing::warn!(
            %key, from, kernel = kernel.unwrap_or("?"),
            "rebuilding a program for the new driver failed; going on with the others: {why}"
        ),
        _ => {}
    }
}

/// The foreground rebuild: every program of the working set, `progress` told after each.
pub(crate) fn run_foreground(
    device: &dyn DynDevice,
    from: Option<&str>,
    progress: &mut dyn FnMut(&RebuildProgress<'_>),
) -> Result<RebuildReport> {
    let local = plan(device, from)?;
    // Nothing of this machine's: the fleet's recipes, when a remote tier is configured.
    #[cfg(feature = "remote")]
    let local = match (local, from, device.fleet_recipes(), device.cache_dir()) {
        (None, None, Some(fleet), Some(into)) => fleet_plan(fleet, into),
        (local, ..) => local,
    };
    let Some(plan) = local else {
        return Err(Error::new(
            ErrorKind::Unavailable,
            format!(
                "no GPU folder of this device under another driver has a working set to rebuild ({} `{}`); \
                 name one with --from",
                device.info().backend,
                device.info().gpu_id
            ),
        ));
    };
    let mut report =
        RebuildReport { from: plan.source_name(), planned: plan.keys.len(), ..Default::default() };
    for (index, key) in plan.keys.iter().enumerate() {
        let (kernel, outcome) = step(device, &plan.from, *key);
        log_problem(&report.from, *key, kernel.as_deref(), &outcome);
        report.count(*key, kernel.as_deref(), &outcome);
        progress(&RebuildProgress {
            done: index + 1,
            total: plan.keys.len(),
            key: *key,
            kernel: kernel.as_deref(),
            outcome: &outcome,
        });
    }
    plan.record(&report);
    Ok(report)
}

/// Starts the background rebuild for a device just opened, when another driver's folder of the
/// same device has a working set that no earlier rebuild into this folder went through (a
/// process that exits part-way leaves the rest to the next one), and `SPARKLE_CACHE_REBUILD` is
/// not off. Returns at once.
pub(crate) fn start_in_background(device: &Arc<dyn DynDevice>) {
    if !device.cache_writable() || !background_enabled() {
        return;
    }
    let plan = match plan(device.as_ref(), None) {
        Ok(Some(plan)) if !plan.keys.is_empty() => Some(plan),
        _ => None,
    };
    let weak = Arc::downgrade(device);
    let work: Box<dyn FnOnce() + Send> = match plan {
        Some(plan) => {
            if recipe::rebuild_completed(&plan.into, &plan.source_name()) {
                return;
            }
            tracing::info!(
                from = %plan.source_name(),
                programs = plan.keys.len(),
                "a new driver for this GPU: rebuilding the old driver's working set in the background"
            );
            Box::new(move || run_background(&weak, &plan))
        }
        None => match fleet_work(device.as_ref(), weak) {
            Some(work) => work,
            None => return,
        },
    };
    let spawned = std::thread::Builder::new().name("sparkle-rebuild".into()).spawn(move || {
        lower_priority();
        work();
    });
    if let Err(err) = spawned {
        tracing::debug!(error = %err, "the background rebuild could not start");
    }
}

/// The background work of a rebuild from the fleet's recipes, when there may be one.
#[cfg(feature = "remote")]
fn fleet_work(device: &dyn DynDevice, weak: Weak<dyn DynDevice>) -> Option<Box<dyn FnOnce() + Send>> {
    let found = from_the_fleet(device)?;
    Some(Box::new(move || {
        if let Some(plan) = found() {
            run_background(&weak, &plan);
        }
    }))
}

/// Without a fleet tier in this build there is nothing more to rebuild from.
#[cfg(not(feature = "remote"))]
fn fleet_work(_device: &dyn DynDevice, _weak: Weak<dyn DynDevice>) -> Option<Box<dyn FnOnce() + Send>> {
    None
}

/// With nothing local to rebuild from: when a remote tier is configured and this GPU folder is
/// new (no working set, or a rebuild that did not go through), what finds the fleet's plan (it
/// asks the remote: run it on the rebuild's thread). `None`: nothing to look for.
#[cfg(feature = "remote")]
fn from_the_fleet(device: &dyn DynDevice) -> Option<impl FnOnce() -> Option<Plan> + Send> {
    let fleet = device.fleet_recipes()?;
    let into = device.cache_dir()?;
    let fresh = recipe::working_set(&into).is_empty() || recipe::read_ledger(&into).is_some();
    if !fresh || recipe::any_rebuild_completed(&into) {
        return None;
    }
    Some(move || {
        let plan = fleet_plan(fleet, into)?;
        if recipe::rebuild_completed(&plan.into, &plan.source_name()) {
            return None;
        }
        tracing::info!(
            from = %plan.source_name(),
            programs = plan.keys.len(),
            "a new driver for this GPU: rebuilding the fleet's recipes of the old driver in the background"
        );
        Some(plan)
    })
}

/// The background rebuild's loop: holds the device for one program at a time (and not while
/// it reads a recipe, which may come from the fleet tier).
fn run_background(weak: &Weak<dyn DynDevice>, plan: &Plan) {
    let started = Instant::now();
    let mut report =
        RebuildReport { from: plan.source_name(), planned: plan.keys.len(), ..Default::default() };
    for key in &plan.keys {
        if weak.strong_count() == 0 || started.elapsed() > BACKGROUND_BUDGET {
            report.stopped = true;
            break;
        }
        let (kernel, outcome) = match recipe_spec(&plan.from, *key) {
            Err(outcome) => (None, outcome),
            Ok(spec) => {
                // The user's own loads and compiles go first.
                let device = loop {
                    let Some(device) = weak.upgrade() else { break None };
                    if device.compiles_in_flight() == 0 || started.elapsed() > BACKGROUND_BUDGET {
                        break Some(device);
                    }
                    drop(device);
                    std::thread::sleep(YIELD_POLL);
                };
                let Some(device) = device.filter(|_| started.elapsed() <= BACKGROUND_BUDGET) else {
                    report.stopped = true;
                    break;
                };
                let outcome = build(device.as_ref(), &spec);
                drop(device);
                (Some(spec.name), outcome)
            }
        };
        log_problem(&report.from, *key, kernel.as_deref(), &outcome);
        report.count(*key, kernel.as_deref(), &outcome);
    }
    plan.record(&report);
    tracing::info!(
        from = %report.from,
        rebuilt = report.rebuilt,
        present = report.present,
        failed = report.failed.len(),
        refused = report.refused.len(),
        stopped = report.stopped,
        "background rebuild after a driver update finished"
    );
}

/// Lowers this thread (and the compiler processes it starts) to the lowest priority.
fn lower_priority() {
    // SAFETY: gettid takes no arguments and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    // SAFETY: setpriority with PRIO_PROCESS and a thread id changes that thread's nice value
    // only; no memory is passed.
    let niced = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param that outlives the call.
    let idled = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if niced != 0 || idled != 0 {
        tracing::debug!("the background rebuild could not lower its priority fully");
    }
}

/// A rebuild's request: `source` as it is, noting whether its compile ran and succeeded here
/// (not served by another thread's or process's work, nor by the fleet tier), which is what
/// counts as rebuilt.
pub(crate) struct Noting<S> {
    source: S,
    compiled: AtomicBool,
}

impl<S> Noting<S> {
    pub fn new(source: S) -> Self {
        Self { source, compiled: AtomicBool::new(false) }
    }

    /// Whether the program was compiled through this request.
    pub fn compiled(&self) -> bool {
        self.compiled.load(Ordering::Relaxed)
    }
}

impl<P, S: ProgramSource<P>> ProgramSource<P> for Noting<S> {
    type Error = S::Error;

    fn compile(&self) -> std::result::Result<Built<P>, S::Error> {
        let built = self.source.compile()?;
        self.compiled.store(true, Ordering::Relaxed);
        Ok(built)
    }

    fn compile_racing(
        &self,
        give_up: &mut dyn FnMut() -> bool,
    ) -> std::result::Result<Option<Built<P>>, S::Error> {
        let built = self.source.compile_racing(give_up)?;
        if built.is_some() {
            self.compiled.store(true, Ordering::Relaxed);
        }
        Ok(built)
    }

    fn load(&self, blob: &Blob) -> std::result::Result<P, LoadFailure<S::Error>> {
        self.source.load(blob)
    }

    fn check_loaded(&self, program: &P) -> std::result::Result<(), String> {
        self.source.check_loaded(program)
    }

    fn kernel_name(&self) -> &str {
        self.source.kernel_name()
    }

    fn recipe(&self) -> Option<Vec<u8>> {
        self.source.recipe()
    }
}

// ---- The spec as JSON ----

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecJson {
    format: u32,
    name: String,
    sources: Vec<SourceJson>,
    defines: Vec<(String, String)>,
    bindings: Vec<BindingJson>,
    workgroup_size: [u32; 3],
    pinned: Vec<(String, u32)>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "language", rename_all = "kebab-case", deny_unknown_fields)]
enum SourceJson {
    Glsl { source: String },
    OpenCl { source: String, entry_point: String, options: Vec<String> },
    CodeObjects { entry_point: String, objects: Vec<(String, String)> },
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum BindingJson {
    Storage { name: String, access: String },
    Scalar { name: String, ty: String },
}

fn access_name(access: Access) -> String {
    match access {
        Access::ReadOnly => "read-only".into(),
        Access::ReadWrite => "read-write".into(),
        Access::Texels(format) => format!("texels:{}", format.name()),
    }
}

fn access_from(name: &str) -> Option<Access> {
    const FORMATS: [TexelFormat; 6] = [
        TexelFormat::R32F,
        TexelFormat::Rgba32F,
        TexelFormat::R32Ui,
        TexelFormat::Rgba32Ui,
        TexelFormat::R32I,
        TexelFormat::Rgba32I,
    ];
    match name {
        "read-only" => Some(Access::ReadOnly),
        "read-write" => Some(Access::ReadWrite),
        _ => {
            let format = name.strip_prefix("texels:")?;
            FORMATS.into_iter().find(|f| f.name() == format).map(Access::Texels)
        }
    }
}

fn scalar_from(name: &str) -> Option<ScalarType> {
    [ScalarType::U32, ScalarType::I32, ScalarType::F32].into_iter().find(|t| t.name() == name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok()).collect()
}

/// A kernel spec as the JSON of its recipe.
pub(crate) fn spec_to_json(spec: &KernelSpec) -> Vec<u8> {
    let json = SpecJson {
        format: SPEC_FORMAT,
        name: spec.name.clone(),
        sources: spec
            .sources
            .iter()
            .map(|source| match source {
                KernelSource::Glsl(source) => SourceJson::Glsl { source: source.clone() },
                KernelSource::OpenCl { source, entry_point, options } => SourceJson::OpenCl {
                    source: source.clone(),
                    entry_point: entry_point.clone(),
                    options: options.clone(),
                },
                KernelSource::CodeObjects { entry_point, objects } => SourceJson::CodeObjects {
                    entry_point: entry_point.clone(),
                    objects: objects.iter().map(|o| (o.target.clone(), hex(&o.bytes))).collect(),
                },
            })
            .collect(),
        defines: spec.defines.clone(),
        bindings: spec
            .bindings
            .iter()
            .map(|binding| match binding {
                Binding::Storage { name, access } => {
                    BindingJson::Storage { name: name.clone(), access: access_name(*access) }
                }
                Binding::Scalar { name, ty } => {
                    BindingJson::Scalar { name: name.clone(), ty: ty.name().into() }
                }
            })
            .collect(),
        workgroup_size: spec.workgroup_size,
        pinned: spec.pinned.clone(),
    };
    // Serializing plain strings, numbers and arrays cannot fail.
    serde_json::to_vec(&json).unwrap_or_default()
}

/// The kernel spec a recipe's JSON holds, checked as any spec is; why not otherwise.
pub(crate) fn spec_from_json(bytes: &[u8]) -> std::result::Result<KernelSpec, String> {
    let json: SpecJson = serde_json::from_slice(bytes)
        .map_err(|err| format!("the recipe's kernel spec does not parse: {err}"))?;
    if json.format != SPEC_FORMAT {
        return Err(format!("the recipe's kernel spec is in format {}, expected {SPEC_FORMAT}", json.format));
    }
    let mut spec = KernelSpec::new(json.name, json.workgroup_size);
    for source in json.sources {
        spec = spec.with_source(match source {
            SourceJson::Glsl { source } => KernelSource::Glsl(source),
            SourceJson::OpenCl { source, entry_point, options } => {
                KernelSource::OpenCl { source, entry_point, options }
            }
            SourceJson::CodeObjects { entry_point, objects } => KernelSource::CodeObjects {
                entry_point,
                objects: objects
                    .into_iter()
                    .map(|(target, bytes)| {
                        unhex(&bytes)
                            .map(|bytes| crate::kernel::CodeObject { target, bytes: bytes.into() })
                            .ok_or_else(|| "the recipe holds a code object that is not hex".to_owned())
                    })
                    .collect::<std::result::Result<_, _>>()?,
            },
        });
    }
    spec.defines = json.defines;
    for binding in json.bindings {
        spec.bindings.push(match binding {
            BindingJson::Storage { name, access } => Binding::Storage {
                access: access_from(&access)
                    .ok_or_else(|| format!("the recipe names an unknown access {access:?}"))?,
                name,
            },
            BindingJson::Scalar { name, ty } => Binding::Scalar {
                ty: scalar_from(&ty)
                    .ok_or_else(|| format!("the recipe names an unknown scalar type {ty:?}"))?,
                name,
            },
        });
    }
    spec.pinned = json.pinned;
    spec.check().map_err(|err| format!("the recipe's kernel spec is not valid: {err}"))?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_round_trips_through_its_recipe() {
        let spec = KernelSpec::new("k", [64, 2, 1])
            .glsl("void main() {}")
            .opencl("k", "__kernel void k() {}")
            .opencl_option("-cl-fast-relaxed-math")
            .code_object("k", "gfx1100", &[0, 1, 0xfe])
            .define("N", 4)
            .storage("a", Access::ReadOnly)
            .storage("t", Access::Texels(TexelFormat::Rgba32Ui))
            .storage("b", Access::ReadWrite)
            .scalar("n", ScalarType::U32)
            .scalar("x", ScalarType::F32)
            .pin("n", 7);
        assert_eq!(spec_from_json(&spec_to_json(&spec)), Ok(spec));
    }

    #[test]
    fn a_bad_recipe_spec_is_refused() {
        let spec = KernelSpec::new("k", [1, 1, 1]).glsl("void main() {}");
        let json = String::from_utf8(spec_to_json(&spec)).unwrap();
        for (bad, why) in [
            (json.replace("\"format\":1", "\"format\":9"), "format"),
            (json.replace("[1,1,1]", "[0,1,1]"), "not valid"),
            (json.replace("\"name\"", "\"extra\":1,\"name\""), "does not parse"),
            ("{".to_owned(), "does not parse"),
        ] {
            let err = spec_from_json(bad.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
    }
}
