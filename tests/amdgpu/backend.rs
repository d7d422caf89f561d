//! The amdgpu backend through `sparkle::Runtime` over a recording fake of the kernel driver (no
//! card, no simulator: nothing runs, so these check what the backend hands the kernel). Each
//! suite kernel's IB is decoded back with the `pm4` decoder and compared with its code object's
//! descriptor and metadata: program address, RSRC registers, user SGPRs, kernel arguments at
//! their metadata offsets (buffer pointers lead to the uploaded bytes), the dispatch packet,
//! group counts, the end-of-pipe release and the BO list. Also: specs that disagree with the
//! kernel, cache keys, copies, waits that time out or find a GPU reset, and no leaks.

use std::sync::Arc;
use std::time::Duration;

use crate::amdgpu_support::code_objects::aot_blob;
use crate::amdgpu_support::{FakeDriver, Recorded, WaitMode};
use pm4::fields::PgmRsrc2;
use pm4::{Body, Gfx};
use sparkle::amdgpu::Compiler;
use sparkle::amdgpu::{Amdgpu, AmdgpuDevice, DeviceOptions, Hardware, SourcePreference};
use sparkle::cache::CacheConfig;
use sparkle::hal::{BufferUsage, Device};
use sparkle::kernel::{Access, KernelSpec, ScalarType};
use sparkle::runtime::Arg;
use sparkle::suite::{self, Case};
use sparkle::{ErrorKind, Runtime};
use sparkle_amdgpu_codeobj::codeobj::CodeObject;
use sparkle_amdgpu_codeobj::descriptor::UserSgpr;

fn device(kmd: &Arc<FakeDriver>, options: DeviceOptions) -> AmdgpuDevice<Hardware> {
    AmdgpuDevice::new(kmd.clone(), options).unwrap()
}

fn runtime(kmd: &Arc<FakeDriver>) -> Runtime {
    Runtime::from_device::<Amdgpu>(device(kmd, DeviceOptions::default()), &CacheConfig::memory_only())
}

/// What an explicit kernel argument must hold.
enum Expect {
    /// A pointer to a data buffer starting with these bytes.
    Buffer(Vec<u8>),
    U32(u32),
    F32(f32),
}

fn floats(values: &[f32]) -> Vec<u8> {
    values.iter().take(16).flat_map(|v| v.to_le_bytes()).collect()
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// One dispatch as the test expects it.
struct Launch<'a> {
    gfx: Gfx,
    /// The code object the backend ran, and its kernel.
    blob: &'a [u8],
    entry: &'a str,
    workgroup: [u32; 3],
    groups: [u32; 3],
    /// The explicit arguments, in order.
    args: &'a [Expect],
}

