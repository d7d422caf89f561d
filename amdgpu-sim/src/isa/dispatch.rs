//! A compute dispatch as the hardware sees it (program address, PGM_RSRC1/2/3, user data, group
//! size and count) and the initial state of each wave (LLVM AMDGPUUsage, "Initial Kernel
//! Execution State", gfx11): user SGPRs, then workgroup ids as enabled, packed work-item ids in
//! VGPR0, EXEC for the lanes that exist.

use pm4::fields::TmpringSize;
use pm4::Gfx;

use super::error::SimError;
use super::wave::{Wave, LANES};

/// LDS_SIZE in COMPUTE_PGM_RSRC2 counts 512-byte granules on gfx11.
pub const LDS_GRANULE_BYTES: u32 = 512;
/// The most LDS one workgroup can address.
pub const MAX_LDS_BYTES: u32 = 64 * 1024;
/// Default instruction budget per dispatch (wave instructions), about a few seconds of simulation.
pub const DEFAULT_BUDGET: u64 = 2_000_000_000;

/// Everything the dispatcher hands to the waves of one DISPATCH_DIRECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    /// For error messages ("GPU page fault ... in kernel K").
    pub kernel_name: String,
    /// The generation whose ISA the code is.
    pub gfx: Gfx,
    /// Code entry address: (COMPUTE_PGM_HI << 32 | COMPUTE_PGM_LO) << 8.
    pub code_address: u64,
    /// COMPUTE_PGM_RSRC1 as written by the driver.
    pub rsrc1: u32,
    /// COMPUTE_PGM_RSRC2 as written by the driver, including LDS_SIZE.
    pub rsrc2: u32,
    /// COMPUTE_PGM_RSRC3 as written by the driver.
    pub rsrc3: u32,
    /// COMPUTE_USER_DATA_0.. ; at least RSRC2.USER_SGPR entries.
    pub user_data: Vec<u32>,
    /// COMPUTE_NUM_THREAD_X/Y/Z.
    pub workgroup_size: [u32; 3],
    /// DISPATCH_DIRECT dimensions, in workgroups.
    pub grid_workgroups: [u32; 3],
    /// DISPATCH_INITIATOR.CS_W32_EN: wave32, else wave64.
    pub wave32: bool,
    /// Wave instructions the whole dispatch may execute before it counts as hung.
    pub instruction_budget: u64,
    /// The scratch ring its waves' private segments live in (read when RSRC2.SCRATCH_EN).
    pub scratch: ScratchRing,
}

/// The scratch ring: COMPUTE_TMPRING_SIZE (WAVES slots of WAVESIZE × 256 bytes on gfx11, × 1 KiB
/// on gfx10.3) and, for gfx11's architected flat scratch, COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI
/// (address >> 8). Each wave gets one slot. On gfx11 each of its lanes gets a contiguous slice
/// of the slot (the hardware interleaves lanes by dword, which no kernel can observe there); on
/// gfx10.3 the kernel finds the ring through the descriptors it was handed and addresses the
/// interleaved layout itself, and the wave learns its slot's byte offset in a system SGPR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScratchRing {
    /// GPU address of slot 0.
    pub base: u64,
    /// COMPUTE_TMPRING_SIZE as written.
    pub tmpring_size: u32,
}

impl ScratchRing {
    /// No scratch.
    pub const NONE: ScratchRing = ScratchRing { base: 0, tmpring_size: 0 };

    /// Wave slots (TMPRING_SIZE.WAVES).
    pub fn waves(&self) -> u32 {
        self.tmpring_size & 0xfff
    }

    /// Bytes per wave slot (TMPRING_SIZE.WAVESIZE: 256-byte units on gfx11, 1 KiB on gfx10.3).
    pub fn wave_bytes(&self, gfx: Gfx) -> u64 {
        let units = u64::from(TmpringSize::from_bits(gfx, self.tmpring_size).wavesize());
        match gfx {
            Gfx::Gfx11 => units * 256,
            Gfx::Gfx10_3 => units * 1024,
        }
    }
}

/// The fields of COMPUTE_PGM_RSRC1/2 the interpreter reads.
#[derive(Debug, Clone, Copy)]
struct Rsrc {
    round_mode: u32,
    denorm_mode: u32,
    dx10_clamp: bool,
    ieee: bool,
    scratch: bool,
    user_sgprs: u32,
    tgid: [bool; 3],
    tg_size: bool,
    tidig_comp_cnt: u32,
    lds_size: u32,
}

