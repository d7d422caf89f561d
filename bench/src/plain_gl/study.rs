//! A study of what the driver makes of the ways a plain GL program can submit work and move
//! bytes, on the baseline's own context (`baseline.rs`): what a fence, a flush and a poll cost
//! next to a small dispatch; round trips that read back with `glGetBufferSubData` or through a
//! persistently mapped buffer, and when the host sees a kernel's writes to a mapped buffer
//! against when it sees the fence (`watched.rs`); uploads and read-backs at sizes from 4 KiB to
//! 256 MiB through `glBufferSubData` / `glGetBufferSubData` (in one call, and in pieces of 256 KiB
//! to 1 MiB), a mapping of the buffer, and persistently mapped staging buffers with each
//! combination of `glBufferStorage` flags (client storage or not, coherent or explicitly
//! flushed); whether a device copy runs beside kernels (`overlap.rs`), and copies made by
//! kernels beside another kernel on one context (`beside.rs`).
//! `sparkle-bench bench-transfer --study` prints it; the gl backend's choices rest on what it showed.
//! For benchmarking only.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use glow::HasContext;

use super::baseline::{self, Baseline, BaselineKernel, Buffers, SaxpyInputs};
use super::error::driver_error;
use super::overlap::OverlapPlan;
use super::{PlainGlError, ALL_BARRIERS};

/// A staging buffer's storage flags, with a name for the report.
#[derive(Clone, Copy)]
pub(super) struct Flags {
    name: &'static str,
    pub(super) bits: u32,
}

const PERSISTENT: u32 = glow::MAP_PERSISTENT_BIT;

pub(super) const STAGING: [Flags; 4] = [
    Flags {
        name: "read|write|coherent",
        bits: glow::MAP_READ_BIT | glow::MAP_WRITE_BIT | PERSISTENT | glow::MAP_COHERENT_BIT,
    },
    Flags {
        name: "read|write|coherent|client",
        bits: glow::MAP_READ_BIT
            | glow::MAP_WRITE_BIT
            | PERSISTENT
            | glow::MAP_COHERENT_BIT
            | glow::CLIENT_STORAGE_BIT,
    },
    Flags {
        name: "one-way|coherent|client",
        bits: PERSISTENT | glow::MAP_COHERENT_BIT | glow::CLIENT_STORAGE_BIT,
    },
    Flags { name: "one-way|flushed|client", bits: PERSISTENT | glow::CLIENT_STORAGE_BIT },
];

/// The study's report, as text.
pub fn run(
    baseline: &Baseline,
    kernel: &BaselineKernel,
    inputs: &SaxpyInputs,
    sizes: &[usize],
    overlap: &OverlapPlan,
) -> Result<String, PlainGlError> {
    let source = baseline::glsl_of(kernel)?;
    let groups = kernel.groups;
    let inputs = inputs.clone();
    let sizes = sizes.to_vec();
    let overlap = *overlap;
    baseline.call(move |state| {
        let mut out = String::new();
        extensions(state.gl(), &mut out);
        let program = state.program(&source)?;
        let buffers = Buffers::create(state.gl(), &inputs)?;
        let gl = state.gl();
        let outcome = (|| {
            fences(gl, &program, &buffers, inputs.a, groups, &mut out)?;
            round_trips(gl, &program, &buffers, inputs.a, groups, &mut out)?;
            transfers(gl, &sizes, &mut out)?;
            super::overlap::run(gl, &program, &overlap, &mut out)
        })();
        buffers.delete(gl);
        let per_group = inputs.x.len().div_ceil(groups[0].max(1) as usize).max(1);
        let outcome = outcome
            .and_then(|()| super::watched::run(state, &program, per_group, &mut out))
            .and_then(|()| super::beside::run(state, &program, &overlap, &mut out));
        outcome.map(|()| out)
    })?
}

fn extensions(gl: &glow::Context, out: &mut String) {
    let names: Vec<String> = gl
        .supported_extensions()
        .iter()
        .filter(|e| {
            ["buffer", "copy", "memory", "sync", "pinned", "map"].iter().any(|w| e.to_lowercase().contains(w))
        })
        .cloned()
        .collect();
    let mut names = names;
    names.sort();
    let _ = writeln!(out, "extensions about buffers, copies, memory, sync: {}", names.join(" "));
}

