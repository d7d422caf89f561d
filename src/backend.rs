//! The `Backend` trait every GPU backend implements, the device description it reports, the
//! type-erased handles (buffers, programs, submissions) that cross it, and the choice of backend
//! from `SPARKLE_BACKEND`.

use std::any::Any;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::cache::{CacheConfig, CacheStats, GpuId};
use crate::kernel::KernelSpec;
use crate::{Error, Result};

/// The environment variable that picks a backend.
pub const BACKEND_ENV: &str = "SPARKLE_BACKEND";

/// Which implementation runs the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendKind {
    Gl,
}

impl BackendKind {
    /// Every backend this build knows, in the order `auto` tries them.
    pub const ALL: &'static [BackendKind] = &[BackendKind::Gl];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Gl => "gl",
        }
    }

    /// The number stored in cache entry headers; never reuse a retired one.
    pub fn code(self) -> u32 {
        match self {
            BackendKind::Gl => 1,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the user asked for in `SPARKLE_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Only(BackendKind),
}

impl BackendChoice {
    /// Parses a `SPARKLE_BACKEND` value; unset or empty means `auto`.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        let value = value.map(str::trim).unwrap_or("");
        if value.is_empty() || value.eq_ignore_ascii_case("auto") {
            return Ok(BackendChoice::Auto);
        }
        BackendKind::ALL
            .iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(value))
            .map(|&kind| BackendChoice::Only(kind))
            .ok_or_else(|| Error::UnknownBackend { value: value.to_owned(), valid: valid_choices() })
    }

    /// Reads `SPARKLE_BACKEND` from the environment.
    pub fn from_env() -> Result<Self> {
        Self::parse(std::env::var(BACKEND_ENV).ok().as_deref())
    }
}

fn valid_choices() -> String {
    let mut names: Vec<&str> = BackendKind::ALL.iter().map(|k| k.name()).collect();
    names.push("auto");
    names.join(", ")
}

/// Limits a kernel and a dispatch are checked against before they reach the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub max_workgroup_size: [u32; 3],
    pub max_workgroup_invocations: u32,
    pub max_workgroup_count: [u32; 3],
    pub max_shared_memory_bytes: u32,
    pub max_storage_buffer_bytes: u64,
    pub max_storage_buffer_bindings: u32,
}

/// What a backend reports about the device it drives.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub backend: BackendKind,
    pub name: String,
    /// Backend-specific details worth showing (driver, API version, …), in display order.
    pub details: Vec<(String, String)>,
    pub gpu_id: GpuId,
    pub limits: Limits,
}

/// How a buffer will be used; backends may pick memory placement from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferUsage {
    /// Written by the host once or rarely, read by kernels.
    Input,
    /// Written by kernels, read back by the host.
    Output,
    /// Read and written by both.
    InOut,
}

/// A device buffer. Cloning shares the same memory; it is freed when the last clone drops.
#[derive(Clone)]
pub struct Buffer {
    size: u64,
    backend: BackendKind,
    resource: Arc<dyn Any + Send + Sync>,
}

impl Buffer {
    /// Wraps a backend's buffer object. Only backends call this.
    pub fn new<T: Any + Send + Sync>(backend: BackendKind, size: u64, resource: T) -> Self {
        Self { size, backend, resource: Arc::new(resource) }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The backend's own object, if this buffer belongs to a backend storing `T`.
    pub fn resource<T: Any>(&self) -> Option<&T> {
        self.resource.downcast_ref::<T>()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer").field("backend", &self.backend).field("size", &self.size).finish()
    }
}

/// A compiled kernel, ready to dispatch. Holding it keeps the program in the cache's memory tier.
#[derive(Clone)]
pub struct Program {
    spec: Arc<KernelSpec>,
    backend: BackendKind,
    inner: Arc<dyn Any + Send + Sync>,
}

impl Program {
    /// Wraps a backend's program object. Only backends call this.
    pub fn new<T: Any + Send + Sync>(backend: BackendKind, spec: KernelSpec, inner: T) -> Self {
        Self { spec: Arc::new(spec), backend, inner: Arc::new(inner) }
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// The backend's own object, if this program belongs to a backend storing `T`.
    pub fn inner<T: Any>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program").field("name", &self.spec.name).field("backend", &self.backend).finish()
    }
}

/// A kernel argument, matched in order against the kernel's [`Binding`](crate::kernel::Binding)s.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Buffer(&'a Buffer),
    U32(u32),
    I32(i32),
    F32(f32),
}

impl Arg<'_> {
    pub(crate) fn describe(&self) -> String {
        match self {
            Arg::Buffer(_) => "a storage buffer".to_owned(),
            Arg::U32(_) => "a u32 scalar".to_owned(),
            Arg::I32(_) => "an i32 scalar".to_owned(),
            Arg::F32(_) => "an f32 scalar".to_owned(),
        }
    }
}

/// Work a backend has accepted; [`Submission::wait`] blocks until the GPU finished it.
pub struct Submission {
    pending: Box<dyn PendingWork>,
}

/// What a backend implements for its in-flight work.
pub trait PendingWork: Send {
    /// Blocks until the work is done, or fails once `timeout` has passed.
    fn wait(&mut self, timeout: Duration) -> Result<()>;
}

impl Submission {
    pub fn new(pending: impl PendingWork + 'static) -> Self {
        Self { pending: Box::new(pending) }
    }

    /// Waits for the work to finish; after `Ok`, its writes are visible to buffer reads.
    pub fn wait(mut self, timeout: Duration) -> Result<()> {
        self.pending.wait(timeout)
    }
}

impl fmt::Debug for Submission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Submission")
    }
}

/// A GPU backend. Every method may be called from any thread.
pub trait Backend: Send + Sync {
    fn info(&self) -> &DeviceInfo;

    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<Buffer>;
    fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8]) -> Result<()>;
    fn read_buffer(&self, buffer: &Buffer, offset: u64, out: &mut [u8]) -> Result<()>;

    /// The program for `kernel`, from the cache or compiled (once, however many threads ask).
    fn program(&self, kernel: &KernelSpec) -> Result<Program>;

    /// Brings all `kernels` into the cache, compiling in parallel where the backend can.
    fn warm_up(&self, kernels: &[KernelSpec]) -> Result<Vec<Program>> {
        kernels.iter().map(|k| self.program(k)).collect()
    }

    /// Queues `groups` workgroups of `program`; the returned submission is waited on.
    fn dispatch(&self, program: &Program, args: &[Arg<'_>], groups: [u32; 3]) -> Result<Submission>;

    fn cache_stats(&self) -> CacheStats;

    /// The folder this backend's device keeps its cache entries in, if it persists any.
    fn cache_dir(&self) -> Option<PathBuf>;
}

impl dyn Backend + '_ {
    /// Creates a buffer holding `data`.
    pub fn upload<T: bytemuck::Pod>(&self, data: &[T], usage: BufferUsage) -> Result<Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = self.create_buffer(bytes.len() as u64, usage)?;
        self.write_buffer(&buffer, 0, bytes)?;
        Ok(buffer)
    }

    /// Reads a whole buffer back as `T`s.
    pub fn download<T: bytemuck::Pod>(&self, buffer: &Buffer) -> Result<Vec<T>> {
        let count = buffer.size() as usize / std::mem::size_of::<T>();
        let mut out = vec![T::zeroed(); count];
        self.read_buffer(buffer, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

/// Opens the backend `SPARKLE_BACKEND` asks for (default `auto`), logging which and why.
pub fn open_from_env() -> Result<Box<dyn Backend>> {
    open(BackendChoice::from_env()?)
}

/// Opens the backend `choice` names, with the cache configured from the environment.
pub fn open(choice: BackendChoice) -> Result<Box<dyn Backend>> {
    open_with(choice, &CacheConfig::from_env()?)
}

/// Opens the backend `choice` names with an explicit cache configuration; `auto` takes the
/// first in [`BackendKind::ALL`] that works.
pub fn open_with(choice: BackendChoice, cache: &CacheConfig) -> Result<Box<dyn Backend>> {
    match choice {
        BackendChoice::Only(kind) => {
            let backend = open_kind(kind, cache)?;
            tracing::info!(backend = %kind, "using the backend {BACKEND_ENV} asks for");
            Ok(backend)
        }
        BackendChoice::Auto => {
            let mut reasons = Vec::new();
            for &kind in BackendKind::ALL {
                match open_kind(kind, cache) {
                    Ok(backend) => {
                        tracing::info!(backend = %kind, "auto: picked the first backend that opened");
                        return Ok(backend);
                    }
                    Err(err) => {
                        tracing::info!(backend = %kind, error = %err, "auto: backend did not open");
                        reasons.push(format!("{kind}: {err}"));
                    }
                }
            }
            Err(Error::BackendUnavailable { backend: "auto".into(), reason: reasons.join("; ") })
        }
    }
}

fn open_kind(kind: BackendKind, cache: &CacheConfig) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Gl => Ok(Box::new(crate::gl::GlBackend::open_with(cache)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choice_parses_known_values_and_lists_them_for_unknown_ones() {
        assert_eq!(BackendChoice::parse(None).unwrap(), BackendChoice::Auto);
        assert_eq!(BackendChoice::parse(Some(" ")).unwrap(), BackendChoice::Auto);
        assert_eq!(BackendChoice::parse(Some("AUTO")).unwrap(), BackendChoice::Auto);
        assert_eq!(BackendChoice::parse(Some("gl")).unwrap(), BackendChoice::Only(BackendKind::Gl));
        let err = BackendChoice::parse(Some("vulkan")).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, Error::UnknownBackend { .. }));
        assert!(message.contains("vulkan") && message.contains("gl, auto"), "{message}");
    }
}
