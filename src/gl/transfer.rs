//! Large uploads and read-backs of plain (unmapped) buffers, through a ring of persistently
//! mapped staging buffers: the host copies a chunk into one ring buffer while the GPU copies
//! the chunk before it out of another, so the copy engine and the host's memory copies overlap,
//! and the host copies of a chunk are split over a few threads. On the H100 (driver 580.159.04)
//! `glBufferSubData` / `glGetBufferSubData` moved 5–12 GB/s depending on the size, with the
//! host's memory copy, not the GPU's, as the slow part (`sparkle bench-transfer --study`).
//!
//! The device has two rings, one for uploads and one for read-backs, each made on the first large
//! transfer its way; transfers the same way take their ring in turn. With one ring for both, a
//! pipeline's read-back of one batch waited for the upload of the next to finish with the ring
//! (and the other way round), so the two host copies never overlapped. Each chunk's GPU copy is
//! an ordinary submission on the device's timeline, so a ring buffer is reused only once the copy
//! that used it has completed, and GL's ordering puts every later command on the destination
//! after the copies of an upload.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::memory::GlBuffer;
use super::stream_copy::Stores;
use super::thread::GlThread;
use super::GlError;
use crate::hal::{BufferUsage, ReadTarget};

/// Transfers of at least this many bytes go through the ring on a GPU, unless
/// `SPARKLE_GL_TRANSFER_RING_MIN` (bytes) says otherwise. On the H100 (driver 580.159.04), with
/// the helpers of the host's copies woken while the device copies run, 2 MiB moved 15–16 GB/s
/// each way through the ring against 10–13 through the driver; 1 MiB was faster through the
/// driver (12–26 against 8–11).
const RING_MIN: usize = 2 << 20;

/// The environment variable that moves the threshold (for measurements and tests).
pub const RING_MIN_ENV: &str = "SPARKLE_GL_TRANSFER_RING_MIN";

/// Whether a transfer of `len` bytes goes through the ring: from `SPARKLE_GL_TRANSFER_RING_MIN`
/// bytes where that is set; else from [`RING_MIN`] on a GPU, and never on a CPU renderer, whose
/// "device" copy is one more memory copy on the host's own cores (llvmpipe, 2 cores: 2–64 MiB
/// moved 6–13 GB/s through the ring against 11–43 through the driver).
pub(crate) fn through_ring(len: usize, cpu_renderer: bool) -> bool {
    static ASKED: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let asked = *ASKED.get_or_init(|| std::env::var(RING_MIN_ENV).ok().and_then(|v| v.trim().parse().ok()));
    match asked {
        Some(min) => len >= min.max(1),
        None => !cpu_renderer && len >= RING_MIN,
    }
}

/// Bytes per ring buffer (and per GPU copy).
const CHUNK: usize = 8 << 20;

/// Ring buffers: enough for host copies and GPU copies to overlap with some slack.
const SLOTS: usize = 4;

/// Wakes the helpers that a host copy of `chunk` bytes uses, to poll for it until the guard
/// drops, for at most the time its device copy and its host copy take at a slow 10 GB/s each,
/// plus a submission's latency.
fn wake_helpers(chunk: usize) -> super::copy_helpers::WokenAhead {
    let helpers = super::memory::host_threads(chunk).saturating_sub(1);
    let most = Duration::from_micros(100) + Duration::from_nanos(chunk as u64 / 5);
    super::copy_helpers::wake_ahead(helpers, most)
}

/// Whether waking helpers ahead of a read-back pays here. On a busy host the helpers' polling
/// can hold up the very threads the read-back waits for: on one H100 guest with steal time, and
/// on another with twelve CPU-bound threads on its 16 vCPUs, 2–16 MiB read-backs took about the
/// helpers' window longer than usual while the helpers spun without yielding (2–4 MiB at
/// 2.7–4.4 GB/s), where on a quiet one the wake made them up to 1.8× faster. Helpers now yield
/// as every wait does (`copy_helpers`), which removed most of it under the twelve threads; this
/// is for what yielding cannot help, such as a hypervisor that holds the vCPUs back. A
/// read-back that outlives its window is the sign: after [`WakeAhead::MISSES`] in a row the ring
/// stops waking helpers ahead, trying again once every [`WakeAhead::PROBE_EVERY`] read-backs,
/// and starts again after one that finished within its window.
#[derive(Debug, Default)]
struct WakeAhead {
    missed_in_a_row: u32,
    skipped: u32,
}

