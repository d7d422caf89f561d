//! Programs of the amdgpu backend: what a kernel spec becomes before compiling
//! ([`AmdgpuSource`]: OpenCL C for the device's exact target, or a prebuilt code object for it),
//! and a loaded kernel ([`AmdgpuProgram`]: its code uploaded to an executable buffer, the
//! register values and user SGPRs its descriptor asks for, its kernarg layout, and the interface
//! the runtime matches specs against, read from the code object's metadata).

use std::sync::Arc;

use super::codeobj::{CodeObject, RunLimits, WHOLE_OBJECT};
use super::compile::{Builtins, CompileRequest, Compiler};
use super::descriptor::{KernelDescriptor, UserSgpr};
use super::error::{AmdgpuError, Result};
use super::gfx_target::GfxTarget;
use super::kernarg::KernargLayout;
use super::kmd::{KernelCode, KernelDriver};
use super::memory::{Buffer, BufferKind, Memory};
use super::metadata::ArgKind;
use super::options::OpenClOptions;
use super::printf::PrintfFormats;
use super::workgroups;
use crate::cache::LoadFailure;
use crate::hal::{ProgramInterface, ScalarSlot, StorageSlot};
use crate::kernel::{KernelSource, KernelSpec, ScalarType};

/// The cache blob format tag of this backend: a linked AMDHSA code object (ELF).
pub const BLOB_FORMAT: u32 = 0x0A4D_4401;

/// Bytes mapped after a kernel's code, for the instruction prefetcher.
const CODE_PREFETCH_SLACK: u64 = 256;

/// How a program is built.
#[derive(Debug, Clone)]
pub(crate) enum Build {
    /// OpenCL C compiled by clang for the device's target, with the spec's defines and its
    /// OpenCL options (checked).
    OpenCl { source: String, defines: Vec<(String, String)>, cu_mode: bool, options: OpenClOptions },
    /// A code object built ahead of time for the device's target.
    Prebuilt { bytes: Arc<[u8]> },
}

/// The compiler input of one kernel on one device ([`hal::Api::CompileInput`](crate::hal::Api)):
/// what [`hal::Device::prepare`](crate::hal::Device::prepare) chose (OpenCL C with its defines
/// and modes, or a prebuilt code object) for [`hal::Device::compile`](crate::hal::Device::compile)
/// to build. Opaque: it is passed from one to the other, not built by hand.
#[derive(Debug, Clone)]
pub struct AmdgpuSource {
    /// The spec's name, for messages.
    pub(crate) kernel: String,
    /// The `__kernel` function to run.
    pub(crate) entry_point: String,
    /// The spec's work-group size, which the dispatch uses (it is part of the cache key).
    pub(crate) workgroup_size: [u32; 3],
    /// What is built.
    pub(crate) build: Build,
}

/// Whether a spec's prebuilt code objects are used when one exists for the device's target. A
/// code object is used as it was built: the spec's defines apply to OpenCL C only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourcePreference {
    /// A prebuilt code object for the exact target, else OpenCL C (no compiler needed for the
    /// built-in suite).
    CodeObjectFirst,
    /// Always compile the OpenCL C source (e.g. to compile in CU mode for a simulator).
    OpenClOnly,
}

/// What `prepare` needs from the device.
pub(crate) struct PrepareContext<'a> {
    pub backend: &'static str,
    pub target: GfxTarget,
    pub compiler: std::result::Result<&'a Compiler, &'a str>,
    pub preference: SourcePreference,
    pub cu_mode: bool,
    /// The device cannot run kernels that flush f32 denormals (the simulator).
    pub flush_to_zero_unsupported: bool,
}

