//! The state of one wave (32 or 64 lanes): scalar and vector register files, SCC, PC, MODE,
//! and its status. Lane masks (EXEC, VCC, compare results) are u64; a wave32 uses the low 32
//! bits and the low SGPR of each pair.

use std::cell::Cell;

use pm4::Gfx;

use super::error::{ExecResult, Fault};
use super::operand::{Src, EXEC_HI, EXEC_LO, NULL, VCC_LO};
use super::private::PrivateLane;

/// Lanes of the widest wave (wave64); every per-lane array has this many entries, a wave32
/// uses the first 32.
pub const LANES: usize = 64;
/// Architectural VGPRs (v0..v255) plus slack so that a register range starting near v255 cannot
/// index past the file; reads there return zeros.
const VGPR_ROWS: usize = 256 + 16;
/// Addressable SGPRs s0..s105.
pub const SGPRS: usize = 106;

/// Where a wave is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaveStatus {
    /// Executing.
    Running,
    /// Waiting at `s_barrier` for the other waves of the workgroup.
    AtBarrier,
    /// Past `s_endpgm`.
    Ended,
}

/// One wave. `sgpr` is indexed by the operand encoding (0..=127: s0..s105, VCC, TTMP, NULL, M0,
/// EXEC), so operand fields index it directly.
#[derive(Clone)]
pub struct Wave {
    /// Scalar registers by operand encoding.
    pub sgpr: [u32; 128],
    /// Vector registers, one value per lane.
    pub vgpr: Vec<[u32; LANES]>,
    /// The scalar condition code.
    pub scc: bool,
    /// Address of the next instruction.
    pub pc: u64,
    /// The MODE hardware register as `s_getreg` reads it.
    pub mode: u32,
    /// Running, at a barrier or ended.
    pub status: WaveStatus,
    /// Index of this wave within its workgroup.
    pub wave_id: u32,
    /// 32 or 64 lanes.
    pub width: u32,
    /// GPU address of this wave's scratch slot (FLAT_SCRATCH); its lane `l` owns the
    /// `lane_scratch_bytes` from `scratch_base + l * lane_scratch_bytes`.
    pub scratch_base: u64,
    /// Private segment bytes of each lane; 0 without scratch, and any private access faults.
    pub lane_scratch_bytes: u32,
    /// The generation whose ISA the wave runs (a few results differ between them).
    pub gfx: Gfx,
    /// gfx10.3: FLAT_SCRATCH as the kernel set it (`s_setreg` of FLAT_SCR_LO/HI), the base its
    /// private-aperture FLAT accesses are swizzled from.
    pub flat_scratch: u64,
    /// The selected sources of the SDWA instruction being executed.
    pub(crate) sdwa_latch: [[u32; LANES]; 2],
    /// The modifiers the VALU instruction being executed applied (see `modifiers`).
    pub(crate) handled: Cell<u16>,
}

impl std::fmt::Debug for Wave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wave")
            .field("pc", &format_args!("{:#x}", self.pc))
            .field("exec", &format_args!("{:#010x}", self.exec()))
            .field("status", &self.status)
            .field("wave_id", &self.wave_id)
            .finish_non_exhaustive()
    }
}

impl Wave {
    /// A wave32 about to run the instruction at `pc`, registers zero.
    pub fn new(pc: u64) -> Wave {
        Wave {
            sgpr: [0; 128],
            vgpr: vec![[0; LANES]; VGPR_ROWS],
            scc: false,
            pc,
            mode: 0,
            status: WaveStatus::Running,
            wave_id: 0,
            width: 32,
            scratch_base: 0,
            lane_scratch_bytes: 0,
            gfx: Gfx::Gfx11,
            flat_scratch: 0,
            sdwa_latch: [[0; LANES]; 2],
            handled: Cell::new(0),
        }
    }

    /// A wave of `width` (32 or 64) lanes starting at `pc`.
    pub fn with_width(pc: u64, width: u32) -> Wave {
        Wave { width, ..Wave::new(pc) }
    }

    /// Marks modifiers (`modifiers` bits) of the instruction being executed as applied.
    pub(crate) fn handle(&self, bits: u16) {
        self.handled.set(self.handled.get() | bits);
    }

