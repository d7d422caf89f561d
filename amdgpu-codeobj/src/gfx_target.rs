//! GPU identity facts: the LLVM processor (`gfx1100`, …) a code object is built for, the GC IP
//! version the kernel reports, how one maps to the other, how to derive it from the DEV_INFO
//! family and external revision on kernels that do not report the IP version, and the ELF
//! `e_flags` machine numbers. Which targets the backend supports is decided here.

use std::fmt;

use sparkle_amdgpu_kmd::uapi;

/// An LLVM AMDGPU processor: `gfx{major}{minor}{stepping}` with the minor and stepping as one hex
/// digit each (gfx1030 = 10.3.0, gfx90a = 9.0.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GfxTarget {
    /// Major version (10 in gfx1030).
    pub major: u32,
    /// Minor version (3 in gfx1030).
    pub minor: u32,
    /// Stepping (0 in gfx1030).
    pub stepping: u32,
}

impl GfxTarget {
    /// The target `gfx{major}{minor:x}{stepping:x}`.
    pub const fn new(major: u32, minor: u32, stepping: u32) -> Self {
        Self { major, minor, stepping }
    }

    /// Parses `gfx1100` (also `gfx1100:xnack-` style target ids: features after `:` are ignored).
    pub fn parse(name: &str) -> Option<Self> {
        let base = name.split(':').next()?;
        let digits = base.strip_prefix("gfx")?;
        if digits.len() < 3 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let (major, rest) = digits.split_at(digits.len() - 2);
        let mut rest = rest.chars();
        let minor = rest.next()?.to_digit(16)?;
        let stepping = rest.next()?.to_digit(16)?;
        Some(Self { major: major.parse().ok()?, minor, stepping })
    }

    /// The LLVM processor name, e.g. `gfx1100`.
    pub fn name(self) -> String {
        format!("gfx{}{:x}{:x}", self.major, self.minor, self.stepping)
    }

    /// Whether the backend runs code for this target: gfx10.3 (gfx1030–gfx1036) and
    /// gfx1100–gfx1103.
    pub fn is_supported(self) -> bool {
        matches!((self.major, self.minor, self.stepping), (10, 3, 0..=6) | (11, 0, 0..=3))
    }

    /// The supported targets, for messages.
    pub fn supported_list() -> &'static str {
        "gfx1030, gfx1031, gfx1032, gfx1033, gfx1034, gfx1035, gfx1036, gfx1100, gfx1101, gfx1102, gfx1103"
    }

    /// Native wave size of the target's compute kernels as LLVM builds them by default.
    pub fn default_wave_size(self) -> u32 {
        if self.major >= 10 {
            32
        } else {
            64
        }
    }

    /// `EF_AMDGPU_MACH_*` value of this target in a code object's `e_flags`, if known.
    pub fn elf_mach(self) -> Option<u32> {
        ELF_MACH.iter().find(|(_, t)| *t == self).map(|(m, _)| *m)
    }

    /// The target an `EF_AMDGPU_MACH_*` value names, if known.
    pub fn from_elf_mach(mach: u32) -> Option<Self> {
        ELF_MACH.iter().find(|(m, _)| *m == mach).map(|(_, t)| *t)
    }
}

impl fmt::Display for GfxTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// `EF_AMDGPU_MACH_AMDGCN_*` values for the RDNA targets (LLVM's ELF.h and AMDGPUUsage "AMDGPU
/// ELF Header"; checked against clang-22's output).
const ELF_MACH: &[(u32, GfxTarget)] = &[
    (0x033, GfxTarget::new(10, 1, 0)),
    (0x034, GfxTarget::new(10, 1, 1)),
    (0x035, GfxTarget::new(10, 1, 2)),
    (0x042, GfxTarget::new(10, 1, 3)),
    (0x036, GfxTarget::new(10, 3, 0)),
    (0x037, GfxTarget::new(10, 3, 1)),
    (0x038, GfxTarget::new(10, 3, 2)),
    (0x039, GfxTarget::new(10, 3, 3)),
    (0x03e, GfxTarget::new(10, 3, 4)),
    (0x03d, GfxTarget::new(10, 3, 5)),
    (0x045, GfxTarget::new(10, 3, 6)),
    (0x041, GfxTarget::new(11, 0, 0)),
    (0x046, GfxTarget::new(11, 0, 1)),
    (0x047, GfxTarget::new(11, 0, 2)),
    (0x044, GfxTarget::new(11, 0, 3)),
    (0x043, GfxTarget::new(11, 5, 0)),
    (0x04a, GfxTarget::new(11, 5, 1)),
    (0x048, GfxTarget::new(12, 0, 0)),
    (0x04e, GfxTarget::new(12, 0, 1)),
];