/// Checks one recorded single-dispatch submission against the kernel's code object.
fn check_dispatch(kmd: &FakeDriver, rec: &Recorded, launch: Launch<'_>) {
    let Launch { gfx, blob, entry, workgroup, groups, args: expect } = launch;
    let object = CodeObject::parse(blob).unwrap();
    let kernel = object.kernel(entry).unwrap();
    let kd = &kernel.descriptor;
    let packets = pm4::decode(&rec.words, gfx).unwrap();
    let names: Vec<&str> = packets.iter().map(|p| p.name()).collect();

    // Cache invalidate before the dispatch; partial flush and end-of-pipe release after it.
    let dispatch_at = names.iter().position(|n| *n == "DISPATCH_DIRECT").unwrap();
    assert_eq!(names.iter().filter(|n| **n == "DISPATCH_DIRECT").count(), 1, "{names:?}");
    assert!(names[..dispatch_at].contains(&"ACQUIRE_MEM"), "{names:?}");
    assert_eq!(&names[names.len() - 2..], ["EVENT_WRITE", "RELEASE_MEM"], "{names:?}");
    let Body::DispatchDirect(d) = &packets[dispatch_at].body else { unreachable!() };
    assert_eq!([d.x, d.y, d.z], groups);
    assert!(d.initiator.compute_shader_en() && d.initiator.cs_w32_en(), "{:#x}", d.initiator.bits());
    let Body::ReleaseMem(release) = &packets.last().unwrap().body else { unreachable!() };
    assert!(kmd.mapping_of(release.address).unwrap().2.writeable, "the fence goes to a writable buffer");

    let mut regs = std::collections::BTreeMap::new();
    for packet in &packets[..dispatch_at] {
        if let Body::SetShReg(writes) = &packet.body {
            for w in writes {
                regs.insert(w.reg.name, w.value);
            }
        }
    }
    let reg = |name: &str| *regs.get(name).unwrap_or_else(|| panic!("{name} not written: {regs:?}"));

    // The program: PGM_LO/HI point at the kernel's entry in an executable, read-only buffer.
    let pgm = (u64::from(reg("COMPUTE_PGM_LO")) << 8) | (u64::from(reg("COMPUTE_PGM_HI")) << 40);
    let (code_bo, code_base, code_flags) = kmd.mapping_of(pgm).unwrap();
    assert!(code_flags.executable && !code_flags.writeable, "{code_flags:?}");
    assert_eq!(pgm - code_base, kernel.entry_offset);
    let priv_bit = if gfx == Gfx::Gfx11 { 1 << 20 } else { 0 };
    assert_eq!(reg("COMPUTE_PGM_RSRC1"), kd.compute_pgm_rsrc1 | priv_bit);
    let rsrc2 =
        PgmRsrc2::from_bits(kd.compute_pgm_rsrc2).with_lds_bytes(kd.group_segment_fixed_size).unwrap();
    assert_eq!(reg("COMPUTE_PGM_RSRC2"), rsrc2.bits());
    assert_eq!(reg("COMPUTE_PGM_RSRC3"), kd.compute_pgm_rsrc3);
    assert_eq!(reg("COMPUTE_TMPRING_SIZE"), 0, "no scratch");
    assert_eq!(
        [reg("COMPUTE_NUM_THREAD_X"), reg("COMPUTE_NUM_THREAD_Y"), reg("COMPUTE_NUM_THREAD_Z")],
        workgroup
    );
    assert_eq!([reg("COMPUTE_START_X"), reg("COMPUTE_START_Y"), reg("COMPUTE_START_Z")], [0, 0, 0]);

    // User SGPRs in the descriptor's order.
    let user = |i: usize| reg(&format!("COMPUTE_USER_DATA_{i}"));
    let mut at = 0;
    let (mut kernarg, mut packet) = (None, None);
    for sgpr in kd.user_sgprs() {
        let pair = || u64::from(user(at)) | (u64::from(user(at + 1)) << 32);
        match sgpr {
            UserSgpr::PrivateSegmentBuffer => {
                assert_eq!([user(at), user(at + 1), user(at + 2), user(at + 3)], [0; 4])
            }
            UserSgpr::DispatchPtr => packet = Some(pair()),
            UserSgpr::KernargSegmentPtr => kernarg = Some(pair()),
            other => panic!("unexpected user SGPR {other:?}"),
        }
        at += sgpr.count() as usize;
    }
    assert!(!regs.contains_key(format!("COMPUTE_USER_DATA_{at}").as_str()), "extra user data");
    let kernarg = kernarg.expect("the kernel takes a kernarg pointer");
    let (kernarg_bo, _, kernarg_flags) = kmd.mapping_of(kernarg).unwrap();
    assert!(kernarg_flags.readable && !kernarg_flags.writeable && !kernarg_flags.executable);
    assert_eq!(kernarg % 64, 0);

    // Kernel arguments at their metadata offsets.
    let md = &kernel.metadata;
    let bytes = kmd.read_va(kernarg, md.kernarg_segment_size as usize);
    let mut explicit = expect.iter();
    let mut data_bos = Vec::new();
    for arg in &md.args {
        let at = arg.offset as usize;
        match arg.value_kind.as_str() {
            "global_buffer" | "by_value" => match explicit.next().expect("more arguments than expected") {
                Expect::Buffer(prefix) => {
                    let pointer = u64_at(&bytes, at);
                    let (bo, start, flags) = kmd.mapping_of(pointer).unwrap();
                    assert!(flags.writeable && !flags.executable, "{:?}: {flags:?}", arg.name);
                    assert_eq!(pointer, start, "{:?} points at its buffer's start", arg.name);
                    assert_eq!(
                        kmd.read_va(pointer, prefix.len()),
                        *prefix,
                        "{:?} holds the uploaded data",
                        arg.name
                    );
                    data_bos.push(bo);
                }
                Expect::U32(v) => assert_eq!(u32_at(&bytes, at), *v, "{:?}", arg.name),
                Expect::F32(v) => assert_eq!(f32::from_bits(u32_at(&bytes, at)), *v, "{:?}", arg.name),
            },
            "hidden_block_count_x" => assert_eq!(u32_at(&bytes, at), groups[0]),
            "hidden_block_count_y" => assert_eq!(u32_at(&bytes, at), groups[1]),
            "hidden_block_count_z" => assert_eq!(u32_at(&bytes, at), groups[2]),
            "hidden_group_size_x" => {
                assert_eq!(u16::from_le_bytes([bytes[at], bytes[at + 1]]), workgroup[0] as u16)
            }
            "hidden_group_size_y" => {
                assert_eq!(u16::from_le_bytes([bytes[at], bytes[at + 1]]), workgroup[1] as u16)
            }
            "hidden_group_size_z" => {
                assert_eq!(u16::from_le_bytes([bytes[at], bytes[at + 1]]), workgroup[2] as u16)
            }
            "hidden_remainder_x" | "hidden_remainder_y" | "hidden_remainder_z" => {
                assert_eq!(u16::from_le_bytes([bytes[at], bytes[at + 1]]), 0, "whole groups only")
            }
            "hidden_global_offset_x" | "hidden_global_offset_y" | "hidden_global_offset_z" => {
                assert_eq!(u64_at(&bytes, at), 0)
            }
            "hidden_grid_dims" => {
                let dims = if groups[2] > 1 || workgroup[2] > 1 {
                    3
                } else if groups[1] > 1 || workgroup[1] > 1 {
                    2
                } else {
                    1
                };
                assert_eq!(u16::from_le_bytes([bytes[at], bytes[at + 1]]), dims)
            }
            _ => {}
        }
    }
    assert!(explicit.next().is_none(), "fewer arguments than expected");

    // The dispatch packet, when the kernel reads it.
    if let Some(packet) = packet {
        assert!(kd.uses_dispatch_ptr());
        let p = kmd.read_va(packet, 64);
        for axis in 0..3 {
            assert_eq!(u16::from_le_bytes([p[4 + 2 * axis], p[5 + 2 * axis]]), workgroup[axis] as u16);
            assert_eq!(u32_at(&p, 12 + 4 * axis), groups[axis] * workgroup[axis]);
        }
        assert_eq!(u32_at(&p, 28), kd.group_segment_fixed_size);
        assert_eq!(u64_at(&p, 32), code_base + kernel.descriptor_offset);
        assert_eq!(u64_at(&p, 40), kernarg);
    }

    // One BO list with everything the IB touches.
    let ib_bo = kmd.mapping_of(rec.ib_va).unwrap();
    assert!(!ib_bo.2.writeable && !ib_bo.2.executable, "the IB is read-only to the GPU");
    let fence_bo = kmd.mapping_of(release.address).unwrap().0;
    for bo in [code_bo, kernarg_bo, ib_bo.0, fence_bo].iter().chain(&data_bos) {
        assert!(rec.buffers.contains(bo), "{bo:?} missing from the BO list {:?}", rec.buffers);
    }
    assert_eq!(rec.buffers.len(), 4 + data_bos.len(), "{:?}", rec.buffers);
}

