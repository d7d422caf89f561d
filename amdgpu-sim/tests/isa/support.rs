//! Shared helpers of the ISA interpreter tests: a mapped test memory, the LLVM tools (assembler,
//! OpenCL C compiler), loading a code object's kernel, and building its dispatch.
#![allow(dead_code)]

use object::{Object, ObjectSection, ObjectSymbol};
use sparkle_amdgpu_sim::isa::{Access, Dispatch, GlobalMemory, MemoryFault, ScratchRing, DEFAULT_BUDGET};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One mapping of the test memory.
struct Region {
    base: u64,
    bytes: Vec<u8>,
    write: bool,
    exec: bool,
}

/// A sparse GPU address space made of mappings with read/write/execute permissions.
#[derive(Default)]
pub struct TestMemory {
    regions: Vec<Region>,
}

impl std::fmt::Debug for TestMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let spans: Vec<String> =
            self.regions.iter().map(|r| format!("{:#x}+{:#x}", r.base, r.bytes.len())).collect();
        f.debug_struct("TestMemory").field("regions", &spans).finish()
    }
}

impl TestMemory {
    pub fn map(&mut self, base: u64, bytes: Vec<u8>, write: bool, exec: bool) {
        self.regions.push(Region { base, bytes, write, exec });
    }

    fn find(&mut self, addr: u64, len: usize, access: Access) -> Result<&mut [u8], MemoryFault> {
        for r in &mut self.regions {
            if addr >= r.base && addr + len as u64 <= r.base + r.bytes.len() as u64 {
                let ok = match access {
                    Access::Read => true,
                    Access::Write => r.write,
                    Access::Fetch => r.exec,
                };
                if !ok {
                    break;
                }
                let o = (addr - r.base) as usize;
                return Ok(&mut r.bytes[o..o + len]);
            }
        }
        Err(MemoryFault { addr, access })
    }

    pub fn bytes(&mut self, addr: u64, len: usize) -> Vec<u8> {
        self.find(addr, len, Access::Read).unwrap().to_vec()
    }