/// The compiler input for `kernel` and its cache key material.
pub(crate) fn prepare(
    spec: &KernelSpec,
    cx: &PrepareContext<'_>,
) -> crate::Result<(Vec<Vec<u8>>, AmdgpuSource)> {
    let target = cx.target.name();
    let workgroup = format!("workgroup {:?}", spec.workgroup_size).into_bytes();
    let prebuilt = spec.sources.iter().find_map(|source| match source {
        KernelSource::CodeObjects { entry_point, objects }
            if cx.preference == SourcePreference::CodeObjectFirst =>
        {
            objects.iter().find(|o| o.target == target).map(|o| (entry_point, o))
        }
        _ => None,
    });
    if let Some((entry_point, object)) = prebuilt {
        let key = vec![
            b"amdgpu code object".to_vec(),
            target.clone().into_bytes(),
            entry_point.clone().into_bytes(),
            workgroup,
            object.bytes.to_vec(),
        ];
        let input = AmdgpuSource {
            kernel: spec.name.clone(),
            entry_point: entry_point.clone(),
            workgroup_size: spec.workgroup_size,
            build: Build::Prebuilt { bytes: object.bytes.clone() },
        };
        return Ok((key, input));
    }
    let opencl = spec.sources.iter().find_map(|source| match source {
        KernelSource::OpenCl { source, entry_point, options } => Some((source, entry_point, options)),
        _ => None,
    });
    let Some((source, entry_point, options)) = opencl else {
        let available: Vec<&str> = spec
            .sources
            .iter()
            .flat_map(|s| match s {
                KernelSource::CodeObjects { objects, .. } => {
                    objects.iter().map(|o| o.target.as_str()).collect()
                }
                _ => Vec::new(),
            })
            .collect();
        let problem = if available.is_empty() {
            format!("it has neither OpenCL C nor a code object, which the {} backend needs; add one with KernelSpec::opencl or KernelSpec::code_object", cx.backend)
        } else {
            format!(
                "it has no OpenCL C source and no code object for this device's target {target} (code objects for: {}); add one with KernelSpec::opencl or KernelSpec::code_object",
                available.join(", ")
            )
        };
        return Err(crate::Error::new(
            crate::ErrorKind::Unavailable,
            format!("kernel `{}`: {problem}", spec.name),
        ));
    };
    let options = OpenClOptions::parse(options).map_err(|e| {
        crate::Error::new(crate::ErrorKind::InvalidKernel, format!("kernel `{}`: {e}", spec.name))
    })?;
    if options.flushes_denormals() && cx.flush_to_zero_unsupported {
        return Err(crate::Error::new(
            crate::ErrorKind::Unavailable,
            format!(
                "kernel `{}`: -cl-denorms-are-zero makes the kernel flush f32 denormals to zero, which the {} backend does not model (it runs kernels that keep denormals); the amdgpu backend on a card takes it",
                spec.name, cx.backend
            ),
        ));
    }
    let compiler = cx.compiler.map_err(|why| {
        crate::Error::new(
            crate::ErrorKind::Unavailable,
            format!(
                "kernel `{}` must be compiled from OpenCL C for {target} (no prebuilt code object for it), but {why}",
                spec.name
            ),
        )
    })?;
    let request = CompileRequest {
        name: &spec.name,
        source,
        target: cx.target,
        builtins: Builtins::Libclc,
        defines: &spec.defines,
        cu_mode: cx.cu_mode,
        options: &options,
        workgroup: Some((entry_point, spec.workgroup_size)),
    };
    // The headers of the include directories are part of what is compiled.
    let includes = options.include_material().map_err(|e| {
        crate::Error::new(crate::ErrorKind::InvalidKernel, format!("kernel `{}`: {e}", spec.name))
    })?;
    let key = vec![
        b"amdgpu opencl".to_vec(),
        compiler.key_material(&request).into_bytes(),
        includes.into_bytes(),
        entry_point.clone().into_bytes(),
        workgroup,
        source.clone().into_bytes(),
    ];
    let input = AmdgpuSource {
        kernel: spec.name.clone(),
        entry_point: entry_point.clone(),
        workgroup_size: spec.workgroup_size,
        build: Build::OpenCl {
            source: source.clone(),
            defines: spec.defines.clone(),
            cu_mode: cx.cu_mode,
            options,
        },
    };
    Ok((key, input))
}

/// Compiles an OpenCL build into code object bytes; `Ok(None)` when `give_up` said the code
/// object is no longer wanted before the compiler finished.
pub(crate) fn compile(
    input: &AmdgpuSource,
    target: GfxTarget,
    compiler: &Compiler,
    give_up: &mut dyn FnMut() -> bool,
) -> Result<Option<Vec<u8>>> {
    match &input.build {
        Build::OpenCl { source, defines, cu_mode, options } => {
            let request = CompileRequest {
                name: &input.kernel,
                source,
                target,
                builtins: Builtins::Libclc,
                defines,
                cu_mode: *cu_mode,
                options,
                workgroup: Some((&input.entry_point, input.workgroup_size)),
            };
            Ok(compiler.compile_racing(&request, give_up)?.map(|object| object.bytes))
        }
        Build::Prebuilt { bytes } => Ok(Some(bytes.to_vec())),
    }
}

/// Where a user argument comes from at dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgSource {
    /// Index into the interface's storage slots.
    Storage(usize),
    /// Index into the interface's scalar slots.
    Scalar(usize),
}