fn run_case(rt: &Runtime, case: &dyn Case) -> Vec<sparkle::runtime::Buffer> {
    let program = rt.program(&case.spec()).unwrap();
    let buffers = case.upload(rt).unwrap();
    case.dispatch(rt, &program, &buffers).unwrap().wait(Duration::from_secs(5)).unwrap();
    buffers
}

#[test]
fn saxpy_dispatch_on_gfx1100_and_gfx1030() {
    for (gc, gfx, target) in [((11, 0, 0), Gfx::Gfx11, "gfx1100"), ((10, 3, 0), Gfx::Gfx10_3, "gfx1030")] {
        let kmd = FakeDriver::new(gc);
        let rt = runtime(&kmd);
        let case = suite::saxpy::Saxpy::random(1000, 3);
        let _buffers = run_case(&rt, &case);
        let recs = kmd.submissions();
        assert_eq!(recs.len(), 1);
        check_dispatch(
            &kmd,
            &recs[0],
            Launch {
                gfx,
                blob: &aot_blob("saxpy", target),
                entry: "saxpy",
                workgroup: [256, 1, 1],
                groups: [4, 1, 1],
                args: &[
                    Expect::Buffer(floats(&case.x)),
                    Expect::Buffer(floats(&case.y)),
                    Expect::F32(1.5),
                    Expect::U32(1000),
                ],
            },
        );
        // The prebuilt object was used: no compile, and a second request is a memory hit.
        rt.program(&case.spec()).unwrap();
        assert_eq!(rt.cache_stats().memory_hits, 1);
    }
}

