//! `Field`: a named bit range inside a 32-bit register or packet dword. A leaf that both the
//! register maps and the typed field builders use.

use crate::error::FieldError;

/// A bit range `hi:lo` (inclusive) inside a 32-bit register or packet dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Field name as hardware documentation spells it.
    pub name: &'static str,
    /// Lowest bit.
    pub lo: u8,
    /// Highest bit (inclusive).
    pub hi: u8,
}

impl Field {
    /// A field covering bits `hi:lo`.
    pub const fn new(name: &'static str, lo: u8, hi: u8) -> Field {
        Field { name, lo, hi }
    }

    /// Width in bits.
    pub const fn width(self) -> u32 {
        (self.hi - self.lo + 1) as u32
    }

    /// The largest value the field holds.
    pub const fn max(self) -> u32 {
        if self.width() >= 32 {
            u32::MAX
        } else {
            (1u32 << self.width()) - 1
        }
    }

    /// The field's bits in place inside the register.
    pub const fn mask(self) -> u32 {
        self.max() << self.lo
    }

    /// Extracts the field from a register value.
    pub const fn get(self, reg: u32) -> u32 {
        (reg >> self.lo) & self.max()
    }

    /// Replaces the field inside a register value, rejecting values that do not fit.
    pub const fn set(self, reg: u32, value: u32) -> Result<u32, FieldError> {
        if value > self.max() {
            return Err(FieldError { field: self.name, value: value as u64, bits: self.width() });
        }
        Ok((reg & !self.mask()) | (value << self.lo))
    }
}
