//! The amdgpu backend on the runtime seam: [`AmdgpuDevice`] implements [`hal::Device`] over any
//! [`KernelDriver`] — the render node ([`AmdgpuDevice::open`]) or a simulated driver — and
//! [`AmdgpuApi`] names its types. The backend's name is a type parameter ([`Flavor`]) because
//! [`hal::Api::NAME`] is a constant: [`Amdgpu`] is the hardware backend (`amdgpu`), and a
//! simulator registers its own flavor (e.g. `amdgpu-sim`) with the same device code, getting its
//! own cache folder and identity.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::compile::Compiler;
use super::device_info::DeviceInfo as GpuInfo;
use super::discovery::{self, DrmPaths, SystemProber};
use super::error::AmdgpuError;
use super::ib;
use super::kernarg::ArgValue;
use super::kmd::KernelDriver;
use super::memory::{Buffer, BufferKind, Memory};
use super::printf::PrintfSink;
use super::program::{
    self, AmdgpuProgram, AmdgpuSource, ArgSource, PrepareContext, SourcePreference, BLOB_FORMAT,
};
use super::render_node::RenderNode;
use super::submit::{Op, Queue, ScratchWaves};
use crate::cache::{Blob, LoadFailure};
use crate::hal::{
    self, Api, BufferUsage, Command, Compiled, DeviceClass, DeviceInfo, Limits, Prepared, ProgramInterface,
    ReadTarget, ScalarValue,
};
use crate::kernel::{KernelSpec, SourceLanguage};
use crate::{Error, ErrorKind, Result};

/// Names one backend built on [`AmdgpuDevice`].
pub trait Flavor: Send + Sync + 'static {
    /// The backend's name in `SPARKLE_BACKEND`, cache folders and messages.
    const NAME: &'static str;
    /// What runs the kernels (a GPU, or a simulator of one).
    const CLASS: DeviceClass = DeviceClass::Gpu;
}

/// The hardware backend: a real GPU through its render node.
pub enum Hardware {}

impl Flavor for Hardware {
    const NAME: &'static str = "amdgpu";
}

/// The types of an amdgpu-family backend.
pub struct AmdgpuApi<F: Flavor>(PhantomData<fn() -> F>);

/// The amdgpu backend's types.
pub type Amdgpu = AmdgpuApi<Hardware>;

impl<F: Flavor> Api for AmdgpuApi<F> {
    const NAME: &'static str = F::NAME;
    type Device = AmdgpuDevice<F>;
    type Buffer = Buffer;
    type Program = AmdgpuProgram;
    type CompileInput = AmdgpuSource;
}

/// How a device builds programs.
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// Whether prebuilt code objects are taken before OpenCL C.
    pub source_preference: SourcePreference,
    /// Compile OpenCL C in CU mode (`-mcumode`).
    pub cu_mode: bool,
    /// The compiler; `None` finds clang-22 from the environment (`SPARKLE_CLANG`, PATH). A
    /// device without a compiler still runs prebuilt code objects.
    pub compiler: Option<Compiler>,
    /// Where kernels' printf output goes (standard output by default).
    pub printf: PrintfSink,
}

impl Default for DeviceOptions {
    /// What the hardware backend uses: prebuilt code objects first, WGP mode, clang from the
    /// environment.
    fn default() -> Self {
        Self {
            source_preference: SourcePreference::CodeObjectFirst,
            cu_mode: false,
            compiler: None,
            printf: PrintfSink::Stdout,
        }
    }
}

/// Distinguishes device instances, and never equals another backend's token.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
const TOKEN_TAG: u64 = 0xA3D6 << 48;

/// One GPU driven through a [`KernelDriver`].
pub struct AmdgpuDevice<F: Flavor> {
    // Dropped first: waits for unfinished work and destroys the context.
    queue: Queue,
    memory: Memory,
    kmd: Arc<dyn KernelDriver>,
    gpu: GpuInfo,
    info: DeviceInfo,
    gfx: pm4::Gfx,
    compiler: std::result::Result<Compiler, String>,
    options: DeviceOptions,
    token: u64,
    _flavor: PhantomData<fn() -> F>,
}