impl WakeAhead {
    const MISSES: u32 = 3;
    const PROBE_EVERY: u32 = 32;

    /// Whether this read-back wakes helpers ahead.
    fn wakes(&mut self) -> bool {
        if self.missed_in_a_row < Self::MISSES {
            return true;
        }
        self.skipped += 1;
        if self.skipped < Self::PROBE_EVERY {
            return false;
        }
        self.skipped = 0;
        true
    }

    /// What became of a read-back that woke helpers ahead: whether its window passed first.
    fn record(&mut self, window_passed: bool) {
        if !window_passed {
            self.missed_in_a_row = 0;
            return;
        }
        self.missed_in_a_row = self.missed_in_a_row.saturating_add(1);
        if self.missed_in_a_row == Self::MISSES {
            tracing::debug!(
                "ring read-backs outlived the helpers' polling window {} times in a row: no helpers \
                 woken ahead for now",
                Self::MISSES
            );
        }
    }
}

/// How long one chunk's GPU copy may take.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(60);

/// The ring, or why there is none.
pub(crate) struct Ring {
    slots: Vec<GlBuffer>,
    /// The fence of the last GPU copy that used each slot (0: none).
    fences: [u64; SLOTS],
    /// The slot the next transfer starts in: each transfer starts where the one before ended,
    /// so that a read-back's device copy never writes the slot the host has just read. The lines
    /// the host's threads read stay in their caches, and a device copy writing them had to wait
    /// for each to be taken back: on the H100, the wait for a 4 MiB read-back's device copy was
    /// 140–283 µs into the slot just read and 93–221 µs (median 107) into the next (8 MiB:
    /// 220–391 against 171–294, median 175), the copy alone taking about 90 µs (175).
    next: usize,
    /// Whether read-backs wake the host copy's helpers ahead (read-backs only).
    wake: WakeAhead,
}

/// Where a chunk's GPU copy goes: `post` queues one copy and returns its fence.
pub(crate) type PostCopy<'a> = dyn Fn(&GlBuffer, u64, &GlBuffer, u64, u64) -> crate::Result<u64> + 'a;

/// Which way a transfer through a ring goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Host memory into a buffer.
    Upload,
    /// A buffer into host memory.
    Download,
}

/// The device's two rings, each made on first use.
#[derive(Default)]
pub(crate) struct RingCell {
    uploads: Mutex<Option<Ring>>,
    downloads: Mutex<Option<Ring>>,
}

impl RingCell {
    /// Runs `transfer` with the ring of `direction` (made now if needed); `Ok(None)`: the ring
    /// could not be made, the caller transfers directly.
    pub(crate) fn with<R>(
        &self,
        thread: &GlThread,
        direction: Direction,
        transfer: impl FnOnce(&mut Ring) -> crate::Result<R>,
    ) -> crate::Result<Option<R>> {
        let cell = match direction {
            Direction::Upload => &self.uploads,
            Direction::Download => &self.downloads,
        };
        let mut ring = cell.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.is_none() {
            match Ring::new(thread) {
                Ok(made) => *ring = Some(made),
                Err(err) => {
                    tracing::debug!(error = %err, "no staging ring for large transfers; they go through the driver");
                    return Ok(None);
                }
            }
        }
        match ring.as_mut() {
            Some(ring) => transfer(ring).map(Some),
            None => Ok(None),
        }
    }
}

/// A ring buffer without its mapping: [`Ring::new`] refuses those, so no transfer meets one.
fn unmapped_slot() -> GlError {
    GlError::BufferCreation {
        size: CHUNK as u64,
        reason: "a buffer of the staging ring is not mapped".into(),
    }
}

