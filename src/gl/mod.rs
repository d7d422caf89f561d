//! The gl backend: OpenGL 4.3+ compute shaders on a headless EGL context, with linked programs
//! kept across runs as program binaries in the shared cache.
//!
//! All GL calls run on one GL thread per EGL device per process, shared by every backend opened
//! on it ([`thread`] says why); the public [`GlBackend`] is `Send + Sync` and forwards work to it.

mod buffer;
mod context;
mod device;
mod dispatch;
mod error;
mod program;
mod thread;

use std::path::PathBuf;

pub use context::DEVICE_ENV;
pub use error::GlError;

use buffer::GlBuffer;
use device::Probe;
use dispatch::{BoundArg, GlSubmission};
use program::{GlProgram, GlSource};
use thread::GlThread;

use crate::backend::{Arg, Backend, BackendKind, Buffer, BufferUsage, DeviceInfo, Program, Submission};
use crate::cache::{CacheConfig, CacheKey, CacheStats, ProgramCache, ProgramHandle};
use crate::kernel::{KernelSpec, SourceLanguage};
use crate::Result;

/// Most programs a warm-up has compiling at once when the driver compiles in parallel.
const MAX_PARALLEL_COMPILES: usize = 32;

/// The gl backend. Cheap to share between threads; every call is forwarded to its GL thread.
pub struct GlBackend {
    thread: GlThread,
    probe: Probe,
    info: DeviceInfo,
    cache: ProgramCache<GlProgram>,
}

impl GlBackend {
    /// Opens the gl backend with the cache configured from the environment.
    pub fn open() -> Result<Self> {
        Self::open_with(&CacheConfig::from_env()?)
    }

    /// Opens the gl backend with an explicit cache configuration.
    pub fn open_with(config: &CacheConfig) -> Result<Self> {
        let (thread, probe) = GlThread::shared()?;
        let gpu_id = probe.gpu_id();
        let memory_only;
        let config = if probe.persists_programs() {
            config
        } else {
            tracing::warn!(
                renderer = %probe.renderer,
                "this GL driver offers no program binary formats (with Mesa, MESA_SHADER_CACHE_DISABLE \
                 turns them off): programs are compiled on every run and cached in memory only"
            );
            memory_only = CacheConfig { dir: None, ..config.clone() };
            &memory_only
        };
        let cache = ProgramCache::open(gpu_id.clone(), config);
        let info = DeviceInfo {
            backend: BackendKind::Gl,
            name: probe.renderer.clone(),
            details: details(&probe),
            gpu_id,
            limits: probe.limits.clone(),
        };
        tracing::info!(device = %info.name, version = %probe.version, "gl backend ready");
        Ok(Self { thread, probe, info, cache })
    }

    /// Whether compiled programs outlive this process on this driver.
    pub fn persists_programs(&self) -> bool {
        self.probe.persists_programs() && self.cache.is_persistent()
    }

    fn source_for(&self, kernel: &KernelSpec) -> Result<(CacheKey, GlSource)> {
        kernel.validate(&self.info)?;
        let key = kernel.cache_key(&self.info.gpu_id, SourceLanguage::Glsl)?;
        let source = GlSource {
            thread: self.thread.clone(),
            spec: kernel.clone(),
            glsl: program::assemble(kernel)?,
            persist: self.probe.persists_programs(),
            parallel_compile: self.probe.parallel_compile,
        };
        Ok((key, source))
    }

    fn wrap(&self, kernel: &KernelSpec, handle: ProgramHandle<GlProgram>) -> Program {
        Program::new(BackendKind::Gl, kernel.clone(), handle)
    }

    fn gl_buffer<'a>(&self, buffer: &'a Buffer) -> Result<&'a GlBuffer> {
        buffer.resource::<GlBuffer>().ok_or_else(|| {
            GlError::ForeignObject { what: "buffer", backend: buffer.backend().to_string() }.into()
        })
    }
}

fn details(probe: &Probe) -> Vec<(String, String)> {
    let formats = if probe.binary_formats.is_empty() {
        "none (programs are cached in memory only)".to_owned()
    } else {
        probe.binary_formats.iter().map(|f| format!("0x{f:04x}")).collect::<Vec<_>>().join(", ")
    };
    vec![
        ("vendor".into(), probe.vendor.clone()),
        ("renderer".into(), probe.renderer.clone()),
        ("GL version".into(), probe.version.clone()),
        ("GLSL version".into(), probe.glsl_version.clone()),
        (
            "context".into(),
            format!("{}.{} core on {}", probe.context_version.0, probe.context_version.1, probe.source),
        ),
        ("program binary formats".into(), formats),
        ("parallel shader compile".into(), if probe.parallel_compile { "yes" } else { "no" }.into()),
    ]
}

impl Backend for GlBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<Buffer> {
        let buffer = GlBuffer::create(&self.thread, size, usage, self.info.limits.max_storage_buffer_bytes)?;
        Ok(Buffer::new(BackendKind::Gl, size, buffer))
    }

    fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        Ok(self.gl_buffer(buffer)?.write(offset, data.to_vec())?)
    }

    fn read_buffer(&self, buffer: &Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        let bytes = self.gl_buffer(buffer)?.read(offset, out.len())?;
        out.copy_from_slice(&bytes);
        Ok(())
    }

    fn program(&self, kernel: &KernelSpec) -> Result<Program> {
        let (key, source) = self.source_for(kernel)?;
        let handle = self.cache.get(&key, &source)?;
        Ok(self.wrap(kernel, handle))
    }

    fn warm_up(&self, kernels: &[KernelSpec]) -> Result<Vec<Program>> {
        let requests = kernels.iter().map(|k| self.source_for(k)).collect::<Result<Vec<_>>>()?;
        let handles = if self.probe.parallel_compile {
            // Every compile is started at once; the driver's threads do the work.
            self.cache.warm_up_with_threads(&requests, requests.len().min(MAX_PARALLEL_COMPILES))
        } else {
            self.cache.warm_up(&requests)
        };
        kernels.iter().zip(handles).map(|(kernel, handle)| Ok(self.wrap(kernel, handle?))).collect()
    }

    fn dispatch(&self, program: &Program, args: &[Arg<'_>], groups: [u32; 3]) -> Result<Submission> {
        let handle = program.inner::<ProgramHandle<GlProgram>>().ok_or_else(|| GlError::ForeignObject {
            what: "program",
            backend: program.backend().to_string(),
        })?;
        program.spec().validate_dispatch(&self.info, args, groups)?;
        let mut bound = Vec::with_capacity(args.len());
        let mut buffers = Vec::new();
        for arg in args {
            bound.push(match arg {
                Arg::Buffer(buffer) => {
                    buffers.push((*buffer).clone());
                    BoundArg::Buffer(self.gl_buffer(buffer)?.id)
                }
                Arg::U32(v) => BoundArg::U32(*v),
                Arg::I32(v) => BoundArg::I32(*v),
                Arg::F32(v) => BoundArg::F32(*v),
            });
        }
        let gl_program = handle.clone();
        let fence = self.thread.call(move |state| dispatch::record(state, &gl_program, &bound, groups))??;
        Ok(Submission::new(GlSubmission {
            thread: self.thread.clone(),
            fence,
            kernel: program.name().to_owned(),
            done: false,
            _program: program.clone(),
            _buffers: buffers,
        }))
    }

    fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    fn cache_dir(&self) -> Option<PathBuf> {
        self.cache.gpu_dir()
    }
}