/// A GC (graphics core) IP version as the kernel's IP discovery reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GcVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Revision.
    pub revision: u32,
}

impl GcVersion {
    /// The GC IP version `major.minor.revision`.
    pub const fn new(major: u32, minor: u32, revision: u32) -> Self {
        Self { major, minor, revision }
    }

    /// Decodes `drm_amdgpu_info_hw_ip::ip_discovery_version` (bits 23:16, 15:8, 7:0); `None` for 0
    /// (kernels before 6.2 and pre-discovery chips leave it 0).
    pub fn from_ip_discovery(value: u32) -> Option<Self> {
        if value == 0 {
            return None;
        }
        Some(Self::new((value >> 16) & 0xff, (value >> 8) & 0xff, value & 0xff))
    }

    /// The LLVM processor that runs code for this GC version. GC revisions are not LLVM
    /// steppings: GC 10.3.2 (Navi22) is gfx1031, GC 11.0.3 (Navi32) is gfx1101, GC 11.0.1 and
    /// 11.0.4 (Phoenix) are gfx1103, GC 10.3.7 (Mendocino) runs gfx1036 code.
    pub fn llvm_target(self) -> Option<GfxTarget> {
        let (minor, stepping) = match (self.major, self.minor, self.revision) {
            (10, 1, 10) => (1, 0),
            (10, 1, 2) => (1, 1),
            (10, 1, 1) => (1, 2),
            (10, 1, 3) => (1, 3),
            (10, 3, 0) => (3, 0),
            (10, 3, 2) => (3, 1),
            (10, 3, 4) => (3, 2),
            (10, 3, 1) => (3, 3),
            (10, 3, 5) => (3, 4),
            (10, 3, 3) => (3, 5),
            (10, 3, 6) | (10, 3, 7) => (3, 6),
            (11, 0, 0) => (0, 0),
            (11, 0, 3) => (0, 1),
            (11, 0, 2) => (0, 2),
            (11, 0, 1) | (11, 0, 4) => (0, 3),
            (11, 5, 0) => (5, 0),
            (11, 5, 1) => (5, 1),
            (12, 0, 0) => (0, 0),
            (12, 0, 1) => (0, 1),
            _ => return None,
        };
        Some(GfxTarget::new(self.major, minor, stepping))
    }
}

impl fmt::Display for GcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.revision)
    }
}