impl AmdgpuDevice<Hardware> {
    /// The GPU of the render node `SPARKLE_AMDGPU_NODE` names, or of the first amdgpu render
    /// node. Fails with what discovery found: no render nodes, only other drivers' nodes, no
    /// permission (with the `render` group hint), or an unsupported gfx target.
    pub fn open() -> Result<Self> {
        Self::open_with(DeviceOptions::default())
    }

    /// [`open`](Self::open) with `options` (e.g. a printf sink of the caller's).
    pub fn open_with(options: DeviceOptions) -> Result<Self> {
        let node = discovery::find_node(&DrmPaths::default(), &SystemProber::default())?;
        let kmd = RenderNode::open(&node)?;
        Self::new(Arc::new(kmd), options)
    }
}

impl<F: Flavor> AmdgpuDevice<F> {
    /// A device over `kmd`: reads the GPU's identity, refuses unsupported targets, creates the
    /// submission context. Any driver implementing the trait works (the render node, a
    /// simulator, a test's fake). The device manages the driver's GPU address space, so a
    /// driver instance (one open render node) backs one live device at a time.
    pub fn new(kmd: Arc<dyn KernelDriver>, options: DeviceOptions) -> Result<Self> {
        let gpu = GpuInfo::query(kmd.as_ref())?;
        gpu.require_supported()?;
        let gfx = ib::generation(gpu.target)?;
        let compiler = match options.compiler.clone() {
            Some(compiler) => Ok(compiler),
            None => Compiler::from_env().map_err(|e| e.to_string()),
        };
        let compiler_identity = match &compiler {
            Ok(compiler) => compiler.version().to_owned(),
            Err(_) => "none".to_owned(),
        };
        let memory = Memory::for_device(kmd.clone(), &gpu);
        let scratch_waves = ScratchWaves::for_device(gpu.compute_units, gpu.shader_engines);
        let queue = Queue::new(
            kmd.clone(),
            memory.clone(),
            gfx,
            scratch_waves,
            options.printf.clone(),
            gpu.gpu_counter_khz,
        )?;
        let info = DeviceInfo {
            backend: F::NAME,
            name: format!("AMD {} ({})", gpu.target, kmd.describe()),
            details: details(&gpu, kmd.as_ref(), &compiler, &options),
            gpu_id: gpu.gpu_id_for(F::NAME, &compiler_identity),
            limits: limits(&gpu),
            persists_programs: true,
            parallel_compile: false,
            languages: vec![SourceLanguage::CodeObject, SourceLanguage::OpenCl],
            class: F::CLASS,
        };
        tracing::info!(backend = F::NAME, device = %info.name, "amdgpu backend ready");
        Ok(Self {
            queue,
            memory,
            kmd,
            gpu,
            info,
            gfx,
            compiler,
            options,
            token: TOKEN_TAG | NEXT_TOKEN.fetch_add(1, Ordering::Relaxed),
            _flavor: PhantomData,
        })
    }

    /// The kernel driver underneath.
    pub fn kernel_driver(&self) -> &Arc<dyn KernelDriver> {
        &self.kmd
    }

    /// The PM4 generation the device's command buffers are built for.
    pub fn generation(&self) -> pm4::Gfx {
        self.gfx
    }

    /// The fence value the last finished submission stored at end of pipe (diagnostics).
    pub fn signalled_fence(&self) -> Option<u32> {
        self.queue.signalled_value()
    }

    fn compile_error(&self, failure: LoadFailure<AmdgpuError>, kernel: &str) -> Error {
        match failure {
            LoadFailure::Refused(reason) => Error::new(
                ErrorKind::InvalidKernel,
                format!("kernel `{kernel}`: the {} backend cannot use the code object: {reason}", F::NAME),
            ),
            LoadFailure::Failed(err) => err.into(),
        }
    }
}

