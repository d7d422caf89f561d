//! Large uploads and read-backs of plain buffers on the gl backend (they go through a ring of
//! mapped staging buffers, chunk by chunk): every byte lands where it was written, at offsets
//! and lengths that do not fall on chunk boundaries, small transfers next to large ones stay
//! right, read-backs round the ring buffer by buffer, uploads and read-backs on two threads at
//! once stay right, kernels see an upload's bytes and write what a large read-back returns, a
//! Staging buffer's host writes reach a device copy whole, and the host and the GPU see each
//! other's latest bytes in Staging buffers round after round.

use std::time::Duration;

use crate::isolated;
use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

/// Whether the test `function` ran in a process of its own whose plain transfers take the
/// staging ring from 2 MiB, on a CPU renderer too (where it is off by default): these tests are
/// about the ring. The library reads the threshold once per process, so the tests of this
/// binary beside them keep the default; in that process this is false and the test runs.
fn ran_with_the_ring(function: &str) -> bool {
    isolated::ran_in_own_process(module_path!(), function, &[(RING_MIN_ENV, Some(RING_MIN))])
}

const RING_MIN_ENV: &str = "SPARKLE_GL_TRANSFER_RING_MIN";
/// 2 MiB.
const RING_MIN: &str = "2097152";

fn runtime() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only())
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

/// Bytes no two positions of a few megabytes share in a row (a misplaced chunk shows).
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8).collect()
}

#[test]
fn large_writes_and_reads_land_byte_for_byte_at_any_offset() {
    if ran_with_the_ring("large_writes_and_reads_land_byte_for_byte_at_any_offset") {
        return;
    }
    let rt = runtime();
    let size = (37 << 20) + 4099;
    let buffer = rt.create_buffer(size as u64, BufferUsage::InOut).unwrap();
    let whole = pattern(size, 1);
    rt.write_buffer(&buffer, 0, &whole).unwrap();
    // A large write at an odd offset over chunk boundaries, and a small one inside it.
    let (offset, len) = (12_345, (19 << 20) + 777);
    let middle = pattern(len, 2);
    rt.write_buffer(&buffer, offset as u64, &middle).unwrap();
    let small = pattern(300, 3);
    rt.write_buffer(&buffer, (offset + 8_000_000) as u64, &small).unwrap();
    let mut want = whole.clone();
    want[offset..offset + len].copy_from_slice(&middle);
    want[offset + 8_000_000..offset + 8_000_300].copy_from_slice(&small);
    let mut got = vec![0u8; size];
    rt.read_buffer(&buffer, 0, &mut got).unwrap();
    assert!(got == want, "the whole buffer, read in one large read");
    for (at, n) in [(offset + 5, (9 << 20) + 3), (size - (5 << 20), 5 << 20), (1, 1000)] {
        let mut part = vec![0u8; n];
        rt.read_buffer(&buffer, at as u64, &mut part).unwrap();
        assert!(part == want[at..at + n], "{n} bytes at {at}");
    }
}

/// Read-backs of one chunk each start in successive buffers of the ring: round after round the
/// buffer changes, and each read-back returns the round's bytes, never a buffer's earlier ones.
#[test]
fn one_chunk_read_backs_round_the_ring_and_return_each_rounds_bytes() {
    if ran_with_the_ring("one_chunk_read_backs_round_the_ring_and_return_each_rounds_bytes") {
        return;
    }
    let rt = runtime();
    let size = (2 << 20) + 4321;
    let buffer = rt.create_buffer(size as u64, BufferUsage::InOut).unwrap();
    for round in 0..10 {
        let want = pattern(size, 100 + round);
        rt.write_buffer(&buffer, 0, &want).unwrap();
        let mut got = vec![0u8; size];
        rt.read_buffer(&buffer, 0, &mut got).unwrap();
        assert!(got == want, "round {round}: the read-back's bytes");
        let at = 17 + round as usize;
        let part: Vec<u8> = rt.read_vec(&buffer, at as u64, (2 << 20) + 1).unwrap();
        assert!(part == want[at..at + (2 << 20) + 1], "round {round}: a read-back at {at}");
    }
}

