//! Executes one decoded instruction on a wave: advances the PC, then dispatches by encoding.

use super::buffer::exec_mubuf;
use super::decode::{Decoded, Inst, ValuEnc};
use super::error::ExecResult;
use super::global::exec_flat;
use super::lds::exec_ds;
use super::memory::GlobalMemory;
use super::modifiers;
use super::scalar::{exec_smem, exec_sop1, exec_sop2, exec_sopc, exec_sopk, exec_sopp};
use super::sdwa::exec_sdwa;
use super::valu::exec_valu;
use super::vcmp::exec_vcmp;
use super::vop3p::exec_vop3p;
use super::vopd::exec_vopd;
use super::wave::Wave;

pub(crate) fn execute(w: &mut Wave, d: &Decoded, mem: &mut dyn GlobalMemory, lds: &mut [u8]) -> ExecResult {
    w.pc = w.pc.wrapping_add(d.size as u64);
    match &d.inst {
        Inst::Sop2 { op, sdst, s0, s1 } => exec_sop2(w, *op, *sdst, s0, s1, d.word),
        Inst::Sop1 { op, sdst, s0 } => exec_sop1(w, *op, *sdst, s0, d.word),
        Inst::Sopk { op, sdst, simm, .. } => exec_sopk(w, *op, *sdst, *simm, d.word),
        Inst::Sopc { op, s0, s1 } => exec_sopc(w, *op, s0, s1, d.word),
        Inst::Sopp { op, simm } => exec_sopp(w, *op, *simm, d.word),
        Inst::Smem { op, sdata, sbase, offset, soffset, .. } => {
            exec_smem(w, mem, *op, *sdata, *sbase, *offset, *soffset, d.word)
        }
        Inst::Valu(v) => {
            w.handled.set(0);
            match (&v.sdwa, v.enc) {
                (Some(s), _) => exec_sdwa(w, v, s, d.word),
                (None, ValuEnc::Vop3p) => exec_vop3p(w, v, d.word),
                (None, _) if v.op < 256 => exec_vcmp(w, v, d.word),
                (None, _) => exec_valu(w, v, d.word),
            }?;
            // Every modifier the instruction carries must have been applied.
            modifiers::check(v, w.handled.get())
        }
        Inst::Vopd(v) => exec_vopd(w, v, d.word),
        Inst::Ds(ds) => exec_ds(w, lds, ds, d.word),
        Inst::Flat(f) => exec_flat(w, mem, lds, f, d.word),
        Inst::Mubuf(m) => exec_mubuf(w, mem, m, d.word),
    }
}
