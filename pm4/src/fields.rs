//! Field layouts of the compute registers the backend sets, and typed builders for them.
//!
//! The layout constants are the single source of truth: the register tables use them for decoding
//! and the builders use them for encoding. Where a layout differs between generations, the
//! generation-specific variant is named with a `GFX10_3` or `GFX11` suffix.

use crate::error::FieldError;
use crate::field::Field;
use crate::gfx::Gfx;

/// COMPUTE_PGM_RSRC1 layout (same on gfx10.3 and gfx11).
pub mod rsrc1 {
    use super::Field;
    /// VGPR blocks − 1.
    pub const VGPRS: Field = Field::new("VGPRS", 0, 5);
    /// SGPR blocks − 1 (ignored on gfx10+, where SGPRs are fixed).
    pub const SGPRS: Field = Field::new("SGPRS", 6, 9);
    /// Wave priority.
    pub const PRIORITY: Field = Field::new("PRIORITY", 10, 11);
    /// Round and denormal modes.
    pub const FLOAT_MODE: Field = Field::new("FLOAT_MODE", 12, 19);
    /// Privileged mode; set on gfx11 so that compute wave save/restore works.
    pub const PRIV: Field = Field::new("PRIV", 20, 20);
    /// DX10 clamp mode.
    pub const DX10_CLAMP: Field = Field::new("DX10_CLAMP", 21, 21);
    /// IEEE mode.
    pub const IEEE_MODE: Field = Field::new("IEEE_MODE", 23, 23);
    /// Bulky wave.
    pub const BULKY: Field = Field::new("BULKY", 24, 24);
    /// FP16 overflow behaviour.
    pub const FP16_OVFL: Field = Field::new("FP16_OVFL", 26, 26);
    /// Workgroup-processor mode (as opposed to CU mode).
    pub const WGP_MODE: Field = Field::new("WGP_MODE", 29, 29);
    /// Memory operations return in order.
    pub const MEM_ORDERED: Field = Field::new("MEM_ORDERED", 30, 30);
    /// Forward-progress guarantee.
    pub const FWD_PROGRESS: Field = Field::new("FWD_PROGRESS", 31, 31);
    /// Every field, low to high.
    pub const ALL: &[Field] = &[
        VGPRS,
        SGPRS,
        PRIORITY,
        FLOAT_MODE,
        PRIV,
        DX10_CLAMP,
        IEEE_MODE,
        BULKY,
        FP16_OVFL,
        WGP_MODE,
        MEM_ORDERED,
        FWD_PROGRESS,
    ];
}

/// COMPUTE_PGM_RSRC2 layout (same on gfx10.3 and gfx11).
pub mod rsrc2 {
    use super::Field;
    /// Scratch (private segment) enable.
    pub const SCRATCH_EN: Field = Field::new("SCRATCH_EN", 0, 0);
    /// Number of user SGPRs preloaded from USER_DATA_*.
    pub const USER_SGPR: Field = Field::new("USER_SGPR", 1, 5);
    /// Trap handler present.
    pub const TRAP_PRESENT: Field = Field::new("TRAP_PRESENT", 6, 6);
    /// Workgroup id X in an SGPR.
    pub const TGID_X_EN: Field = Field::new("TGID_X_EN", 7, 7);
    /// Workgroup id Y in an SGPR.
    pub const TGID_Y_EN: Field = Field::new("TGID_Y_EN", 8, 8);
    /// Workgroup id Z in an SGPR.
    pub const TGID_Z_EN: Field = Field::new("TGID_Z_EN", 9, 9);
    /// Workgroup size information in an SGPR.
    pub const TG_SIZE_EN: Field = Field::new("TG_SIZE_EN", 10, 10);
    /// How many thread-id VGPRs are loaded (0 = X, 1 = XY, 2 = XYZ).
    pub const TIDIG_COMP_CNT: Field = Field::new("TIDIG_COMP_CNT", 11, 12);
    /// Exception enables, high bits.
    pub const EXCP_EN_MSB: Field = Field::new("EXCP_EN_MSB", 13, 14);
    /// LDS allocation in 512-byte granules.
    pub const LDS_SIZE: Field = Field::new("LDS_SIZE", 15, 23);
    /// Exception enables.
    pub const EXCP_EN: Field = Field::new("EXCP_EN", 24, 30);
    /// Every field, low to high.
    pub const ALL: &[Field] = &[
        SCRATCH_EN,
        USER_SGPR,
        TRAP_PRESENT,
        TGID_X_EN,
        TGID_Y_EN,
        TGID_Z_EN,
        TG_SIZE_EN,
        TIDIG_COMP_CNT,
        EXCP_EN_MSB,
        LDS_SIZE,
        EXCP_EN,
    ];
}

