//! The complete packet sequence of one kernel launch, and the one-time queue preamble.
//!
//! Order: cache invalidate → code address → RSRC1/2 → RSRC3 → scratch ring → user data →
//! resource limits → workgroup origin and size → DISPATCH_DIRECT → partial flush → fence.

use crate::encoder::{PacketWriter, Sink};
use crate::error::EncodeError;
use crate::fields::{DispatchInitiator, PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
use crate::gfx::Gfx;
use crate::packets::{AcquireMem, DispatchDirect, EventWrite, GcrCntl, ReleaseMem};
use crate::registers::{self, gfx11};

/// Writes the per-queue preamble: enable every CU of every shader engine for compute. Without it a
/// directly-submitted dispatch may find no CU enabled.
pub fn write_preamble<S: Sink>(w: &mut PacketWriter<S>, gfx: Gfx) -> Result<(), EncodeError> {
    const ALL_CUS: [u32; 4] = [u32::MAX; 4];
    w.set_sh_reg(registers::COMPUTE_STATIC_THREAD_MGMT_SE0, &ALL_CUS[..2])?;
    w.set_sh_reg(registers::COMPUTE_STATIC_THREAD_MGMT_SE2, &ALL_CUS[..2])?;
    if gfx == Gfx::Gfx11 {
        w.set_sh_reg(gfx11::COMPUTE_STATIC_THREAD_MGMT_SE4, &ALL_CUS)?;
    }
    Ok(())
}

/// Everything one kernel launch needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeDispatch<'a> {
    /// Target generation.
    pub gfx: Gfx,
    /// GPU address of the kernel's first instruction (256-byte aligned).
    pub code_address: u64,
    /// COMPUTE_PGM_RSRC1 (with PRIV already set on gfx11).
    pub rsrc1: PgmRsrc1,
    /// COMPUTE_PGM_RSRC2 (with the LDS size).
    pub rsrc2: PgmRsrc2,
    /// COMPUTE_PGM_RSRC3.
    pub rsrc3: PgmRsrc3,
    /// COMPUTE_TMPRING_SIZE.
    pub tmpring: TmpringSize,
    /// Values for USER_DATA_0.. (at most 16): the user SGPRs the kernel descriptor asks for.
    pub user_data: &'a [u32],
    /// COMPUTE_RESOURCE_LIMITS.
    pub resource_limits: ResourceLimits,
    /// Workgroup size in threads.
    pub workgroup: [u32; 3],
    /// Grid size in workgroups.
    pub grid: [u32; 3],
    /// Launch wave32 waves.
    pub wave32: bool,
    /// Where to write the fence value once the dispatch has finished, and the value.
    pub fence: Option<(u64, u32)>,
}

impl ComputeDispatch<'_> {
    /// Appends the launch sequence.
    #[inline]
    pub fn write<S: Sink>(&self, w: &mut PacketWriter<S>) -> Result<(), EncodeError> {
        if self.code_address % 256 != 0 {
            return Err(EncodeError::Misaligned { addr: self.code_address, align: 256 });
        }
        let pgm = self.code_address >> 8;
        w.acquire_mem(&AcquireMem::full_range(GcrCntl::INVALIDATE_ALL))?;
        w.set_sh_reg(registers::COMPUTE_PGM_LO, &[pgm as u32, (pgm >> 32) as u32])?;
        w.set_sh_reg(registers::COMPUTE_PGM_RSRC1, &[self.rsrc1.bits(), self.rsrc2.bits()])?;
        w.set_sh_reg(registers::COMPUTE_PGM_RSRC3, &[self.rsrc3.bits()])?;
        w.set_sh_reg(registers::COMPUTE_TMPRING_SIZE, &[self.tmpring.bits()])?;
        if !self.user_data.is_empty() {
            w.set_sh_reg(registers::COMPUTE_USER_DATA_0, self.user_data)?;
        }
        w.set_sh_reg(registers::COMPUTE_RESOURCE_LIMITS, &[self.resource_limits.bits()])?;
        let [x, y, z] = self.workgroup;
        w.set_sh_reg(registers::COMPUTE_START_X, &[0, 0, 0, x, y, z])?;
        let [gx, gy, gz] = self.grid;
        w.dispatch_direct(&DispatchDirect {
            x: gx,
            y: gy,
            z: gz,
            initiator: DispatchInitiator::launch(self.wave32),
        })?;
        w.event_write(&EventWrite::CS_PARTIAL_FLUSH)?;
        if let Some((address, value)) = self.fence {
            w.release_mem(&ReleaseMem::fence32(address, value))?;
        }
        Ok(())
    }
}
