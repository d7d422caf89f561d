//! AMDHSA code objects: reads the ELF that `ld.lld -shared` makes of LLVM's AMDGPU output into a
//! load image (the PT_LOAD segments laid out by virtual address, with the relocations it knows how
//! to resolve), the gfx target from `e_flags`, and each kernel's descriptor and metadata; and
//! decides, before anything reaches a GPU, whether the backend can run a kernel.

use std::collections::BTreeMap;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym};
use object::LittleEndian;

use crate::descriptor::{KernelDescriptor, UserSgpr, KERNEL_DESCRIPTOR_SIZE};
use crate::gfx_target::GfxTarget;
use crate::kernarg::KernargLayout;
use crate::metadata::{self, ArgKind, KernelMetadata};
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// `e_machine` of AMDGPU code.
pub const EM_AMDGPU: u16 = 224;
/// `EI_OSABI` of AMDHSA code objects.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `EF_AMDGPU_MACH` mask of `e_flags`.
const EF_AMDGPU_MACH: u32 = 0x0ff;
/// v4+ feature bits: XNACK (0x300) and SRAMECC (0xc00) settings.
const EF_AMDGPU_FEATURE_XNACK: u32 = 0x300;
const EF_AMDGPU_FEATURE_SRAMECC: u32 = 0xc00;
/// v6: generic target version (non-zero for `gfx11-generic` and friends).
const EF_AMDGPU_GENERIC_VERSION: u32 = 0xff00_0000;
/// `R_AMDGPU_RELATIVE64`: image base + addend.
const R_AMDGPU_RELATIVE64: u32 = 13;
const R_AMDGPU_NONE: u32 = 0;
/// Absolute relocations against a symbol (S + A): low and high halves, 64 and 32 bits.
const R_AMDGPU_ABS32_LO: u32 = 1;
const R_AMDGPU_ABS32_HI: u32 = 2;
const R_AMDGPU_ABS64: u32 = 3;
const R_AMDGPU_ABS32: u32 = 6;
/// What clang's printf lowering calls to reserve a record in the printf buffer; the backend
/// defines it when it compiles OpenCL C (see `compile`).
pub const PRINTF_ALLOC: &str = "__printf_alloc";

/// Where the code object starts executing must be 256-byte aligned (COMPUTE_PGM_LO holds
/// address >> 8).
pub const CODE_ALIGNMENT: u64 = 256;

/// The most private memory one work-item may use on `target` in a wave of `wave_size` lanes: the
/// largest COMPUTE_TMPRING_SIZE.WAVESIZE slot (13 bits of 1 KiB units on gfx10.3, 15 bits of
/// 256-byte units on gfx11) in the whole KiB the backend sizes slots in, split over the lanes.
pub fn max_scratch_per_work_item(target: GfxTarget, wave_size: u32) -> u32 {
    let slot: u32 = if target.major >= 11 { ((1 << 15) - 1) * 256 } else { ((1 << 13) - 1) * 1024 };
    slot / 1024 * 1024 / wave_size.max(1)
}

/// What the device and backend can run, for [`CodeObject::check_runnable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// The device's exact target.
    pub target: GfxTarget,
    /// Whether wave64 dispatches are supported.
    pub wave64: bool,
    /// Whether the backend sets up scratch (private segment) memory on this target.
    pub scratch: bool,
    /// LDS bytes a work-group may use.
    pub max_lds_bytes: u32,
    /// Largest work-group (work-items).
    pub max_workgroup_size: u32,
    /// Whether the backend passes the implicit inputs that code built at -O0 keeps without
    /// reading them: a queue descriptor for the queue pointer, a null host-call buffer. Off,
    /// a kernel asking for either is refused (optimized code asks for them only if it uses
    /// them, and nothing here services a queue or host calls).
    pub unoptimized_inputs: bool,
}

impl RunLimits {
    /// What the amdgpu backend supports on `target`: wave32 and wave64, scratch (gfx11's
    /// architected flat scratch; gfx10.3's private segment buffer and FLAT_SCRATCH
    /// initialisation), 64 KiB LDS, 1024 work-items per group.
    pub fn backend_default(target: GfxTarget) -> Self {
        Self {
            target,
            wave64: true,
            scratch: target.major >= 10,
            max_lds_bytes: 64 * 1024,
            max_workgroup_size: 1024,
            unoptimized_inputs: false,
        }
    }
}