/// COMPUTE_PGM_RSRC3 layout. gfx10.3 defines only SHARED_VGPR_CNT; gfx11 adds the rest.
pub mod rsrc3 {
    use super::Field;
    /// Shared VGPR blocks (wave64 only).
    pub const SHARED_VGPR_CNT: Field = Field::new("SHARED_VGPR_CNT", 0, 3);
    /// Instruction prefetch size in 128-byte lines (gfx11).
    pub const INST_PREF_SIZE: Field = Field::new("INST_PREF_SIZE", 4, 9);
    /// Trap on wave start (gfx11).
    pub const TRAP_ON_START: Field = Field::new("TRAP_ON_START", 10, 10);
    /// Trap on wave end (gfx11).
    pub const TRAP_ON_END: Field = Field::new("TRAP_ON_END", 11, 11);
    /// The kernel uses image operations (gfx11).
    pub const IMAGE_OP: Field = Field::new("IMAGE_OP", 31, 31);
    /// gfx10.3 layout.
    pub const GFX10_3: &[Field] = &[SHARED_VGPR_CNT];
    /// gfx11 layout.
    pub const GFX11: &[Field] = &[SHARED_VGPR_CNT, INST_PREF_SIZE, TRAP_ON_START, TRAP_ON_END, IMAGE_OP];
}

/// COMPUTE_DISPATCH_INITIATOR layout; gfx11 adds bits 16 and 17.
pub mod initiator {
    use super::Field;
    /// Must be set for a compute dispatch.
    pub const COMPUTE_SHADER_EN: Field = Field::new("COMPUTE_SHADER_EN", 0, 0);
    /// The last workgroup in each dimension may be partial.
    pub const PARTIAL_TG_EN: Field = Field::new("PARTIAL_TG_EN", 1, 1);
    /// Start at workgroup (0,0,0) instead of COMPUTE_START_*.
    pub const FORCE_START_AT_000: Field = Field::new("FORCE_START_AT_000", 2, 2);
    /// Ordered append enable.
    pub const ORDERED_APPEND_ENBL: Field = Field::new("ORDERED_APPEND_ENBL", 3, 3);
    /// Ordered append mode.
    pub const ORDERED_APPEND_MODE: Field = Field::new("ORDERED_APPEND_MODE", 4, 4);
    /// Dispatch sizes are in threads instead of workgroups.
    pub const USE_THREAD_DIMENSIONS: Field = Field::new("USE_THREAD_DIMENSIONS", 5, 5);
    /// Launch workgroups in order.
    pub const ORDER_MODE: Field = Field::new("ORDER_MODE", 6, 6);
    /// Invalidate volatile scalar L1 lines.
    pub const SCALAR_L1_INV_VOL: Field = Field::new("SCALAR_L1_INV_VOL", 10, 10);
    /// Invalidate volatile vector L1 lines.
    pub const VECTOR_L1_INV_VOL: Field = Field::new("VECTOR_L1_INV_VOL", 11, 11);
    /// Reserved bit.
    pub const RESERVED: Field = Field::new("RESERVED", 12, 12);
    /// Tunnel (high-priority) dispatch.
    pub const TUNNEL_ENABLE: Field = Field::new("TUNNEL_ENABLE", 13, 13);
    /// Restore after preemption.
    pub const RESTORE: Field = Field::new("RESTORE", 14, 14);
    /// Launch wave32 waves (wave64 when clear).
    pub const CS_W32_EN: Field = Field::new("CS_W32_EN", 15, 15);
    /// Amplification shader (gfx11).
    pub const AMP_SHADER_EN: Field = Field::new("AMP_SHADER_EN", 16, 16);
    /// Disable dispatch preemption (gfx11).
    pub const DISABLE_DISP_PREMPT_EN: Field = Field::new("DISABLE_DISP_PREMPT_EN", 17, 17);
    /// gfx10.3 layout.
    pub const GFX10_3: &[Field] = &[
        COMPUTE_SHADER_EN,
        PARTIAL_TG_EN,
        FORCE_START_AT_000,
        ORDERED_APPEND_ENBL,
        ORDERED_APPEND_MODE,
        USE_THREAD_DIMENSIONS,
        ORDER_MODE,
        SCALAR_L1_INV_VOL,
        VECTOR_L1_INV_VOL,
        RESERVED,
        TUNNEL_ENABLE,
        RESTORE,
        CS_W32_EN,
    ];
    /// gfx11 layout.
    pub const GFX11: &[Field] = &[
        COMPUTE_SHADER_EN,
        PARTIAL_TG_EN,
        FORCE_START_AT_000,
        ORDERED_APPEND_ENBL,
        ORDERED_APPEND_MODE,
        USE_THREAD_DIMENSIONS,
        ORDER_MODE,
        SCALAR_L1_INV_VOL,
        VECTOR_L1_INV_VOL,
        RESERVED,
        TUNNEL_ENABLE,
        RESTORE,
        CS_W32_EN,
        AMP_SHADER_EN,
        DISABLE_DISP_PREMPT_EN,
    ];
}

