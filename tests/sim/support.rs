//! Shared helpers of the simulated-driver tests: OpenCL C compiled at test time with clang-22,
//! code objects loaded and kernel arguments filled through the library's own code-object layer,
//! and buffers, IBs and submissions made only through the `KernelDriver` API — what the amdgpu
//! backend does, by hand, so that the simulator is tested without the backend.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use pm4::fields::{DispatchInitiator, PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
use pm4::packets::{AcquireMem, DispatchDirect, EventWrite, GcrCntl, ReleaseMem};
use pm4::registers as r;
use pm4::{Gfx, PacketWriter};
use sparkle::amdgpu::kmd::{
    BoHandle, BufferDesc, ContextId, CpuMapping, Domain, HwIp, IbDesc, KernelDriver, SeqNo, Submission,
    Timeout, VaFlags, WaitStatus,
};
use sparkle::amdgpu::Result;
use sparkle_amdgpu_codeobj::codeobj::{CodeObject, RunLimits};
use sparkle_amdgpu_codeobj::descriptor::{KernelDescriptor, UserSgpr};
use sparkle_amdgpu_codeobj::gfx_target::GfxTarget;
use sparkle_amdgpu_codeobj::kernarg::{
    dispatch_packet, ArgValue, DispatchGrid, HiddenBuffers, KernargLayout, PacketAddresses,
};
use sparkle_amdgpu_sim::{identity, SimDriver, SimOptions};

pub const LIBCLC: &str = "/usr/lib/clc/amdgcn-amd-amdhsa.bc";

/// `y[i] = a * x[i] + y[i]` for `i < n`, one work-item per element in groups of 64, built with
/// [`Builtins::Clang`].
pub const SAXPY: &str = r#"
kernel void saxpy(global const float* x, global float* y, float a, uint n) {
    uint i = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
"#;

/// How a kernel gets its builtins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtins {
    /// `-nogpulib` only: clang builtins.
    Clang,
    /// libclc-22 linked in, with this code object version (None: clang's default).
    Libclc(Option<u32>),
}