pub(super) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub(super) fn quantile(mut values: Vec<Duration>, q: f64) -> Duration {
    values.sort();
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// Per-dispatch cost of the plain loop with a fence, a flush or both after every dispatch.
fn fences(
    gl: &glow::Context,
    program: &baseline::Linked,
    buffers: &Buffers,
    a: f32,
    groups: [u32; 3],
    out: &mut String,
) -> Result<(), PlainGlError> {
    const N: usize = 5000;
    let _ = writeln!(out, "\nper dispatch, {N} in a row, until complete (µs; median of 3):");
    for (name, fence, flush, poll) in [
        ("plain", false, false, false),
        ("+ fence", true, false, false),
        ("+ flush", false, true, false),
        ("+ fence + flush", true, true, false),
        ("+ fence + flush + poll oldest", true, true, true),
    ] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let mut pending = std::collections::VecDeque::new();
            for _ in 0..N {
                // SAFETY: the context is current on the baseline thread; program and buffers
                // are its own; every fence made is deleted once.
                unsafe {
                    baseline::dispatch(gl, program, buffers, a, groups);
                    let _ = gl.get_error();
                    gl.memory_barrier(ALL_BARRIERS);
                    if fence {
                        if let Ok(sync) = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0) {
                            pending.push_back(sync);
                        }
                    }
                    if flush {
                        gl.flush();
                    }
                    if poll {
                        if let Some(&oldest) = pending.front() {
                            if gl.client_wait_sync(oldest, 0, 0) != glow::TIMEOUT_EXPIRED {
                                gl.delete_sync(oldest);
                                pending.pop_front();
                            }
                        }
                    }
                }
            }
            let last = baseline::fence_and_flush(gl)?;
            baseline::wait_and_delete(gl, last)?;
            for sync in pending {
                // SAFETY: as above.
                unsafe { gl.delete_sync(sync) };
            }
            runs.push(started.elapsed() / N as u32);
        }
        let _ = writeln!(out, "  {name:32} {:8.2}", us(quantile(runs, 0.5)));
    }
    Ok(())
}

/// A buffer with immutable storage `flags`, mapped persistently with the same access bits.
pub(super) fn mapped(
    gl: &glow::Context,
    size: usize,
    flags: u32,
) -> Result<(glow::NativeBuffer, *mut u8), PlainGlError> {
    let access = flags
        & (glow::MAP_READ_BIT | glow::MAP_WRITE_BIT | glow::MAP_PERSISTENT_BIT | glow::MAP_COHERENT_BIT);
    // SAFETY: `gl`'s context is current on this thread (each caller runs on the thread that
    // made it: the study's, or the overlap study's second); the buffer is made here.
    unsafe {
        let id = gl
            .create_buffer()
            .map_err(|reason| PlainGlError::BufferCreation { size: size as u64, reason })?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_storage(glow::COPY_WRITE_BUFFER, size as i32, None, flags);
        let ptr =
            gl.map_buffer_range(glow::COPY_WRITE_BUFFER, 0, size as i32, access | extra_map_bits(flags));
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        driver_error(gl, "a persistently mapped study buffer")?;
        if ptr.is_null() {
            gl.delete_buffer(id);
            return Err(PlainGlError::BufferCreation { size: size as u64, reason: "no mapping".into() });
        }
        Ok((id, ptr))
    }
}

/// A flushed (not coherent) mapping is flushed explicitly.
fn extra_map_bits(flags: u32) -> u32 {
    if flags & glow::MAP_COHERENT_BIT == 0 && flags & glow::MAP_WRITE_BIT != 0 {
        glow::MAP_FLUSH_EXPLICIT_BIT
    } else {
        0
    }
}

pub(super) fn device_buffer(gl: &glow::Context, size: usize) -> Result<glow::NativeBuffer, PlainGlError> {
    // SAFETY: `gl`'s context is current on this thread (each caller runs on the thread that
    // made it: the study's, or the overlap study's second); the buffer is made here.
    unsafe {
        let id = gl
            .create_buffer()
            .map_err(|reason| PlainGlError::BufferCreation { size: size as u64, reason })?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_data_size(glow::COPY_WRITE_BUFFER, size as i32, glow::DYNAMIC_COPY);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        driver_error(gl, "a study device buffer")?;
        Ok(id)
    }
}

