//! Whether a benchmark process keeps the host memory it frees. `bench-pipeline` clones a whole
//! stream of inputs (up to 0.8 GB) before each timed run and frees every result as it arrives.
//! With the C library's defaults, freeing the last input of a stream handed the whole stream's
//! memory back to the kernel at once (47 ms on the feeder's thread, inside the timed run), and
//! the next run faulted it back in; the GPU, left idle meanwhile, lowered its clocks. Keeping
//! freed blocks in the process measures the executor instead of the allocator.

/// Large blocks come from the heap up to this size: the first of these the C library accepts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_BLOCK_LIMITS: [i32; 3] = [1 << 30, 256 << 20, 32 << 20];

/// Keeps freed host memory in this process from now on: large blocks come from the heap instead
/// of their own mappings, and the heap's free top is never returned to the kernel. Returns what
/// was set, for the report, or `None` where the allocator cannot be told (then it keeps its
/// defaults). Call it before the process starts other threads: glibc documents `mallopt` as
/// unsafe to call while other threads allocate. (The CLI test of `bench-pipeline` checks it, in
/// a process of its own.)
pub fn keep_freed_memory() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only changes the allocator's parameters, and the caller has started no
        // other thread that could allocate meanwhile.
        let limit = HEAP_BLOCK_LIMITS
            .into_iter()
            .find(|&limit| unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, limit) } == 1)?;
        // Setting the mapping threshold fixed the trim threshold at its small default too: both
        // or neither, or freed memory would go back to the kernel more often, not less.
        // SAFETY: as above.
        if unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) } != 1 {
            tracing::warn!(
                "the C library refused to stop trimming the heap; freed memory goes back to the kernel"
            );
            return None;
        }
        Some(format!(
            "freed blocks kept in the process (glibc: blocks up to {} MiB from the heap, which is never trimmed)",
            limit >> 20
        ))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}