    pub fn f32s(&mut self, addr: u64, n: usize) -> Vec<f32> {
        self.bytes(addr, 4 * n).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    pub fn u32s(&mut self, addr: u64, n: usize) -> Vec<u32> {
        self.bytes(addr, 4 * n).chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

impl GlobalMemory for TestMemory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        let src = self.find(addr, buf.len(), Access::Read)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        self.find(addr, data.len(), Access::Write)?.copy_from_slice(data);
        Ok(())
    }
    fn fetch(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        let src = self.find(addr, buf.len(), Access::Fetch)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs an LLVM tool, failing with the Debian package to install when it is missing.
pub fn tool(name: &str, args: &[&str]) -> std::process::Output {
    let package = if name.starts_with("clang") {
        "clang-22"
    } else if name.starts_with("ld.lld") {
        "lld-22"
    } else {
        "llvm-22"
    };
    let out = Command::new(name).args(args).output().unwrap_or_else(|e| {
        panic!("cannot run {name} ({e}): install the {package} package (apt-get install {package})")
    });
    assert!(out.status.success(), "{name} {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Assembles gfx1100 assembly and returns the bytes of its .text section.
pub fn assemble(asm: &str) -> Vec<u8> {
    assemble_for("gfx1100", asm)
}

/// Assembles assembly for `mcpu` and returns the bytes of its .text section.
pub fn assemble_for(mcpu: &str, asm: &str) -> Vec<u8> {
    let mcpu = format!("-mcpu={mcpu}");
    let dir = tempdir();
    let src = dir.path().join("k.s");
    let obj = dir.path().join("k.o");
    std::fs::write(&src, asm).unwrap();
    tool(
        "llvm-mc-22",
        &["-arch=amdgcn", &mcpu, "-filetype=obj", src.to_str().unwrap(), "-o", obj.to_str().unwrap()],
    );
    let data = std::fs::read(&obj).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.section_by_name(".text").unwrap().data().unwrap().to_vec()
}

pub fn kernel_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sim_kernels").join(name)
}

/// How a test kernel gets its builtins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// Clang builtins only (`-nogpulib`, `SIM_BUILTINS` defined).
    Builtins,
    /// Standard OpenCL C builtins from libclc.
    Libclc,
}

pub const LIBCLC: &str = "/usr/lib/clc/amdgcn-amd-amdhsa.bc";

/// Compiles an OpenCL C file for gfx1100 the way the backend does (default WGP mode) and links
/// it into a code object; returns the code object bytes and its metadata notes as text.
pub fn compile_cl(file: &str, build: Build) -> (Vec<u8>, String) {
    compile_cl_with(file, build, &[])
}

/// `compile_cl` with extra compiler flags.
pub fn compile_cl_with(file: &str, build: Build, extra: &[&str]) -> (Vec<u8>, String) {
    let dir = tempdir();
    let src = kernel_source(file);
    let obj = dir.path().join("k.o");
    let co = dir.path().join("k.co");
    let mut args = vec![
        "-x",
        "cl",
        "-cl-std=CL2.0",
        "-target",
        "amdgcn-amd-amdhsa",
        "-mcpu=gfx1100",
        "-O3",
        "-nogpulib",
    ];
    match build {
        Build::Builtins => args.push("-DSIM_BUILTINS"),
        Build::Libclc => {
            assert!(Path::new(LIBCLC).exists(), "{LIBCLC} is missing: install the libclc-22 package");
            args.extend(["-Xclang", "-mlink-builtin-bitcode", "-Xclang", LIBCLC]);
        }
    }
    args.extend(extra);
    args.extend(["-c", src.to_str().unwrap(), "-o", obj.to_str().unwrap()]);
    tool("clang-22", &args);
    tool("ld.lld-22", &["-shared", obj.to_str().unwrap(), "-o", co.to_str().unwrap()]);
    let notes = tool("llvm-readelf-22", &["--notes", co.to_str().unwrap()]);
    (std::fs::read(&co).unwrap(), String::from_utf8(notes.stdout).unwrap())
}

/// One kernel argument from the metadata note.
#[derive(Debug, Clone)]
pub struct ArgMeta {
    pub offset: usize,
    pub size: usize,
    pub kind: String,
}

/// Reads the `.args` of kernel `name` from `llvm-readelf --notes` output (YAML: kernels at
/// indent 2, kernel keys at 4, argument entries at 6, argument keys at 8).
pub fn kernel_args(notes: &str, name: &str) -> Vec<ArgMeta> {
    let mut kernels: Vec<(Option<String>, Vec<ArgMeta>)> = Vec::new();
    for line in notes.lines() {
        let indent = line.len() - line.trim_start().len();
        let mut t = line.trim();
        if let Some(rest) = t.strip_prefix("- ") {
            t = rest;
            if indent == 2 {
                kernels.push((None, Vec::new()));
            } else if indent == 6 && rest.starts_with('.') {
                if let Some(k) = kernels.last_mut() {
                    k.1.push(ArgMeta { offset: 0, size: 0, kind: String::new() });
                }
            }
        }
        let Some(k) = kernels.last_mut() else { continue };
        let Some((key, value)) = t.split_once(':') else { continue };
        let value = value.trim();
        if indent >= 6 {
            if let Some(a) = k.1.last_mut() {
                match key {
                    ".offset" => a.offset = value.parse().unwrap(),
                    ".size" => a.size = value.parse().unwrap(),
                    ".value_kind" => a.kind = value.to_string(),
                    _ => {}
                }
            }
        } else if key == ".name" {
            k.0 = Some(value.to_string());
        }
    }
    kernels
        .into_iter()
        .find(|k| k.0.as_deref() == Some(name))
        .map(|k| k.1)
        .unwrap_or_else(|| panic!("no metadata for kernel {name}"))
}

/// A kernel loaded into test memory.
pub struct LoadedKernel {
    pub name: String,
    pub code_address: u64,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub rsrc3: u32,
    pub properties: u16,
    pub group_segment_size: u32,
    pub kernarg_size: u32,
    pub descriptor_address: u64,
    pub args: Vec<ArgMeta>,
}

/// Where test code objects are mapped.
pub const CODE_BASE: u64 = 0x7_0000_0000;

/// Maps the allocatable sections of a code object at CODE_BASE (code executable) and reads
/// kernel `name`'s descriptor.
pub fn load_kernel(mem: &mut TestMemory, co: &[u8], notes: &str, name: &str) -> LoadedKernel {
    let file = object::File::parse(co).unwrap();
    for s in file.sections() {
        let Ok(data) = s.data() else { continue };
        if s.address() == 0 || data.is_empty() {
            continue;
        }
        let exec = s.name().unwrap_or("") == ".text";
        mem.map(CODE_BASE + s.address(), data.to_vec(), false, exec);
    }
    let kd_name = format!("{name}.kd");
    let sym = file
        .symbols()
        .find(|s| s.name() == Ok(kd_name.as_str()))
        .unwrap_or_else(|| panic!("no symbol {kd_name}"));
    let kd_addr = CODE_BASE + sym.address();
    let kd = mem.bytes(kd_addr, 64);
    let u32_at = |o: usize| u32::from_le_bytes(kd[o..o + 4].try_into().unwrap());
    let entry_offset = i64::from_le_bytes(kd[16..24].try_into().unwrap());
    LoadedKernel {
        name: name.to_string(),
        code_address: kd_addr.wrapping_add(entry_offset as u64),
        group_segment_size: u32_at(0),
        kernarg_size: u32_at(8),
        rsrc3: u32_at(44),
        rsrc1: u32_at(48),
        rsrc2: u32_at(52),
        properties: u16::from_le_bytes(kd[56..58].try_into().unwrap()),
        descriptor_address: kd_addr,
        args: kernel_args(notes, name),
    }
}

/// Explicit argument values in order: a pointer or a 32-bit scalar.
#[derive(Debug, Clone, Copy)]
pub enum ArgValue {
    Ptr(u64),
    U32(u32),
    F32(f32),
}

pub const KERNARG_BASE: u64 = 0x6_0000_0000;
pub const PACKET_BASE: u64 = 0x6_1000_0000;

/// Writes the kernarg segment (explicit and hidden arguments) and, when the kernel wants one,
/// the dispatch packet, then builds the dispatch as a driver would program it.
pub fn prepare_dispatch(
    mem: &mut TestMemory,
    k: &LoadedKernel,
    values: &[ArgValue],
    group: [u32; 3],
    grid_threads: [u32; 3],
) -> Dispatch {
    let groups: [u32; 3] = std::array::from_fn(|i| grid_threads[i].div_ceil(group[i]));
    // Scalar loads fetch whole 16/32-byte blocks, so the segment is padded as a driver's
    // allocation would be.
    let mut kernarg = vec![0u8; (k.kernarg_size as usize).next_multiple_of(256)];
    let mut explicit = values.iter();
    for a in &k.args {
        let put = |kernarg: &mut Vec<u8>, bytes: &[u8]| {
            kernarg[a.offset..a.offset + bytes.len()].copy_from_slice(bytes)
        };
        match a.kind.as_str() {
            "global_buffer" | "by_value" => match explicit.next().expect("too few argument values") {
                ArgValue::Ptr(p) => put(&mut kernarg, &p.to_le_bytes()),
                ArgValue::U32(v) => put(&mut kernarg, &v.to_le_bytes()),
                ArgValue::F32(v) => put(&mut kernarg, &v.to_le_bytes()),
            },
            "hidden_block_count_x" => put(&mut kernarg, &groups[0].to_le_bytes()),
            "hidden_block_count_y" => put(&mut kernarg, &groups[1].to_le_bytes()),
            "hidden_block_count_z" => put(&mut kernarg, &groups[2].to_le_bytes()),
            "hidden_group_size_x" => put(&mut kernarg, &(group[0] as u16).to_le_bytes()),
            "hidden_group_size_y" => put(&mut kernarg, &(group[1] as u16).to_le_bytes()),
            "hidden_group_size_z" => put(&mut kernarg, &(group[2] as u16).to_le_bytes()),
            // Every group is whole here (the grid is rounded up), so no remainder.
            "hidden_remainder_x" | "hidden_remainder_y" | "hidden_remainder_z" => {
                put(&mut kernarg, &0u16.to_le_bytes())
            }
            "hidden_global_offset_x" | "hidden_global_offset_y" | "hidden_global_offset_z" => {
                put(&mut kernarg, &0u64.to_le_bytes())
            }
            "hidden_grid_dims" => {
                let dims = if grid_threads[2] > 1 {
                    3u16
                } else if grid_threads[1] > 1 {
                    2
                } else {
                    1
                };
                put(&mut kernarg, &dims.to_le_bytes())
            }
            other => {
                panic!("kernel {} asks for argument kind {other}, which the test does not provide", k.name)
            }
        }
    }
    assert!(explicit.next().is_none(), "too many argument values");
    mem.map(KERNARG_BASE, kernarg, false, false);

    // hsa_kernel_dispatch_packet_t: sizes of the (rounded-up) grid as the hardware launches it.
    let mut packet = vec![0u8; 64];
    let dims = if grid_threads[2] > 1 {
        3u16
    } else if grid_threads[1] > 1 {
        2
    } else {
        1
    };
    packet[2..4].copy_from_slice(&dims.to_le_bytes());
    for i in 0..3 {
        packet[4 + 2 * i..6 + 2 * i].copy_from_slice(&(group[i] as u16).to_le_bytes());
        packet[12 + 4 * i..16 + 4 * i].copy_from_slice(&(groups[i] * group[i]).to_le_bytes());
    }
    packet[28..32].copy_from_slice(&k.group_segment_size.to_le_bytes());
    packet[32..40].copy_from_slice(&k.descriptor_address.to_le_bytes());
    packet[40..48].copy_from_slice(&KERNARG_BASE.to_le_bytes());
    mem.map(PACKET_BASE, packet, false, false);

    // User SGPRs in the order the kernel code properties enable them.
    let mut user = Vec::new();
    let p = k.properties;
    assert_eq!(p & 1, 0, "private segment buffer not provided");
    if p & 2 != 0 {
        user.extend([PACKET_BASE as u32, (PACKET_BASE >> 32) as u32]);
    }
    assert_eq!(p & 4, 0, "queue pointer not provided");
    if p & 8 != 0 {
        user.extend([KERNARG_BASE as u32, (KERNARG_BASE >> 32) as u32]);
    }
    assert_eq!(p & 0x70, 0, "dispatch id / flat scratch / private segment size not provided");
    let user_sgprs = (k.rsrc2 >> 1) & 0x1f;
    user.resize(user_sgprs as usize, 0);
    let lds_granules = k.group_segment_size.div_ceil(512);
    Dispatch {
        kernel_name: k.name.clone(),
        gfx: sparkle_amdgpu_sim::isa::Gfx::Gfx11,
        code_address: k.code_address,
        rsrc1: k.rsrc1,
        rsrc2: (k.rsrc2 & !(0x1ff << 15)) | lds_granules << 15,
        rsrc3: k.rsrc3,
        user_data: user,
        workgroup_size: group,
        grid_workgroups: groups,
        wave32: true,
        instruction_budget: DEFAULT_BUDGET,
        scratch: ScratchRing::NONE,
    }
}

/// A dispatch of hand-written assembly at `code_address`: s[0:1] = `arg`, s2 = workgroup id x,
/// v0 = packed work-item ids (x only), IEEE mode, denormals preserved.
pub fn asm_dispatch(code_address: u64, arg: u64, threads: u32, groups: u32, lds_bytes: u32) -> Dispatch {
    Dispatch {
        kernel_name: "asm_test".to_string(),
        gfx: sparkle_amdgpu_sim::isa::Gfx::Gfx11,
        code_address,
        rsrc1: 0x00af_0000 | 0x3f,
        rsrc2: (2 << 1) | (1 << 7) | (lds_bytes.div_ceil(512) << 15),
        rsrc3: 0,
        user_data: vec![arg as u32, (arg >> 32) as u32],
        workgroup_size: [threads, 1, 1],
        grid_workgroups: [groups, 1, 1],
        wave32: true,
        instruction_budget: 1_000_000,
        scratch: ScratchRing::NONE,
    }
}

pub const ASM_CODE: u64 = 0x1_0000_0000;
pub const ASM_DATA: u64 = 0x2_0000_0000;

/// Assembles `body` (ending in s_endpgm), maps it executable and a data buffer writable, and runs
/// `threads` x `groups` threads; returns the memory for inspection.
pub fn run_asm(
    body: &str,
    data: Vec<u8>,
    threads: u32,
    groups: u32,
    lds_bytes: u32,
) -> Result<TestMemory, sparkle_amdgpu_sim::isa::SimError> {
    let code = assemble(body);
    let mut mem = TestMemory::default();
    mem.map(ASM_CODE, code, false, true);
    mem.map(ASM_DATA, data, true, false);
    let d = asm_dispatch(ASM_CODE, ASM_DATA, threads, groups, lds_bytes);
    sparkle_amdgpu_sim::isa::run_dispatch(&d, &mut mem)?;
    Ok(mem)
}

/// `run_asm` for gfx10.3 assembly, one workgroup of `threads`; `scratch` (bytes per lane, a
/// multiple of 32) adds SCRATCH_EN and a ring of one 1 KiB-granular slot per wave right after
/// the data buffer: s[0:1] the data, s[2:3] the ring, s4 the group id, s5 the wave's offset.
pub fn run_asm_gfx10(
    body: &str,
    data: Vec<u8>,
    threads: u32,
    scratch: u32,
) -> Result<TestMemory, sparkle_amdgpu_sim::isa::SimError> {
    let code = assemble_for("gfx1030", body);
    let mut mem = TestMemory::default();
    mem.map(ASM_CODE, code, false, true);
    let ring = ASM_DATA + (data.len() as u64).next_multiple_of(4096);
    mem.map(ASM_DATA, data, true, false);
    let mut d = asm_dispatch(ASM_CODE, ASM_DATA, threads, 1, 0);
    d.gfx = sparkle_amdgpu_sim::isa::Gfx::Gfx10_3;
    if scratch > 0 {
        let waves = threads.div_ceil(32);
        let kib = (scratch * 32).div_ceil(1024);
        mem.map(ring, vec![0; (waves * kib * 1024) as usize], true, false);
        // 4 user SGPRs: data address, ring address; then the group id, the wave's offset.
        d.user_data = vec![ASM_DATA as u32, (ASM_DATA >> 32) as u32, ring as u32, (ring >> 32) as u32];
        d.rsrc2 = 1 | (4 << 1) | (1 << 7);
        d.scratch = sparkle_amdgpu_sim::isa::ScratchRing { base: 0, tmpring_size: waves | kib << 12 };
    }
    sparkle_amdgpu_sim::isa::run_dispatch(&d, &mut mem)?;
    Ok(mem)
}