impl Ring {
    fn new(thread: &GlThread) -> Result<Ring, GlError> {
        let slots = (0..SLOTS)
            .map(|_| GlBuffer::create(thread, CHUNK as u64, BufferUsage::Staging, true))
            .collect::<Result<Vec<_>, _>>()?;
        if slots.iter().any(|slot| slot.mapping().is_none()) {
            return Err(GlError::BufferCreation {
                size: CHUNK as u64,
                reason: "the ring's buffers are not mapped".into(),
            });
        }
        Ok(Ring { slots, fences: [0; SLOTS], next: 0, wake: WakeAhead::default() })
    }

    /// The slot a transfer of `chunks` chunks starts in; the next transfer starts after its last.
    fn start(&mut self, chunks: usize) -> usize {
        let first = self.next;
        self.next = (first + chunks) % SLOTS;
        first
    }

    /// Waits until the last GPU copy that used `slot` completed.
    fn settle(&mut self, thread: &GlThread, slot: usize) -> crate::Result<()> {
        let fence = std::mem::take(&mut self.fences[slot]);
        if fence == 0 {
            return Ok(());
        }
        match thread.timeline().wait(fence, CHUNK_TIMEOUT) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.fences[slot] = fence;
                Err(crate::Error::new(
                    crate::ErrorKind::Timeout,
                    format!("a chunk of a transfer did not finish within {} s", CHUNK_TIMEOUT.as_secs()),
                ))
            }
            Err(err) => Err(err.context("a chunk of a transfer failed")),
        }
    }

    /// Copies `data` into `dst` at `offset`, chunk by chunk; returns once the last chunk's GPU
    /// copy is queued (later commands on `dst` come after it).
    pub(crate) fn upload(
        &mut self,
        thread: &GlThread,
        post: &PostCopy<'_>,
        dst: &GlBuffer,
        offset: u64,
        data: &[u8],
    ) -> crate::Result<()> {
        // A transfer the ring holds whole ends in a device copy right after the host's last
        // write, which reads streamed bytes faster; a longer one is a stream bound by the host's
        // writes, faster through the caches (H100: 16 MiB 13.2-15.8 GB/s cached, 15.9-21.9
        // streamed; 256 MiB 18.2-20.6 cached, 14.6-19.5 streamed).
        let stores = if data.len() <= CHUNK * SLOTS { Stores::Streaming } else { Stores::Cached };
        let first = self.start(data.len().div_ceil(CHUNK));
        for (k, chunk) in data.chunks(CHUNK).enumerate() {
            let slot = (first + k) % SLOTS;
            let began = Instant::now();
            self.settle(thread, slot)?;
            let settled = Instant::now();
            let staging = &self.slots[slot];
            staging.mapping().map_or(Ok(()), |m| m.write(0, chunk, stores))?;
            tracing::trace!(
                chunk = k,
                slot,
                bytes = chunk.len(),
                wait_us = (settled - began).as_micros() as u64,
                host_copy_us = settled.elapsed().as_micros() as u64,
                "ring upload chunk"
            );
            let at = offset + (k * CHUNK) as u64;
            self.fences[slot] = post(staging, 0, dst, at, chunk.len() as u64)?;
        }
        Ok(())
    }

    /// Copies `out.len()` bytes of `src` at `offset` into `out`, chunk by chunk, with up to
    /// `SLOTS` GPU copies ahead of the host's.
    pub(crate) fn download(
        &mut self,
        thread: &GlThread,
        post: &PostCopy<'_>,
        src: &GlBuffer,
        offset: u64,
        out: &mut ReadTarget<'_>,
    ) -> crate::Result<()> {
        let len = out.len();
        let chunks = len.div_ceil(CHUNK);
        let span = |k: usize| (k * CHUNK, (len - k * CHUNK).min(CHUNK));
        let first = self.start(chunks);
        let issue = |ring: &mut Ring, k: usize| -> crate::Result<()> {
            let slot = (first + k) % SLOTS;
            ring.settle(thread, slot)?;
            let (start, size) = span(k);
            ring.fences[slot] = post(src, offset + start as u64, &ring.slots[slot], 0, size as u64)?;
            Ok(())
        };
        for k in 0..chunks.min(SLOTS) {
            issue(self, k)?;
        }
        let base = out.as_mut_ptr();
        // The helpers of the first chunk's host copy wake while its device copy runs. Later
        // chunks' copies are usually done by the time the host gets to them, and helpers kept
        // polling through a long transfer took the CPUs its own threads needed: on a busy H100
        // guest, 64 MiB read back at 8.4–10.7 GB/s that way against 23.3–23.6 without. Where
        // waits do not poll (a CPU renderer, whose copies run on the host's own cores, or
        // `SPARKLE_SPIN_US=0`), neither do the helpers.
        let polls = thread.timeline().wait_window() > Duration::ZERO;
        let mut woken = (polls && self.wake.wakes()).then(|| wake_helpers(len.min(CHUNK)));
        for k in 0..chunks {
            let slot = (first + k) % SLOTS;
            let (start, size) = span(k);
            let began = Instant::now();
            self.settle(thread, slot)?;
            let settled = Instant::now();
            let mapping = self.slots[slot].mapping().ok_or_else(unmapped_slot)?;
            // SAFETY: `start + size <= len`, the bytes the target lends from `base`, which the
            // ring's own mapping never overlaps.
            unsafe { mapping.read_into(0, base.add(start), size)? };
            tracing::trace!(
                chunk = k,
                slot,
                bytes = size,
                wait_us = (settled - began).as_micros() as u64,
                host_copy_us = settled.elapsed().as_micros() as u64,
                "ring read-back chunk"
            );
            // Past the first chunk, the helpers sleep between copies again.
            if let Some(woken) = woken.take() {
                self.wake.record(woken.window_passed());
            }
            if k + SLOTS < chunks {
                issue(self, k + SLOTS)?;
            }
        }
        // SAFETY: the chunks cover `0..len` and each was copied in full above.
        unsafe { out.assume_filled() };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Ring, WakeAhead, SLOTS};

    /// Each transfer starts in the slot after the last one the transfer before used, so a
    /// one-chunk read-back never reuses the slot the host has just read.
    #[test]
    fn each_transfer_starts_where_the_one_before_ended() {
        let mut ring = Ring { slots: Vec::new(), fences: [0; SLOTS], next: 0, wake: WakeAhead::default() };
        let starts: Vec<usize> = [1, 1, 2, 5, 1, 4].into_iter().map(|chunks| ring.start(chunks)).collect();
        assert_eq!(starts, [0, 1, 2, 0, 1, 2]);
        assert_eq!(ring.next, 2);
        let mut previous = ring.start(1);
        for _ in 0..2 * SLOTS {
            let next = ring.start(1);
            assert_ne!(next, previous, "a one-chunk transfer reused the slot of the one before");
            previous = next;
        }
    }

    /// Read-backs wake helpers ahead until three in a row outlive their window; then only one
    /// in every `PROBE_EVERY` does, until one finishes within its window.
    #[test]
    fn waking_ahead_stops_after_three_misses_in_a_row_and_probes_until_one_pays() {
        let mut wake = WakeAhead::default();
        // Misses that are not in a row change nothing.
        for passed in [true, true, false, true, true, false] {
            assert!(wake.wakes());
            wake.record(passed);
        }
        for _ in 0..WakeAhead::MISSES {
            assert!(wake.wakes());
            wake.record(true);
        }
        let woke: Vec<bool> = (0..2 * WakeAhead::PROBE_EVERY).map(|_| wake.wakes()).collect();
        let probes: Vec<usize> = woke.iter().enumerate().filter(|(_, &w)| w).map(|(i, _)| i).collect();
        let every = WakeAhead::PROBE_EVERY as usize;
        assert_eq!(probes, [every - 1, 2 * every - 1], "one probe in every {every}");
        // A probe that misses keeps it off; one that pays turns it back on.
        wake.record(true);
        assert!((1..WakeAhead::PROBE_EVERY).all(|_| !wake.wakes()), "a probe that missed keeps it off");
        assert!(wake.wakes(), "the next probe");
        wake.record(false);
        assert!((0..10).all(|_| wake.wakes()), "a read-back within its window turns it back on");
    }
}
