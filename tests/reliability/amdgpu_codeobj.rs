//! Fault injection on amdgpu code objects at the load level, without a GPU or the simulator: a
//! blob that is still a valid ELF but names another target, carries another machine or ABI,
//! disagrees with its metadata, or whose kernel descriptor asks for what the backend cannot run
//! (wave64, scratch, too much LDS, an entry point outside the image) never reaches GPU memory:
//! the backend's load refuses it before allocating the code buffer, naming what is wrong. Every
//! such blob is a refusal (the cache discards the entry and compiles again), never a load
//! failure, which would keep a blob that can never run; given as a spec's prebuilt code object,
//! the same blob is an error naming the kernel.

use crate::amdgpu_support::code_objects::{aot_blob, descriptor_offset};
use crate::amdgpu_support::FakeDriver;
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions, Hardware};
use sparkle::cache::{Blob, LoadFailure};
use sparkle::hal::Device;
use sparkle::suite;

/// File offset of the `.dynsym` entry whose value is `value` and whose size is 64 (a descriptor).
fn descriptor_symbol(bytes: &[u8], value: u64) -> usize {
    use object::read::elf::{ElfFile64, SectionHeader};
    let file = ElfFile64::<object::LittleEndian>::parse(bytes).unwrap();
    let dynsym = file
        .elf_section_table()
        .iter()
        .find(|s| s.sh_type(object::LittleEndian) == object::elf::SHT_DYNSYM)
        .unwrap();
    let (start, len) = dynsym.file_range(object::LittleEndian).unwrap();
    (start as usize..(start + len) as usize)
        .step_by(24)
        .find(|&at| {
            u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap()) == value
                && u64::from_le_bytes(bytes[at + 16..at + 24].try_into().unwrap()) == 64
        })
        .unwrap()
}

fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut count = 0;
    let mut at = 0;
    while let Some(pos) = bytes[at..].windows(from.len()).position(|w| w == from) {
        bytes[at + pos..][..to.len()].copy_from_slice(to);
        at += pos + from.len();
        count += 1;
    }
    count
}

/// Damaged versions of a suite kernel's gfx1100 code object, each with a word its refusal must
/// contain (lower case).
fn damaged(kernel: &str) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let good = aot_blob(kernel, "gfx1100");
    let kd = descriptor_offset(&good, kernel);
    let edit = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = good.clone();
        f(&mut bytes);
        bytes
    };
    let set_u32 =
        |bytes: &mut Vec<u8>, at: usize, value: u32| bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    vec![
        (
            "e_flags names gfx1030",
            edit(&|b| set_u32(b, 48, (u32::from_le_bytes(b[48..52].try_into().unwrap()) & !0xff) | 0x36)),
            "",
        ),
        (
            "e_flags names gfx1101",
            edit(&|b| set_u32(b, 48, (u32::from_le_bytes(b[48..52].try_into().unwrap()) & !0xff) | 0x46)),
            "",
        ),
        ("e_machine is x86-64", edit(&|b| b[18..20].copy_from_slice(&62u16.to_le_bytes())), ""),
        ("OS/ABI is System V", edit(&|b| b[7] = 0), ""),
        ("32-bit ELF class", edit(&|b| b[4] = 1), ""),
        ("big-endian ELF data", edit(&|b| b[5] = 2), ""),
        ("metadata names gfx1101", edit(&|b| assert!(replace_all(b, b"gfx1100", b"gfx1101") > 0)), ""),
        (
            // Only the metadata's msgpack string (length-prefixed): the symbol it names is missing.
            "metadata names a descriptor that is not exported",
            edit(&|b| {
                let name = format!("{kernel}.kd");
                let prefix = [0xa0 | name.len() as u8];
                let from = [&prefix[..], name.as_bytes()].concat();
                let to = [&prefix[..], format!("{kernel}.kx").as_bytes()].concat();
                assert_eq!(replace_all(b, &from, &to), 1);
            }),
            "",
        ),
        (
            "entry point outside the image",
            edit(&|b| b[kd + 16..kd + 24].copy_from_slice(&(1i64 << 40).to_le_bytes())),
            "",
        ),
        (
            "entry point before the image",
            edit(&|b| b[kd + 16..kd + 24].copy_from_slice(&(-(1i64 << 20)).to_le_bytes())),
            "",
        ),
        (
            "descriptor symbol at the top of the address space",
            edit(&|b| {
                let at = descriptor_symbol(&good, kd as u64) + 8;
                b[at..at + 8].copy_from_slice(&(u64::MAX - 16).to_le_bytes());
            }),
            "",
        ),
        (
            "descriptor symbol past the image",
            edit(&|b| {
                let at = descriptor_symbol(&good, kd as u64) + 8;
                b[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
            }),
            "",
        ),
        ("truncated to half", edit(&|b| b.truncate(good.len() / 2)), ""),
        ("truncated to the ELF header", edit(&|b| b.truncate(64)), ""),
        ("wave64 descriptor", edit(&|b| b[kd + 57] &= !(1 << 2)), "wave"),
        ("scratch in the descriptor", edit(&|b| set_u32(b, kd + 4, 4096)), "scratch"),
        ("LDS beyond 64 KiB", edit(&|b| set_u32(b, kd, 1 << 20)), "lds"),
        ("queue pointer requested", edit(&|b| b[kd + 56] |= 1 << 2), "queue"),
    ]
}