    /// Whether MODE.DX10_CLAMP is set (clamp turns a NaN into 0).
    pub(crate) fn dx10_clamp(&self) -> bool {
        self.mode >> 8 & 1 != 0
    }

    /// Lanes of this wave.
    pub fn lanes(&self) -> usize {
        self.width as usize
    }

    /// Where lane `lane`'s private segment is for FLAT and SCRATCH accesses: its slice of the
    /// wave's slot on gfx11, dword-interleaved from FLAT_SCRATCH on gfx10.3.
    pub(crate) fn private_lane(&self, lane: usize) -> PrivateLane {
        match self.gfx {
            Gfx::Gfx11 => PrivateLane {
                base: self.scratch_base + lane as u64 * u64::from(self.lane_scratch_bytes),
                bytes: self.lane_scratch_bytes,
                swizzle: None,
            },
            Gfx::Gfx10_3 => PrivateLane {
                base: self.flat_scratch,
                bytes: self.lane_scratch_bytes,
                swizzle: Some((lane as u32, self.width)),
            },
        }
    }

    fn pair(&self, lo: u8) -> u64 {
        let low = self.sgpr[lo as usize] as u64;
        if self.width == 64 {
            low | (self.sgpr[lo as usize + 1] as u64) << 32
        } else {
            low
        }
    }

    /// The EXEC lane mask.
    pub fn exec(&self) -> u64 {
        self.pair(EXEC_LO)
    }

    /// Sets EXEC; a wave32 keeps EXEC_HI zero.
    pub fn set_exec(&mut self, v: u64) {
        self.sgpr[EXEC_LO as usize] = v as u32;
        self.sgpr[EXEC_HI as usize] = if self.width == 64 { (v >> 32) as u32 } else { 0 };
    }

    /// The VCC lane mask.
    pub fn vcc(&self) -> u64 {
        self.pair(VCC_LO)
    }

    /// A lane mask from a scalar source: one SGPR in wave32, a pair in wave64.
    pub(crate) fn lane_mask(&self, s: &Src) -> ExecResult<u64> {
        if self.width == 64 {
            self.scalar64(s, false)
        } else {
            Ok(self.scalar32(s)? as u64)
        }
    }

    /// Writes a lane mask to a scalar destination: one SGPR in wave32, a pair in wave64.
    pub(crate) fn write_mask(&mut self, sdst: u8, m: u64) -> ExecResult {
        match (self.width, sdst) {
            (64, EXEC_LO) => {
                self.set_exec(m);
                Ok(())
            }
            (64, _) => self.write_sgpr64(sdst, m),
            _ => self.write_sgpr(sdst, m as u32),
        }
    }

    /// Writes a scalar register; writes to NULL are discarded.
    pub(crate) fn write_sgpr(&mut self, idx: u8, v: u32) -> ExecResult {
        match idx {
            NULL => Ok(()),
            i if (i as usize) < self.sgpr.len() => {
                self.sgpr[i as usize] = v;
                Ok(())
            }
            i => Err(Fault::unsupported(format!("write to scalar register field {i}"))),
        }
    }

    pub(crate) fn write_sgpr64(&mut self, idx: u8, v: u64) -> ExecResult {
        if idx == NULL {
            return Ok(());
        }
        if idx % 2 != 0 || idx as usize + 1 >= self.sgpr.len() {
            return Err(Fault::unsupported(format!(
                "64-bit scalar destination at odd or invalid register {idx}"
            )));
        }
        self.write_sgpr(idx, v as u32)?;
        self.write_sgpr(idx + 1, (v >> 32) as u32)
    }

    /// Scalar register `idx` (operand encoding); 0 past the end.
    pub fn read_sgpr(&self, idx: u8) -> u32 {
        self.sgpr.get(idx as usize).copied().unwrap_or(0)
    }

    /// The scalar register pair starting at `idx`.
    pub fn read_sgpr64(&self, idx: u8) -> u64 {
        self.read_sgpr(idx) as u64 | (self.read_sgpr(idx.wrapping_add(1)) as u64) << 32
    }