/// COMPUTE_TMPRING_SIZE layout; WAVESIZE is 13 bits on gfx10.3 and 15 bits on gfx11.
pub mod tmpring {
    use super::Field;
    /// Number of waves that may hold scratch at once.
    pub const WAVES: Field = Field::new("WAVES", 0, 11);
    /// Scratch per wave in 1 KiB units (gfx10.3).
    pub const WAVESIZE_GFX10_3: Field = Field::new("WAVESIZE", 12, 24);
    /// Scratch per wave in 256-byte units (gfx11).
    pub const WAVESIZE_GFX11: Field = Field::new("WAVESIZE", 12, 26);
    /// gfx10.3 layout.
    pub const GFX10_3: &[Field] = &[WAVES, WAVESIZE_GFX10_3];
    /// gfx11 layout.
    pub const GFX11: &[Field] = &[WAVES, WAVESIZE_GFX11];
}

/// COMPUTE_RESOURCE_LIMITS layout (same on gfx10.3 and gfx11).
pub mod resource_limits {
    use super::Field;
    /// Waves per shader array (0 = no limit).
    pub const WAVES_PER_SH: Field = Field::new("WAVES_PER_SH", 0, 9);
    /// Workgroups per CU (0 = no limit).
    pub const TG_PER_CU: Field = Field::new("TG_PER_CU", 12, 15);
    /// Lock threshold.
    pub const LOCK_THRESHOLD: Field = Field::new("LOCK_THRESHOLD", 16, 21);
    /// SIMD destination control.
    pub const SIMD_DEST_CNTL: Field = Field::new("SIMD_DEST_CNTL", 22, 22);
    /// Force SIMD distribution.
    pub const FORCE_SIMD_DIST: Field = Field::new("FORCE_SIMD_DIST", 23, 23);
    /// CU group count.
    pub const CU_GROUP_COUNT: Field = Field::new("CU_GROUP_COUNT", 24, 26);
    /// Every field, low to high.
    pub const ALL: &[Field] =
        &[WAVES_PER_SH, TG_PER_CU, LOCK_THRESHOLD, SIMD_DEST_CNTL, FORCE_SIMD_DIST, CU_GROUP_COUNT];
}

/// COMPUTE_NUM_THREAD_X/Y/Z layout.
pub mod num_thread {
    use super::Field;
    /// Threads per full workgroup in this dimension.
    pub const NUM_THREAD_FULL: Field = Field::new("NUM_THREAD_FULL", 0, 15);
    /// Threads in the partial last workgroup.
    pub const NUM_THREAD_PARTIAL: Field = Field::new("NUM_THREAD_PARTIAL", 16, 31);
    /// Every field.
    pub const ALL: &[Field] = &[NUM_THREAD_FULL, NUM_THREAD_PARTIAL];
}

