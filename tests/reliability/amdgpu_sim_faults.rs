//! Fault injection on the amdgpu-sim backend's persisted code objects: every entry of a warm
//! cache of the suite is damaged in turn (the same cases as on gl: flips at every header offset
//! and a stride through the payload, truncations, extensions, zeroed, another kernel's entry,
//! re-sealed for another GPU, backend or format version) and must be rejected by verification
//! before the backend sees it, compiled again, and compute the right result on the simulated
//! gfx1100. Then entries that verification must accept — valid ELF code objects, correctly
//! sealed, but for another target, of another kernel, or with a descriptor this backend cannot
//! run — must be refused by the backend's load (`driver_refused`), discarded and compiled again,
//! never kept to fail every later run. Counts are printed (`-- --nocapture`).

use std::path::Path;
use std::sync::OnceLock;

use crate::amdgpu_support::code_objects::{aot_blob, descriptor_offset};
use crate::faults::{damage_every_entry, payload, run_case, warm, with_payload};
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::Compiler;
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::{CacheConfig, HEADER_LEN};
use sparkle::suite::{self, Case};
use sparkle::Runtime;

/// What `Runtime::open_backend("amdgpu-sim", ..)` opens, with the compiler found once: finding
/// it runs `clang --version`, which would cost more than most of the runs here.
fn open_sim(dir: &Path) -> Runtime {
    static COMPILER: OnceLock<Option<Compiler>> = OnceLock::new();
    let compiler = COMPILER.get_or_init(|| Compiler::from_env().ok()).clone();
    let options = DeviceOptions { compiler, ..DeviceOptions::default() };
    let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options)
        .expect("the simulator opens anywhere");
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::in_dir(dir))
}

/// Small problems: the interpreter runs every wave instruction on the CPU.
fn cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(1000, 5)),
        Box::new(suite::sgemm::Sgemm::random(40, 24, 33, 5)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 3, h: 9, w: 11, k: 2 }, 5)),
    ]
}

const KERNELS: [&str; 3] = ["saxpy", "sgemm", "conv2d"];

#[test]
fn every_damaged_amdgpu_sim_entry_is_rejected_before_the_backend_and_recompiled_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let tally = damage_every_entry(dir.path(), &open_sim, &cases(), 256);
    eprintln!("amdgpu-sim fault injection: {tally}");
    assert!(tally.cases >= 3 * (HEADER_LEN + 256));
    assert_eq!(tally.driver_refused, 0);
}

/// Code objects that parse as ELF but that this device must never run for `kernel`.
fn unrunnable(kernel: &str, genuine: &[u8]) -> Vec<(String, Vec<u8>)> {
    assert_eq!(genuine, aot_blob(kernel, "gfx1100"), "the cache holds the shipped code object");
    let kd = descriptor_offset(genuine, kernel);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = genuine.to_vec();
        f(&mut bytes);
        bytes
    };
    let set_u32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let mut out: Vec<(String, Vec<u8>)> = ["gfx1030", "gfx1101", "gfx1102"]
        .iter()
        .map(|target| (format!("the shipped {target} code object"), aot_blob(kernel, target)))
        .collect();
    let other = KERNELS[(KERNELS.iter().position(|k| *k == kernel).unwrap() + 1) % KERNELS.len()];
    out.push((format!("{other}'s gfx1100 code object"), aot_blob(other, "gfx1100")));
    out.extend([
        (
            "e_flags names gfx1101".to_owned(),
            edit(&|b| set_u32(b, 48, (u32::from_le_bytes(b[48..52].try_into().unwrap()) & !0xff) | 0x46)),
        ),
        ("a wave64 descriptor".to_owned(), edit(&|b| b[kd + 57] &= !(1 << 2))),
        ("scratch in the descriptor".to_owned(), edit(&|b| set_u32(b, kd + 4, 4096))),
        ("the queue pointer requested".to_owned(), edit(&|b| b[kd + 56] |= 1 << 2)),
        ("LDS size beyond the metadata's".to_owned(), edit(&|b| set_u32(b, kd, 1 << 20))),
        (
            "the entry point outside the image".to_owned(),
            edit(&|b| b[kd + 16..kd + 24].copy_from_slice(&(1i64 << 40).to_le_bytes())),
        ),
    ]);
    for (what, bytes) in &out {
        assert!(
            object::read::elf::ElfFile64::<object::LittleEndian>::parse(&bytes[..]).is_ok(),
            "{what}: not ELF"
        );
    }
    out
}

#[test]
fn sealed_code_objects_the_device_cannot_run_are_refused_by_the_backend_and_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    let entries = warm(dir.path(), &open_sim, &cases);
    let mut refused = 0;
    for ((case, path), kernel) in cases.iter().zip(&entries).zip(KERNELS) {
        let genuine = std::fs::read(path).unwrap();
        for (what, code_object) in unrunnable(kernel, payload(&genuine)) {
            std::fs::write(path, with_payload(&genuine, &code_object)).unwrap();
            let runtime = run_case(dir.path(), &open_sim, case.as_ref(), &what);
            let stats = runtime.cache_stats();
            assert_eq!(stats.disk_rejected, 0, "{kernel}, {what}: verification should accept it: {stats:?}");
            assert_eq!(stats.driver_refused, 1, "{kernel}, {what}: the backend did not refuse it: {stats:?}");
            assert_eq!((stats.compiles, stats.disk_hits, stats.load_errors), (1, 0, 0), "{kernel}, {what}");
            // The refused entry was replaced by the recompiled, genuine code object.
            assert_eq!(payload(&std::fs::read(path).unwrap()), payload(&genuine), "{kernel}, {what}");
            let again = run_case(dir.path(), &open_sim, case.as_ref(), &what);
            assert_eq!(
                (again.cache_stats().disk_hits, again.cache_stats().compiles),
                (1, 0),
                "{kernel}, {what}"
            );
            refused += 1;
        }
    }
    eprintln!(
        "amdgpu-sim: {refused} sealed code objects for another target, of another kernel or with a descriptor \
         the backend cannot run: all refused by the backend's load, discarded, recompiled, results correct"
    );
    assert_eq!(refused, 3 * 10);
}