impl Rsrc {
    fn new(rsrc1: u32, rsrc2: u32) -> Rsrc {
        Rsrc {
            round_mode: (rsrc1 >> 12) & 0xf,
            denorm_mode: (rsrc1 >> 16) & 0xf,
            dx10_clamp: rsrc1 >> 21 & 1 != 0,
            ieee: rsrc1 >> 23 & 1 != 0,
            scratch: rsrc2 & 1 != 0,
            user_sgprs: (rsrc2 >> 1) & 0x1f,
            tgid: [rsrc2 >> 7 & 1 != 0, rsrc2 >> 8 & 1 != 0, rsrc2 >> 9 & 1 != 0],
            tg_size: rsrc2 >> 10 & 1 != 0,
            tidig_comp_cnt: (rsrc2 >> 11) & 3,
            lds_size: (rsrc2 >> 15) & 0x1ff,
        }
    }
}

/// gfx11 compute register byte addresses the dispatch reads (SET_SH_REG space).
pub mod regs {
    /// First workgroup index in X (dispatch offset).
    pub const COMPUTE_START_X: u32 = 0xB810;
    /// First workgroup index in Y.
    pub const COMPUTE_START_Y: u32 = 0xB814;
    /// First workgroup index in Z.
    pub const COMPUTE_START_Z: u32 = 0xB818;
    /// Workgroup size in X.
    pub const COMPUTE_NUM_THREAD_X: u32 = 0xB81C;
    /// Workgroup size in Y.
    pub const COMPUTE_NUM_THREAD_Y: u32 = 0xB820;
    /// Workgroup size in Z.
    pub const COMPUTE_NUM_THREAD_Z: u32 = 0xB824;
    /// Code address bits 8..40.
    pub const COMPUTE_PGM_LO: u32 = 0xB830;
    /// Code address bits 40..48.
    pub const COMPUTE_PGM_HI: u32 = 0xB834;
    /// Register counts, float mode, IEEE and DX10 clamp.
    pub const COMPUTE_PGM_RSRC1: u32 = 0xB848;
    /// User SGPRs, system SGPRs and VGPRs enabled, LDS size, scratch enable.
    pub const COMPUTE_PGM_RSRC2: u32 = 0xB84C;
    /// Shared VGPRs and the like (gfx10+).
    pub const COMPUTE_PGM_RSRC3: u32 = 0xB8A0;
    /// Scratch base address bits 8..40 (gfx11 architected flat scratch).
    pub const COMPUTE_DISPATCH_SCRATCH_BASE_LO: u32 = 0xB840;
    /// Scratch base address bits 40..48.
    pub const COMPUTE_DISPATCH_SCRATCH_BASE_HI: u32 = 0xB844;
    /// Scratch waves and bytes per wave.
    pub const COMPUTE_TMPRING_SIZE: u32 = 0xB860;
    /// The first user-data register (the kernel's initial user SGPRs).
    pub const COMPUTE_USER_DATA_0: u32 = 0xB900;
    /// COMPUTE_USER_DATA_0..15.
    pub const USER_DATA_COUNT: u32 = 16;
}

/// DISPATCH_INITIATOR bits the interpreter looks at.
const INITIATOR_COMPUTE_SHADER_EN: u32 = 1 << 0;
const INITIATOR_PARTIAL_TG_EN: u32 = 1 << 1;
const INITIATOR_FORCE_START_AT_000: u32 = 1 << 2;
const INITIATOR_USE_THREAD_DIMENSIONS: u32 = 1 << 5;
const INITIATOR_CS_W32_EN: u32 = 1 << 15;

