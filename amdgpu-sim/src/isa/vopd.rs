//! VOPD dual issue: two independent VALU operations in one instruction. Both halves read all
//! their sources before either writes its destination.

use super::decode::{Vopd, VopdHalf};
use super::error::{ExecResult, Fault};
use super::float::{f16_to_f32, minmax32};
use super::operand::Src;
use super::valu16::flush_denormal;
use super::wave::{Wave, LANES};

fn half(w: &Wave, h: &VopdHalf, literal: u32, y: bool, word: u32) -> ExecResult<[u32; LANES]> {
    let s0 = w.src32(&h.src0)?;
    let s1 = w.vgpr[h.vsrc1 as usize];
    let d = w.vgpr[h.vdst as usize];
    let ie = w.mode >> 9 & 1 != 0;
    let f = |x: u32| f32::from_bits(x);
    let k = f32::from_bits(literal);
    let vcc = w.vcc();
    let r: [u32; LANES] = std::array::from_fn(|l| {
        let (a, b) = (s0[l], s1[l]);
        match h.op {
            0 => f(a).mul_add(f(b), f(d[l])).to_bits(),
            1 => f(a).mul_add(f(b), k).to_bits(),
            2 => f(a).mul_add(k, f(b)).to_bits(),
            3 => (f(a) * f(b)).to_bits(),
            4 => (f(a) + f(b)).to_bits(),
            5 => (f(a) - f(b)).to_bits(),
            6 => (f(b) - f(a)).to_bits(),
            7 => (if f(a) == 0.0 || f(b) == 0.0 { 0.0 } else { f(a) * f(b) }).to_bits(),
            8 => a,
            9 => {
                if vcc >> l & 1 != 0 {
                    b
                } else {
                    a
                }
            }
            10 => minmax32(f(a), f(b), true, ie).to_bits(),
            11 => minmax32(f(a), f(b), false, ie).to_bits(),
            // dot2acc: D + S0.lo * S1.lo + S0.hi * S1.hi over f16 (12, denormal f32 accumulator
            // and result flushed, as v_dot2acc_f32_f16) or bf16 (13) halves; rounded once.
            12 | 13 => {
                let widen = |x: u32| {
                    if h.op == 12 {
                        f16_to_f32(x as u16) as f64
                    } else {
                        f32::from_bits(x << 16) as f64
                    }
                };
                let acc = if h.op == 12 { flush_denormal(f(d[l])) } else { f(d[l]) } as f64;
                let sum = acc + widen(a & 0xffff) * widen(b & 0xffff) + widen(a >> 16) * widen(b >> 16);
                let r = sum as f32;
                (if h.op == 12 { flush_denormal(r) } else { r }).to_bits()
            }
            16 if y => a.wrapping_add(b),
            17 if y => b << (a & 31),
            18 if y => a & b,
            _ => 0,
        }
    });
    if !(h.op <= 13 || (y && (16..=18).contains(&h.op))) {
        return Err(Fault::Unknown {
            encoding: if y { "VOPD (Y half)" } else { "VOPD (X half)" },
            opcode: h.op as u32,
            word,
        });
    }
    if let Src::Unsupported(f) = h.src0 {
        return Err(super::wave::unsupported_src(f));
    }
    Ok(r)
}

pub(crate) fn exec_vopd(w: &mut Wave, d: &Vopd, word: u32) -> ExecResult {
    let rx = half(w, &d.x, d.literal, false, word)?;
    let ry = half(w, &d.y, d.literal, true, word)?;
    let exec = w.exec();
    w.write_vgpr(d.x.vdst as usize, &rx, exec);
    w.write_vgpr(d.y.vdst as usize, &ry, exec);
    Ok(())
}
