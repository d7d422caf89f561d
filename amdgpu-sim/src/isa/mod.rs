//! An interpreter for the RDNA3 (gfx1100) and RDNA2 (gfx1030) ISAs, wave32 and wave64, written
//! from AMD's "RDNA3 Instruction Set Architecture" reference guide and LLVM's AMDGPU
//! documentation (encodings, initial kernel execution state). gfx10.3 words are decoded into the
//! gfx11 instruction doing the same operation (`decode_gfx10`); the few results that differ
//! between the generations (16-bit results of VOP1/VOP2 operations, SDWA, scratch) follow the
//! wave's [`Gfx`].
//!
//! The simulated driver describes a DISPATCH_DIRECT with a [`Dispatch`] (program address, the
//! PGM_RSRC registers, user data, group size and count) and runs it with [`run_dispatch`]
//! (workgroup by workgroup, `DispatchRun`) against a [`GlobalMemory`] that enforces its mappings.
//! Failures are [`SimError`]s naming the kernel and PC. `check_code`, behind the driver's
//! `check_kernel_code`, decodes a kernel's code before it is uploaded and names the first
//! instruction it cannot execute; [`survey_code`] lists every instruction of a kernel and whether
//! the interpreter runs it (the coverage corpus's view).
//!
//! Modelled: wave32 and wave64 (DISPATCH_INITIATOR.CS_W32_EN; lane masks are 64-bit, a wave32
//! uses the low half); IEEE f32/f64 with round-to-nearest-even and denormals preserved (other
//! MODE settings are refused); memory is synchronous, so wait counters and cache invalidates are
//! no-ops; the division helpers scale extreme operands so that f32 and f64 quotients come out
//! correctly rounded over the whole range; private memory through gfx11 architected flat scratch
//! (SCRATCH instructions and FLAT addresses in the private aperture, each lane confined to its
//! slice of its wave's slot) and through gfx10.3's private segment buffer (MUBUF with a swizzled
//! descriptor) and FLAT_SCRATCH (lanes interleaved by dword, as the hardware lays them out, each
//! lane confined to its own bytes); FLAT addresses in the shared aperture (LDS).
//!
//! Every modifier an instruction carries (clamp, omod, abs, neg, op_sel, VOP3P's op_sel_hi and
//! neg_hi, SDWA's selections) is either applied or refuses the instruction: the executors mark
//! what they apply and `modifiers` refuses what is left, so nothing decoded is silently ignored.
//!
//! Buffers: gfx10.3's private segment buffer, and untyped raw and structured buffers (MUBUF
//! and s_buffer_load) for accesses inside them (`buffer`). WMMA in wave32.
//!
//! Not modelled (refused when a kernel is loaded, or for what only execution shows, when used):
//! GDS and GWS, typed (format) buffer accesses, swizzled buffers other than the private segment
//! buffer, buffer accesses out of range (what they return depends on OOB_SELECT), images, DPP,
//! omod, the conversions to normalized integers whose rounding the ISA guide leaves undefined,
//! float mode changes, messages and traps, TG_SIZE. Transcendentals (v_rcp,
//! v_rsq, v_sqrt, v_exp, v_log, v_sin, v_cos, f32 and f16) are correctly rounded here, whereas
//! the hardware approximates them to about one ulp; the float dot products (v_dot2*) and WMMA
//! round their sums once, where the guide's pseudo-code accumulates step by step; NaNs an
//! operation makes from numbers (inf - inf) are the host's default NaN, whose sign the hardware
//! may not share. No timing, caches or scheduling fairness. `tests/fixtures/isa_coverage`
//! lists every opcode and form LLVM decodes and the ISA tests' coverage table says which run.

mod buffer;
mod code_cache;
mod decode;
mod decode_gfx10;
mod dispatch;
mod division;
mod error;
mod exec;
mod float;
mod gfx10_table;
mod global;
mod lds;
#[cfg(test)]
mod llvm_syntax;
mod memory;
mod mnemonic;
mod mnemonic_table;
mod modifiers;
#[cfg(test)]
mod objdump_check;
mod operand;
mod private;
mod scalar;
mod sdwa;
mod validate;
mod valu;
mod valu16;
mod valu_more;
mod vcmp;
mod vop3p;
mod vopd;
mod wave;
mod workgroup;

pub use decode::instruction_size;
pub use dispatch::{initial_waves, regs, Dispatch, ScratchRing, DEFAULT_BUDGET};
pub use error::{Access, MemoryFault, SimError};
pub use memory::GlobalMemory;
pub(crate) use operand::aperture_fault;
/// The apertures' high 32 bits (`SRC_SHARED_BASE`/`SRC_PRIVATE_BASE` read as 64 bits, then
/// shifted): where generic addresses reach LDS and the private segment.
pub use operand::{PRIVATE_APERTURE_HI, SHARED_APERTURE_HI};
/// The hardware generation whose ISA a kernel is (gfx10.3 or gfx11).
pub use pm4::Gfx;
pub(crate) use validate::check_code;
pub use validate::{survey_code, SurveyedInstruction};
pub use wave::{Wave, WaveStatus, LANES};
pub use workgroup::{run_dispatch, DispatchStats};