    /// A scalar (uniform) 32-bit source value.
    pub(crate) fn scalar32(&self, s: &Src) -> ExecResult<u32> {
        match *s {
            Src::Sgpr(i) => Ok(self.read_sgpr(i)),
            Src::Scc => Ok(self.scc as u32),
            Src::Vccz => Ok((self.vcc() == 0) as u32),
            Src::Execz => Ok((self.exec() == 0) as u32),
            Src::Vgpr(v) => Err(Fault::unsupported(format!("VGPR v{v} used as a scalar operand"))),
            Src::SdwaLatch(_) => Err(Fault::unsupported("an SDWA source used as a scalar operand")),
            Src::Unsupported(f) => Err(unsupported_src(f)),
            // A 32-bit read of an aperture gives its high half (the low half is zero).
            Src::Aperture(a) => Ok((a.value() >> 32) as u32),
            c => Ok(c.const32().unwrap_or(0)),
        }
    }

    /// A scalar 64-bit source value (register pair or constant).
    pub(crate) fn scalar64(&self, s: &Src, float: bool) -> ExecResult<u64> {
        match *s {
            Src::Sgpr(i) => Ok(self.read_sgpr64(i)),
            Src::Scc | Src::Vccz | Src::Execz => Ok(self.scalar32(s)? as u64),
            Src::Vgpr(v) => Err(Fault::unsupported(format!("VGPR v{v} used as a scalar operand"))),
            Src::SdwaLatch(_) => Err(Fault::unsupported("an SDWA source used as a 64-bit operand")),
            Src::Unsupported(f) => Err(unsupported_src(f)),
            Src::Aperture(a) => Ok(a.value()),
            c => Ok(c.const64(float).unwrap_or(0)),
        }
    }

    /// A 32-bit vector source: the per-lane values (scalars broadcast).
    pub(crate) fn src32(&self, s: &Src) -> ExecResult<[u32; LANES]> {
        match *s {
            Src::Vgpr(v) => Ok(self.vgpr[v as usize]),
            Src::SdwaLatch(i) => Ok(self.sdwa_latch[usize::from(i & 1)]),
            _ => Ok([self.scalar32(s)?; LANES]),
        }
    }

    /// A 16-bit vector source (low half; float constants are halves).
    pub(crate) fn src16(&self, s: &Src) -> ExecResult<[u32; LANES]> {
        match *s {
            Src::Int(_) | Src::Float(_) | Src::Literal(_) => Ok([s.const16().unwrap_or(0); LANES]),
            _ => self.src32(s),
        }
    }

    /// A 64-bit vector source: a VGPR pair, an SGPR pair or a constant.
    pub(crate) fn src64(&self, s: &Src, float: bool) -> ExecResult<[u64; LANES]> {
        match *s {
            Src::Vgpr(v) => {
                let lo = &self.vgpr[v as usize];
                let hi = &self.vgpr[v as usize + 1];
                Ok(std::array::from_fn(|l| lo[l] as u64 | (hi[l] as u64) << 32))
            }
            _ => Ok([self.scalar64(s, float)?; LANES]),
        }
    }

    /// Writes `vals` to a VGPR for the lanes set in `mask`.
    pub fn write_vgpr(&mut self, v: usize, vals: &[u32; LANES], mask: u64) {
        let row = &mut self.vgpr[v];
        for (l, out) in row.iter_mut().enumerate() {
            if mask >> l & 1 != 0 {
                *out = vals[l];
            }
        }
    }

    /// Writes 64-bit `vals` to the vector register pair from `v`, in the lanes of `mask`.
    pub fn write_vgpr64(&mut self, v: usize, vals: &[u64; LANES], mask: u64) {
        let lo: [u32; LANES] = std::array::from_fn(|l| vals[l] as u32);
        let hi: [u32; LANES] = std::array::from_fn(|l| (vals[l] >> 32) as u32);
        self.write_vgpr(v, &lo, mask);
        self.write_vgpr(v + 1, &hi, mask);
    }
}

pub(crate) fn unsupported_src(field: u16) -> Fault {
    let what = match field {
        233 => "DPP8",
        250 => "DPP16",
        239 => "POPS_EXITING_WAVE_ID",
        254 => "LDS_DIRECT",
        _ => "a reserved operand",
    };
    Fault::unsupported(format!("source operand {field} ({what}) is not modelled"))
}