fn details(
    gpu: &GpuInfo,
    kmd: &dyn KernelDriver,
    compiler: &std::result::Result<Compiler, String>,
    options: &DeviceOptions,
) -> Vec<(String, String)> {
    let gc_source = match gpu.gc_source {
        super::device_info::GcSource::IpDiscovery => "IP discovery",
        super::device_info::GcSource::FamilyTable => "family and revision",
    };
    vec![
        ("device".into(), kmd.describe()),
        ("kernel driver".into(), gpu.driver.to_string()),
        ("gfx target".into(), format!("{} (GC {}, from {gc_source})", gpu.target, gpu.gc_version)),
        ("PCI id".into(), format!("{:#06x} rev {:#04x}", gpu.pci_device_id, gpu.pci_revision)),
        ("compute units".into(), gpu.compute_units.to_string()),
        (
            "VRAM".into(),
            format!("{} MiB ({} MiB CPU-visible)", gpu.vram_bytes >> 20, gpu.cpu_visible_vram_bytes >> 20),
        ),
        (
            "compiler".into(),
            match compiler {
                Ok(compiler) => compiler.version().to_owned(),
                Err(why) => format!("none: {why} (prebuilt code objects still run)"),
            },
        ),
        (
            "programs".into(),
            match options.source_preference {
                SourcePreference::CodeObjectFirst => {
                    "prebuilt code object for the target, else OpenCL C".into()
                }
                SourcePreference::OpenClOnly => "OpenCL C".into(),
            },
        ),
    ]
}

fn limits(gpu: &GpuInfo) -> Limits {
    // Data buffers live in CPU-visible VRAM; a fake or unknown heap size gets 1 GiB.
    let max_buffer = match gpu.cpu_visible_vram_bytes {
        0 => 1 << 30,
        bytes => bytes.min(4 << 30),
    };
    Limits {
        max_workgroup_size: [1024, 1024, 1024],
        max_workgroup_invocations: 1024,
        // Work-items per axis must fit the dispatch packet's 32-bit grid size; checked per dispatch.
        max_workgroup_count: [u32::MAX; 3],
        max_shared_memory_bytes: 64 * 1024,
        max_storage_buffer_bytes: max_buffer,
        max_storage_buffer_bindings: 64,
        storage_buffer_offset_alignment: 16,
        // Kernels come as OpenCL C or code objects, which read buffers through pointers only.
        max_texel_buffer_texels: 0,
        texel_buffer_offset_alignment: 1,
    }
}

impl<F: Flavor> hal::Device<AmdgpuApi<F>> for AmdgpuDevice<F> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn token(&self) -> u64 {
        self.token
    }

    fn prepare(&self, kernel: &KernelSpec) -> Result<Prepared<AmdgpuSource>> {
        let cx = PrepareContext {
            backend: F::NAME,
            target: self.gpu.target,
            compiler: self.compiler.as_ref().map_err(String::as_str),
            preference: self.options.source_preference,
            cu_mode: self.options.cu_mode,
            flush_to_zero_unsupported: F::CLASS == DeviceClass::Simulator,
        };
        let (key_material, input) = program::prepare(kernel, &cx)?;
        // An OpenCL source's included headers are read at each prepare.
        Ok(Prepared { key_material, input, from_spec_alone: false })
    }

    fn compile(&self, input: &AmdgpuSource) -> Result<Compiled<AmdgpuProgram>> {
        match self.compile_racing(input, &mut || false)? {
            Some(compiled) => Ok(compiled),
            None => unreachable!("a compile that never gives up finishes"),
        }
    }

    fn compile_racing(
        &self,
        input: &AmdgpuSource,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Compiled<AmdgpuProgram>>> {
        let bytes = match (&input.build, &self.compiler) {
            (program::Build::Prebuilt { bytes }, _) => bytes.to_vec(),
            (program::Build::OpenCl { .. }, Ok(compiler)) => {
                match program::compile(input, self.gpu.target, compiler, give_up)? {
                    Some(bytes) => bytes,
                    None => return Ok(None),
                }
            }
            (program::Build::OpenCl { .. }, Err(why)) => {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("kernel `{}` needs compiling, but {why}", input.kernel),
                ))
            }
        };
        let program = program::load(input, &bytes, self.gpu.target, &self.memory, self.kmd.as_ref())
            .map_err(|failure| self.compile_error(failure, &input.kernel))?;
        Ok(Some(Compiled { program, blob: Some(Blob { format: BLOB_FORMAT, bytes }) }))
    }

    fn load(&self, input: &AmdgpuSource, blob: &Blob) -> Result<AmdgpuProgram, LoadFailure<Error>> {
        if blob.format != BLOB_FORMAT {
            return Err(LoadFailure::Refused(format!(
                "blob format {:#x} is not an amdgpu code object ({BLOB_FORMAT:#x})",
                blob.format
            )));
        }
        program::load(input, &blob.bytes, self.gpu.target, &self.memory, self.kmd.as_ref()).map_err(
            |failure| match failure {
                LoadFailure::Refused(reason) => LoadFailure::Refused(reason),
                LoadFailure::Failed(err) => LoadFailure::Failed(err.into()),
            },
        )
    }

    fn interface<'p>(&self, program: &'p AmdgpuProgram) -> &'p ProgramInterface {
        &program.interface
    }

    fn create_buffer(&self, size: u64, _usage: BufferUsage) -> Result<Buffer> {
        Ok(self.memory.allocate(size, BufferKind::Data)?)
    }

    fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        Ok(buffer.write(offset, data)?)
    }

    /// Copies out of the buffer's CPU mapping into the target as a slice (zeroed first where
    /// the caller lent uninitialised memory).
    fn read_buffer(&self, buffer: &Buffer, offset: u64, out: &mut ReadTarget<'_>) -> Result<()> {
        Ok(buffer.read(offset, out.bytes_mut())?)
    }

    fn submit(&self, commands: &[Command<'_, AmdgpuApi<F>>]) -> Result<u64> {
        let ops = commands.iter().map(op).collect::<Result<Vec<_>>>()?;
        self.queue.submit(&ops, false)
    }

    /// GPU time from RELEASE_MEM timestamps of the GPU clock counter. On the simulator that
    /// clock is the simulation's own (host time spent interpreting), not hardware time: the
    /// device's class says it is a simulator.
    fn measures_gpu_time(&self) -> bool {
        self.queue.measures_gpu_time()
    }

    fn submit_timed(&self, commands: &[Command<'_, AmdgpuApi<F>>]) -> Result<u64> {
        let ops = commands.iter().map(op).collect::<Result<Vec<_>>>()?;
        self.queue.submit(&ops, true)
    }

    fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        self.queue.take_gpu_time(fence)
    }

    fn completed(&self) -> u64 {
        self.queue.completed()
    }

    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        self.queue.wait(fence, timeout)
    }
}

