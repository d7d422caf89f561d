//! Host copies into memory that the GPU reads next (a persistently mapped staging buffer), with
//! non-temporal stores where a device copy follows the host's: they send the bytes to memory
//! without keeping them in the CPU's caches. After ordinary stores, the device copy out of the
//! mapping has to fetch the lines back from the CPU's caches: on an H100 guest that copy took
//! 81–86 µs instead of 54 for 1 MiB and 556 instead of 419 for 16 MiB, and 61 and 372 after
//! non-temporal stores. In a long stream of chunks through a few mapped buffers, the host's
//! stores are the bottleneck instead, and ordinary ones were faster there (256 MiB through the
//! gl backend's ring: 18.2–20.6 GB/s in two leases against 14.6–19.5 in three).

/// How a copy into a mapping stores its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stores {
    /// Non-temporal stores: for bytes a device copy reads right after.
    Streaming,
    /// Ordinary stores, through the CPU's caches: for a long stream of chunks through the same
    /// few buffers, where the host's copies are the slow part.
    Cached,
}

/// Copies `len` bytes from `src` to `dst` with ordinary stores, or with non-temporal stores
/// where the CPU has them (x86-64; elsewhere an ordinary copy) and `stores` asks for them,
/// then fenced, so that they are visible to every later store of this thread, the one that
/// hands the work to the GPU among them.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and the two ranges must
/// not overlap.
pub(crate) unsafe fn copy_for_device(src: *const u8, dst: *mut u8, len: usize, stores: Stores) {
    #[cfg(target_arch = "x86_64")]
    if stores == Stores::Streaming {
        // SAFETY: the caller's contract is this function's.
        return unsafe { x86_64::copy(src, dst, len) };
    }
    let _ = stores;
    // SAFETY: the caller's contract is this function's.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
}

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// Bytes one pass of the loop moves: four 16-byte stores, a whole cache line when aligned.
    const LINE: usize = 64;

    /// SSE2's streaming stores, which every x86-64 CPU has.
    ///
    /// # Safety
    /// As for [`super::copy_for_device`].
    pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
        // Streaming stores need 16-byte-aligned destinations: the bytes before the first
        // aligned address, and those after the last whole line, go by an ordinary copy.
        let head = dst.align_offset(16).min(len);
        let body = (len - head) / LINE * LINE;
        // SAFETY: `head + body <= len`, so every access below stays in the caller's ranges;
        // `dst + head` is 16-byte aligned, so is each store address (steps of 16); loads are
        // unaligned loads.
        unsafe {
            std::ptr::copy_nonoverlapping(src, dst, head);
            let (src_body, dst_body) = (src.add(head), dst.add(head));
            for at in (0..body).step_by(LINE) {
                for part in (0..LINE).step_by(16) {
                    let value = _mm_loadu_si128(src_body.add(at + part).cast::<__m128i>());
                    _mm_stream_si128(dst_body.add(at + part).cast::<__m128i>(), value);
                }
            }
            let done = head + body;
            std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done);
            // Streaming stores are weakly ordered: without the fence, the store that hands the
            // work on could become visible before them.
            _mm_sfence();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{copy_for_device, Stores};

    /// Every length and both misalignments, both ways of storing: the bytes arrive exactly, and
    /// nothing around them is touched.
    #[test]
    fn copies_exactly_the_bytes_at_any_alignment_and_length() {
        let source: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for stores in [Stores::Streaming, Stores::Cached] {
            for len in (0..300).chain([1023, 1024, 1025, 4096, 4900]) {
                for src_at in [0, 1, 5, 16, 33].into_iter().filter(|at| at + len <= source.len()) {
                    for dst_at in [0, 1, 8, 15, 16, 47] {
                        let mut target = vec![0xEEu8; dst_at + len + 100];
                        // SAFETY: both ranges are in bounds and in different vectors.
                        unsafe {
                            copy_for_device(
                                source[src_at..].as_ptr(),
                                target[dst_at..].as_mut_ptr(),
                                len,
                                stores,
                            )
                        };
                        let case = format!("{stores:?}, {len} bytes, {src_at} → {dst_at}");
                        assert_eq!(&target[dst_at..dst_at + len], &source[src_at..src_at + len], "{case}");
                        assert!(
                            target[..dst_at].iter().all(|&b| b == 0xEE),
                            "a byte before was written: {case}"
                        );
                        assert!(
                            target[dst_at + len..].iter().all(|&b| b == 0xEE),
                            "a byte after was written: {case}"
                        );
                    }
                }
            }
        }
    }
}