/// The GC version of a chip from its DEV_INFO family and external revision, for kernels that do
/// not report `ip_discovery_version`. Ranges are the `[first, end)` external revisions of each
/// chip in AMD's public ASIC id tables (addrlib's `amdgpu_asic_addr.h`).
pub fn gc_from_family(family: u32, external_rev: u32) -> Option<GcVersion> {
    let r = external_rev;
    let gc = match family {
        uapi::AMDGPU_FAMILY_NV => match r {
            0x01..=0x09 => GcVersion::new(10, 1, 10), // Navi10
            0x0a..=0x13 => GcVersion::new(10, 1, 2),  // Navi12
            0x14..=0x27 => GcVersion::new(10, 1, 1),  // Navi14
            0x28..=0x31 => GcVersion::new(10, 3, 0),  // Navi21
            0x32..=0x3b => GcVersion::new(10, 3, 2),  // Navi22
            0x3c..=0x45 => GcVersion::new(10, 3, 4),  // Navi23
            0x46..=0x4f => GcVersion::new(10, 3, 5),  // Navi24
            _ => return None,
        },
        uapi::AMDGPU_FAMILY_VGH if (0x01..0xff).contains(&r) => GcVersion::new(10, 3, 1), // Van Gogh
        uapi::AMDGPU_FAMILY_YC if (0x01..0xff).contains(&r) => GcVersion::new(10, 3, 3),  // Rembrandt
        uapi::AMDGPU_FAMILY_GC_10_3_6 if (0x01..0xff).contains(&r) => GcVersion::new(10, 3, 6),
        uapi::AMDGPU_FAMILY_GC_10_3_7 if (0x01..0xff).contains(&r) => GcVersion::new(10, 3, 7),
        uapi::AMDGPU_FAMILY_GC_11_0_0 => match r {
            0x01..=0x0f => GcVersion::new(11, 0, 0), // Navi31
            0x10..=0x1f => GcVersion::new(11, 0, 2), // Navi33
            0x20..=0xfe => GcVersion::new(11, 0, 3), // Navi32
            _ => return None,
        },
        uapi::AMDGPU_FAMILY_GC_11_0_1 => match r {
            0x01..=0x7f => GcVersion::new(11, 0, 1), // Phoenix1
            0x80..=0xbf => GcVersion::new(11, 0, 4), // Phoenix2
            _ => return None,
        },
        _ => return None,
    };
    Some(gc)
}