/// A kernel loaded on the device, ready to dispatch.
pub struct AmdgpuProgram {
    pub(crate) kernel: String,
    /// Keeps the code mapped while the program lives (the runtime keeps programs alive until
    /// the submissions that use them completed).
    pub(crate) code: Buffer,
    /// GPU address of the first instruction (256-byte aligned).
    pub(crate) entry_address: u64,
    /// GPU address of the kernel descriptor (the dispatch packet's kernel object).
    pub(crate) descriptor_address: u64,
    pub(crate) descriptor: KernelDescriptor,
    pub(crate) user_sgprs: Vec<UserSgpr>,
    pub(crate) layout: KernargLayout,
    pub(crate) workgroup_size: [u32; 3],
    /// One entry per user argument, in kernarg order.
    pub(crate) arg_sources: Vec<ArgSource>,
    pub(crate) interface: ProgramInterface,
    /// The code object's printf formats, when the kernel takes a printf buffer.
    pub(crate) printf: Option<Arc<PrintfFormats>>,
}

impl std::fmt::Debug for AmdgpuProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmdgpuProgram")
            .field("kernel", &self.kernel)
            .field("entry_address", &format_args!("{:#x}", self.entry_address))
            .field("workgroup_size", &self.workgroup_size)
            .finish()
    }
}

impl AmdgpuProgram {
    /// What the program declares.
    pub fn interface(&self) -> &ProgramInterface {
        &self.interface
    }

    /// The work-group size every dispatch uses.
    pub fn workgroup_size(&self) -> [u32; 3] {
        self.workgroup_size
    }
}

/// Loads a code object for `input` on a device of `target`. Everything the bytes decide is
/// checked before any GPU memory is allocated, and a blob that fails any of it is `Refused`: it
/// is not a code object for this target, or its kernel asks for what this backend can never run
/// (scratch on gfx10.3, too much LDS, another work-group size, arguments it cannot bind, an
/// instruction the device cannot execute) — the same bytes would fail on every load, so the cache discards such an entry and compiles again. Only
/// what says nothing about the bytes (allocating, relocating into, or writing the code buffer)
/// is `Failed`.
pub(crate) fn load(
    input: &AmdgpuSource,
    bytes: &[u8],
    target: GfxTarget,
    memory: &Memory,
    kmd: &dyn KernelDriver,
) -> std::result::Result<AmdgpuProgram, LoadFailure<AmdgpuError>> {
    let refuse = |err: AmdgpuError| LoadFailure::Refused(reason_of(err, &input.kernel));
    let object = CodeObject::parse(bytes).map_err(refuse)?;
    if object.target() != target {
        return Err(LoadFailure::Refused(format!(
            "the code object is for {} but the device is {target}",
            object.target()
        )));
    }
    // Code built at -O0 keeps the queue pointer and host-call buffer without reading them.
    let unoptimized = matches!(&input.build, Build::OpenCl { options, .. } if options.opt_level == Some(0));
    let limits = RunLimits { unoptimized_inputs: unoptimized, ..RunLimits::backend_default(target) };
    let (kernel, layout) = object.check_runnable(&input.entry_point, &limits).map_err(refuse)?;
    kernel.check_workgroup_size(input.workgroup_size).map_err(refuse)?;
    let (interface, arg_sources) = interface_of(&input.kernel, kernel).map_err(refuse)?;
    if arg_sources.len() != layout.user_args().len() {
        return Err(LoadFailure::Refused(format!(
            "the metadata lists {} arguments but the kernarg layout has {}",
            arg_sources.len(),
            layout.user_args().len()
        )));
    }
    let printf = if layout.uses_printf() {
        let formats = PrintfFormats::parse(object.printf_formats())
            .map_err(|reason| refuse(AmdgpuError::invalid_kernel(&kernel.name, reason)))?;
        Some(Arc::new(formats))
    } else {
        None
    };
    let image = object.image();
    let code = KernelCode {
        kernel: &kernel.name,
        image: image.unrelocated(),
        entry: kernel.entry_offset,
        ranges: &kernel.code_ranges,
        wave64: kernel.descriptor.wave_size() == 64,
    };
    kmd.check_kernel_code(&code)
        .map_err(|reason| refuse(AmdgpuError::invalid_kernel(&kernel.name, reason)))?;
    let mut descriptor = kernel.descriptor;
    if let Build::OpenCl { source, .. } = &input.build {
        if workgroups::uses_collectives(source) {
            // The work-group collectives exchange their waves' results in LDS just past the
            // kernel's own (16-byte aligned): the dispatch gives it that much more.
            let own = descriptor.group_segment_fixed_size.next_multiple_of(16);
            let total = own + workgroups::SCRATCH_BYTES;
            let most = RunLimits::backend_default(target).max_lds_bytes;
            if total > most {
                return Err(LoadFailure::Refused(format!(
                    "its work-group collectives need {} bytes of LDS past the kernel's own {} bytes, more than the {most} a work-group has",
                    workgroups::SCRATCH_BYTES,
                    descriptor.group_segment_fixed_size
                )));
            }
            descriptor.group_segment_fixed_size = total;
        }
    }
    // The instruction prefetcher reads past the last instruction: leave mapped slack after it.
    let code = memory
        .allocate(
            image.len() as u64 + CODE_PREFETCH_SLACK,
            if image.has_writable_data() { BufferKind::CodeAndData } else { BufferKind::Code },
        )
        .map_err(LoadFailure::Failed)?;
    let base = code.gpu_address();
    let relocated = image.relocated(base).map_err(LoadFailure::Failed)?;
    code.write(0, &relocated).map_err(LoadFailure::Failed)?;
    tracing::debug!(
        kernel = %input.kernel,
        entry = format_args!("{:#x}", base + kernel.entry_offset),
        bytes = image.len(),
        "loaded code object"
    );
    Ok(AmdgpuProgram {
        kernel: input.kernel.clone(),
        entry_address: base + kernel.entry_offset,
        descriptor_address: base + kernel.descriptor_offset,
        descriptor,
        user_sgprs: kernel.descriptor.user_sgprs(),
        layout,
        workgroup_size: input.workgroup_size,
        arg_sources,
        interface,
        printf,
        code,
    })
}