impl Dispatch {
    /// Builds the dispatch a DISPATCH_DIRECT packet starts, from the compute registers as the
    /// command processor holds them (`reg(byte address)`), the packet's group counts and its
    /// DISPATCH_INITIATOR. Settings the interpreter does not model are refused, naming them.
    pub fn from_registers(
        kernel_name: &str,
        gfx: Gfx,
        reg: impl Fn(u32) -> u32,
        grid_workgroups: [u32; 3],
        initiator: u32,
        instruction_budget: u64,
    ) -> Result<Dispatch, SimError> {
        use regs::*;
        let refuse = |reason: String| SimError::InvalidDispatch { reason, kernel: kernel_name.to_string() };
        if initiator & INITIATOR_COMPUTE_SHADER_EN == 0 {
            return Err(refuse(format!(
                "DISPATCH_INITIATOR {initiator:#x} does not enable the compute shader (bit 0)"
            )));
        }
        if initiator & INITIATOR_PARTIAL_TG_EN != 0 {
            return Err(refuse(
                "DISPATCH_INITIATOR.PARTIAL_TG_EN: partial workgroups are not modelled".into(),
            ));
        }
        if initiator & INITIATOR_USE_THREAD_DIMENSIONS != 0 {
            return Err(refuse(
                "DISPATCH_INITIATOR.USE_THREAD_DIMENSIONS: only group counts are modelled".into(),
            ));
        }
        let start = [reg(COMPUTE_START_X), reg(COMPUTE_START_Y), reg(COMPUTE_START_Z)];
        if initiator & INITIATOR_FORCE_START_AT_000 == 0 && start != [0, 0, 0] {
            return Err(refuse(format!(
                "COMPUTE_START_X/Y/Z {start:?}: only dispatches starting at group 0 are modelled"
            )));
        }
        let code_address = ((reg(COMPUTE_PGM_HI) as u64) << 32 | reg(COMPUTE_PGM_LO) as u64) << 8;
        let threads =
            [COMPUTE_NUM_THREAD_X, COMPUTE_NUM_THREAD_Y, COMPUTE_NUM_THREAD_Z].map(|r| reg(r) & 0xffff);
        let d = Dispatch {
            kernel_name: kernel_name.to_string(),
            gfx,
            code_address,
            rsrc1: reg(COMPUTE_PGM_RSRC1),
            rsrc2: reg(COMPUTE_PGM_RSRC2),
            rsrc3: reg(COMPUTE_PGM_RSRC3),
            user_data: (0..USER_DATA_COUNT).map(|i| reg(COMPUTE_USER_DATA_0 + 4 * i)).collect(),
            workgroup_size: threads,
            grid_workgroups,
            wave32: initiator & INITIATOR_CS_W32_EN != 0,
            instruction_budget,
            scratch: ScratchRing {
                base: ((reg(COMPUTE_DISPATCH_SCRATCH_BASE_HI) as u64) << 32
                    | reg(COMPUTE_DISPATCH_SCRATCH_BASE_LO) as u64)
                    << 8,
                tmpring_size: reg(COMPUTE_TMPRING_SIZE),
            },
        };
        d.validate()?;
        Ok(d)
    }

    fn invalid(&self, reason: impl Into<String>) -> SimError {
        SimError::InvalidDispatch { reason: reason.into(), kernel: self.kernel_name.clone() }
    }

    /// LDS bytes per workgroup, from RSRC2.LDS_SIZE.
    pub fn lds_bytes(&self) -> u32 {
        Rsrc::new(self.rsrc1, self.rsrc2).lds_size * LDS_GRANULE_BYTES
    }

    /// Work-items per workgroup.
    pub fn threads_per_group(&self) -> u32 {
        self.workgroup_size.iter().product()
    }

    /// 32, or 64 when DISPATCH_INITIATOR.CS_W32_EN is clear.
    pub fn wave_lanes(&self) -> u32 {
        if self.wave32 {
            32
        } else {
            LANES as u32
        }
    }

    /// Waves per workgroup (the last may be partial).
    pub fn waves_per_group(&self) -> u32 {
        self.threads_per_group().div_ceil(self.wave_lanes())
    }

