//! Shader storage buffers: creation with a usage hint, uploads and downloads, and deletion from
//! any thread when the last handle drops (GL defers it while queued work still uses the buffer).
//! Staging buffers are, where the context has GL 4.4's `glBufferStorage`, mapped persistently
//! and coherently for their whole life, so the host reads and writes them with plain memory
//! copies on its own thread instead of GL calls queued on the GL thread.

use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use glow::HasContext;

use super::stream_copy::Stores;
use super::thread::{GlState, GlThread, LiveGuard};
use super::GlError;
use crate::hal::{BufferUsage, ReadTarget};

/// A GL buffer object.
pub struct GlBuffer {
    pub(crate) id: glow::NativeBuffer,
    mapping: Option<Mapping>,
    live: LiveGuard,
}

/// Flags of a staging buffer's storage and of its mapping (the same bits for both).
const STAGING_MAP_FLAGS: u32 =
    glow::MAP_READ_BIT | glow::MAP_WRITE_BIT | glow::MAP_PERSISTENT_BIT | glow::MAP_COHERENT_BIT;

// Submissions issue no client-mapped barrier because these mappings are coherent (`submit.rs`).
const _: () = assert!(STAGING_MAP_FLAGS & glow::MAP_COHERENT_BIT != 0);

/// A persistent, coherent mapping of a whole buffer.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// Host copies through the mapping never overlap each other (the runtime orders them
    /// against the GPU, not against other host threads).
    copying: Mutex<()>,
}

// SAFETY: the pointer is the driver's mapping of the buffer, usable from any thread of the
// process until the buffer is deleted, which only `GlBuffer::drop` does, after its last user;
// copies through it are serialized by `copying`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Copies `data` in at `offset` (split over a few threads when large), stored as `stores`
    /// says; the runtime checked the range and that no unfinished work uses the buffer.
    pub(crate) fn write(&self, offset: u64, data: &[u8], stores: Stores) -> Result<(), GlError> {
        self.write_on(host_threads(data.len()), offset, data, stores)
    }

    /// [`write`](Self::write) on at most `threads` threads.
    fn write_on(&self, threads: usize, offset: u64, data: &[u8], stores: Stores) -> Result<(), GlError> {
        let start = self.check(offset, data.len())?;
        let _guard = self.copying.lock().unwrap_or_else(PoisonError::into_inner);
        let base = self.ptr.as_ptr() as usize + start;
        in_pieces_on(data.len(), threads, |from, to| {
            // SAFETY: `start + data.len() <= len` was checked; the pieces are disjoint parts of
            // the checked range, and `data` is host memory, never the mapping itself.
            unsafe {
                super::stream_copy::copy_for_device(
                    data[from..to].as_ptr(),
                    (base + from) as *mut u8,
                    to - from,
                    stores,
                )
            };
        });
        Ok(())
    }

    /// Copies `out.len()` bytes at `offset` out (split over a few threads when large); every
    /// write of the buffer completed.
    pub(crate) fn read(&self, offset: u64, out: &mut ReadTarget<'_>) -> Result<(), GlError> {
        // SAFETY: the target lends `out.len()` bytes from its pointer, and is marked filled
        // below only after the copy wrote all of them.
        unsafe { self.read_into(offset, out.as_mut_ptr(), out.len())? };
        // SAFETY: `read_into` returned after writing all `out.len()` bytes, on this thread or on
        // helper threads whose completion it waited for (a mutex hand-off, so their writes are
        // visible here).
        unsafe { out.assume_filled() };
        Ok(())
    }

    /// Copies `len` bytes at `offset` out to `dst` (split over a few threads when large);
    /// every write of the buffer completed. On `Ok`, all `len` bytes at `dst` were written.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes, used by nobody else during the call, and
    /// must not point into this mapping.
    pub(crate) unsafe fn read_into(&self, offset: u64, dst: *mut u8, len: usize) -> Result<(), GlError> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.read_into_on(host_threads(len), offset, dst, len) }
    }

    /// [`read_into`](Self::read_into) on at most `threads` threads.
    ///
    /// # Safety
    /// As for [`read_into`](Self::read_into).
    unsafe fn read_into_on(
        &self,
        threads: usize,
        offset: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<(), GlError> {
        let start = self.check(offset, len)?;
        let _guard = self.copying.lock().unwrap_or_else(PoisonError::into_inner);
        let base = self.ptr.as_ptr() as usize + start;
        let target = dst as usize;
        in_pieces_on(len, threads, |from, to| {
            // SAFETY: `start + len <= self.len` was checked and `dst` is valid for `len` bytes
            // (the caller's contract); the pieces are disjoint parts of both ranges, and every
            // piece is done before `in_pieces` returns.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (base + from) as *const u8,
                    (target + from) as *mut u8,
                    to - from,
                )
            };
        });
        Ok(())
    }

    fn check(&self, offset: u64, len: usize) -> Result<usize, GlError> {
        match usize::try_from(offset)
            .ok()
            .filter(|&start| start.checked_add(len).is_some_and(|end| end <= self.len))
        {
            Some(start) => Ok(start),
            None => Err(GlError::Driver {
                operation: format!(
                    "a host copy of bytes {offset}..+{len} of a {}-byte mapped buffer",
                    self.len
                ),
                code: 0,
                name: "out of range",
            }),
        }
    }
}