/// The reason a check gave, for a refusal: whoever reports it names the kernel by its spec name,
/// so the reason names the entry point only where the check named one that differs from it.
fn reason_of(err: AmdgpuError, spec_name: &str) -> String {
    match err {
        AmdgpuError::InvalidKernel { kernel, reason } if kernel == spec_name || kernel == WHOLE_OBJECT => {
            reason
        }
        AmdgpuError::InvalidKernel { kernel, reason } => format!("entry point `{kernel}`: {reason}"),
        other => other.to_string(),
    }
}

/// The interface from the metadata's explicit arguments: global buffers become storage slots
/// numbered in argument order, 4-byte scalars become scalar slots.
fn interface_of(
    spec_name: &str,
    kernel: &super::codeobj::Kernel,
) -> Result<(ProgramInterface, Vec<ArgSource>)> {
    let refuse = |reason: String| AmdgpuError::invalid_kernel(spec_name, reason);
    let mut interface = ProgramInterface::default();
    let mut sources = Vec::new();
    for (index, arg) in kernel.metadata.args.iter().enumerate() {
        let kind = ArgKind::classify(&arg.value_kind)
            .map_err(|reason| refuse(format!("argument #{index}: {reason}")))?;
        if !matches!(kind, ArgKind::ByValue | ArgKind::GlobalBuffer) {
            continue;
        }
        let type_name = arg.type_name.clone().unwrap_or_default();
        let Some(name) = arg.name.clone().filter(|n| !n.is_empty()) else {
            return Err(refuse(format!(
                "argument #{index} ({type_name}) has no name in the code object's metadata, so a spec cannot bind it by name; build it with -cl-kernel-arg-info"
            )));
        };
        if kind == ArgKind::GlobalBuffer {
            let access = arg.actual_access.as_deref().or(arg.access.as_deref());
            let read_only = match access {
                Some("read_only") => Some(true),
                Some("write_only" | "read_write") => Some(false),
                _ if arg.is_const => Some(true),
                _ => None,
            };
            sources.push(ArgSource::Storage(interface.storage.len()));
            interface.storage.push(StorageSlot {
                binding: interface.storage.len() as u32,
                names: vec![name],
                min_bytes: 0,
                read_only,
                texels: None,
            });
            continue;
        }
        let ty = match (type_name.as_str(), arg.size) {
            ("uint" | "unsigned int", 4) => ScalarType::U32,
            ("int", 4) => ScalarType::I32,
            ("float", 4) => ScalarType::F32,
            _ => {
                return Err(refuse(format!(
                    "argument `{name}` is `{type_name}` ({} bytes) passed by value; the backend passes only uint, int and float scalars and __global buffers",
                    arg.size
                )))
            }
        };
        sources.push(ArgSource::Scalar(interface.scalars.len()));
        interface.scalars.push(ScalarSlot { name, ty: Some(ty), type_name });
    }
    Ok((interface, sources))
}