#[test]
fn sgemm_dispatch() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let case = suite::sgemm::Sgemm::random(33, 50, 17, 5);
    let _buffers = run_case(&rt, &case);
    check_dispatch(
        &kmd,
        &kmd.submissions()[0],
        Launch {
            gfx: Gfx::Gfx11,
            blob: &aot_blob("sgemm", "gfx1100"),
            entry: "sgemm",
            // The GEMM core's portable variant: 32x32 tiles of C, 64 work-items each.
            workgroup: [64, 1, 1],
            groups: [2, 2, 1],
            args: &[
                Expect::Buffer(floats(&case.a)),
                Expect::Buffer(floats(&case.b)),
                Expect::Buffer(vec![0; 64]),
                Expect::U32(33),
                Expect::U32(50),
                Expect::U32(17),
            ],
        },
    );
    let kd = CodeObject::parse(&aot_blob("sgemm", "gfx1100")).unwrap().kernel("sgemm").unwrap().descriptor;
    assert_eq!(
        kd.group_segment_fixed_size,
        2 * 16 * 32 * 4,
        "16-deep slices of a 32-row and a 32-column tile in LDS"
    );
}

#[test]
fn conv2d_dispatch() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let shape = suite::conv2d::Shape { n: 2, c: 3, h: 17, w: 20, k: 4 };
    let case = suite::conv2d::Conv2d::random(shape, 9);
    let _buffers = run_case(&rt, &case);
    check_dispatch(
        &kmd,
        &kmd.submissions()[0],
        Launch {
            gfx: Gfx::Gfx11,
            blob: &aot_blob("conv2d", "gfx1100"),
            entry: "conv2d",
            // Implicit GEMM: 32 output channels by 32 output pixels (of N·H·W = 680) per group.
            workgroup: [64, 1, 1],
            groups: [22, 1, 1],
            args: &[
                Expect::Buffer(floats(&case.input)),
                Expect::Buffer(floats(&case.weights)),
                Expect::Buffer(floats(&case.bias)),
                Expect::Buffer(vec![0; 64]),
                Expect::U32(2),
                Expect::U32(3),
                Expect::U32(17),
                Expect::U32(20),
                Expect::U32(4),
            ],
        },
    );
}