/// Which bits of `base + target` a relocation stores, and how wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Word64,
    Low32,
    High32,
}

/// A relocation resolved against the image: the word at `offset` becomes the GPU address of
/// image offset `target` (a symbol's value plus the addend).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Relocation {
    offset: u64,
    target: u64,
    store: Store,
}

/// The bytes to place in GPU memory: every PT_LOAD segment at its virtual address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadImage {
    bytes: Vec<u8>,
    alignment: u64,
    relocations: Vec<Relocation>,
    writable: bool,
}

impl LoadImage {
    /// Size of the image in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the image has no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Alignment the GPU address of the image must have.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The image as it is in the file (relocations unresolved).
    pub fn unrelocated(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether a segment is writable (program-scope variables, `.data`/`.bss`): the image must
    /// then be mapped writable for the GPU, code and data alike, since the code reaches its
    /// variables at a fixed distance from itself.
    pub fn has_writable_data(&self) -> bool {
        self.writable
    }

    /// Number of relocations [`relocated`](Self::relocated) resolves.
    pub fn relocation_count(&self) -> usize {
        self.relocations.len()
    }

    /// The image for GPU address `base` (which must be [`alignment`](Self::alignment)-aligned).
    pub fn relocated(&self, base: u64) -> Result<Vec<u8>> {
        if base % self.alignment != 0 {
            return Err(AmdgpuError::invalid_kernel(
                "<code object>",
                format!("load address {base:#x} is not {}-byte aligned", self.alignment),
            ));
        }
        let mut bytes = self.bytes.clone();
        for r in &self.relocations {
            let at = r.offset as usize;
            let value = base.wrapping_add(r.target);
            match r.store {
                Store::Word64 => bytes[at..at + 8].copy_from_slice(&value.to_le_bytes()),
                Store::Low32 => bytes[at..at + 4].copy_from_slice(&(value as u32).to_le_bytes()),
                Store::High32 => bytes[at..at + 4].copy_from_slice(&((value >> 32) as u32).to_le_bytes()),
            }
        }
        Ok(bytes)
    }
}

/// One kernel of a code object.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The kernel's name (its entry point).
    pub name: String,
    /// Its `amdhsa.kernels` metadata entry.
    pub metadata: KernelMetadata,
    /// Its parsed kernel descriptor.
    pub descriptor: KernelDescriptor,
    /// Image offset of the kernel descriptor.
    pub descriptor_offset: u64,
    /// Image offset of the first instruction (descriptor offset + entry byte offset).
    pub entry_offset: u64,
    /// Image ranges of the code this kernel may run: its own function and every helper function
    /// of the code object (not other kernels, nor the `__clang_ocl_kern_imp_*` copies clang emits
    /// for device-side enqueue, which a PM4 dispatch never calls). Empty when the object has no
    /// function symbols; then only the entry point is known.
    pub code_ranges: Vec<std::ops::Range<u64>>,
}