/// COMPUTE_PGM_HI layout.
pub mod pgm_hi {
    use super::Field;
    /// Code address bits 47:40.
    pub const DATA: Field = Field::new("DATA", 0, 7);
    /// Every field.
    pub const ALL: &[Field] = &[DATA];
}

/// GRBM_GFX_INDEX layout (same on gfx10.3 and gfx11).
pub mod grbm_gfx_index {
    use super::Field;
    /// Instance index.
    pub const INSTANCE_INDEX: Field = Field::new("INSTANCE_INDEX", 0, 7);
    /// Shader array index.
    pub const SA_INDEX: Field = Field::new("SA_INDEX", 8, 15);
    /// Shader engine index.
    pub const SE_INDEX: Field = Field::new("SE_INDEX", 16, 23);
    /// Write every shader array.
    pub const SA_BROADCAST_WRITES: Field = Field::new("SA_BROADCAST_WRITES", 29, 29);
    /// Write every instance.
    pub const INSTANCE_BROADCAST_WRITES: Field = Field::new("INSTANCE_BROADCAST_WRITES", 30, 30);
    /// Write every shader engine.
    pub const SE_BROADCAST_WRITES: Field = Field::new("SE_BROADCAST_WRITES", 31, 31);
    /// Every field.
    pub const ALL: &[Field] = &[
        INSTANCE_INDEX,
        SA_INDEX,
        SE_INDEX,
        SA_BROADCAST_WRITES,
        INSTANCE_BROADCAST_WRITES,
        SE_BROADCAST_WRITES,
    ];
}

/// Generates a `u32` newtype with checked setters for multi-bit fields and plain setters for flags.
macro_rules! register_value {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( value $vset:ident / $vget:ident = $vfield:path; )*
            $( flag $fset:ident / $fget:ident = $ffield:path; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub u32);

        impl $name {
            /// The raw register value.
            pub const fn bits(self) -> u32 {
                self.0
            }

            /// Wraps a raw register value.
            pub const fn from_bits(bits: u32) -> Self {
                Self(bits)
            }

            $(
                #[doc = concat!("Sets `", stringify!($vfield), "`, rejecting values wider than the field.")]
                pub const fn $vset(self, value: u32) -> Result<Self, FieldError> {
                    match $vfield.set(self.0, value) {
                        Ok(v) => Ok(Self(v)),
                        Err(e) => Err(e),
                    }
                }

                #[doc = concat!("Reads `", stringify!($vfield), "`.")]
                pub const fn $vget(self) -> u32 {
                    $vfield.get(self.0)
                }
            )*

            $(
                #[doc = concat!("Sets or clears `", stringify!($ffield), "`.")]
                pub const fn $fset(self, on: bool) -> Self {
                    Self((self.0 & !$ffield.mask()) | ((on as u32) << $ffield.lo))
                }

                #[doc = concat!("Reads `", stringify!($ffield), "`.")]
                pub const fn $fget(self) -> bool {
                    $ffield.get(self.0) != 0
                }
            )*
        }
    };
}

register_value! {
    /// A COMPUTE_PGM_RSRC1 value.
    PgmRsrc1 {
        value with_vgprs / vgprs = rsrc1::VGPRS;
        value with_sgprs / sgprs = rsrc1::SGPRS;
        value with_priority / priority = rsrc1::PRIORITY;
        value with_float_mode / float_mode = rsrc1::FLOAT_MODE;
        flag with_priv / privileged = rsrc1::PRIV;
        flag with_dx10_clamp / dx10_clamp = rsrc1::DX10_CLAMP;
        flag with_ieee_mode / ieee_mode = rsrc1::IEEE_MODE;
        flag with_bulky / bulky = rsrc1::BULKY;
        flag with_fp16_ovfl / fp16_ovfl = rsrc1::FP16_OVFL;
        flag with_wgp_mode / wgp_mode = rsrc1::WGP_MODE;
        flag with_mem_ordered / mem_ordered = rsrc1::MEM_ORDERED;
        flag with_fwd_progress / fwd_progress = rsrc1::FWD_PROGRESS;
    }
}