#[test]
fn specs_that_disagree_with_the_kernel_are_refused_naming_both_sides() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let base = || {
        KernelSpec::new("saxpy", [256, 1, 1]).code_object("saxpy", "gfx1100", &aot_blob("saxpy", "gfx1100"))
    };
    let renamed = base()
        .storage("xs", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    let err = rt.program(&renamed).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKernel);
    let message = err.to_string();
    assert!(message.contains("`xs`") && message.contains("(x)") && message.contains("(y)"), "{message}");

    let wrong_type = base()
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::U32)
        .scalar("n", ScalarType::U32);
    let message = rt.program(&wrong_type).unwrap_err().to_string();
    assert!(message.contains("`a`") && message.contains("u32") && message.contains("`float`"), "{message}");

    let read_only_output = base()
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadOnly)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    // `y` is not const and the compiler did not prove it read-only: a ReadOnly spec is taken
    // (it cannot be checked) but the buffer still counts as written.
    rt.program(&read_only_output).unwrap();

    let swapped = base()
        .storage("y", Access::ReadWrite)
        .storage("x", Access::ReadOnly)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    let message = rt.program(&swapped).unwrap_err().to_string();
    assert!(message.contains("binding 1") && message.contains("`y`"), "{message}");

    let missing =
        base().storage("x", Access::ReadOnly).storage("y", Access::ReadWrite).scalar("a", ScalarType::F32);
    let message = rt.program(&missing).unwrap_err().to_string();
    assert!(message.contains("`n`") && message.contains("uint"), "{message}");

    let wrong_size = KernelSpec::new("saxpy", [128, 1, 1])
        .code_object("saxpy", "gfx1100", &aot_blob("saxpy", "gfx1100"))
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    let err = rt.program(&wrong_size).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKernel);
    assert!(err.to_string().contains("[256, 1, 1]") && err.to_string().contains("[128, 1, 1]"), "{err}");
    assert!(kmd.submissions().is_empty());
}

#[test]
fn a_spec_without_a_usable_source_names_the_targets_it_has() {
    let kmd = FakeDriver::new((11, 0, 3)); // gfx1101
    let dev = device(&kmd, DeviceOptions::default());
    let spec = KernelSpec::new("saxpy", [256, 1, 1])
        .code_object("saxpy", "gfx1030", &aot_blob("saxpy", "gfx1030"))
        .code_object("saxpy", "gfx1100", &aot_blob("saxpy", "gfx1100"));
    let err = dev.prepare(&spec).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("gfx1101") && err.to_string().contains("gfx1030, gfx1100"), "{err}");
}

#[test]
fn blobs_for_another_target_or_not_code_objects_are_refused_at_load() {
    let kmd = FakeDriver::gfx1100();
    let dev = device(&kmd, DeviceOptions::default());
    let spec = suite::saxpy::spec();
    let input = dev.prepare(&spec).unwrap().input;
    let blob = |bytes: Vec<u8>| sparkle::cache::Blob { format: 0x0A4D_4401, bytes };
    for bad in [blob(aot_blob("saxpy", "gfx1030")), blob(b"not an ELF".to_vec())] {
        match dev.load(&input, &bad) {
            Err(sparkle::cache::LoadFailure::Refused(reason)) => assert!(!reason.is_empty()),
            Err(sparkle::cache::LoadFailure::Failed(e)) => panic!("failed instead of refused: {e}"),
            Ok(_) => panic!("loaded a bad blob"),
        }
    }
    assert!(dev.load(&input, &blob(aot_blob("saxpy", "gfx1100"))).is_ok());
}

fn compiler() -> Option<Compiler> {
    match Compiler::from_env() {
        Ok(compiler) => Some(compiler),
        Err(e) => {
            eprintln!("skipping: no clang-22 here ({e})");
            None
        }
    }
}