impl Kernel {
    /// Refuses what the backend cannot run, naming the kernel and the reason. On success,
    /// returns the kernarg layout the dispatch code fills.
    pub fn check_runnable(&self, limits: &RunLimits) -> Result<KernargLayout> {
        let refuse = |reason: String| Err(AmdgpuError::invalid_kernel(&self.name, reason));
        let kd = &self.descriptor;
        let md = &self.metadata;
        if kd.uses_queue_ptr() && !limits.unoptimized_inputs {
            return refuse(
                "it uses the queue pointer, which a PM4 submission does not provide (only code the backend builds at -O0, which keeps it unread, gets a queue descriptor)".into(),
            );
        }
        if !limits.unoptimized_inputs
            && md.args.iter().any(|a| ArgKind::classify(&a.value_kind) == Ok(ArgKind::HostcallBuffer))
        {
            return refuse("it uses host calls, which the backend does not service".into());
        }
        if kd.uses_dynamic_stack() || md.uses_dynamic_stack {
            return refuse("it uses a dynamic stack (recursion or variable-sized private arrays)".into());
        }
        if kd.uses_scratch() && !limits.scratch {
            return refuse(format!(
                "it needs {} bytes of scratch per work-item (private arrays or register spills: {} SGPR, {} VGPR), which the backend does not set up on {}",
                kd.private_segment_fixed_size, md.sgpr_spill_count, md.vgpr_spill_count, limits.target
            ));
        }
        // gfx11 has architected flat scratch: a kernel asking for the gfx10-style descriptors
        // was built for another target.
        if kd.uses_scratch()
            && limits.target.major >= 11
            && (kd.user_sgprs().contains(&UserSgpr::FlatScratchInit)
                || kd.user_sgprs().contains(&UserSgpr::PrivateSegmentBuffer))
        {
            return refuse(format!(
                "it needs {} bytes of scratch per work-item through a private segment buffer or FLAT_SCRATCH initialisation, which {} does not use (architected flat scratch)",
                kd.private_segment_fixed_size, limits.target
            ));
        }
        let most = max_scratch_per_work_item(limits.target, kd.wave_size());
        if kd.private_segment_fixed_size > most {
            return refuse(format!(
                "it needs {} bytes of scratch per work-item; the most on {} in wave{} is {most}",
                kd.private_segment_fixed_size,
                limits.target,
                kd.wave_size()
            ));
        }
        if kd.kernarg_preload != 0 {
            return refuse(format!(
                "it preloads kernel arguments into SGPRs (kernarg_preload {:#x})",
                kd.kernarg_preload
            ));
        }
        if kd.wave_size() != md.wavefront_size {
            return refuse(format!(
                "descriptor says wave{} but metadata says wave{}",
                kd.wave_size(),
                md.wavefront_size
            ));
        }
        if kd.wave_size() == 64 && !limits.wave64 {
            return refuse(format!(
                "it is compiled for wave64; the backend runs wave32 on {}",
                limits.target
            ));
        }
        if kd.kernarg_size != md.kernarg_segment_size {
            return refuse(format!(
                "descriptor kernarg size {} differs from metadata {}",
                kd.kernarg_size, md.kernarg_segment_size
            ));
        }
        if kd.group_segment_fixed_size != md.group_segment_fixed_size {
            return refuse(format!(
                "descriptor LDS size {} differs from metadata {}",
                kd.group_segment_fixed_size, md.group_segment_fixed_size
            ));
        }
        if kd.private_segment_fixed_size != md.private_segment_fixed_size {
            return refuse(format!(
                "descriptor asks for {} bytes of scratch (private segment) per work-item, the metadata for {}",
                kd.private_segment_fixed_size, md.private_segment_fixed_size
            ));
        }
        if kd.group_segment_fixed_size > limits.max_lds_bytes {
            return refuse(format!(
                "it uses {} bytes of LDS; the device allows {}",
                kd.group_segment_fixed_size, limits.max_lds_bytes
            ));
        }
        if md.max_flat_workgroup_size == 0 || md.max_flat_workgroup_size > limits.max_workgroup_size {
            return refuse(format!(
                "max_flat_workgroup_size {} is outside 1..={}",
                md.max_flat_workgroup_size, limits.max_workgroup_size
            ));
        }
        let sgprs: u32 = kd.user_sgprs().iter().map(|s| s.count()).sum();
        if sgprs > kd.user_sgpr_count() || kd.user_sgpr_count() > 16 {
            return refuse(format!(
                "its user SGPRs ({sgprs}) do not fit RSRC2.USER_SGPR_COUNT {}",
                kd.user_sgpr_count()
            ));
        }
        if !kd.user_sgprs().contains(&UserSgpr::KernargSegmentPtr) && md.kernarg_segment_size > 0 {
            return refuse("it has arguments but does not enable the kernarg segment pointer".into());
        }
        if self.entry_offset % CODE_ALIGNMENT != 0 {
            return refuse(format!("its entry point {:#x} is not 256-byte aligned", self.entry_offset));
        }
        KernargLayout::new(md)
    }
}

