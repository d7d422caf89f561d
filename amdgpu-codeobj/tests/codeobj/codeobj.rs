//! Code object parsing against real clang-22 output for gfx1030 and gfx1100: the suite kernels
//! (standard OpenCL C linked with libclc) and builtins-only kernels, compiled at test time; and
//! the refusals, on real objects and on real objects with one field changed. Needs clang-22,
//! lld-22 and libclc-22 (`scripts/setup.sh` installs them).

use sparkle_amdgpu_codeobj::codeobj::{max_scratch_per_work_item, CodeObject, RunLimits};
use sparkle_amdgpu_codeobj::compile::{Builtins, CompileRequest, Compiler};
use sparkle_amdgpu_codeobj::descriptor::UserSgpr;
use sparkle_amdgpu_codeobj::gfx_target::GfxTarget;
use sparkle_amdgpu_codeobj::kernarg::{ArgValue, DispatchGrid, HiddenBuffers};
use sparkle_amdgpu_codeobj::AmdgpuError;

fn compiler() -> Compiler {
    Compiler::from_env().unwrap_or_else(|e| {
        panic!("these tests compile kernels with LLVM 22: install clang-22, lld-22 and libclc-22 (scripts/setup.sh does): {e}")
    })
}

fn shader(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../shaders/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

fn build(
    source: &str,
    name: &str,
    target: &str,
    builtins: Builtins,
    defines: &[(String, String)],
) -> Vec<u8> {
    let compiler = compiler();
    let request = CompileRequest {
        name,
        source,
        target: GfxTarget::parse(target).unwrap(),
        builtins,
        defines,
        cu_mode: false,
        options: &sparkle_amdgpu_codeobj::options::OpenClOptions::default(),
        workgroup: None,
    };
    match compiler.compile(&request) {
        Ok(object) => object.bytes,
        Err(e) => panic!("{e}"),
    }
}

const PLAIN: &str = r#"
kernel void fill(global uint *out, uint value) {
    uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
    out[i] = value + i;
}
"#;

#[test]
fn suite_kernels_parse_for_gfx1030_and_gfx1100() {
    let define = |conv: &str| [("CONV".to_string(), conv.to_string())];
    // sgemm and conv2d share the GEMM core: 16-deep slices of 32-row and 32-column tiles in LDS.
    let gemm_lds = 2 * 16 * 32 * 4;
    for target in ["gfx1030", "gfx1100"] {
        let gfx = GfxTarget::parse(target).unwrap();
        for (file, kernel, user_args, lds, wg, conv) in [
            ("saxpy.cl", "saxpy", 4, 0, [256, 1, 1], "0"),
            ("gemm.cl", "sgemm", 6, gemm_lds, [64, 1, 1], "0"),
            ("gemm.cl", "conv2d", 9, gemm_lds, [64, 1, 1], "1"),
        ] {
            let bytes = build(&shader(file), kernel, target, Builtins::Libclc, &define(conv));
            let co = CodeObject::parse(&bytes).unwrap();
            assert_eq!(co.target(), gfx);
            // libclc builds are code object v4: libclc reads global offsets at the v4 offsets.
            assert_eq!(co.code_object_version(), 4);
            assert_eq!(co.image().relocation_count(), 0, "{kernel}: ld.lld -shared left relocations");
            let names: Vec<&str> = co.kernels().iter().map(|k| k.name.as_str()).collect();
            assert_eq!(names, [kernel], "{target}");
            let (k, layout) = co.check_runnable(kernel, &RunLimits::backend_default(gfx)).unwrap();
            assert_eq!(k.metadata.wavefront_size, 32);
            assert_eq!(k.descriptor.wave_size(), 32);
            assert_eq!(k.descriptor.group_segment_fixed_size, lds, "{kernel} LDS");
            assert_eq!(k.metadata.reqd_workgroup_size.as_deref(), Some(&wg[..]));
            assert_eq!(k.entry_offset % 256, 0);
            k.check_workgroup_size(wg).unwrap();
            let err = k.check_workgroup_size([8, 8, 1]).unwrap_err().to_string();
            assert!(err.contains("requires work-group size"), "{err}");
            assert_eq!(layout.user_args().len(), user_args);
            assert!(layout.user_args()[0].is_buffer);
            assert!(layout.user_args()[0].read_only, "{kernel}: first buffer is read-only");
            // libclc's get_global_id (saxpy) reads the dispatch packet and the hidden arguments;
            // the GEMM core only uses group and local ids.
            let sgprs = k.descriptor.user_sgprs();
            assert_eq!(
                sgprs.contains(&UserSgpr::DispatchPtr),
                kernel == "saxpy",
                "{kernel} {target}: {sgprs:?}"
            );
            assert!(sgprs.contains(&UserSgpr::KernargSegmentPtr));
            let hidden: Vec<&str> = k
                .metadata
                .args
                .iter()
                .map(|a| a.value_kind.as_str())
                .filter(|v| v.starts_with("hidden_"))
                .collect();
            // Code object v4: the global offsets libclc's get_global_id adds come first.
            if kernel == "saxpy" {
                assert_eq!(
                    hidden.get(..3),
                    Some(&["hidden_global_offset_x", "hidden_global_offset_y", "hidden_global_offset_z"][..]),
                    "{hidden:?}"
                );
            }
            if target == "gfx1030" {
                // gfx10.3 still enables the private segment buffer in s0-s3.
                assert_eq!(sgprs.first(), Some(&UserSgpr::PrivateSegmentBuffer), "{kernel}");
            }
            // The descriptor's entry points at code inside the image.
            let code = &co.image().unrelocated()[k.entry_offset as usize..];
            assert!(code.iter().take(64).any(|&b| b != 0));
        }
    }
}

#[test]
fn saxpy_kernargs_fill_from_real_metadata() {
    let bytes = build(&shader("saxpy.cl"), "saxpy", "gfx1100", Builtins::Libclc, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    let (_, layout) =
        co.check_runnable("saxpy", &RunLimits::backend_default(GfxTarget::new(11, 0, 0))).unwrap();
    let mut out = vec![0xAAu8; layout.size() as usize];
    let grid = DispatchGrid::from_groups([4, 1, 1], [256, 1, 1]).unwrap();
    layout
        .fill(
            &[ArgValue::Pointer(0x1000), ArgValue::Pointer(0x2000), ArgValue::F32(3.0), ArgValue::U32(1000)],
            &grid,
            &HiddenBuffers::default(),
            &mut out,
        )
        .unwrap();
    let md = &co.kernel("saxpy").unwrap().metadata;
    let at = |kind: &str| md.args.iter().find(|a| a.value_kind == kind).unwrap().offset as usize;
    assert_eq!(u64::from_le_bytes(out[at("global_buffer")..][..8].try_into().unwrap()), 0x1000);
    for offset in ["hidden_global_offset_x", "hidden_global_offset_y", "hidden_global_offset_z"] {
        assert_eq!(u64::from_le_bytes(out[at(offset)..][..8].try_into().unwrap()), 0, "{offset}");
    }
    // F32 where the kernel declares uint is refused.
    let err = layout
        .fill(
            &[ArgValue::Pointer(0), ArgValue::Pointer(0), ArgValue::F32(3.0), ArgValue::F32(1.0)],
            &grid,
            &HiddenBuffers::default(),
            &mut out,
        )
        .unwrap_err();
    assert!(err.to_string().contains("integer"), "{err}");
}

/// A builtins-only kernel that asks for its work-group size and grid: clang's default code object
/// (v6) passes them as hidden arguments, which the backend fills per dispatch.
const SIZES_KERNEL: &str = "__kernel void sizes(__global uint *out) {
    out[0] = __builtin_amdgcn_workgroup_size_x();
    out[1] = __builtin_amdgcn_grid_size_x();
}";

#[test]
fn code_object_v6_hidden_arguments_fill_from_real_metadata() {
    let bytes = build(SIZES_KERNEL, "sizes", "gfx1100", Builtins::None, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    assert_eq!(co.code_object_version(), 6);
    let (_, layout) =
        co.check_runnable("sizes", &RunLimits::backend_default(GfxTarget::new(11, 0, 0))).unwrap();
    let mut out = vec![0u8; layout.size() as usize];
    let grid = DispatchGrid::from_groups([4, 1, 1], [256, 1, 1]).unwrap();
    layout.fill(&[ArgValue::Pointer(0x1000)], &grid, &HiddenBuffers::default(), &mut out).unwrap();
    let md = &co.kernel("sizes").unwrap().metadata;
    let at = |kind: &str| md.args.iter().find(|a| a.value_kind == kind).map(|a| a.offset as usize);
    let kinds: Vec<&str> = md.args.iter().map(|a| a.value_kind.as_str()).collect();
    let group_size = at("hidden_group_size_x").unwrap_or_else(|| panic!("no group size in {kinds:?}"));
    assert_eq!(u16::from_le_bytes(out[group_size..][..2].try_into().unwrap()), 256);
    if let Some(blocks) = at("hidden_block_count_x") {
        assert_eq!(u32::from_le_bytes(out[blocks..][..4].try_into().unwrap()), 4);
    }
}

#[test]
fn builtins_only_kernels_need_no_hidden_arguments() {
    for target in ["gfx1030", "gfx1100"] {
        let bytes = build(PLAIN, "fill", target, Builtins::None, &[]);
        let co = CodeObject::parse(&bytes).unwrap();
        let (k, layout) = co.check_runnable("fill", &RunLimits::backend_default(co.target())).unwrap();
        assert_eq!(layout.user_args().len(), 2);
        assert_eq!(layout.size(), k.metadata.kernarg_segment_size);
        assert!(
            k.metadata.args.iter().all(|a| !a.value_kind.starts_with("hidden_")),
            "{:?}",
            k.metadata.args
        );
        assert!(!k.descriptor.user_sgprs().contains(&UserSgpr::DispatchPtr));
        // No reqd_work_group_size: any size up to the flat maximum (1024 by default).
        k.check_workgroup_size([64, 1, 1]).unwrap();
        let err = k.check_workgroup_size([64, 64, 1]).unwrap_err().to_string();
        assert!(err.contains("max_flat_workgroup_size"), "{err}");
    }
}

fn reason(err: AmdgpuError) -> String {
    match err {
        AmdgpuError::InvalidKernel { kernel, reason } => format!("{kernel}: {reason}"),
        other => panic!("expected InvalidKernel, got {other}"),
    }
}

#[test]
fn a_code_object_for_another_target_is_refused() {
    let bytes = build(PLAIN, "fill", "gfx1030", Builtins::None, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    let err =
        reason(co.check_runnable("fill", &RunLimits::backend_default(GfxTarget::new(11, 0, 0))).unwrap_err());
    assert!(err.contains("gfx1030") && err.contains("gfx1100") && err.starts_with("fill"), "{err}");
    let err = reason(co.check_runnable("nope", &RunLimits::backend_default(co.target())).unwrap_err());
    assert!(err.contains("fill"), "lists the kernels there are: {err}");
}

#[test]
fn scratch_runs_on_gfx10_3_and_gfx11_within_its_limit_and_wave64_is_accepted() {
    let spill = r#"
kernel void spill(global float *out, uint idx) {
    float tmp[512];
    for (int i = 0; i < 512; ++i) tmp[i] = out[i] * 2.0f;
    out[get_global_id(0)] = tmp[idx % 512];
}
"#;
    // gfx11 through architected flat scratch; gfx10.3 through the private segment buffer the
    // backend hands the kernel.
    for target in ["gfx1100", "gfx1030"] {
        let bytes = build(spill, "spill", target, Builtins::Libclc, &[]);
        let co = CodeObject::parse(&bytes).unwrap();
        co.check_runnable("spill", &RunLimits::backend_default(co.target())).unwrap();
        let kd = co.kernel("spill").unwrap().descriptor;
        assert!(kd.private_segment_fixed_size >= 2048, "{target}: {}", kd.private_segment_fixed_size);
        // A backend without scratch refuses it, naming the bytes and the target.
        let limits = RunLimits { scratch: false, ..RunLimits::backend_default(co.target()) };
        let err = reason(co.check_runnable("spill", &limits).unwrap_err());
        assert!(err.starts_with("spill") && err.contains("bytes of scratch per work-item"), "{err}");
        assert!(err.contains(target), "{err}");
    }
    // More than a wave's scratch slot holds: clang itself stops at the same limit the backend
    // checks (a hand-made object over it is refused by check_runnable).
    let huge = spill.replace("512", "70000");
    let request = CompileRequest {
        name: "spill",
        source: &huge,
        target: GfxTarget::parse("gfx1030").unwrap(),
        builtins: Builtins::Libclc,
        defines: &[],
        cu_mode: false,
        options: &sparkle_amdgpu_codeobj::options::OpenClOptions::default(),
        workgroup: None,
    };
    let err = compiler().compile(&request).unwrap_err().to_string();
    let most = max_scratch_per_work_item(GfxTarget::parse("gfx1030").unwrap(), 32);
    assert!(err.contains(&format!("exceeds limit ({most})")), "{err}");

    // wave64, built by hand.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("w.cl");
    std::fs::write(&src, PLAIN).unwrap();
    let compiler = compiler();
    let status = std::process::Command::new(compiler.clang())
        .args([
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "-target",
            "amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-mwavefrontsize64",
            "-nogpulib",
            "-O3",
            "-c",
        ])
        .arg(&src)
        .arg("-o")
        .arg(dir.path().join("w.o"))
        .status()
        .unwrap();
    assert!(status.success());
    let status = std::process::Command::new(compiler.lld())
        .arg("-shared")
        .arg(dir.path().join("w.o"))
        .arg("-o")
        .arg(dir.path().join("w.co"))
        .status()
        .unwrap();
    assert!(status.success());
    let co = CodeObject::parse(&std::fs::read(dir.path().join("w.co")).unwrap()).unwrap();
    assert_eq!(co.kernel("fill").unwrap().descriptor.wave_size(), 64);
    // The backend runs wave64 (DISPATCH_INITIATOR.CS_W32_EN clear); limits without it refuse.
    co.check_runnable("fill", &RunLimits::backend_default(co.target())).unwrap();
    let wave32_only = RunLimits { wave64: false, ..RunLimits::backend_default(co.target()) };
    let err = reason(co.check_runnable("fill", &wave32_only).unwrap_err());
    assert!(err.contains("wave64"), "{err}");
}

#[test]
fn relative_relocations_are_resolved_at_the_load_address() {
    let source = r#"
global int table_a[4];
global int table_b[4];
global int *global pointers[2] = { table_a, table_b };
kernel void pick(global int *out, uint which) {
    out[get_global_id(0)] = pointers[which & 1][0];
}
"#;
    let bytes = build(source, "pick", "gfx1100", Builtins::Libclc, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    assert_eq!(co.image().relocation_count(), 2);
    let base = 0x7f00_0000_0000u64;
    let relocated = co.image().relocated(base).unwrap();
    let plain = co.image().unrelocated();
    let changed: Vec<usize> =
        (0..plain.len() / 8).filter(|i| plain[i * 8..i * 8 + 8] != relocated[i * 8..i * 8 + 8]).collect();
    assert_eq!(changed.len(), 2);
    for i in changed {
        let value = u64::from_le_bytes(relocated[i * 8..i * 8 + 8].try_into().unwrap());
        assert!(value > base && value < base + plain.len() as u64, "{value:#x}");
    }
    assert!(co.image().relocated(base + 4).is_err(), "misaligned base");
}

/// Offset of the first (only) kernel descriptor in the file, found through the parser.
fn descriptor_file_offset(bytes: &[u8], co: &CodeObject) -> usize {
    // The image is laid out by virtual address; find the descriptor bytes in the file.
    let kd = &co.image().unrelocated()[co.kernels()[0].descriptor_offset as usize..][..64];
    bytes.windows(64).position(|w| w == kd).unwrap()
}

#[test]
fn altered_real_objects_are_refused() {
    let bytes = build(PLAIN, "fill", "gfx1100", Builtins::None, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    let limits = RunLimits::backend_default(co.target());

    // Queue pointer: kernel_code_properties bit 2.
    let mut queue = bytes.clone();
    let at = descriptor_file_offset(&bytes, &co) + 56;
    queue[at] |= 1 << 2;
    let err = reason(CodeObject::parse(&queue).unwrap().check_runnable("fill", &limits).unwrap_err());
    assert!(err.contains("queue pointer"), "{err}");

    // e_flags naming gfx1030 while the metadata says gfx1100.
    let mut flags = bytes.clone();
    flags[48] = 0x36;
    let err = reason(CodeObject::parse(&flags).unwrap_err());
    assert!(err.contains("gfx1030") && err.contains("gfx1100"), "{err}");

    // An unknown machine, a generic target, a non-HSA OS/ABI, a non-AMDGPU machine.
    for (offset, value, expect) in
        [(48usize, 0xeeu8, "EF_AMDGPU_MACH"), (51, 0x01, "generic"), (7, 0, "OS/ABI"), (18, 62, "machine")]
    {
        let mut changed = bytes.clone();
        changed[offset] = value;
        let err = reason(CodeObject::parse(&changed).unwrap_err());
        assert!(err.contains(expect), "{expect}: {err}");
    }

    // An unlinked object file.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cl"), PLAIN).unwrap();
    let status = std::process::Command::new(compiler().clang())
        .args([
            "-x",
            "cl",
            "-cl-std=CL2.0",
            "-target",
            "amdgcn-amd-amdhsa",
            "-mcpu=gfx1100",
            "-nogpulib",
            "-c",
        ])
        .arg(dir.path().join("k.cl"))
        .arg("-o")
        .arg(dir.path().join("k.o"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = reason(CodeObject::parse(&std::fs::read(dir.path().join("k.o")).unwrap()).unwrap_err());
    assert!(err.contains("ld.lld -shared"), "{err}");

    // Truncated and empty files are errors, not panics.
    for len in [0, 16, 64, bytes.len() / 2] {
        assert!(CodeObject::parse(&bytes[..len]).is_err(), "{len} bytes");
    }
}

#[test]
fn compile_errors_carry_the_compiler_log() {
    let compiler = compiler();
    let request = CompileRequest {
        name: "broken",
        source: "kernel void broken(global int *p) { p[0] = undefined_name; }",
        target: GfxTarget::new(11, 0, 0),
        builtins: Builtins::Libclc,
        defines: &[],
        cu_mode: false,
        options: &sparkle_amdgpu_codeobj::options::OpenClOptions::default(),
        workgroup: None,
    };
    match compiler.compile(&request).unwrap_err() {
        AmdgpuError::Compile { what, log } => {
            assert_eq!(what, "broken");
            assert!(log.contains("undefined_name"), "{log}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
    assert!(compiler.version().contains("clang version 22"), "{}", compiler.version());
}

#[test]
fn printf_needs_the_backend_runtime_and_says_so_without_it() {
    let source = "kernel void hello(global const uint *a) { printf(\"hello %u\\n\", a[0]); }\n";
    // With libclc the compile driver links printf's device runtime: no undefined symbol, and the
    // format table is there.
    let bytes = build(source, "hello", "gfx1100", Builtins::Libclc, &[]);
    let co = CodeObject::parse(&bytes).unwrap();
    assert_eq!(co.printf_formats(), ["1:1:4:hello %u\\n"]);
    let (_, layout) = co.check_runnable("hello", &RunLimits::backend_default(co.target())).unwrap();
    assert!(layout.uses_printf());
    // Without it, `__printf_alloc` stays undefined: the error names printf, not a relocation.
    let bytes = build(source, "hello", "gfx1100", Builtins::None, &[]);
    let err = CodeObject::parse(&bytes).unwrap_err().to_string();
    assert!(err.contains("printf") && err.contains("__printf_alloc"), "{err}");
    assert!(!err.contains("relocation type"), "{err}");
}

#[test]
fn a_compile_given_up_stops_its_tools_and_one_never_given_up_finishes() {
    let compiler = compiler();
    let source = shader("gemm.cl");
    let request = CompileRequest {
        name: "gemm",
        source: &source,
        target: GfxTarget::parse("gfx1100").unwrap(),
        builtins: Builtins::Libclc,
        defines: &[],
        cu_mode: false,
        options: &sparkle_amdgpu_codeobj::options::OpenClOptions::default(),
        workgroup: None,
    };
    // Asked at once: clang is stopped before it produced anything.
    let mut asked = 0;
    let given_up = compiler
        .compile_racing(&request, &mut || {
            asked += 1;
            true
        })
        .unwrap();
    assert!(given_up.is_none(), "a compile told to give up returned a code object");
    assert_eq!(asked, 1, "given up at the first question");

    // Never told: the same code object as a plain compile (clang is deterministic).
    let mut asked = 0;
    let raced = compiler
        .compile_racing(&request, &mut || {
            asked += 1;
            false
        })
        .unwrap()
        .expect("a compile never told to give up finishes");
    assert!(asked > 0, "the compile asked while its tools ran");
    assert_eq!(raced.bytes, compiler.compile(&request).unwrap().bytes);
}

#[test]
fn program_scope_variables_make_the_image_writable_and_nothing_else_does() {
    let plain = CodeObject::parse(&build(PLAIN, "fill", "gfx1100", Builtins::None, &[])).unwrap();
    assert!(!plain.image().has_writable_data(), "the loader's .dynamic is not the kernel's to write");
    let globals = "global uint counter = 0;\n\
                   kernel void count(global uint *out) { counter += out[0]; out[1] = counter; }\n";
    let co = CodeObject::parse(&build(globals, "count", "gfx1100", Builtins::None, &[])).unwrap();
    assert!(co.image().has_writable_data(), "a program-scope variable lives in .bss");
}