#[test]
fn cache_keys_follow_target_flags_and_source() {
    let Some(compiler) = compiler() else { return };
    let opencl_only = |cu_mode| DeviceOptions {
        source_preference: SourcePreference::OpenClOnly,
        cu_mode,
        compiler: Some(compiler.clone()),
        ..DeviceOptions::default()
    };
    let gfx1100 = FakeDriver::gfx1100();
    let gfx1101 = FakeDriver::new((11, 0, 3));
    let spec = suite::saxpy::spec();
    let key = |kmd: &Arc<FakeDriver>, options| device(kmd, options).prepare(&spec).unwrap().key_material;
    let base = key(&gfx1100, opencl_only(false));
    assert_eq!(base, key(&gfx1100, opencl_only(false)), "identical inputs, identical keys");
    assert_ne!(base, key(&gfx1101, opencl_only(false)), "the target is in the key");
    assert_ne!(base, key(&gfx1100, opencl_only(true)), "compiler flags are in the key");
    let defined = device(&gfx1100, opencl_only(false)).prepare(&spec.clone().define("EXTRA", 1)).unwrap();
    assert_ne!(base, defined.key_material, "defines are in the key");
    let wider = KernelSpec { workgroup_size: [128, 1, 1], ..spec.clone() };
    assert_ne!(base, device(&gfx1100, opencl_only(false)).prepare(&wider).unwrap().key_material);
    // Prebuilt objects: one per target, so the keys differ too.
    let prebuilt =
        |kmd: &Arc<FakeDriver>| device(kmd, DeviceOptions::default()).prepare(&spec).unwrap().key_material;
    assert_ne!(prebuilt(&gfx1100), prebuilt(&gfx1101));
    assert_eq!(prebuilt(&gfx1100), prebuilt(&gfx1100));
    assert_ne!(prebuilt(&gfx1100), base);
}

#[test]
fn a_user_opencl_kernel_compiles_and_dispatches() {
    let Some(compiler) = compiler() else { return };
    let kmd = FakeDriver::gfx1100();
    let options = DeviceOptions { compiler: Some(compiler.clone()), ..DeviceOptions::default() };
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::from_device::<Amdgpu>(device(&kmd, options), &CacheConfig::in_dir(dir.path()));
    let spec = KernelSpec::new("scale", [64, 1, 1])
        .opencl(
            "scale",
            "__kernel void scale(__global float *data, float factor, int count) {\n\
             int i = get_global_id(0);\n\
             if (i < count) data[i] *= factor;\n}\n",
        )
        .storage("data", Access::ReadWrite)
        .scalar("factor", ScalarType::F32)
        .scalar("count", ScalarType::I32);
    let program = rt.program(&spec).unwrap();
    assert_eq!(rt.cache_stats().compiles, 1);
    let data = rt.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&data), Arg::F32(2.5), Arg::I32(3)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(5))
        .unwrap();
    let recs = kmd.submissions();
    let packets = pm4::decode(&recs[0].words, Gfx::Gfx11).unwrap();
    let user: Vec<u32> = packets
        .iter()
        .filter_map(|p| match &p.body {
            Body::SetShReg(w) if w[0].reg.name == "COMPUTE_USER_DATA_0" => {
                Some(w.iter().map(|w| w.value).collect())
            }
            _ => None,
        })
        .next()
        .unwrap();
    // libclc's get_global_id reads the dispatch packet: dispatch pointer, then kernarg pointer.
    assert_eq!(user.len(), 4);
    let kernarg = u64::from(user[2]) | (u64::from(user[3]) << 32);
    let args = kmd.read_va(kernarg, 16);
    assert_eq!(kmd.read_va(u64_at(&args, 0), 12), floats(&[1.0, 2.0, 3.0]));
    assert_eq!(f32::from_bits(u32_at(&args, 8)), 2.5);
    assert_eq!(u32_at(&args, 12), 3);

    // A second runtime (as in another process) on the same cache folder loads the blob
    // instead of compiling.
    drop((program, data, rt));
    let kmd = FakeDriver::gfx1100();
    let again = Runtime::from_device::<Amdgpu>(
        device(&kmd, DeviceOptions { compiler: Some(compiler.clone()), ..DeviceOptions::default() }),
        &CacheConfig::in_dir(dir.path()),
    );
    again.program(&spec).unwrap();
    let stats = again.cache_stats();
    assert_eq!((stats.compiles, stats.disk_hits), (0, 1), "{stats:?}");
}