/// Copies `size` bytes between two buffers on the GPU.
///
/// # Safety
/// The context must be current; both buffers are its own and hold `size` bytes.
pub(super) unsafe fn copy(gl: &glow::Context, src: glow::NativeBuffer, dst: glow::NativeBuffer, size: usize) {
    // SAFETY: per the contract.
    unsafe {
        gl.bind_buffer(glow::COPY_READ_BUFFER, Some(src));
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(dst));
        gl.copy_buffer_sub_data(glow::COPY_READ_BUFFER, glow::COPY_WRITE_BUFFER, 0, 0, size as i32);
        gl.bind_buffer(glow::COPY_READ_BUFFER, None);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
    }
}

/// As [`poll_and_delete`], for a fence not yet flushed: the first poll asks the driver to flush.
fn poll_flushing_and_delete(gl: &glow::Context, sync: glow::NativeFence) {
    // SAFETY: the context is current; the fence is its own and deleted once.
    unsafe {
        let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
        while gl.client_wait_sync(sync, flags, 0) == glow::TIMEOUT_EXPIRED {
            flags = 0;
            std::hint::spin_loop();
        }
        gl.delete_sync(sync);
    }
}

/// Polls `sync` without waiting in the driver until it signals, then deletes it.
pub(super) fn poll_and_delete(gl: &glow::Context, sync: glow::NativeFence) {
    // SAFETY: the context is current; the fence is its own and deleted once.
    unsafe {
        while gl.client_wait_sync(sync, 0, 0) == glow::TIMEOUT_EXPIRED {
            std::hint::spin_loop();
        }
        gl.delete_sync(sync);
    }
}

/// Round trips of one small dispatch and the read-back of `y`, several ways.
fn round_trips(
    gl: &glow::Context,
    program: &baseline::Linked,
    buffers: &Buffers,
    a: f32,
    groups: [u32; 3],
    out: &mut String,
) -> Result<(), PlainGlError> {
    const RUNS: usize = 400;
    let bytes = buffers.y_bytes as usize;
    let mut host = vec![0u8; bytes];
    let (pool, ptr) = mapped(gl, bytes, STAGING[2].bits | glow::MAP_READ_BIT)?;
    // `y` itself in a persistently mapped buffer: the kernel writes host-visible memory, and the
    // read is a memcpy after the fence (what a `BufferUsage::Staging` result is in Sparkle).
    let (mapped_y, mapped_y_ptr) = mapped(gl, bytes, STAGING[0].bits)?;
    // SAFETY: the context is current; both buffers hold `bytes` bytes.
    unsafe { copy(gl, buffers.y, mapped_y, bytes) };
    let kernel_writes_mapped = buffers.with_y(mapped_y);
    let _ = writeln!(out, "\nround trip, dispatch + read of {bytes} bytes (µs; median / p90 of {RUNS}):");
    for way in [
        "fence, wait, glGetBufferSubData",
        "fence, poll, glGetBufferSubData",
        "copy to mapped, fence, poll, memcpy",
        "copy to mapped, fence, wait, memcpy",
        "y mapped, fence, poll, memcpy",
        "y mapped, fence, wait, memcpy",
        "y mapped, barriers around, fence, poll, memcpy",
        "y mapped, glFinish, memcpy",
        "y mapped, fence, poll with flush bit, memcpy",
    ] {
        let y_mapped = way.starts_with("y mapped");
        let dispatched = if y_mapped { &kernel_writes_mapped } else { buffers };
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let started = Instant::now();
            // SAFETY: the context is current on the baseline thread; program, buffers and the
            // pool are its own; `ptr` maps `bytes` bytes of the pool.
            unsafe {
                if way.contains("barriers around") {
                    gl.memory_barrier(glow::CLIENT_MAPPED_BUFFER_BARRIER_BIT);
                }
                baseline::dispatch(gl, program, dispatched, a, groups);
                let _ = gl.get_error();
                gl.memory_barrier(ALL_BARRIERS);
                let copied = way.starts_with("copy");
                if copied {
                    copy(gl, buffers.y, pool, bytes);
                }
                if copied || y_mapped {
                    gl.memory_barrier(glow::CLIENT_MAPPED_BUFFER_BARRIER_BIT);
                }
                if way.contains("glFinish") {
                    // GL promises a coherent mapping's GPU writes to the host after Finish as
                    // after a signalled fence; the driver may wait for it another way.
                    gl.finish();
                } else if way.contains("flush bit") {
                    let sync = baseline::fence(gl)?;
                    poll_flushing_and_delete(gl, sync);
                } else {
                    let sync = baseline::fence_and_flush(gl)?;
                    if way.contains("poll") {
                        poll_and_delete(gl, sync);
                    } else {
                        baseline::wait_and_delete(gl, sync)?;
                    }
                }
                if copied {
                    std::ptr::copy_nonoverlapping(ptr, host.as_mut_ptr(), bytes);
                } else if y_mapped {
                    std::ptr::copy_nonoverlapping(mapped_y_ptr, host.as_mut_ptr(), bytes);
                } else {
                    gl.bind_buffer(glow::COPY_READ_BUFFER, Some(buffers.y));
                    gl.get_buffer_sub_data(glow::COPY_READ_BUFFER, 0, &mut host);
                    gl.bind_buffer(glow::COPY_READ_BUFFER, None);
                }
            }
            times.push(started.elapsed());
        }
        let (median, p90) = (quantile(times.clone(), 0.5), quantile(times, 0.9));
        let _ = writeln!(out, "  {way:46} {:7.1} / {:7.1}", us(median), us(p90));
    }
    // SAFETY: the context is current; the pool and the mapped `y` are deleted once (which
    // unmaps them), after the last round trip's fence.
    unsafe {
        gl.delete_buffer(pool);
        gl.delete_buffer(mapped_y);
    }
    driver_error(gl, "the study's round trips")
}