impl Kernel {
    /// Checks a dispatch's work-group size against the kernel: equal to `.reqd_workgroup_size`
    /// where the kernel declares one, and no more work-items than `.max_flat_workgroup_size`.
    pub fn check_workgroup_size(&self, size: [u32; 3]) -> Result<()> {
        let refuse = |reason: String| Err(AmdgpuError::invalid_kernel(&self.name, reason));
        if size.contains(&0) {
            return refuse(format!("work-group size {size:?} has an empty axis"));
        }
        if let Some(required) = &self.metadata.reqd_workgroup_size {
            if required.as_slice() != size {
                return refuse(format!(
                    "it requires work-group size {required:?}, the dispatch uses {size:?}"
                ));
            }
        }
        let total = size.iter().map(|&s| u64::from(s)).product::<u64>();
        if total > u64::from(self.metadata.max_flat_workgroup_size) {
            return refuse(format!(
                "work-group of {total} work-items exceeds its max_flat_workgroup_size {}",
                self.metadata.max_flat_workgroup_size
            ));
        }
        Ok(())
    }
}

/// A parsed code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    target: GfxTarget,
    code_object_version: u32,
    image: LoadImage,
    kernels: Vec<Kernel>,
    /// The `amdhsa.printf` format table.
    printf: Vec<String>,
}

/// The "kernel" an error about the whole code object names.
pub const WHOLE_OBJECT: &str = "<code object>";

fn malformed(reason: impl Into<String>) -> AmdgpuError {
    AmdgpuError::invalid_kernel(WHOLE_OBJECT, reason)
}

impl CodeObject {
    /// Reads a code object; fails on anything that is not a linked AMDHSA code object v4–v6 or
    /// that carries relocations the loader cannot resolve.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let header = elf::FileHeader64::<LittleEndian>::parse(bytes)
            .map_err(|e| malformed(format!("not a 64-bit little-endian ELF file: {e}")))?;
        let endian = LittleEndian;
        let ident = header.e_ident();
        // The header parser reads the fields little-endian whatever EI_DATA says; a file that
        // declares another encoding is not what it reads.
        if ident.data != elf::ELFDATA2LSB {
            return Err(malformed(format!("ELF data encoding {} is not little-endian (1)", ident.data)));
        }
        if header.e_machine(endian) != EM_AMDGPU {
            return Err(malformed(format!(
                "ELF machine {} is not AMDGPU ({EM_AMDGPU})",
                header.e_machine(endian)
            )));
        }
        if ident.os_abi != ELFOSABI_AMDGPU_HSA {
            return Err(malformed(format!(
                "OS/ABI {} is not AMDGPU HSA ({ELFOSABI_AMDGPU_HSA}); build with -target amdgcn-amd-amdhsa",
                ident.os_abi
            )));
        }
        let code_object_version = match ident.abi_version {
            2 => 4,
            3 => 5,
            4 => 6,
            other => {
                return Err(malformed(format!(
                    "ELF ABI version {other} is not code object v4, v5 or v6 (ABI 2, 3, 4)"
                )))
            }
        };
        if header.e_type(endian) != elf::ET_DYN {
            return Err(malformed(
                "not a linked code object (ELF type is not ET_DYN): link it with `ld.lld -shared`",
            ));
        }
        let flags = header.e_flags(endian);
        if flags & EF_AMDGPU_GENERIC_VERSION != 0 {
            return Err(malformed(format!(
                "e_flags {flags:#x} name a generic target; build for the device's exact target"
            )));
        }
        let mach = flags & EF_AMDGPU_MACH;
        let target = GfxTarget::from_elf_mach(mach)
            .ok_or_else(|| malformed(format!("unknown EF_AMDGPU_MACH {mach:#x} in e_flags {flags:#x}")))?;
        if flags & (EF_AMDGPU_FEATURE_XNACK | EF_AMDGPU_FEATURE_SRAMECC) != 0 && target.is_supported() {
            return Err(malformed(format!(
                "e_flags {flags:#x} set XNACK/SRAMECC modes that {target} does not have"
            )));
        }

        let image = build_image(header, bytes)?;
        let sections =
            header.sections(endian, bytes).map_err(|e| malformed(format!("bad section table: {e}")))?;