#[test]
fn a_kernel_the_backend_cannot_bind_is_refused_naming_the_argument() {
    let Some(compiler) = compiler() else { return };
    let kmd = FakeDriver::gfx1100();
    let options = DeviceOptions { compiler: Some(compiler), ..DeviceOptions::default() };
    let rt = runtime_with(&kmd, options);
    let spec = KernelSpec::new("wide", [64, 1, 1])
        .opencl("wide", "__kernel void wide(__global float *out, float2 v) { out[get_global_id(0)] = v.x; }")
        .storage("out", Access::ReadWrite);
    let err = rt.program(&spec).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKernel);
    assert!(err.to_string().contains("wide") && err.to_string().contains("`v`"), "{err}");
}

fn runtime_with(kmd: &Arc<FakeDriver>, options: DeviceOptions) -> Runtime {
    Runtime::from_device::<Amdgpu>(device(kmd, options), &CacheConfig::memory_only())
}

#[test]
fn copies_use_cp_dma_in_chunks_and_barriers_flush() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let size = 100_000u64;
    let src = rt.upload(&vec![7u8; size as usize], BufferUsage::Input).unwrap();
    let dst = rt.create_buffer(size, BufferUsage::Output).unwrap();
    let mut commands = rt.commands();
    commands.copy(&src, 16, &dst, 32, size - 64).unwrap();
    rt.submit(commands).unwrap().wait(Duration::from_secs(5)).unwrap();
    let recs = kmd.submissions();
    let packets = pm4::decode(&recs[0].words, Gfx::Gfx11).unwrap();
    let copies: Vec<_> = packets
        .iter()
        .filter_map(|p| match &p.body {
            Body::DmaData(d) => Some(*d),
            _ => None,
        })
        .collect();
    assert_eq!(copies.iter().map(|d| u64::from(d.byte_count)).sum::<u64>(), size - 64);
    assert!(copies.len() > 1, "gfx11 copies are split");
    let (src_bo, src_start, _) = kmd.mapping_of(copies[0].src).unwrap();
    let (dst_bo, dst_start, _) = kmd.mapping_of(copies[0].dst).unwrap();
    assert_eq!((copies[0].src - src_start, copies[0].dst - dst_start), (16, 32));
    for pair in copies.windows(2) {
        assert_eq!(pair[1].src, pair[0].src + u64::from(pair[0].byte_count));
        assert!(pair[0].cp_sync);
    }
    assert!(recs[0].buffers.contains(&src_bo) && recs[0].buffers.contains(&dst_bo));

    // A dispatch reading what a copy wrote gets a barrier between them.
    let program = rt.program(&suite::saxpy::spec()).unwrap();
    let y = rt.create_buffer(4096, BufferUsage::InOut).unwrap();
    let mut commands = rt.commands();
    commands.copy(&src, 0, &y, 0, 4096).unwrap();
    commands
        .dispatch(&program, &[Arg::Buffer(&dst), Arg::Buffer(&y), Arg::F32(1.0), Arg::U32(1024)], [4, 1, 1])
        .unwrap();
    rt.submit(commands).unwrap().wait(Duration::from_secs(5)).unwrap();
    let names: Vec<&str> =
        pm4::decode(&kmd.submissions()[1].words, Gfx::Gfx11).unwrap().iter().map(|p| p.name()).collect();
    let copy_at = names.iter().position(|n| *n == "DMA_DATA").unwrap();
    let dispatch_at = names.iter().position(|n| *n == "DISPATCH_DIRECT").unwrap();
    assert!(
        names[copy_at..dispatch_at].contains(&"EVENT_WRITE")
            && names[copy_at..dispatch_at].contains(&"ACQUIRE_MEM"),
        "{names:?}"
    );
}