/// A recorded command with its arguments in kernarg order and its buffers' handles.
fn op<'a, F: Flavor>(command: &Command<'a, AmdgpuApi<F>>) -> Result<Op<'a>> {
    Ok(match command {
        Command::Dispatch { program, buffers, scalars, groups, kernel } => {
            let mut args: Vec<Option<ArgValue>> = vec![None; program.arg_sources.len()];
            let mut handles = Vec::with_capacity(buffers.len());
            for bound in buffers {
                let index = program.arg_sources.iter().position(|s| *s == ArgSource::Storage(bound.slot));
                let slot = index
                    .and_then(|i| args.get_mut(i))
                    .ok_or_else(|| missing(kernel, "storage", bound.slot))?;
                *slot = Some(ArgValue::Pointer(bound.buffer.gpu_address() + bound.offset));
                handles.push(bound.buffer.handle());
            }
            for &(scalar, value) in scalars {
                let index = program.arg_sources.iter().position(|s| *s == ArgSource::Scalar(scalar));
                let slot =
                    index.and_then(|i| args.get_mut(i)).ok_or_else(|| missing(kernel, "scalar", scalar))?;
                *slot = Some(match value {
                    ScalarValue::U32(v) => ArgValue::U32(v),
                    ScalarValue::I32(v) => ArgValue::I32(v),
                    ScalarValue::F32(v) => ArgValue::F32(v),
                });
            }
            let args = args
                .into_iter()
                .enumerate()
                .map(|(index, value)| {
                    value.ok_or_else(|| {
                        let name = program.layout.user_args()[index].name.clone().unwrap_or_default();
                        Error::new(
                            ErrorKind::InvalidArgument,
                            format!("kernel `{kernel}`: argument {index} (`{name}`) was not given a value"),
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Op::Dispatch { program, args, groups: *groups, buffers: handles }
        }
        Command::Copy { src, src_offset, dst, dst_offset, size } => {
            Op::Copy { src, src_offset: *src_offset, dst, dst_offset: *dst_offset, size: *size }
        }
        Command::Barrier => Op::Barrier,
    })
}

fn missing(kernel: &str, what: &str, slot: usize) -> Error {
    Error::new(
        ErrorKind::InvalidArgument,
        format!("kernel `{kernel}`: the program has no {what} slot {slot}"),
    )
}
