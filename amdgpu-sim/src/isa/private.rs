//! Where a lane's private segment (scratch) lives in memory. On gfx11 the simulator gives each
//! lane a contiguous slice of its wave's slot (architected flat scratch: the layout is invisible
//! to kernels). On gfx10.3 kernels address scratch through a buffer descriptor they were handed,
//! so the layout is the hardware's: from the wave's base, dword `k` of lane `l` is at
//! `4 * (k * lanes + l)` (lanes interleaved by dword). FLAT accesses in the private aperture use
//! the same layout from FLAT_SCRATCH. Either way a lane reaching past its own bytes is a fault.

use super::error::{Access, MemoryFault};
use super::operand::PRIVATE_APERTURE_HI;

/// One lane's private segment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrivateLane {
    /// The wave's base (swizzled) or the lane's own base (contiguous).
    pub base: u64,
    /// Bytes the lane owns.
    pub bytes: u32,
    /// `Some((lane, lanes))` when lanes are interleaved by dword.
    pub swizzle: Option<(u32, u32)>,
}

impl PrivateLane {
    /// The pieces (GPU address, offset in the access, length) that `len` bytes from segment
    /// offset `offset` occupy, or the fault of an access past the lane's bytes.
    pub fn pieces(
        &self,
        offset: u64,
        len: usize,
        access: Access,
    ) -> Result<Vec<(u64, usize, usize)>, MemoryFault> {
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|e| e > u64::from(self.bytes)) {
            // The lane's view of the address: its offset in the private aperture, which the
            // fault message recognises ("past the work-item's private segment").
            let addr = u64::from(PRIVATE_APERTURE_HI) << 32 | offset.min(u64::from(u32::MAX));
            return Err(MemoryFault { addr, access });
        }
        let Some((_, _)) = self.swizzle else {
            return Ok(vec![(self.base + offset, 0, len)]);
        };
        let mut out = Vec::new();
        let mut at = 0usize;
        while at < len {
            let o = offset + at as u64;
            let n = (4 - (o % 4) as usize).min(len - at);
            out.push((self.address(o), at, n));
            at += n;
        }
        Ok(out)
    }

    fn address(&self, offset: u64) -> u64 {
        match self.swizzle {
            None => self.base.wrapping_add(offset),
            Some((lane, lanes)) => {
                self.base.wrapping_add((offset / 4) * 4 * u64::from(lanes) + u64::from(lane) * 4 + offset % 4)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzled_lanes_interleave_by_dword() {
        let lane = PrivateLane { base: 0x1000, bytes: 16, swizzle: Some((3, 32)) };
        assert_eq!(lane.pieces(0, 4, Access::Read).unwrap(), vec![(0x1000 + 12, 0, 4)]);
        // dword 1 of lane 3: one row of 32 lanes further.
        assert_eq!(lane.pieces(4, 4, Access::Read).unwrap(), vec![(0x1000 + 128 + 12, 0, 4)]);
        // 8 bytes from offset 2: split at each dword boundary.
        assert_eq!(
            lane.pieces(2, 8, Access::Read).unwrap(),
            vec![(0x1000 + 14, 0, 2), (0x1000 + 128 + 12, 2, 4), (0x1000 + 256 + 12, 6, 2)]
        );
        assert!(lane.pieces(12, 8, Access::Write).is_err());
        assert!(lane.pieces(u64::MAX, 1, Access::Write).is_err());
    }

    #[test]
    fn contiguous_lanes_are_one_piece() {
        let lane = PrivateLane { base: 0x2000, bytes: 64, swizzle: None };
        assert_eq!(lane.pieces(8, 16, Access::Write).unwrap(), vec![(0x2008, 0, 16)]);
        assert!(lane.pieces(60, 8, Access::Read).is_err());
    }
}