/// The smallest copy split over several threads. Waking the helpers costs tens of microseconds
/// in a guest whose idle CPUs halt; below 2 MiB that cost more than the helpers gave (on an H100
/// guest, 1 MiB read out of a Staging buffer with its device copy ran at 5–9 GB/s on two to eight
/// threads, 9–11 on one).
const SPLIT_FROM: usize = 2 << 20;

/// The least each thread of a split copy copies. A single core's memory copies are the slow
/// part of a copy through a mapping: on an H100 guest, writing 2 MiB into a Staging buffer took
/// 0.14–0.22 ms on one or two threads and 0.07–0.11 on eight.
const PER_THREAD: usize = 256 << 10;

/// The unit the threads of a split copy claim, one at a time: small, so that a helper thread
/// that wakes late still finds work and the caller never waits long for the last part.
const PART: usize = 64 << 10;

/// The most threads one copy uses, the caller's among them.
const MOST_THREADS: usize = 8;

/// Threads for a host copy of `len` bytes through a mapping: one below [`SPLIT_FROM`] bytes,
/// else one per [`PER_THREAD`] bytes, up to half the host's cores and at most [`MOST_THREADS`].
pub(crate) fn host_threads(len: usize) -> usize {
    threads_for(len, (crate::hal::spin::host_cores() / 2).clamp(1, MOST_THREADS))
}

/// Threads for a copy of `len` bytes: one below [`SPLIT_FROM`], else one per [`PER_THREAD`], at
/// most `most`.
fn threads_for(len: usize, most: usize) -> usize {
    if len < SPLIT_FROM {
        return 1;
    }
    (len / PER_THREAD).clamp(1, most.max(1))
}

/// Runs `copy(from, to)` over `len` bytes in disjoint parts on at most `threads` threads: the
/// caller's and the host copy helpers ([`super::copy_helpers`]).
fn in_pieces_on(len: usize, threads: usize, copy: impl Fn(usize, usize) + Sync) {
    super::copy_helpers::in_pieces(len, PART, threads.saturating_sub(1), &copy);
}

impl Drop for GlBuffer {
    fn drop(&mut self) {
        let id = self.id;
        self.live.thread().post(move |state| {
            // SAFETY: the context is current on the GL thread and `id` was created by it.
            unsafe { state.gl().delete_buffer(id) };
            super::live::buffer_deleted();
        });
    }
}