#[test]
fn damaged_code_objects_never_reach_gpu_memory() {
    let mut refused = 0;
    for kernel in ["saxpy", "sgemm", "conv2d"] {
        let kmd = FakeDriver::gfx1100();
        let dev = AmdgpuDevice::<Hardware>::new(kmd.clone(), DeviceOptions::default()).unwrap();
        let spec = match kernel {
            "saxpy" => suite::saxpy::spec(),
            "sgemm" => suite::sgemm::spec(),
            _ => suite::conv2d::spec(),
        };
        let input = dev.prepare(&spec).unwrap().input;
        let genuine = Blob { format: 0x0A4D_4401, bytes: aot_blob(kernel, "gfx1100") };
        for (what, bytes, says) in damaged(kernel) {
            let before = kmd.live();
            let outcome = dev.load(&input, &Blob { format: genuine.format, bytes });
            assert_eq!(kmd.live(), before, "{kernel}, {what}: GPU memory was allocated for a damaged object");
            match outcome {
                Ok(_) => panic!("{kernel}, {what}: loaded"),
                Err(LoadFailure::Refused(reason)) => {
                    assert!(
                        !reason.is_empty() && reason.to_lowercase().contains(says),
                        "{kernel}, {what}: {reason}"
                    );
                    eprintln!("{kernel}, {what}: refused: {reason}");
                    refused += 1;
                }
                Err(LoadFailure::Failed(err)) => {
                    panic!(
                        "{kernel}, {what}: failed ({err}) instead of refused: the cache would keep the entry"
                    )
                }
            }
        }
        // The genuine object still loads, and it is the one allocation made.
        let before = kmd.live();
        let program = dev.load(&input, &genuine).unwrap_or_else(|_| panic!("{kernel}: the genuine object"));
        assert!(kmd.live().0 > before.0);
        drop(program);
    }
    eprintln!("amdgpu code object fault injection: {refused} damaged objects refused before any allocation");
    assert_eq!(refused, 3 * damaged("saxpy").len());
}

#[test]
fn a_prebuilt_code_object_the_backend_cannot_run_is_an_error_naming_the_kernel() {
    let kmd = FakeDriver::gfx1100();
    let dev = AmdgpuDevice::<Hardware>::new(kmd.clone(), DeviceOptions::default()).unwrap();
    let rt = sparkle::Runtime::from_device::<sparkle::amdgpu::Amdgpu>(
        dev,
        &sparkle::cache::CacheConfig::memory_only(),
    );
    for (what, bytes, says) in damaged("saxpy") {
        let mut spec = suite::saxpy::spec();
        spec.name = "my_saxpy".into();
        spec.sources.retain(|s| !matches!(s, sparkle::kernel::KernelSource::CodeObjects { .. }));
        let spec = spec.code_object("saxpy", "gfx1100", &bytes);
        let before = kmd.live();
        let err = rt.program(&spec).err().unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(kmd.live(), before, "{what}: GPU memory was allocated");
        assert_eq!(err.kind(), sparkle::ErrorKind::InvalidKernel, "{what}: {err}");
        let text = err.to_string();
        assert!(text.contains("`my_saxpy`") && text.to_lowercase().contains(says), "{what}: {text}");
    }
}
