//! The type-3 packet header: its bit layout, encoding and decoding.
//!
//! Layout: bits 31:30 type (3), 29:16 count − 1 where count is the number of payload dwords,
//! 15:8 opcode, 1 shader type (1 = compute, used for compute packets on the graphics ring),
//! 0 predicate. A type-2 header (`0x8000_0000`) is a one-dword filler.

use crate::opcode::Opcode;

/// Largest payload one type-3 packet can carry (the count field holds `count - 1` in 14 bits).
pub const MAX_PAYLOAD: usize = 0x4000;

/// The type-2 filler dword.
pub const TYPE2_FILLER: u32 = 2 << 30;

/// A NOP header whose count field is all ones carries no payload at all.
pub const NOP_HEADER_ONLY: u32 = (3 << 30) | (0x3FFF << 16) | ((Opcode::Nop as u32) << 8);

/// A decoded (or to-be-encoded) type-3 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Raw opcode byte.
    pub opcode: u8,
    /// Number of payload dwords that follow the header.
    pub payload_len: usize,
    /// Shader-type bit: set for compute packets submitted on the graphics ring.
    pub compute: bool,
    /// Predicate bit: the packet obeys the current predication state.
    pub predicate: bool,
}

impl Header {
    /// Encodes the header. `payload_len` must be in `1..=MAX_PAYLOAD`; callers inside the crate
    /// guarantee that, so the count is masked rather than checked here.
    #[inline(always)]
    pub(crate) const fn encode_raw(opcode: u8, payload_len: usize, compute: bool) -> u32 {
        (3 << 30)
            | ((((payload_len as u32).wrapping_sub(1)) & 0x3FFF) << 16)
            | ((opcode as u32) << 8)
            | ((compute as u32) << 1)
    }

    /// Encodes this header into one dword, or `None` if the payload length cannot be expressed.
    pub fn encode(&self) -> Option<u32> {
        if self.payload_len == 0 || self.payload_len > MAX_PAYLOAD {
            return None;
        }
        Some(Self::encode_raw(self.opcode, self.payload_len, self.compute) | self.predicate as u32)
    }

    /// Decodes a type-3 header. Returns `None` if the type field is not 3.
    ///
    /// The header-only NOP form (count field 0x3FFF on a NOP) decodes to a payload length of 0.
    pub fn decode(word: u32) -> Option<Header> {
        if word >> 30 != 3 {
            return None;
        }
        let opcode = ((word >> 8) & 0xFF) as u8;
        let count_field = ((word >> 16) & 0x3FFF) as usize;
        let payload_len = if word == NOP_HEADER_ONLY || (opcode == Opcode::Nop as u8 && count_field == 0x3FFF)
        {
            0
        } else {
            count_field + 1
        };
        Some(Header { opcode, payload_len, compute: word & 2 != 0, predicate: word & 1 != 0 })
    }
}
