//! SDWA (gfx10.3 sub-dword addressing): a VOP1, VOP2 or VOPC instruction that reads one byte or
//! word of each source (zero- or sign-extended) and writes one byte or word of its destination,
//! zeroing, sign-extending or keeping the other bits. The selected sources are latched in the
//! wave and the instruction runs as its plain form; its result is then placed where `dst_sel`
//! says.

use super::decode::{Sdwa, Valu};
use super::error::{ExecResult, Fault};
use super::operand::Src;
use super::valu::exec_valu;
use super::vcmp::exec_vcmp;
use super::wave::Wave;

const DWORD: u8 = 6;

/// The bit offset and width of a selection (byte 0..=3, word 0..=1, dword).
fn field(sel: u8) -> ExecResult<(u32, u32)> {
    match sel {
        0..=3 => Ok((8 * u32::from(sel), 8)),
        4 | 5 => Ok((16 * u32::from(sel - 4), 16)),
        DWORD => Ok((0, 32)),
        _ => Err(Fault::unsupported(format!("SDWA selection {sel} is reserved"))),
    }
}

/// The selected bits of `x`, zero- or sign-extended to 32 bits.
fn select(x: u32, (shift, width): (u32, u32), sext: bool) -> u32 {
    if width == 32 {
        return x;
    }
    let bits = (x >> shift) & ((1 << width) - 1);
    if sext && bits >> (width - 1) != 0 {
        bits | !((1 << width) - 1)
    } else {
        bits
    }
}

/// The destination after writing `result`'s low bits into the selected field of `old`.
fn place(result: u32, old: u32, (shift, width): (u32, u32), unused: u8) -> ExecResult<u32> {
    if width == 32 {
        return Ok(result);
    }
    let mask = ((1u32 << width) - 1) << shift;
    let value = (result << shift) & mask;
    Ok(match unused {
        0 => value,
        // The bits above the field repeat its sign; those below are zero.
        1 if value >> (shift + width - 1) & 1 != 0 => value | !(mask | (mask - 1)),
        1 => value,
        2 => (old & !mask) | value,
        _ => return Err(Fault::unsupported(format!("SDWA dst_unused {unused} is reserved"))),
    })
}

/// Executes an SDWA instruction.
pub(crate) fn exec_sdwa(w: &mut Wave, v: &Valu, s: &Sdwa, word: u32) -> ExecResult {
    let mut plain = v.clone();
    plain.sdwa = None;
    // VOP1 reads one source; VOP2 and VOPC two (src2, when set, is an implicit VCC or
    // accumulator that SDWA does not select).
    let sources = if v.op >= super::decode::VOP1_BASE { 1 } else { 2 };
    for i in 0..sources {
        let sel = field(s.src_sel[i])?;
        let raw = w.src32(&v.src[i])?;
        w.sdwa_latch[i] = raw.map(|x| select(x, sel, s.src_sext[i]));
        plain.src[i] = Src::SdwaLatch(i as u8);
    }
    if v.op < 256 {
        // A compare writes a lane mask: there is no destination field to select.
        return exec_vcmp(w, &plain, word);
    }
    let dst = field(s.dst_sel)?;
    let vdst = usize::from(v.vdst);
    let before = w.vgpr[vdst];
    exec_valu(w, &plain, word)?;
    if dst.1 == 32 {
        return Ok(());
    }
    let exec = w.exec();
    let lanes = w.lanes();
    for (l, (out, old)) in w.vgpr[vdst].iter_mut().zip(before).enumerate().take(lanes) {
        if exec >> l & 1 != 0 {
            *out = place(*out, old, dst, s.dst_unused)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_selected_and_extended() {
        assert_eq!(select(0x1234_80ff, field(0).unwrap(), false), 0xff);
        assert_eq!(select(0x1234_80ff, field(0).unwrap(), true), 0xffff_ffff);
        assert_eq!(select(0x1234_80ff, field(1).unwrap(), true), 0xffff_ff80);
        assert_eq!(select(0x1234_80ff, field(5).unwrap(), false), 0x1234);
        assert_eq!(select(0x8234_80ff, field(5).unwrap(), true), 0xffff_8234);
        assert_eq!(select(0x8234_80ff, field(DWORD).unwrap(), true), 0x8234_80ff);
    }

    #[test]
    fn results_go_to_their_field() {
        let old = 0xaabb_ccdd;
        // word 1, pad with zeros / keep the rest / sign-extend.
        assert_eq!(place(0x0000_8001, old, field(5).unwrap(), 0).unwrap(), 0x8001_0000);
        assert_eq!(place(0x0000_8001, old, field(5).unwrap(), 2).unwrap(), 0x8001_ccdd);
        assert_eq!(place(0x0000_8001, old, field(5).unwrap(), 1).unwrap(), 0x8001_0000);
        // byte 1 with its sign bit set: the bits above repeat it, those below are zero.
        assert_eq!(place(0x80, old, field(1).unwrap(), 1).unwrap(), 0xffff_8000);
        assert_eq!(place(0x7f, old, field(1).unwrap(), 1).unwrap(), 0x0000_7f00);
        assert_eq!(place(0x12, old, field(0).unwrap(), 2).unwrap(), 0xaabb_cc12);
        assert!(place(0, old, field(0).unwrap(), 3).is_err());
        assert!(field(7).is_err());
    }
}