/// Large uploads on one thread while another reads back (a pipeline's feeder and reader): each
/// way has a ring of its own, the two run at once, and neither disturbs the other's bytes.
#[test]
fn large_uploads_and_reads_on_two_threads_at_once_land_byte_for_byte() {
    if ran_with_the_ring("large_uploads_and_reads_on_two_threads_at_once_land_byte_for_byte") {
        return;
    }
    let rt = runtime();
    let size = (9 << 20) + 12_345;
    let written = rt.create_buffer(size as u64, BufferUsage::InOut).unwrap();
    let kept = rt.create_buffer(size as u64, BufferUsage::InOut).unwrap();
    let fixed = pattern(size, 7);
    rt.write_buffer(&kept, 0, &fixed).unwrap();
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            for round in 0..4u32 {
                let data = pattern(size, 100 + round);
                rt.write_buffer(&written, 0, &data).unwrap();
                let back: Vec<u8> = rt.read_vec(&written, 0, size).unwrap();
                assert!(back == data, "round {round}: the written buffer read back other bytes");
            }
        });
        for round in 0..6 {
            let got: Vec<u8> = rt.read_vec(&kept, 0, size).unwrap();
            assert!(got == fixed, "round {round}: the kept buffer read back other bytes");
        }
        writer.join().expect("the writing thread");
    });
}

#[test]
fn kernels_see_large_uploads_and_large_reads_see_kernels() {
    if ran_with_the_ring("kernels_see_large_uploads_and_large_reads_see_kernels") {
        return;
    }
    let rt = runtime();
    let spec = KernelSpec::new("twice_plus", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; };
             uniform uint n;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = 2.0 * v[i] + 1.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let program = rt.program(&spec).unwrap();
    let n = 3 << 20; // 12 MiB of floats
    let values: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let buffer = rt.create_buffer((n * 4) as u64, BufferUsage::InOut).unwrap();
    for round in 0..3 {
        rt.write_buffer(&buffer, 0, bytemuck::cast_slice(&values)).unwrap();
        let groups = [(n as u32).div_ceil(64).min(65535), 1, 1];
        assert!(n as u32 <= groups[0] * 64, "one row of groups covers the data");
        rt.dispatch(&program, &[Arg::Buffer(&buffer), Arg::U32(n as u32)], groups)
            .unwrap()
            .wait(Duration::from_secs(120))
            .unwrap();
        let got: Vec<f32> = rt.download(&buffer).unwrap();
        let wrong = got.iter().zip(&values).position(|(g, v)| *g != 2.0 * v + 1.0);
        assert_eq!(wrong, None, "round {round}: first wrong element");
    }
}

/// A Staging buffer's host writes (split over threads when large, with stores that bypass the
/// CPU's caches) reach the device whole: copied on the device into a plain buffer, every byte
/// reads back where it was written, at offsets on no alignment, next to bytes left as they were.
#[test]
fn staging_writes_reach_device_copies_byte_for_byte_at_any_offset() {
    if ran_with_the_ring("staging_writes_reach_device_copies_byte_for_byte_at_any_offset") {
        return;
    }
    let rt = runtime();
    let size = (3 << 20) + 4321;
    let staging = rt.create_buffer(size as u64, BufferUsage::Staging).unwrap();
    let device = rt.create_buffer(size as u64, BufferUsage::InOut).unwrap();
    let mut want = pattern(size, 4);
    rt.write_buffer(&staging, 0, &want).unwrap();
    for (at, n, seed) in [(7, (2 << 20) + 13, 5), (3, 17, 6), (size - 61, 61, 7), ((1 << 20) + 9, 100_003, 8)]
    {
        let bytes = pattern(n, seed);
        rt.write_buffer(&staging, at as u64, &bytes).unwrap();
        want[at..at + n].copy_from_slice(&bytes);
    }
    let mut commands = rt.commands();
    commands.copy(&staging, 0, &device, 0, size as u64).unwrap();
    rt.submit(commands).unwrap().wait(Duration::from_secs(60)).unwrap();
    let mut got = vec![0u8; size];
    rt.read_buffer(&device, 0, &mut got).unwrap();
    let wrong = got.iter().zip(&want).position(|(g, w)| g != w);
    assert_eq!(wrong, None, "the first byte the device copy of the staging buffer got wrong");
}