fn gbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e9
}

fn reps(size: usize) -> usize {
    match size {
        0..=1_048_576 => 20,
        1_048_577..=16_777_216 => 8,
        _ => 3,
    }
}

/// The pieces `glBufferSubData` / `glGetBufferSubData` are also timed in, for larger sizes.
const PIECES: [usize; 3] = [256 << 10, 512 << 10, 1 << 20];

/// Uploads and read-backs at each size, each way: GB/s of the median.
fn transfers(gl: &glow::Context, sizes: &[usize], out: &mut String) -> Result<(), PlainGlError> {
    let _ = writeln!(
        out,
        "\ntransfers (GB/s, median; staging: memcpy into/out of the mapping + GPU copy, the median share of one step in brackets):"
    );
    for &size in sizes {
        let device = device_buffer(gl, size)?;
        let mut host = vec![1u8; size];
        let mut back = vec![0u8; size];
        let mut line = format!("  {:>9} B:", size);
        // glBufferSubData + fence + wait.
        let time = |f: &mut dyn FnMut() -> Result<(), PlainGlError>| -> Result<Duration, PlainGlError> {
            let mut times = Vec::new();
            for _ in 0..reps(size) {
                let started = Instant::now();
                f()?;
                times.push(started.elapsed());
            }
            Ok(quantile(times, 0.5))
        };
        // In one call, then over pieces of the range: the driver's way may depend on a call's size.
        for piece in std::iter::once(size).chain(PIECES.into_iter().filter(|&piece| piece < size)) {
            let up = time(&mut || {
                // SAFETY: the context is current; every piece lies within `device`'s `size` bytes.
                unsafe {
                    gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(device));
                    for (index, part) in host.chunks(piece).enumerate() {
                        gl.buffer_sub_data_u8_slice(glow::COPY_WRITE_BUFFER, (index * piece) as i32, part);
                    }
                    gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
                }
                let sync = baseline::fence_and_flush(gl)?;
                baseline::wait_and_delete(gl, sync)
            })?;
            let down = time(&mut || {
                // SAFETY: as above.
                unsafe {
                    gl.bind_buffer(glow::COPY_READ_BUFFER, Some(device));
                    for (index, part) in back.chunks_mut(piece).enumerate() {
                        gl.get_buffer_sub_data(glow::COPY_READ_BUFFER, (index * piece) as i32, part);
                    }
                    gl.bind_buffer(glow::COPY_READ_BUFFER, None);
                }
                Ok(())
            })?;
            let (up, down) = (gbps(size, up), gbps(size, down));
            let _ = if piece == size {
                write!(line, " subdata {up:.2}/{down:.2}")
            } else {
                write!(line, " | in {} KiB {up:.2}/{down:.2}", piece >> 10)
            };
        }
        // glMapBufferRange of the device buffer.
        let up = time(&mut || {
            // SAFETY: as above; the mapping covers `size` bytes and is unmapped before use.
            unsafe {
                gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(device));
                let ptr = gl.map_buffer_range(
                    glow::COPY_WRITE_BUFFER,
                    0,
                    size as i32,
                    glow::MAP_WRITE_BIT | glow::MAP_INVALIDATE_BUFFER_BIT,
                );
                if !ptr.is_null() {
                    std::ptr::copy_nonoverlapping(host.as_ptr(), ptr, size);
                }
                gl.unmap_buffer(glow::COPY_WRITE_BUFFER);
                gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
            }
            let sync = baseline::fence_and_flush(gl)?;
            baseline::wait_and_delete(gl, sync)
        })?;
        let down = time(&mut || {
            // SAFETY: as above.
            unsafe {
                gl.bind_buffer(glow::COPY_READ_BUFFER, Some(device));
                let ptr = gl.map_buffer_range(glow::COPY_READ_BUFFER, 0, size as i32, glow::MAP_READ_BIT);
                if !ptr.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, back.as_mut_ptr(), size);
                }
                gl.unmap_buffer(glow::COPY_READ_BUFFER);
                gl.bind_buffer(glow::COPY_READ_BUFFER, None);
            }
            Ok(())
        })?;
        let _ = write!(line, " | map {:.2}/{:.2}", gbps(size, up), gbps(size, down));
        for flags in STAGING {
            let one_way = flags.bits & glow::MAP_READ_BIT == 0;
            let (up_bits, down_bits) = if one_way {
                (flags.bits | glow::MAP_WRITE_BIT, flags.bits | glow::MAP_READ_BIT)
            } else {
                (flags.bits, flags.bits)
            };
            let (up_buf, up_ptr) = mapped(gl, size, up_bits)?;
            let (down_buf, down_ptr) = mapped(gl, size, down_bits)?;
            let (mut up_split, mut down_split) = (Vec::new(), Vec::new());
            let up = time(&mut || {
                let started = Instant::now();
                // SAFETY: the mapping covers `size` bytes; the context is current.
                unsafe {
                    std::ptr::copy_nonoverlapping(host.as_ptr(), up_ptr, size);
                    if extra_map_bits(up_bits) != 0 {
                        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(up_buf));
                        gl.flush_mapped_buffer_range(glow::COPY_WRITE_BUFFER, 0, size as i32);
                        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
                    }
                    gl.memory_barrier(glow::CLIENT_MAPPED_BUFFER_BARRIER_BIT);
                }
                let copied = Instant::now();
                // SAFETY: both buffers hold `size` bytes.
                unsafe { copy(gl, up_buf, device, size) };
                let sync = baseline::fence_and_flush(gl)?;
                baseline::wait_and_delete(gl, sync)?;
                up_split.push(copied - started);
                Ok(())
            })?;
            let down = time(&mut || {
                let started = Instant::now();
                // SAFETY: as above.
                unsafe {
                    copy(gl, device, down_buf, size);
                    gl.memory_barrier(glow::CLIENT_MAPPED_BUFFER_BARRIER_BIT);
                }
                let sync = baseline::fence_and_flush(gl)?;
                baseline::wait_and_delete(gl, sync)?;
                let copied = Instant::now();
                // SAFETY: the mapping covers `size` bytes.
                unsafe { std::ptr::copy_nonoverlapping(down_ptr, back.as_mut_ptr(), size) };
                down_split.push(copied - started);
                Ok(())
            })?;
            let _ = write!(
                line,
                " | {} {:.2} [memcpy {:.0}%] / {:.2} [gpu {:.0}%]",
                flags.name,
                gbps(size, up),
                100.0 * quantile(up_split, 0.5).as_secs_f64() / up.as_secs_f64(),
                gbps(size, down),
                100.0 * quantile(down_split, 0.5).as_secs_f64() / down.as_secs_f64()
            );
            // SAFETY: the context is current; each buffer is deleted once (unmapping it).
            unsafe {
                gl.delete_buffer(up_buf);
                gl.delete_buffer(down_buf);
            }
        }
        // SAFETY: as above.
        unsafe { gl.delete_buffer(device) };
        driver_error(gl, "the study's transfers")?;
        host[0] = back[0];
        let _ = writeln!(out, "{line}");
    }
    Ok(())
}