        let mut metadata = None;
        for section in sections.iter() {
            let Some(mut notes) =
                section.notes(endian, bytes).map_err(|e| malformed(format!("bad note section: {e}")))?
            else {
                continue;
            };
            while let Some(note) = notes.next().map_err(|e| malformed(format!("bad note: {e}")))? {
                if note.name() == metadata::NOTE_OWNER.as_bytes()
                    && note.n_type(endian) == metadata::NT_AMDGPU_METADATA
                {
                    metadata = Some(metadata::parse(note.desc())?);
                }
            }
        }
        let metadata = metadata.ok_or_else(|| malformed("no AMDGPU metadata note (NT_AMDGPU_METADATA)"))?;
        if let Some(declared) = &metadata.target {
            let name = declared.rsplit("--").next().unwrap_or(declared);
            if GfxTarget::parse(name) != Some(target) {
                return Err(malformed(format!(
                    "metadata target `{declared}` differs from e_flags target {target}"
                )));
            }
        }

        let symbols = sections
            .symbols(endian, bytes, elf::SHT_DYNSYM)
            .map_err(|e| malformed(format!("bad dynamic symbol table: {e}")))?;
        let mut by_name = BTreeMap::new();
        for symbol in symbols.iter() {
            if let Ok(name) = symbols.symbol_name(endian, symbol) {
                by_name.insert(
                    String::from_utf8_lossy(name).into_owned(),
                    (symbol.st_value(endian), symbol.st_size(endian)),
                );
            }
        }
        // Functions from both symbol tables: helpers are local, so only .symtab names them.
        let mut functions = BTreeMap::new();
        for table in [elf::SHT_DYNSYM, elf::SHT_SYMTAB] {
            let symbols = sections
                .symbols(endian, bytes, table)
                .map_err(|e| malformed(format!("bad symbol table: {e}")))?;
            for symbol in symbols.iter().filter(|s| s.st_type() == elf::STT_FUNC) {
                let (start, size) = (symbol.st_value(endian), symbol.st_size(endian));
                if size == 0 || start.checked_add(size).is_none_or(|end| end > image.bytes.len() as u64) {
                    continue;
                }
                if let Ok(name) = symbols.symbol_name(endian, symbol) {
                    functions.insert(String::from_utf8_lossy(name).into_owned(), start..start + size);
                }
            }
        }
        let kernel_names: Vec<&str> = metadata.kernels.iter().map(|k| k.name.as_str()).collect();
        let helpers: Vec<std::ops::Range<u64>> = functions
            .iter()
            .filter(|(name, _)| {
                !kernel_names.contains(&name.as_str()) && !name.starts_with("__clang_ocl_kern_imp_")
            })
            .map(|(_, range)| range.clone())
            .collect();