/// `read_vec` fills memory it never zeroed on every read path: out of a Staging buffer's
/// mapping (split over threads), through the ring (plain buffers from 2 MiB), and with
/// `glGetBufferSubData` (small plain reads) — every byte the buffer holds, at odd offsets.
#[test]
fn reads_into_new_vectors_return_every_byte_on_every_read_path() {
    if ran_with_the_ring("reads_into_new_vectors_return_every_byte_on_every_read_path") {
        return;
    }
    let rt = runtime();
    let size = (9 << 20) + 4099;
    let want = pattern(size, 9);
    for usage in [BufferUsage::Staging, BufferUsage::InOut] {
        let buffer = rt.create_buffer(size as u64, usage).unwrap();
        rt.write_buffer(&buffer, 0, &want).unwrap();
        for (at, n) in [(0, size), (13, (5 << 20) + 7), (size - 999, 999), (3, 0)] {
            let got: Vec<u8> = rt.read_vec(&buffer, at as u64, n).unwrap();
            assert!(got == want[at..at + n], "{usage:?}: {n} bytes at {at}");
        }
        let words: Vec<u32> = rt.read_vec(&buffer, 4, 1000).unwrap();
        assert!(bytemuck::cast_slice::<u32, u8>(&words) == &want[4..4004], "{usage:?}: as u32s");
    }
}

/// Staging buffers carry no barrier between the host and the GPU (their mapping is coherent),
/// so every submission must still see the host's latest writes and the host every submission's
/// latest results: round after round, the host writes new words into one Staging buffer, and one
/// submission copies them to a device buffer, runs a kernel over them, copies the result into a
/// second Staging buffer and runs the kernel over a third in place; the host reads both at once
/// after the wait. A stale word from any earlier round shows.
#[test]
fn every_round_through_staging_buffers_sees_the_latest_bytes_both_ways() {
    if ran_with_the_ring("every_round_through_staging_buffers_sees_the_latest_bytes_both_ways") {
        return;
    }
    let rt = runtime();
    let spec = KernelSpec::new("times_three_plus", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { uint v[]; };
             uniform uint n;
             uniform uint add;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = 3u * v[i] + add; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
        .scalar("add", ScalarType::U32);
    let program = rt.program(&spec).unwrap();
    let n = 16 << 10;
    let bytes = (n * 4) as u64;
    let input = rt.create_buffer(bytes, BufferUsage::Staging).unwrap();
    let device = rt.create_buffer(bytes, BufferUsage::InOut).unwrap();
    let output = rt.create_buffer(bytes, BufferUsage::Staging).unwrap();
    let in_place = rt.create_buffer(bytes, BufferUsage::Staging).unwrap();
    let groups = [(n as u32).div_ceil(64), 1, 1];
    let mut kept = vec![0u32; n];
    rt.write_buffer(&in_place, 0, bytemuck::cast_slice(&kept)).unwrap();
    for round in 0..200u32 {
        let words: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) ^ round).collect();
        rt.write_buffer(&input, 0, bytemuck::cast_slice(&words)).unwrap();
        let mut commands = rt.commands();
        commands.copy(&input, 0, &device, 0, bytes).unwrap();
        commands
            .dispatch(&program, &[Arg::Buffer(&device), Arg::U32(n as u32), Arg::U32(round)], groups)
            .unwrap();
        commands.copy(&device, 0, &output, 0, bytes).unwrap();
        commands
            .dispatch(&program, &[Arg::Buffer(&in_place), Arg::U32(n as u32), Arg::U32(round)], groups)
            .unwrap();
        rt.submit(commands).unwrap().wait(Duration::from_secs(60)).unwrap();
        let copied: Vec<u32> = rt.read_vec(&output, 0, n).unwrap();
        let changed: Vec<u32> = rt.read_vec(&in_place, 0, n).unwrap();
        for (i, w) in words.iter().enumerate() {
            kept[i] = kept[i].wrapping_mul(3).wrapping_add(round);
            let want = w.wrapping_mul(3).wrapping_add(round);
            assert_eq!(copied[i], want, "round {round}: word {i} of the copied result");
            assert_eq!(changed[i], kept[i], "round {round}: word {i} of the Staging buffer changed in place");
        }
    }
}