register_value! {
    /// A COMPUTE_PGM_RSRC2 value.
    PgmRsrc2 {
        value with_user_sgpr / user_sgpr = rsrc2::USER_SGPR;
        value with_tidig_comp_cnt / tidig_comp_cnt = rsrc2::TIDIG_COMP_CNT;
        value with_excp_en_msb / excp_en_msb = rsrc2::EXCP_EN_MSB;
        value with_lds_size / lds_size = rsrc2::LDS_SIZE;
        value with_excp_en / excp_en = rsrc2::EXCP_EN;
        flag with_scratch_en / scratch_en = rsrc2::SCRATCH_EN;
        flag with_trap_present / trap_present = rsrc2::TRAP_PRESENT;
        flag with_tgid_x_en / tgid_x_en = rsrc2::TGID_X_EN;
        flag with_tgid_y_en / tgid_y_en = rsrc2::TGID_Y_EN;
        flag with_tgid_z_en / tgid_z_en = rsrc2::TGID_Z_EN;
        flag with_tg_size_en / tg_size_en = rsrc2::TG_SIZE_EN;
    }
}

impl PgmRsrc2 {
    /// Sets LDS_SIZE from a byte count, rounding up to 512-byte granules.
    pub const fn with_lds_bytes(self, bytes: u32) -> Result<Self, FieldError> {
        self.with_lds_size(bytes.div_ceil(512))
    }
}

register_value! {
    /// A COMPUTE_PGM_RSRC3 value. Only SHARED_VGPR_CNT exists on gfx10.3.
    PgmRsrc3 {
        value with_shared_vgpr_cnt / shared_vgpr_cnt = rsrc3::SHARED_VGPR_CNT;
        value with_inst_pref_size / inst_pref_size = rsrc3::INST_PREF_SIZE;
        flag with_trap_on_start / trap_on_start = rsrc3::TRAP_ON_START;
        flag with_trap_on_end / trap_on_end = rsrc3::TRAP_ON_END;
        flag with_image_op / image_op = rsrc3::IMAGE_OP;
    }
}

register_value! {
    /// A COMPUTE_DISPATCH_INITIATOR value. AMP_SHADER_EN and DISABLE_DISP_PREMPT_EN are gfx11 only.
    DispatchInitiator {
        flag with_compute_shader_en / compute_shader_en = initiator::COMPUTE_SHADER_EN;
        flag with_partial_tg_en / partial_tg_en = initiator::PARTIAL_TG_EN;
        flag with_force_start_at_000 / force_start_at_000 = initiator::FORCE_START_AT_000;
        flag with_ordered_append_enbl / ordered_append_enbl = initiator::ORDERED_APPEND_ENBL;
        flag with_ordered_append_mode / ordered_append_mode = initiator::ORDERED_APPEND_MODE;
        flag with_use_thread_dimensions / use_thread_dimensions = initiator::USE_THREAD_DIMENSIONS;
        flag with_order_mode / order_mode = initiator::ORDER_MODE;
        flag with_scalar_l1_inv_vol / scalar_l1_inv_vol = initiator::SCALAR_L1_INV_VOL;
        flag with_vector_l1_inv_vol / vector_l1_inv_vol = initiator::VECTOR_L1_INV_VOL;
        flag with_tunnel_enable / tunnel_enable = initiator::TUNNEL_ENABLE;
        flag with_restore / restore = initiator::RESTORE;
        flag with_cs_w32_en / cs_w32_en = initiator::CS_W32_EN;
        flag with_amp_shader_en / amp_shader_en = initiator::AMP_SHADER_EN;
        flag with_disable_disp_prempt_en / disable_disp_prempt_en = initiator::DISABLE_DISP_PREMPT_EN;
    }
}

impl DispatchInitiator {
    /// The usual initiator of a kernel launch: compute enable, start at workgroup (0,0,0), and
    /// wave32 when `wave32` is set.
    pub const fn launch(wave32: bool) -> Self {
        Self(0).with_compute_shader_en(true).with_force_start_at_000(true).with_cs_w32_en(wave32)
    }
}

register_value! {
    /// A COMPUTE_RESOURCE_LIMITS value.
    ResourceLimits {
        value with_waves_per_sh / waves_per_sh = resource_limits::WAVES_PER_SH;
        value with_tg_per_cu / tg_per_cu = resource_limits::TG_PER_CU;
        value with_lock_threshold / lock_threshold = resource_limits::LOCK_THRESHOLD;
        value with_cu_group_count / cu_group_count = resource_limits::CU_GROUP_COUNT;
        flag with_simd_dest_cntl / simd_dest_cntl = resource_limits::SIMD_DEST_CNTL;
        flag with_force_simd_dist / force_simd_dist = resource_limits::FORCE_SIMD_DIST;
    }
}