fn tool(name: &str, args: &[&str]) {
    let out = Command::new(name)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {name} ({e}): install clang-22 and lld-22"));
    assert!(out.status.success(), "{name} {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Compiles OpenCL C for gfx1100 and links it into a code object.
pub fn compile(source: &str, builtins: Builtins) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let (cl, obj, co) = (dir.path().join("k.cl"), dir.path().join("k.o"), dir.path().join("k.co"));
    std::fs::write(&cl, source).unwrap();
    let mut args: Vec<String> =
        ["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-nogpulib", "-O3"]
            .map(String::from)
            .to_vec();
    if let Builtins::Libclc(version) = builtins {
        assert!(Path::new(LIBCLC).exists(), "{LIBCLC} is missing: install libclc-22");
        args.extend(["-Xclang", "-mlink-builtin-bitcode", "-Xclang", LIBCLC].map(String::from));
        if let Some(v) = version {
            args.push(format!("-mcode-object-version={v}"));
        }
    }
    args.extend(["-c".into(), cl.display().to_string(), "-o".into(), obj.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tool("clang-22", &args);
    tool("ld.lld-22", &["-shared", obj.to_str().unwrap(), "-o", co.to_str().unwrap()]);
    std::fs::read(&co).unwrap()
}

/// A buffer created, VA-mapped and CPU-mapped through the driver.
pub struct GpuBuffer {
    pub bo: BoHandle,
    pub va: u64,
    pub size: u64,
    pub cpu: Box<dyn CpuMapping>,
}

impl GpuBuffer {
    pub fn write_bytes(&self, offset: usize, data: &[u8]) {
        self.cpu.write(offset, data).unwrap();
    }

    pub fn write_u32s(&self, offset: usize, values: &[u32]) {
        self.write_bytes(offset, &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    }

    pub fn write_f32s(&self, offset: usize, values: &[f32]) {
        self.write_bytes(offset, &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    }

    pub fn read_bytes(&self, offset: usize, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        self.cpu.read(offset, &mut out).unwrap();
        out
    }

    pub fn read_u32s(&self, offset: usize, n: usize) -> Vec<u32> {
        self.read_bytes(offset, 4 * n).chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    pub fn read_f32s(&self, offset: usize, n: usize) -> Vec<f32> {
        self.read_bytes(offset, 4 * n).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

/// A kernel of a code object uploaded into a code buffer.
pub struct LoadedKernel {
    pub name: String,
    pub code: GpuBuffer,
    pub entry: u64,
    pub descriptor_address: u64,
    pub descriptor: KernelDescriptor,
    pub layout: KernargLayout,
}

/// A simulated device with a bump allocator over its VA range.
pub struct Gpu {
    pub kmd: Arc<dyn KernelDriver>,
    pub ctx: ContextId,
    next_va: std::sync::atomic::AtomicU64,
}

/// The fence value every test IB writes last.
pub const FENCE_VALUE: u32 = 0x600d_f00d;

impl Gpu {
    pub fn new() -> Self {
        Self::with_options(SimOptions::default())
    }

    pub fn with_options(options: SimOptions) -> Self {
        let kmd: Arc<dyn KernelDriver> = SimDriver::new(options);
        let ctx = kmd.ctx_create().unwrap();
        Self { kmd, ctx, next_va: std::sync::atomic::AtomicU64::new(identity::VA_START) }
    }

    /// A fresh, unused, 64 KiB-aligned GPU address range of `size` bytes.
    pub fn reserve_va(&self, size: u64) -> u64 {
        let size = size.next_multiple_of(0x1_0000) + 0x1_0000; // a guard gap after each buffer
        self.next_va.fetch_add(size, std::sync::atomic::Ordering::SeqCst)
    }

    /// Creates a buffer of `size` bytes (rounded to 4 KiB), maps it at a fresh address with
    /// `flags`, and maps it for the CPU.
    pub fn buffer(&self, size: u64, flags: VaFlags) -> GpuBuffer {
        let size = size.next_multiple_of(4096);
        let bo = self
            .kmd
            .gem_create(&BufferDesc {
                size,
                alignment: 4096,
                domain: Domain::Gtt,
                cpu_access: true,
                cleared: true,
            })
            .unwrap();
        let va = self.reserve_va(size);
        self.kmd.va_map(bo, va, size, flags).unwrap();
        let cpu = self.kmd.map_cpu(bo, size).unwrap();
        GpuBuffer { bo, va, size, cpu }
    }

    /// Uploads a code object's load image into a buffer mapped with `flags` (CODE normally) and
    /// finds kernel `name` in it.
    pub fn load(&self, code_object: &[u8], name: &str, flags: VaFlags) -> LoadedKernel {
        let object = CodeObject::parse(code_object).unwrap();
        let (kernel, layout) =
            object.check_runnable(name, &RunLimits::backend_default(GfxTarget::new(11, 0, 0))).unwrap();
        let image = object.image();
        let code = self.buffer(image.len() as u64, flags);
        code.write_bytes(0, &image.relocated(code.va).unwrap());
        LoadedKernel {
            name: name.to_string(),
            entry: code.va + kernel.entry_offset,
            descriptor_address: code.va + kernel.descriptor_offset,
            descriptor: kernel.descriptor,
            layout,
            code,
        }
    }

    /// Writes the kernarg segment (rounded up to 256 bytes: scalar loads read whole blocks) and
    /// the dispatch packet into `args`, and returns the launch for it.
    pub fn launch(
        &self,
        kernel: &LoadedKernel,
        args_buffer: &GpuBuffer,
        values: &[ArgValue],
        grid: DispatchGrid,
    ) -> Launch {
        let kernarg_size = (kernel.layout.size() as usize).next_multiple_of(256).max(256);
        let mut kernarg = vec![0u8; kernarg_size];
        kernel.layout.fill(values, &grid, &HiddenBuffers::default(), &mut kernarg).unwrap();
        args_buffer.write_bytes(0, &kernarg);
        let kernarg_address = args_buffer.va;
        let packet_address = args_buffer.va + kernarg_size as u64;
        let packet = dispatch_packet(
            &grid,
            &PacketAddresses {
                private_segment_size: 0,
                group_segment_size: kernel.descriptor.group_segment_fixed_size,
                kernel_object: kernel.descriptor_address,
                kernarg_address,
            },
        )
        .unwrap();
        args_buffer.write_bytes(kernarg_size, &packet);
        let mut user_data = Vec::new();
        for sgpr in kernel.descriptor.user_sgprs() {
            match sgpr {
                UserSgpr::PrivateSegmentBuffer => user_data.extend([0; 4]),
                UserSgpr::DispatchPtr => {
                    user_data.extend([packet_address as u32, (packet_address >> 32) as u32])
                }
                UserSgpr::KernargSegmentPtr => {
                    user_data.extend([kernarg_address as u32, (kernarg_address >> 32) as u32])
                }
                UserSgpr::DispatchId => user_data.extend([1, 0]),
                other => panic!("kernel {} wants {other:?}, which the tests do not provide", kernel.name),
            }
        }
        Launch {
            entry: kernel.entry,
            rsrc1: kernel.descriptor.compute_pgm_rsrc1,
            rsrc2: kernel.descriptor.compute_pgm_rsrc2,
            rsrc3: kernel.descriptor.compute_pgm_rsrc3,
            lds_bytes: kernel.descriptor.group_segment_fixed_size,
            user_data,
            workgroup: grid.workgroup_size,
            groups: grid.groups(),
        }
    }

    /// Writes `words` into a fresh read-only IB buffer.
    pub fn ib_buffer(&self, words: &[u32]) -> GpuBuffer {
        let ib = self.buffer((words.len() * 4) as u64, VaFlags::READ_ONLY);
        ib.write_u32s(0, words);
        ib
    }

    /// Submits one IB with the BO list `buffers` (the IB's own buffer is added).
    pub fn submit(&self, ib: &GpuBuffer, dwords: usize, buffers: &[BoHandle]) -> Result<SeqNo> {
        self.submit_on(self.ctx, ib, dwords, buffers)
    }

    pub fn submit_on(
        &self,
        ctx: ContextId,
        ib: &GpuBuffer,
        dwords: usize,
        buffers: &[BoHandle],
    ) -> Result<SeqNo> {
        let mut list = buffers.to_vec();
        list.push(ib.bo);
        let ibs =
            [IbDesc { va: ib.va, size_bytes: (dwords * 4) as u32, ip: HwIp::Compute, ring: 0, flags: 0 }];
        self.kmd.submit(&Submission { ctx, ibs: &ibs, buffers: &list })
    }

    /// Waits up to a minute.
    pub fn wait(&self, seq: SeqNo) -> Result<WaitStatus> {
        self.wait_on(self.ctx, seq)
    }

    pub fn wait_on(&self, ctx: ContextId, seq: SeqNo) -> Result<WaitStatus> {
        self.kmd.wait(ctx, HwIp::Compute, 0, seq, Timeout::Relative(Duration::from_secs(60)))
    }

    /// Builds the IB of `launches` (preamble, each launch, partial flush, fence), submits it
    /// with `buffers` (plus the code, argument, fence and IB buffers), and waits.
    pub fn run(
        &self,
        launches: &[(&Launch, &GpuBuffer)],
        code: &[&GpuBuffer],
        buffers: &[BoHandle],
        fence: &GpuBuffer,
    ) -> Result<WaitStatus> {
        let words = ib_words(launches.iter().map(|(l, _)| *l), Some(fence.va));
        let ib = self.ib_buffer(&words);
        let mut list: Vec<BoHandle> = buffers.to_vec();
        list.extend(launches.iter().map(|(_, args)| args.bo));
        list.extend(code.iter().map(|c| c.bo));
        list.push(fence.bo);
        let seq = self.submit(&ib, words.len(), &list)?;
        self.wait(seq)
    }
}

impl Default for Gpu {
    fn default() -> Self {
        Self::new()
    }
}

/// The register values of one dispatch.
#[derive(Debug, Clone)]
pub struct Launch {
    pub entry: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    pub lds_bytes: u32,
    pub user_data: Vec<u32>,
    pub workgroup: [u32; 3],
    pub groups: [u32; 3],
}

/// Appends one launch as the backend does: cache invalidate, program registers, user data,
/// DISPATCH_DIRECT.
pub fn write_launch(w: &mut PacketWriter<&mut Vec<u32>>, l: &Launch) {
    let pgm = l.entry >> 8;
    let rsrc1 = PgmRsrc1::from_bits(l.rsrc1).with_priv(true);
    let rsrc2 = PgmRsrc2::from_bits(l.rsrc2).with_lds_bytes(l.lds_bytes).unwrap();
    w.acquire_mem(&AcquireMem::full_range(GcrCntl::INVALIDATE_ALL)).unwrap();
    w.set_sh_reg(r::COMPUTE_PGM_LO, &[pgm as u32, (pgm >> 32) as u32]).unwrap();
    w.set_sh_reg(r::COMPUTE_PGM_RSRC1, &[rsrc1.bits(), rsrc2.bits()]).unwrap();
    w.set_sh_reg(r::COMPUTE_PGM_RSRC3, &[PgmRsrc3::from_bits(l.rsrc3).bits()]).unwrap();
    w.set_sh_reg(r::COMPUTE_TMPRING_SIZE, &[TmpringSize::new(Gfx::Gfx11).bits()]).unwrap();
    if !l.user_data.is_empty() {
        w.set_sh_reg(r::COMPUTE_USER_DATA_0, &l.user_data).unwrap();
    }
    w.set_sh_reg(r::COMPUTE_RESOURCE_LIMITS, &[ResourceLimits::default().bits()]).unwrap();
    let [x, y, z] = l.workgroup;
    w.set_sh_reg(r::COMPUTE_START_X, &[0, 0, 0, x, y, z]).unwrap();
    let [gx, gy, gz] = l.groups;
    w.dispatch_direct(&DispatchDirect { x: gx, y: gy, z: gz, initiator: DispatchInitiator::launch(true) })
        .unwrap();
}

/// A complete IB: CU-enable preamble, the launches, a partial flush and (optionally) the
/// end-of-pipe fence write of [`FENCE_VALUE`].
pub fn ib_words<'a>(launches: impl IntoIterator<Item = &'a Launch>, fence: Option<u64>) -> Vec<u32> {
    let mut words = Vec::new();
    let mut w = PacketWriter::new(&mut words);
    pm4::dispatch::write_preamble(&mut w, Gfx::Gfx11).unwrap();
    for l in launches {
        write_launch(&mut w, l);
    }
    w.event_write(&EventWrite::CS_PARTIAL_FLUSH).unwrap();
    if let Some(address) = fence {
        w.release_mem(&ReleaseMem::fence32(address, FENCE_VALUE)).unwrap();
    }
    words
}

/// A 1-D grid of `n` work-items in groups of `group` (the last group may be partial).
pub fn grid_1d(n: u32, group: u32) -> DispatchGrid {
    DispatchGrid { workgroup_size: [group, 1, 1], grid_size: [n, 1, 1], global_offset: [0; 3], dims: 1 }
}