/// The `glBufferData` usage hint of a buffer that is not mapped persistently. Output buffers
/// take the hint of a buffer the GPU writes and copies, not `GL_STATIC_READ`: on NVIDIA's driver
/// (580, H100 and H200) a device copy out of a `STATIC_READ` buffer that a kernel had just
/// written ran at about 10 GB/s instead of 50 — a staged conv2d batch of 16.8 MB each way took
/// 2.35 ms of GPU time against 0.885 — and its plain read-back was slower too.
fn usage_hint(usage: BufferUsage) -> u32 {
    match usage {
        BufferUsage::Input => glow::STATIC_DRAW,
        BufferUsage::Output | BufferUsage::InOut => glow::DYNAMIC_COPY,
        BufferUsage::Staging => glow::STREAM_READ,
    }
}

impl GlBuffer {
    /// A buffer of `size` bytes; the runtime checked `size` against the device limit, which
    /// the gl backend caps at `i32::MAX`.
    /// `persistent`: the context has `glBufferStorage`, so staging buffers are mapped.
    pub(crate) fn create(
        thread: &GlThread,
        size: u64,
        usage: BufferUsage,
        persistent: bool,
    ) -> Result<Self, GlError> {
        let hint = usage_hint(usage);
        let size = i32::try_from(size).map_err(|_| GlError::BufferCreation {
            size,
            reason: "larger than the gl backend's 2 GiB limit".into(),
        })?;
        if usage == BufferUsage::Staging && persistent {
            let (id, mapping) = thread.call(move |state| create_mapped(state, size))??;
            super::live::buffer_made();
            return Ok(Self { id, mapping: Some(mapping), live: thread.acquire() });
        }
        let id = thread.call(move |state| create(state, size, hint))??;
        super::live::buffer_made();
        Ok(Self { id, mapping: None, live: thread.acquire() })
    }

    /// The persistent mapping of a staging buffer, if it has one.
    pub(crate) fn mapping(&self) -> Option<&Mapping> {
        self.mapping.as_ref()
    }

    /// Writes `data` at `offset` (checked by the runtime), straight from the caller's memory.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) -> Result<(), GlError> {
        let id = self.id;
        let source = HostBytes::of(data);
        self.live.thread().call(move |state| {
            // SAFETY: `call` returns only once this job has run or was dropped unrun, so the
            // caller's `data` outlives every use of `source` here.
            let data = unsafe { source.as_slice() };
            // SAFETY: the context is current on the GL thread; the runtime checked the range
            // against the buffer's size, which fits in i32.
            unsafe {
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
                state.gl().buffer_sub_data_u8_slice(glow::COPY_WRITE_BUFFER, offset as i32, data);
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, None);
            }
            state.check("buffer upload")
        })?
    }

    /// Reads `out.len()` bytes at `offset` (checked by the runtime) straight into `out`
    /// (`glGetBufferSubData` takes a slice, so memory that held no values is zeroed first).
    pub(crate) fn read(&self, offset: u64, out: &mut ReadTarget<'_>) -> Result<(), GlError> {
        let id = self.id;
        let target = HostBytesMut::of(out.bytes_mut());
        self.live.thread().call(move |state| {
            // SAFETY: as in `write`: the caller's `out` outlives this job.
            read_on_thread(state, id, offset, unsafe { target.as_slice() })
        })?
    }

    /// Reads `out.len()` bytes at `offset` into `out` in one GL-thread job that first lets
    /// submission `fence` settle, polling for a short window; `false` if it had not by then
    /// (nothing read). Saves a synchronous read-back the hand-offs of waiting on the caller's
    /// thread first.
    pub(crate) fn read_once_settled(
        &self,
        fence: u64,
        offset: u64,
        out: &mut ReadTarget<'_>,
    ) -> Result<bool, GlError> {
        let id = self.id;
        let target = HostBytesMut::of(out.bytes_mut());
        self.live.thread().call_keeping_fences(move |state| {
            // A failed write leaves the read to the runtime, which reports the failure.
            if !state.settle_briefly(fence) || state.timeline.wait(fence, Duration::ZERO).is_err() {
                return Ok(false);
            }
            // SAFETY: as in `write`: the caller's `out` outlives this job.
            read_on_thread(state, id, offset, unsafe { target.as_slice() }).map(|()| true)
        })?
    }
}