/// A name for a DEV_INFO family number, for messages.
pub fn family_name(family: u32) -> &'static str {
    match family {
        uapi::AMDGPU_FAMILY_SI => "SI (gfx6)",
        uapi::AMDGPU_FAMILY_CI => "CI (gfx7)",
        uapi::AMDGPU_FAMILY_KV => "KV (gfx7 APU)",
        uapi::AMDGPU_FAMILY_VI => "VI (gfx8)",
        uapi::AMDGPU_FAMILY_CZ => "CZ (gfx8 APU)",
        uapi::AMDGPU_FAMILY_AI => "AI (gfx9)",
        uapi::AMDGPU_FAMILY_RV => "RV (gfx9 APU)",
        uapi::AMDGPU_FAMILY_NV => "NV (gfx10)",
        uapi::AMDGPU_FAMILY_VGH => "VGH (Van Gogh)",
        uapi::AMDGPU_FAMILY_GC_11_0_0 => "GC 11.0.0 (RDNA3)",
        uapi::AMDGPU_FAMILY_YC => "YC (Rembrandt)",
        uapi::AMDGPU_FAMILY_GC_11_0_1 => "GC 11.0.1 (Phoenix)",
        uapi::AMDGPU_FAMILY_GC_10_3_6 => "GC 10.3.6 (Raphael)",
        uapi::AMDGPU_FAMILY_GC_11_5_0 => "GC 11.5.0",
        uapi::AMDGPU_FAMILY_GC_10_3_7 => "GC 10.3.7 (Mendocino)",
        uapi::AMDGPU_FAMILY_GC_12_0_0 => "GC 12.0.0 (RDNA4)",
        _ => "unknown family",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (_, target) in ELF_MACH {
            assert_eq!(GfxTarget::parse(&target.name()), Some(*target));
        }
        assert_eq!(GfxTarget::parse("gfx1100").unwrap().name(), "gfx1100");
        assert_eq!(GfxTarget::parse("gfx90a"), Some(GfxTarget::new(9, 0, 10)));
        assert_eq!(GfxTarget::parse("gfx1030:xnack-"), Some(GfxTarget::new(10, 3, 0)));
        assert_eq!(GfxTarget::parse("gfx11"), None);
        assert_eq!(GfxTarget::parse("sm_90"), None);
    }

    #[test]
    fn elf_mach_table_matches_llvm() {
        assert_eq!(GfxTarget::from_elf_mach(0x41).unwrap().name(), "gfx1100");
        assert_eq!(GfxTarget::from_elf_mach(0x36).unwrap().name(), "gfx1030");
        assert_eq!(GfxTarget::parse("gfx1101").unwrap().elf_mach(), Some(0x46));
        assert_eq!(GfxTarget::parse("gfx1102").unwrap().elf_mach(), Some(0x47));
        assert_eq!(GfxTarget::from_elf_mach(0x999), None);
    }

    #[test]
    fn supported_targets_are_gfx103x_and_gfx110x() {
        let supported: Vec<String> =
            ELF_MACH.iter().map(|(_, t)| *t).filter(|t| t.is_supported()).map(|t| t.name()).collect();
        assert_eq!(supported.join(", "), GfxTarget::supported_list());
    }

    #[test]
    fn ip_discovery_version_decodes_and_maps_to_llvm() {
        let gc = GcVersion::from_ip_discovery(0x000b_0003).unwrap();
        assert_eq!(gc, GcVersion::new(11, 0, 3));
        assert_eq!(gc.llvm_target().unwrap().name(), "gfx1101");
        assert_eq!(GcVersion::from_ip_discovery(0), None);
        let cases = [
            ((10, 3, 0), "gfx1030"),
            ((10, 3, 2), "gfx1031"),
            ((10, 3, 4), "gfx1032"),
            ((10, 3, 1), "gfx1033"),
            ((10, 3, 5), "gfx1034"),
            ((10, 3, 3), "gfx1035"),
            ((10, 3, 6), "gfx1036"),
            ((10, 3, 7), "gfx1036"),
            ((11, 0, 0), "gfx1100"),
            ((11, 0, 2), "gfx1102"),
            ((11, 0, 1), "gfx1103"),
            ((11, 0, 4), "gfx1103"),
        ];
        for ((a, b, c), name) in cases {
            assert_eq!(GcVersion::new(a, b, c).llvm_target().unwrap().name(), name, "GC {a}.{b}.{c}");
        }
        let navi10 = GcVersion::new(10, 1, 10).llvm_target().unwrap();
        assert_eq!(navi10.name(), "gfx1010");
        assert!(!navi10.is_supported());
        assert_eq!(GcVersion::new(9, 4, 2).llvm_target(), None);
    }

    #[test]
    fn family_and_external_revision_give_the_gc_version() {
        // Kernel: external_rev = pci rev + chip offset (Navi21 +0x28, Navi31 +0x1, Navi33 +0x10,
        // Navi32 +0x20).
        let cases = [
            (uapi::AMDGPU_FAMILY_NV, 0x28, "gfx1030"),
            (uapi::AMDGPU_FAMILY_NV, 0x32, "gfx1031"),
            (uapi::AMDGPU_FAMILY_NV, 0x3c, "gfx1032"),
            (uapi::AMDGPU_FAMILY_NV, 0x46, "gfx1034"),
            (uapi::AMDGPU_FAMILY_VGH, 0x01, "gfx1033"),
            (uapi::AMDGPU_FAMILY_YC, 0x01, "gfx1035"),
            (uapi::AMDGPU_FAMILY_GC_10_3_6, 0x01, "gfx1036"),
            (uapi::AMDGPU_FAMILY_GC_10_3_7, 0x01, "gfx1036"),
            (uapi::AMDGPU_FAMILY_GC_11_0_0, 0x01, "gfx1100"),
            (uapi::AMDGPU_FAMILY_GC_11_0_0, 0x10, "gfx1102"),
            (uapi::AMDGPU_FAMILY_GC_11_0_0, 0x20, "gfx1101"),
            (uapi::AMDGPU_FAMILY_GC_11_0_1, 0x01, "gfx1103"),
            (uapi::AMDGPU_FAMILY_GC_11_0_1, 0x80, "gfx1103"),
        ];
        for (family, rev, name) in cases {
            let target = gc_from_family(family, rev).and_then(GcVersion::llvm_target).unwrap();
            assert_eq!(target.name(), name, "family {family} rev {rev:#x}");
            assert!(target.is_supported());
        }
        let navi10 = gc_from_family(uapi::AMDGPU_FAMILY_NV, 0x01).unwrap();
        assert_eq!(navi10, GcVersion::new(10, 1, 10));
        assert_eq!(gc_from_family(uapi::AMDGPU_FAMILY_AI, 0x01), None);
        assert_eq!(gc_from_family(uapi::AMDGPU_FAMILY_NV, 0x00), None);
        assert_eq!(gc_from_family(uapi::AMDGPU_FAMILY_NV, 0x50), None);
    }
}