#[test]
fn several_dispatches_share_one_submission_and_fences_count_up() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let program = rt.program(&suite::saxpy::spec()).unwrap();
    let x = rt.upload(&[1.0f32; 512], BufferUsage::Input).unwrap();
    let y = rt.upload(&[2.0f32; 512], BufferUsage::InOut).unwrap();
    let mut commands = rt.commands();
    for _ in 0..3 {
        commands
            .dispatch(&program, &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(1.0), Arg::U32(512)], [2, 1, 1])
            .unwrap();
    }
    let first = rt.submit(commands).unwrap();
    let second = rt
        .dispatch(&program, &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(1.0), Arg::U32(512)], [2, 1, 1])
        .unwrap();
    assert_eq!((first.fence(), second.fence()), (1, 2));
    second.wait(Duration::from_secs(5)).unwrap();
    let recs = kmd.submissions();
    assert_eq!(recs.len(), 2);
    let names: Vec<&str> =
        pm4::decode(&recs[0].words, Gfx::Gfx11).unwrap().iter().map(|p| p.name()).collect();
    assert_eq!(names.iter().filter(|n| **n == "DISPATCH_DIRECT").count(), 3);
    // Each dispatch writes y, so the runtime puts barriers between them.
    assert!(names.iter().filter(|n| **n == "EVENT_WRITE").count() >= 3, "{names:?}");
    // The end-of-pipe write stores each submission's fence value.
    for (rec, fence) in recs.iter().zip([1u64, 2]) {
        let packets = pm4::decode(&rec.words, Gfx::Gfx11).unwrap();
        let Body::ReleaseMem(release) = &packets.last().unwrap().body else { panic!() };
        assert_eq!(release.data, fence);
    }
}

#[test]
fn waits_time_out_and_a_gpu_reset_is_device_lost() {
    let kmd = FakeDriver::gfx1100();
    let rt = runtime(&kmd);
    let program = rt.program(&suite::saxpy::spec()).unwrap();
    let x = rt.upload(&[1.0f32; 256], BufferUsage::Input).unwrap();
    let y = rt.upload(&[2.0f32; 256], BufferUsage::InOut).unwrap();
    kmd.set_wait_mode(WaitMode::Busy);
    let submission = rt
        .dispatch(&program, &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(1.0), Arg::U32(256)], [1, 1, 1])
        .unwrap();
    assert!(!submission.is_done());
    let err = submission.wait(Duration::from_millis(30)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");

    kmd.set_wait_mode(WaitMode::Reset);
    let err = submission.wait(Duration::from_millis(30)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("the GPU was reset") && err.to_string().contains("30 ms"), "{err}");
    // The device stays lost: later submissions fail at once.
    let err = rt
        .dispatch(&program, &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(1.0), Arg::U32(256)], [1, 1, 1])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost);
    kmd.set_wait_mode(WaitMode::Done);
}

#[test]
fn nothing_is_left_after_the_runtime_is_dropped() {
    let kmd = FakeDriver::gfx1100();
    {
        let rt = runtime(&kmd);
        let case = suite::sgemm::Sgemm::random(20, 20, 20, 1);
        let _buffers = run_case(&rt, &case);
        // A failing spec allocates nothing that stays.
        let bad = KernelSpec::new("sgemm", [8, 8, 1])
            .code_object("sgemm", "gfx1100", &aot_blob("sgemm", "gfx1100"))
            .storage("a", Access::ReadOnly);
        rt.program(&bad).unwrap_err();
        assert!(kmd.live().0 > 0);
    }
    assert_eq!(kmd.live(), (0, 0, 0, 0), "GEM handles, VA mappings, CPU mappings, contexts");
}

#[test]
fn an_unsupported_gpu_is_refused_when_opening() {
    let kmd = FakeDriver::new((9, 4, 2));
    let err = AmdgpuDevice::<Hardware>::new(kmd.clone(), DeviceOptions::default()).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("gfx1030"), "{err}");
    assert_eq!(kmd.live(), (0, 0, 0, 0));
}