register_value! {
    /// A COMPUTE_NUM_THREAD_X/Y/Z value.
    NumThread {
        value with_full / full = num_thread::NUM_THREAD_FULL;
        value with_partial / partial = num_thread::NUM_THREAD_PARTIAL;
    }
}

/// A COMPUTE_TMPRING_SIZE value; the WAVESIZE width depends on the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TmpringSize {
    gfx: Gfx,
    bits: u32,
}

impl TmpringSize {
    /// An empty value (no scratch) for a generation.
    pub const fn new(gfx: Gfx) -> Self {
        Self { gfx, bits: 0 }
    }

    /// Wraps a raw register value.
    pub const fn from_bits(gfx: Gfx, bits: u32) -> Self {
        Self { gfx, bits }
    }

    /// The raw register value.
    pub const fn bits(self) -> u32 {
        self.bits
    }

    const fn wavesize_field(gfx: Gfx) -> Field {
        match gfx {
            Gfx::Gfx10_3 => tmpring::WAVESIZE_GFX10_3,
            Gfx::Gfx11 => tmpring::WAVESIZE_GFX11,
        }
    }

    /// Sets WAVES.
    pub const fn with_waves(self, waves: u32) -> Result<Self, FieldError> {
        match tmpring::WAVES.set(self.bits, waves) {
            Ok(bits) => Ok(Self { gfx: self.gfx, bits }),
            Err(e) => Err(e),
        }
    }

    /// Sets WAVESIZE, in the generation's units (1 KiB on gfx10.3, 256 bytes on gfx11).
    pub const fn with_wavesize(self, units: u32) -> Result<Self, FieldError> {
        match Self::wavesize_field(self.gfx).set(self.bits, units) {
            Ok(bits) => Ok(Self { gfx: self.gfx, bits }),
            Err(e) => Err(e),
        }
    }

    /// Reads WAVES.
    pub const fn waves(self) -> u32 {
        tmpring::WAVES.get(self.bits)
    }

    /// Reads WAVESIZE.
    pub const fn wavesize(self) -> u32 {
        Self::wavesize_field(self.gfx).get(self.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsrc_values_from_a_real_kernel_descriptor() {
        // saxpy built for gfx1100: rsrc1 0xe0af0000, rsrc2 0x9e, rsrc3 0x20.
        let r1 = PgmRsrc1::from_bits(0xe0af_0000);
        assert_eq!(r1.float_mode(), 0xF0);
        assert!(r1.dx10_clamp() && r1.ieee_mode() && r1.wgp_mode() && r1.mem_ordered() && r1.fwd_progress());
        assert!(!r1.privileged());
        assert_eq!(r1.with_priv(true).bits(), 0xe0bf_0000);
        let r2 = PgmRsrc2::from_bits(0x9e);
        assert_eq!(r2.user_sgpr(), 15);
        assert!(r2.tgid_x_en() && !r2.tgid_y_en() && !r2.scratch_en());
        assert_eq!(PgmRsrc3::from_bits(0x20).inst_pref_size(), 2);
    }

    #[test]
    fn builders_reject_overflow() {
        assert!(PgmRsrc2::default().with_user_sgpr(32).is_err());
        assert_eq!(PgmRsrc2::default().with_lds_bytes(513).unwrap().lds_size(), 2);
        assert!(PgmRsrc2::default().with_lds_bytes(512 * 512).is_err());
        assert!(TmpringSize::new(Gfx::Gfx10_3).with_wavesize(1 << 13).is_err());
        assert_eq!(TmpringSize::new(Gfx::Gfx11).with_wavesize(1 << 13).unwrap().bits(), 1 << 25);
        assert!(TmpringSize::new(Gfx::Gfx11).with_wavesize(1 << 15).is_err());
    }

    #[test]
    fn launch_initiator_bits() {
        assert_eq!(DispatchInitiator::launch(true).bits(), 0x8005);
        assert_eq!(DispatchInitiator::launch(false).bits(), 0x0005);
    }
}