    /// Refuses what the interpreter does not model, naming the setting.
    pub fn validate(&self) -> Result<(), SimError> {
        let r = Rsrc::new(self.rsrc1, self.rsrc2);
        if r.round_mode != 0 {
            return Err(self.invalid(format!(
                "RSRC1 FLOAT_ROUND_MODE {:#x}: only round-to-nearest-even is modelled",
                r.round_mode
            )));
        }
        if r.denorm_mode != 0xf {
            return Err(self.invalid(format!(
                "RSRC1 FLOAT_DENORM_MODE {:#x}: only denormals preserved (0xf) is modelled",
                r.denorm_mode
            )));
        }
        if r.scratch {
            let ring = &self.scratch;
            // gfx10.3 has no scratch base register: kernels get the ring in their descriptors.
            if ring.wave_bytes(self.gfx) == 0 || (ring.base == 0 && self.gfx == Gfx::Gfx11) {
                return Err(self.invalid(format!(
                    "RSRC2 SCRATCH_EN without a scratch ring (COMPUTE_DISPATCH_SCRATCH_BASE {:#x}, \
                     COMPUTE_TMPRING_SIZE {:#x})",
                    ring.base, ring.tmpring_size
                )));
            }
            // Workgroups run one at a time here, so each wave of a group needs its own slot.
            if ring.waves() < self.waves_per_group() {
                return Err(self.invalid(format!(
                    "COMPUTE_TMPRING_SIZE.WAVES {} is fewer than the {} waves of one workgroup",
                    ring.waves(),
                    self.waves_per_group()
                )));
            }
        }
        if r.tg_size {
            return Err(self.invalid("RSRC2 TG_SIZE_EN: the workgroup-info SGPR is not modelled"));
        }
        if (self.user_data.len() as u32) < r.user_sgprs {
            return Err(self.invalid(format!(
                "RSRC2 asks for {} user SGPRs but only {} user data values were given",
                r.user_sgprs,
                self.user_data.len()
            )));
        }
        if r.tidig_comp_cnt == 3 {
            return Err(self.invalid("RSRC2 TIDIG_COMP_CNT 3 is reserved"));
        }
        let t = self.threads_per_group();
        if self.workgroup_size.contains(&0) || self.workgroup_size.iter().any(|&d| d > 1024) || t > 1024 {
            return Err(self.invalid(format!(
                "workgroup size {:?} (each 1..=1024, at most 1024 threads)",
                self.workgroup_size
            )));
        }
        if self.lds_bytes() > MAX_LDS_BYTES {
            return Err(self.invalid(format!(
                "RSRC2 LDS_SIZE asks for {} bytes, the most is {MAX_LDS_BYTES}",
                self.lds_bytes()
            )));
        }
        if self.code_address % 256 != 0 {
            return Err(
                self.invalid(format!("code address {:#x} is not 256-byte aligned", self.code_address))
            );
        }
        Ok(())
    }

    /// The MODE register value the waves start with.
    fn mode(&self) -> u32 {
        let r = Rsrc::new(self.rsrc1, self.rsrc2);
        r.round_mode | r.denorm_mode << 4 | (r.dx10_clamp as u32) << 8 | (r.ieee as u32) << 9
    }
}

/// The initial state of every wave of workgroup `group` (a pure function of the dispatch).
pub fn initial_waves(d: &Dispatch, group: [u32; 3]) -> Result<Vec<Wave>, SimError> {
    d.validate()?;
    let r = Rsrc::new(d.rsrc1, d.rsrc2);
    let [sx, sy, _] = d.workgroup_size;
    let threads = d.threads_per_group();
    let mut waves = Vec::with_capacity(d.waves_per_group() as usize);
    for wave_id in 0..d.waves_per_group() {
        let lanes = d.wave_lanes();
        let mut w = Wave::with_width(d.code_address, lanes);
        w.gfx = d.gfx;
        w.wave_id = wave_id;
        w.mode = d.mode();
        if r.scratch {
            // gfx11 FLAT_SCRATCH: this wave's slot of the ring.
            let slot = u64::from(wave_id) * d.scratch.wave_bytes(d.gfx);
            w.scratch_base = d.scratch.base + slot;
            w.lane_scratch_bytes = (d.scratch.wave_bytes(d.gfx) / u64::from(lanes)) as u32;
        }
        let mut s = 0usize;
        for &v in d.user_data.iter().take(r.user_sgprs as usize) {
            w.sgpr[s] = v;
            s += 1;
        }
        for (dim, enabled) in r.tgid.iter().enumerate() {
            if *enabled {
                w.sgpr[s] = group[dim];
                s += 1;
            }
        }
        if r.scratch && d.gfx == Gfx::Gfx10_3 {
            // The private segment wave byte offset: where this wave's slot starts in the ring.
            w.sgpr[s] = (u64::from(wave_id) * d.scratch.wave_bytes(d.gfx)) as u32;
        }
        let mut exec = 0u64;
        for lane in 0..lanes {
            let t = wave_id * lanes + lane;
            if t >= threads {
                break;
            }
            exec |= 1u64 << lane;
            let (x, y, z) = (t % sx, (t / sx) % sy, t / (sx * sy));
            let mut id = x;
            if r.tidig_comp_cnt >= 1 {
                id |= y << 10;
            }
            if r.tidig_comp_cnt >= 2 {
                id |= z << 20;
            }
            w.vgpr[0][lane as usize] = id;
        }
        w.set_exec(exec);
        waves.push(w);
    }
    Ok(waves)
}
