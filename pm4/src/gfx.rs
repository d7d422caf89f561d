//! The GPU generations this crate knows, and parsing of LLVM target names into them.

use core::fmt;
use core::str::FromStr;

use crate::error::ParseGfxError;

/// A GPU generation whose compute register map this crate carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gfx {
    /// RDNA2: gfx1030 ..= gfx1036.
    Gfx10_3,
    /// RDNA3: gfx1100 ..= gfx1103.
    Gfx11,
}

impl Gfx {
    /// Every generation, for tests and tools that iterate over them.
    pub const ALL: [Gfx; 2] = [Gfx::Gfx10_3, Gfx::Gfx11];

    /// A short, stable name of the generation.
    pub const fn name(self) -> &'static str {
        match self {
            Gfx::Gfx10_3 => "gfx10.3",
            Gfx::Gfx11 => "gfx11",
        }
    }
}

impl fmt::Display for Gfx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Gfx {
    type Err = ParseGfxError;

    /// Accepts LLVM processor names (`gfx1030`..`gfx1036`, `gfx1100`..`gfx1103`, any case) and the
    /// generation names `gfx10.3` and `gfx11`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "gfx10.3" | "gfx1030" | "gfx1031" | "gfx1032" | "gfx1033" | "gfx1034" | "gfx1035" | "gfx1036" => {
                Ok(Gfx::Gfx10_3)
            }
            "gfx11" | "gfx1100" | "gfx1101" | "gfx1102" | "gfx1103" => Ok(Gfx::Gfx11),
            _ => Err(ParseGfxError(s.to_owned())),
        }
    }
}