        let printf = metadata.printf;
        let mut kernels = Vec::with_capacity(metadata.kernels.len());
        for md in metadata.kernels {
            let (kd_offset, kd_size) = *by_name.get(&md.symbol).ok_or_else(|| {
                AmdgpuError::invalid_kernel(
                    &md.name,
                    format!("descriptor symbol `{}` is not exported", md.symbol),
                )
            })?;
            // The symbol's value comes from the file: near u64::MAX the sum wraps.
            let kd_end = kd_offset.checked_add(kd_size);
            if kd_size != KERNEL_DESCRIPTOR_SIZE as u64
                || kd_end.is_none_or(|end| end > image.bytes.len() as u64)
            {
                return Err(AmdgpuError::invalid_kernel(
                    &md.name,
                    format!(
                        "descriptor `{}` at {kd_offset:#x} size {kd_size} is outside the image",
                        md.symbol
                    ),
                ));
            }
            let at = kd_offset as usize;
            let descriptor =
                KernelDescriptor::parse(&md.name, &image.bytes[at..at + KERNEL_DESCRIPTOR_SIZE])?;
            // Both within i64 by now (the image is in memory), but the entry offset is the file's.
            let entry =
                (kd_offset as i64).checked_add(descriptor.kernel_code_entry_byte_offset).unwrap_or(-1);
            if entry < 0 || entry as u64 >= image.bytes.len() as u64 {
                return Err(AmdgpuError::invalid_kernel(
                    &md.name,
                    format!("entry point {entry:#x} is outside the image"),
                ));
            }
            let mut code_ranges: Vec<std::ops::Range<u64>> =
                functions.get(&md.name).filter(|r| r.start == entry as u64).cloned().into_iter().collect();
            if !code_ranges.is_empty() {
                code_ranges.extend(helpers.iter().cloned());
            }
            kernels.push(Kernel {
                code_ranges,
                name: md.name.clone(),
                descriptor,
                descriptor_offset: kd_offset,
                entry_offset: entry as u64,
                metadata: md,
            });
        }
        Ok(Self { target, code_object_version, image, kernels, printf })
    }

    /// The target the code object was built for.
    pub fn target(&self) -> GfxTarget {
        self.target
    }

    /// 4, 5 or 6.
    pub fn code_object_version(&self) -> u32 {
        self.code_object_version
    }

    /// The image to copy into GPU memory.
    pub fn image(&self) -> &LoadImage {
        &self.image
    }

    /// The kernels it defines, in metadata order.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// The printf formats (`amdhsa.printf`: `id:count:sizes...:format`).
    pub fn printf_formats(&self) -> &[String] {
        &self.printf
    }

    /// The kernel called `name`; the error lists the kernels there are.
    pub fn kernel(&self, name: &str) -> Result<&Kernel> {
        self.kernels.iter().find(|k| k.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.kernels.iter().map(|k| k.name.as_str()).collect();
            AmdgpuError::invalid_kernel(
                name,
                format!("no such kernel in the code object (it has: {})", names.join(", ")),
            )
        })
    }

    /// Checks that the code object is for the device's target and that kernel `name` can run;
    /// returns the kernel and its kernarg layout.
    pub fn check_runnable(&self, name: &str, limits: &RunLimits) -> Result<(&Kernel, KernargLayout)> {
        let kernel = self.kernel(name)?;
        if self.target != limits.target {
            return Err(AmdgpuError::invalid_kernel(
                name,
                format!("the code object is for {} but the device is {}", self.target, limits.target),
            ));
        }
        let layout = kernel.check_runnable(limits)?;
        Ok((kernel, layout))
    }
}

/// Why a code object that needs `name` from elsewhere cannot be loaded, in a user's terms.
fn undefined_symbol(name: &str) -> String {
    if name == PRINTF_ALLOC {
        format!(
            "it calls printf through `{PRINTF_ALLOC}`, which the code object leaves undefined: printf is supported for kernels the backend compiles from OpenCL C, not in prebuilt code objects built without a printf runtime"
        )
    } else {
        format!("it needs the symbol `{name}`, which the code object does not define (the backend links no device libraries at load time)")
    }
}