/// The caller's bytes, lent to a job on the GL thread for the length of a synchronous call.
struct HostBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: only dereferenced by the job of a `GlThread::call`, while the caller that lent the
// bytes is blocked in that call.
unsafe impl Send for HostBytes {}

impl HostBytes {
    fn of(data: &[u8]) -> Self {
        Self { ptr: data.as_ptr(), len: data.len() }
    }

    /// # Safety
    /// The lent slice must still be alive and not written meanwhile.
    unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        // SAFETY: per the contract; `ptr` and `len` came from one slice.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The caller's buffer, lent to a job on the GL thread for the length of a synchronous call.
struct HostBytesMut {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: as for `HostBytes`.
unsafe impl Send for HostBytesMut {}

impl HostBytesMut {
    fn of(out: &mut [u8]) -> Self {
        Self { ptr: out.as_mut_ptr(), len: out.len() }
    }

    /// # Safety
    /// The lent slice must still be alive and used by nobody else meanwhile.
    #[allow(clippy::mut_from_ref)]
    unsafe fn as_slice<'a>(&self) -> &'a mut [u8] {
        // SAFETY: per the contract; `ptr` and `len` came from one exclusive slice.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

fn read_on_thread(
    state: &GlState,
    id: glow::NativeBuffer,
    offset: u64,
    out: &mut [u8],
) -> Result<(), GlError> {
    // SAFETY: the context is current on the GL thread; the range was checked. Shader writes are
    // made visible by the barrier that ends every submission.
    unsafe {
        state.gl().bind_buffer(glow::COPY_READ_BUFFER, Some(id));
        state.gl().get_buffer_sub_data(glow::COPY_READ_BUFFER, offset as i32, out);
        state.gl().bind_buffer(glow::COPY_READ_BUFFER, None);
    }
    state.check("buffer download")
}

fn create(state: &mut GlState, size: i32, hint: u32) -> Result<glow::NativeBuffer, GlError> {
    state.take_error();
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; size is positive and fits in i32.
    let id = unsafe {
        let id = gl.create_buffer().map_err(|reason| GlError::BufferCreation {
            size: size as u64,
            reason: format!("glGenBuffers failed: {reason}"),
        })?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_data_size(glow::COPY_WRITE_BUFFER, size, hint);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        id
    };
    if let Some(code) = state.take_error() {
        // SAFETY: as above; `id` was just created.
        unsafe { state.gl().delete_buffer(id) };
        return Err(GlError::BufferCreation {
            size: size as u64,
            reason: super::error::gl_error_name(code).to_owned(),
        });
    }
    Ok(id)
}

/// A buffer with immutable storage, mapped for reading and writing until it is deleted
/// (deleting a buffer unmaps it).
fn create_mapped(state: &mut GlState, size: i32) -> Result<(glow::NativeBuffer, Mapping), GlError> {
    state.take_error();
    let gl = state.gl();
    let failed = |reason: String| GlError::BufferCreation { size: size as u64, reason };
    // SAFETY: the context is current on the GL thread and has glBufferStorage (GL 4.4 or
    // ARB_buffer_storage, probed); size is positive; the mapping covers the whole storage.
    let (id, ptr) = unsafe {
        let id = gl.create_buffer().map_err(|reason| failed(format!("glGenBuffers failed: {reason}")))?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_storage(glow::COPY_WRITE_BUFFER, size, None, STAGING_MAP_FLAGS);
        let ptr = gl.map_buffer_range(glow::COPY_WRITE_BUFFER, 0, size, STAGING_MAP_FLAGS);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        (id, ptr)
    };
    let error = state.take_error();
    match (error, NonNull::new(ptr)) {
        (None, Some(ptr)) => Ok((id, Mapping { ptr, len: size as usize, copying: Mutex::new(()) })),
        (error, _) => {
            // SAFETY: as above; `id` was just created and is deleted once.
            unsafe { state.gl().delete_buffer(id) };
            let reason = error.map_or("glMapBufferRange returned no pointer", super::error::gl_error_name);
            Err(failed(format!("a persistently mapped staging buffer: {reason}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No buffer a kernel writes carries a READ hint (see `usage_hint`).
    #[test]
    fn buffers_kernels_write_are_hinted_as_gpu_copies() {
        for usage in [BufferUsage::Output, BufferUsage::InOut] {
            assert_eq!(usage_hint(usage), glow::DYNAMIC_COPY, "{usage:?}");
        }
        assert_eq!(usage_hint(BufferUsage::Input), glow::STATIC_DRAW);
    }

    /// A copy of 2 MiB or more gets a thread per whole share, within the host's; a smaller one
    /// stays on the caller's thread.
    #[test]
    fn a_large_copy_gets_a_thread_per_share_up_to_the_hosts() {
        let cases = [(0, 8, 1), (PER_THREAD, 8, 1), (SPLIT_FROM - 1, 8, 1), (SPLIT_FROM, 8, 8)];
        let more = [
            (SPLIT_FROM, 4, 4),
            (SPLIT_FROM + PER_THREAD - 1, 16, 8),
            (SPLIT_FROM + PER_THREAD, 16, 9),
            (64 * PER_THREAD, 8, 8),
            (64 * PER_THREAD, 1, 1),
            (64 * PER_THREAD, 0, 1),
        ];
        for (len, most, threads) in cases.into_iter().chain(more) {
            assert_eq!(threads_for(len, most), threads, "{len} bytes, at most {most} threads");
        }
    }

    /// Through a real mapping, split over up to eight threads whatever this host's cores: every
    /// byte written lands at its offset both ways of storing, and every byte read comes back, at
    /// an offset and a length that are not multiples of a part.
    #[test]
    fn copies_through_a_mapping_split_over_threads_move_every_byte() {
        let device = match super::super::GlDevice::open(None) {
            Ok(device) => device,
            Err(err) => panic!("these tests need a GL 4.4 context (llvmpipe will do): {err}"),
        };
        let len = 3 * SPLIT_FROM + 12_345;
        let buffer =
            GlBuffer::create(device.thread(), (len + 4096) as u64, BufferUsage::Staging, true).unwrap();
        let mapping = buffer.mapping().expect("a Staging buffer is mapped where GL has glBufferStorage");
        for (round, stores) in [Stores::Streaming, Stores::Cached].into_iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + round * 7 + i / 4099) as u8).collect();
            for threads in [1, 3, 8] {
                mapping.write_on(threads, 1001, &data, stores).unwrap();
                let mut back = vec![0u8; len];
                // SAFETY: `back` holds `len` bytes, is this test's own and is not in the mapping.
                unsafe { mapping.read_into_on(threads, 1001, back.as_mut_ptr(), len) }.unwrap();
                let wrong = back.iter().zip(&data).position(|(b, d)| b != d);
                assert_eq!(wrong, None, "{stores:?} on {threads} threads: the first byte that differs");
            }
        }
        assert!(mapping.write_on(8, (len + 4096 - 10) as u64, &[0; 11], Stores::Cached).is_err());
    }

    /// Every byte is copied exactly once, whatever the length and the number of threads.
    #[test]
    fn pieces_cover_every_byte_once() {
        for threads in [1, 2, 3, 4, 8] {
            for len in [0, 1, 4095, PART - 1, PART + 1, PER_THREAD, 3 * PER_THREAD + 12_345, 40 * PART] {
                let seen: Vec<std::sync::atomic::AtomicU8> = (0..len).map(|_| Default::default()).collect();
                in_pieces_on(len, threads, |from, to| {
                    assert!(from <= to && to <= len, "{from}..{to} of {len}");
                    for byte in &seen[from..to] {
                        byte.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                });
                let wrong = seen.iter().position(|b| b.load(std::sync::atomic::Ordering::Relaxed) != 1);
                assert_eq!(wrong, None, "{len} bytes on {threads} threads");
            }
        }
    }
}
