//! GPU virtual address allocation inside the range DEV_INFO gives: first fit over a free list
//! ordered by address, with neighbours merged on free so that freed space is reused.

use std::collections::BTreeMap;

/// Alignment every range gets at least: 64 KiB, so that the kernel can use 64 KiB PTE
/// fragments (it requires only 4 KiB GPU pages; larger alignment keeps TLB use low, as Mesa does).
pub const MIN_VA_ALIGNMENT: u64 = 64 * 1024;

/// Highest address handed out: COMPUTE_PGM_LO/HI hold a 40-bit code address, so code (and, to
/// keep one allocator, everything) stays below 1 TiB.
pub const VA_LIMIT: u64 = 1 << 40;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaAllocator {
    start: u64,
    end: u64,
    alignment: u64,
    /// Free ranges: start → size.
    free: BTreeMap<u64, u64>,
}

impl VaAllocator {
    /// Manages `[start, end)` (clamped to [`VA_LIMIT`]) with at least `alignment`
    /// (rounded up to a power of two and to [`MIN_VA_ALIGNMENT`]).
    pub fn new(start: u64, end: u64, alignment: u64) -> Self {
        let alignment = alignment.max(MIN_VA_ALIGNMENT).next_power_of_two();
        let start = start.div_ceil(alignment) * alignment;
        let end = end.min(VA_LIMIT) / alignment * alignment;
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        Self { start, end, alignment, free }
    }

    #[cfg(test)]
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// `size` rounded up to the allocation granule.
    pub fn round(&self, size: u64) -> Option<u64> {
        size.max(1).checked_next_multiple_of(self.alignment)
    }

    /// Allocates `size` bytes (rounded up); `None` when no free range is large enough.
    pub fn allocate(&mut self, size: u64) -> Option<(u64, u64)> {
        let size = self.round(size)?;
        let (&at, &len) = self.free.iter().find(|(_, &len)| len >= size)?;
        self.free.remove(&at);
        if len > size {
            self.free.insert(at + size, len - size);
        }
        Some((at, size))
    }

    /// Returns a range from [`allocate`](Self::allocate).
    pub fn free(&mut self, at: u64, size: u64) {
        debug_assert!(
            at >= self.start && at + size <= self.end,
            "freeing {at:#x}+{size:#x} outside the heap"
        );
        let mut at = at;
        let mut size = size;
        if let Some((&prev, &prev_len)) = self.free.range(..at).next_back() {
            if prev + prev_len == at {
                self.free.remove(&prev);
                at = prev;
                size += prev_len;
            }
        }
        if let Some(&next_len) = self.free.get(&(at + size)) {
            self.free.remove(&(at + size));
            size += next_len;
        }
        self.free.insert(at, size);
    }

    /// Bytes free.
    #[cfg(test)]
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }

    /// Bytes managed.
    #[cfg(test)]
    pub fn capacity(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_reused() {
        let mut va = VaAllocator::new(0x1000, 0x100_0000, 4096);
        assert_eq!(va.alignment(), MIN_VA_ALIGNMENT);
        let (a, a_len) = va.allocate(1).unwrap();
        let (b, b_len) = va.allocate(100_000).unwrap();
        assert_eq!(a % MIN_VA_ALIGNMENT, 0);
        assert_eq!(a, 0x10000);
        assert_eq!(a_len, MIN_VA_ALIGNMENT);
        assert_eq!(b, a + a_len);
        assert_eq!(b_len, 2 * MIN_VA_ALIGNMENT);
        va.free(a, a_len);
        assert_eq!(va.allocate(10).unwrap().0, a, "freed space is reused");
        va.free(a, a_len);
        va.free(b, b_len);
        assert_eq!(va.free_bytes(), va.capacity(), "neighbours merge back into one range");
        let (c, _) = va.allocate(3 * MIN_VA_ALIGNMENT).unwrap();
        assert_eq!(c, a);
    }

    #[test]
    fn exhaustion_is_none_and_the_limit_holds() {
        let mut va = VaAllocator::new(0, 4 * MIN_VA_ALIGNMENT, 0);
        assert!(va.allocate(5 * MIN_VA_ALIGNMENT).is_none());
        assert!(va.allocate(4 * MIN_VA_ALIGNMENT).is_some());
        assert!(va.allocate(1).is_none());
        let va = VaAllocator::new(1 << 20, 1 << 47, 4096);
        assert_eq!(va.capacity(), VA_LIMIT - (1 << 20));
    }
}