/// Lays the PT_LOAD segments out by virtual address and collects relocations.
fn build_image(header: &elf::FileHeader64<LittleEndian>, bytes: &[u8]) -> Result<LoadImage> {
    let endian = LittleEndian;
    let segments =
        header.program_headers(endian, bytes).map_err(|e| malformed(format!("bad program headers: {e}")))?;
    let loads: Vec<_> = segments.iter().filter(|p| p.p_type(endian) == elf::PT_LOAD).collect();
    if loads.is_empty() {
        return Err(malformed("no PT_LOAD segment"));
    }
    let mut end = 0u64;
    let mut alignment = CODE_ALIGNMENT;
    for p in &loads {
        let vend =
            p.p_vaddr(endian).checked_add(p.p_memsz(endian)).ok_or_else(|| malformed("segment overflows"))?;
        end = end.max(vend);
        alignment = alignment.max(p.p_align(endian));
    }
    if end > (1 << 30) {
        return Err(malformed(format!("load image of {end} bytes is implausibly large")));
    }
    let mut image = vec![0u8; end as usize];
    for p in &loads {
        let data = p.data(endian, bytes).map_err(|_| malformed("segment data outside the file"))?;
        if p.p_filesz(endian) > p.p_memsz(endian) {
            return Err(malformed("segment file size exceeds its memory size"));
        }
        let at = p.p_vaddr(endian) as usize;
        image[at..at + data.len()].copy_from_slice(data);
    }

    let mut relocations = Vec::new();
    let sections =
        header.sections(endian, bytes).map_err(|e| malformed(format!("bad section table: {e}")))?;
    // Program-scope variables (.data, .bss) are written by kernels; the loader's own writable
    // sections (.dynamic, .relro_padding, .data.rel.ro) are not.
    let alloc_write = u64::from(elf::SHF_ALLOC | elf::SHF_WRITE);
    let writable = sections.iter().any(|section| {
        let name = sections.section_name(endian, section).unwrap_or_default();
        section.sh_flags(endian) & alloc_write == alloc_write
            && section.sh_size(endian) > 0
            && ((name.starts_with(b".data") && !name.starts_with(b".data.rel.ro"))
                || name.starts_with(b".bss"))
    });
    // Symbol-relative relocations name entries of the dynamic symbol table.
    let symbols = sections
        .symbols(endian, bytes, elf::SHT_DYNSYM)
        .map_err(|e| malformed(format!("bad dynamic symbol table: {e}")))?;
    for section in sections.iter() {
        // Relocations of non-allocated sections (debug info) never reach the GPU.
        if section.sh_flags(endian) & u64::from(elf::SHF_ALLOC) == 0 {
            continue;
        }
        let mut entries: Vec<(u64, u32, u32, Option<u64>)> = Vec::new();
        if let Some((rela, _)) =
            section.rela(endian, bytes).map_err(|e| malformed(format!("bad RELA section: {e}")))?
        {
            for r in rela {
                entries.push((
                    r.r_offset(endian),
                    r.r_type(endian, false),
                    r.r_sym(endian, false),
                    Some(r.r_addend(endian) as u64),
                ));
            }
        }
        if let Some((rel, _)) =
            section.rel(endian, bytes).map_err(|e| malformed(format!("bad REL section: {e}")))?
        {
            for r in rel {
                entries.push((r.r_offset(endian), r.r_type(endian), r.r_sym(endian), None));
            }
        }
        if section.sh_type(endian) == elf::SHT_RELR {
            return Err(malformed("RELR relocations are not supported"));
        }
        for (offset, r_type, sym, addend) in entries {
            let (store, width) = match r_type {
                R_AMDGPU_NONE => continue,
                R_AMDGPU_RELATIVE64 | R_AMDGPU_ABS64 => (Store::Word64, 8),
                R_AMDGPU_ABS32_LO | R_AMDGPU_ABS32 => (Store::Low32, 4),
                R_AMDGPU_ABS32_HI => (Store::High32, 4),
                other => {
                    return Err(malformed(format!(
                        "relocation type {other} at {offset:#x} is not supported (only absolute and relative addresses are resolved)"
                    )))
                }
            };
            if offset.checked_add(width).is_none_or(|e| e > image.len() as u64) {
                return Err(malformed(format!("relocation at {offset:#x} is outside the image")));
            }
            let at = offset as usize;
            // REL entries keep their addend in the word they patch.
            let addend = match addend {
                Some(a) => a,
                None if width == 8 => {
                    u64::from_le_bytes(image[at..at + 8].try_into().map_err(|_| malformed("relocation"))?)
                }
                None => u64::from(u32::from_le_bytes(
                    image[at..at + 4].try_into().map_err(|_| malformed("relocation"))?,
                )),
            };
            let symbol_value = match (r_type, sym) {
                (R_AMDGPU_RELATIVE64, _) | (_, 0) => 0,
                _ => {
                    let symbol = symbols.symbol(object::read::SymbolIndex(sym as usize)).map_err(|e| {
                        malformed(format!("relocation at {offset:#x}: bad symbol {sym}: {e}"))
                    })?;
                    let name =
                        symbols.symbol_name(endian, symbol).map(String::from_utf8_lossy).unwrap_or_default();
                    if symbol.st_shndx(endian) == elf::SHN_UNDEF {
                        return Err(malformed(undefined_symbol(&name)));
                    }
                    symbol.st_value(endian)
                }
            };
            relocations.push(Relocation { offset, target: symbol_value.wrapping_add(addend), store });
        }
    }
    Ok(LoadImage { bytes: image, alignment, relocations, writable })
}
