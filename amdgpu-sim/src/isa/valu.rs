//! Vector ALU instructions (VOP1, VOP2, VOP3 including the SDST forms) executed per lane.
//! Compares live in `vcmp.rs`, packed math in `vop3p.rs`, dual issue in `vopd.rs`.

use pm4::Gfx;

use super::decode::{Valu, VOP1_BASE, VOP2_BASE};
use super::division;
use super::error::{ExecResult, Fault};
use super::float::{f16_to_f32, f32_to_f16, f64_to_f16, med3_32, minmax32, minmax64};
use super::modifiers;
use super::operand::NULL;
use super::scalar::bfe32;
use super::wave::{Wave, LANES};

pub(super) type L<T> = [T; LANES];

pub(super) fn map<A: Copy, R>(a: &L<A>, f: impl Fn(A) -> R) -> L<R> {
    std::array::from_fn(|l| f(a[l]))
}
pub(super) fn map2<A: Copy, B: Copy, R>(a: &L<A>, b: &L<B>, f: impl Fn(A, B) -> R) -> L<R> {
    std::array::from_fn(|l| f(a[l], b[l]))
}
pub(super) fn map3<A: Copy, B: Copy, C: Copy, R>(
    a: &L<A>,
    b: &L<B>,
    c: &L<C>,
    f: impl Fn(A, B, C) -> R,
) -> L<R> {
    std::array::from_fn(|l| f(a[l], b[l], c[l]))
}

/// Per-instruction operand access with the VOP3 modifiers applied as the operand's type wants.
pub(crate) struct Ops<'a> {
    pub w: &'a Wave,
    pub v: &'a Valu,
}

impl Ops<'_> {
    /// abs and neg of source `i`, which the caller applies.
    pub(super) fn mods(&self, i: usize) -> (bool, bool) {
        self.w.handle(modifiers::abs(i) | modifiers::neg(i));
        (self.v.abs >> i & 1 != 0, self.v.neg >> i & 1 != 0)
    }
    /// Whether op_sel picks the high half of 16-bit source `i` (the caller applies it).
    pub(super) fn high_half(&self, i: usize) -> bool {
        self.w.handle(modifiers::opsel(i));
        self.v.opsel >> i & 1 != 0
    }
    /// opsel selects 16-bit halves; on a 32- or 64-bit operand it is refused, not ignored.
    fn no_opsel(&self, i: usize) -> ExecResult {
        if self.v.opsel >> i & 1 != 0 {
            return Err(Fault::unsupported(format!(
                "opsel on 32/64-bit operand {i} of VALU opcode {}",
                self.v.op
            )));
        }
        Ok(())
    }
    /// f32 source with abs/neg.
    pub fn f(&self, i: usize) -> ExecResult<L<f32>> {
        self.no_opsel(i)?;
        let (abs, neg) = self.mods(i);
        let raw = self.w.src32(&self.v.src[i])?;
        Ok(map(&raw, |x| {
            let x = if abs { x & 0x7fff_ffff } else { x };
            f32::from_bits(if neg { x ^ 0x8000_0000 } else { x })
        }))
    }
    /// 32-bit source bits with abs/neg applied to bit 31 (for selects and moves).
    pub fn fbits(&self, i: usize) -> ExecResult<L<u32>> {
        Ok(map(&self.f(i)?, f32::to_bits))
    }
    /// f64 source with abs/neg.
    pub fn d(&self, i: usize) -> ExecResult<L<f64>> {
        self.no_opsel(i)?;
        let (abs, neg) = self.mods(i);
        let raw = self.w.src64(&self.v.src[i], true)?;
        Ok(map(&raw, |x| {
            let x = if abs { x & !(1u64 << 63) } else { x };
            f64::from_bits(if neg { x ^ (1u64 << 63) } else { x })
        }))
    }
    /// f16 source (as f32) with abs/neg; opsel bit i picks the high half.
    pub fn h(&self, i: usize) -> ExecResult<L<f32>> {
        let (abs, neg) = self.mods(i);
        let hi = self.high_half(i);
        let raw = self.w.src16(&self.v.src[i])?;
        Ok(map(&raw, |x| {
            let x = if hi { (x >> 16) as u16 } else { x as u16 };
            let x = if abs { x & 0x7fff } else { x };
            f16_to_f32(if neg { x ^ 0x8000 } else { x })
        }))
    }
    /// The bits of 16-bit source `i` (op_sel picks the half), abs and neg applied to bit 15:
    /// for operations that move halves rather than compute with them.
    pub fn half_bits(&self, i: usize) -> ExecResult<L<u32>> {
        let (abs, neg) = self.mods(i);
        let hi = self.high_half(i);
        let raw = self.w.src16(&self.v.src[i])?;
        Ok(map(&raw, |x| {
            let x = if hi { x >> 16 } else { x } & 0xffff;
            let x = if abs { x & 0x7fff } else { x };
            if neg {
                x ^ 0x8000
            } else {
                x
            }
        }))
    }
    fn no_mods(&self, i: usize) -> ExecResult {
        self.no_opsel(i)?;
        if (self.v.abs | self.v.neg) >> i & 1 != 0 {
            return Err(Fault::unsupported(format!(
                "abs/neg modifier on integer operand {i} of VALU opcode {}",
                self.v.op
            )));
        }
        Ok(())
    }
    /// 16-bit integer source (low half, or high half with opsel), zero-extended. Constants are
    /// their 32-bit values (a float inline constant its f32 pattern), as the hardware reads them
    /// for integer operations.
    pub fn u16(&self, i: usize) -> ExecResult<L<u32>> {
        if (self.v.abs | self.v.neg) >> i & 1 != 0 {
            return Err(Fault::unsupported(format!(
                "abs/neg on 16-bit integer operand {i} of VALU opcode {}",
                self.v.op
            )));
        }
        let hi = self.high_half(i);
        let raw = self.w.src32(&self.v.src[i])?;
        Ok(map(&raw, |x| if hi { x >> 16 } else { x & 0xffff }))
    }
    /// 32-bit integer source (modifiers refused).
    pub fn u(&self, i: usize) -> ExecResult<L<u32>> {
        self.no_mods(i)?;
        self.w.src32(&self.v.src[i])
    }
    /// 64-bit integer source (modifiers refused).
    pub fn q(&self, i: usize) -> ExecResult<L<u64>> {
        self.no_mods(i)?;
        self.w.src64(&self.v.src[i], false)
    }
}

/// A 32/64-bit integer (or bit pattern) result: op_sel on the destination and omod do not
/// apply. Clamp is applied (and marked) by the operations that saturate; on any other it is
/// refused after the instruction ran (`modifiers::check`).
pub(super) fn int_only(v: &Valu) -> ExecResult {
    if v.opsel & 8 != 0 {
        return Err(Fault::unsupported(format!("opsel on the 32-bit destination of VALU opcode {}", v.op)));
    }
    no_omod(v)
}

/// The output modifier is not modelled: LLVM does not emit it for kernels in IEEE mode with
/// denormals, and whether the hardware applies it there is not something this interpreter claims.
pub(super) fn no_omod(v: &Valu) -> ExecResult {
    if v.omod != 0 {
        return Err(Fault::unsupported(format!(
            "the output modifier (omod {}) on {} opcode {} is not modelled",
            v.omod,
            enc_name(v),
            v.op
        )));
    }
    Ok(())
}

/// The saturating form of an integer operation when clamp is set (marked as applied).
pub(super) fn saturating(w: &Wave, v: &Valu) -> bool {
    w.handle(modifiers::CLAMP);
    v.clamp
}

pub(super) fn out_u(w: &mut Wave, v: &Valu, r: &L<u32>) -> ExecResult {
    int_only(v)?;
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, r, exec);
    Ok(())
}

pub(super) fn out_q(w: &mut Wave, v: &Valu, r: &L<u64>) -> ExecResult {
    int_only(v)?;
    let exec = w.exec();
    w.write_vgpr64(v.vdst as usize, r, exec);
    Ok(())
}

pub(super) fn out_f(w: &mut Wave, v: &Valu, r: L<f32>) -> ExecResult {
    if v.opsel & 8 != 0 {
        return Err(Fault::unsupported(format!("opsel on the 32-bit destination of VALU opcode {}", v.op)));
    }
    no_omod(v)?;
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let r = map(&r, |x| {
        let x = if v.clamp { modifiers::clamp_float(x as f64, dx10) as f32 } else { x };
        x.to_bits()
    });
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, &r, exec);
    Ok(())
}

pub(super) fn out_d(w: &mut Wave, v: &Valu, r: L<f64>) -> ExecResult {
    if v.opsel & 8 != 0 {
        return Err(Fault::unsupported(format!("opsel on the 64-bit destination of VALU opcode {}", v.op)));
    }
    no_omod(v)?;
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let r = map(&r, |x| {
        let x = if v.clamp { modifiers::clamp_float(x, dx10) } else { x };
        x.to_bits()
    });
    let exec = w.exec();
    w.write_vgpr64(v.vdst as usize, &r, exec);
    Ok(())
}

/// Writes 16-bit results to the low half (or the high half with opsel bit 3), keeping the other
/// — except on gfx10.3, where the operations that have a VOP1 or VOP2 form (in any encoding)
/// zero the high half, as gfx9 did; only the VOP3-only ones keep it.
pub(super) fn out_half(w: &mut Wave, v: &Valu, r: &L<u32>) -> ExecResult {
    no_omod(v)?;
    w.handle(modifiers::opsel(3));
    let hi = v.opsel >> 3 & 1 != 0;
    let zero_high = w.gfx == Gfx::Gfx10_3 && (VOP2_BASE..VOP1_BASE + 128).contains(&v.op);
    let old = w.vgpr[v.vdst as usize];
    let out: L<u32> = std::array::from_fn(|l| {
        let h = r[l] & 0xffff;
        if hi {
            (old[l] & 0xffff) | h << 16
        } else if zero_high {
            h
        } else {
            (old[l] & 0xffff_0000) | h
        }
    });
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, &out, exec);
    Ok(())
}

/// Rounds exact (f64) results to f16 once and writes them as halves.
pub(super) fn out_h(w: &mut Wave, v: &Valu, r: L<f64>) -> ExecResult {
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let bits = map(&r, |x| {
        let x = if v.clamp { modifiers::clamp_float(x, dx10) } else { x };
        f64_to_f16(x) as u32
    });
    out_half(w, v, &bits)
}

/// Writes a per-lane carry/flag mask to the scalar destination (inactive lanes read 0).
pub(super) fn out_mask(w: &mut Wave, sdst: u8, bits: &L<bool>) -> ExecResult {
    let exec = w.exec();
    let mut m = 0u64;
    for (l, b) in bits.iter().enumerate() {
        if *b {
            m |= 1 << l;
        }
    }
    if sdst == NULL {
        return Ok(());
    }
    w.write_mask(sdst, m & exec)
}

pub(super) fn lane_mask(w: &Wave, v: &Valu, i: usize) -> ExecResult<u64> {
    w.lane_mask(&v.src[i])
}

pub(super) fn ieee(w: &Wave) -> bool {
    w.mode >> 9 & 1 != 0
}

fn rounding_int(x: f32) -> f32 {
    x.round_ties_even()
}

pub(crate) fn exec_valu(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    let ops = Ops { w, v };
    let ie = ieee(w);
    let op = v.op;
    match op {
        // ---- VOP2 ----
        257 => {
            // Selects bit patterns; VOP3 abs/neg act on them as on f32 signs.
            let (a, b, m) = (ops.fbits(0)?, ops.fbits(1)?, lane_mask(w, v, 2)?);
            let r: L<u32> = std::array::from_fn(|l| if m >> l & 1 != 0 { b[l] } else { a[l] });
            out_u(w, v, &r)
        }
        259 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| a + b);
            out_f(w, v, r)
        }
        260 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| a - b);
            out_f(w, v, r)
        }
        261 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| b - a);
            out_f(w, v, r)
        }
        262 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| {
                if a == 0.0 || b == 0.0 {
                    c
                } else {
                    a.mul_add(b, c)
                }
            });
            out_f(w, v, r)
        }
        263 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| if a == 0.0 || b == 0.0 { 0.0 } else { a * b });
            out_f(w, v, r)
        }
        264 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| a * b);
            out_f(w, v, r)
        }
        265 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| s24(a).wrapping_mul(s24(b)) as u32);
            out_u(w, v, &r)
        }
        266 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| ((s24(a) as i64 * s24(b) as i64) >> 32) as u32);
            out_u(w, v, &r)
        }
        267 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff));
            out_u(w, v, &r)
        }
        268 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| {
                (((a & 0xff_ffff) as u64 * (b & 0xff_ffff) as u64) >> 32) as u32
            });
            out_u(w, v, &r)
        }
        271 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| minmax32(a, b, false, ie));
            out_f(w, v, r)
        }
        272 => {
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| minmax32(a, b, true, ie));
            out_f(w, v, r)
        }
        273 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| (a as i32).min(b as i32) as u32);
            out_u(w, v, &r)
        }
        274 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| (a as i32).max(b as i32) as u32);
            out_u(w, v, &r)
        }
        275 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, u32::min);
            out_u(w, v, &r)
        }
        276 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, u32::max);
            out_u(w, v, &r)
        }
        280 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| b << (a & 31));
            out_u(w, v, &r)
        }
        281 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| b >> (a & 31));
            out_u(w, v, &r)
        }
        282 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| ((b as i32) >> (a & 31)) as u32);
            out_u(w, v, &r)
        }
        283 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| a & b);
            out_u(w, v, &r)
        }
        284 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| a | b);
            out_u(w, v, &r)
        }
        285 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| a ^ b);
            out_u(w, v, &r)
        }
        286 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| !(a ^ b));
            out_u(w, v, &r)
        }
        288..=290 => {
            let (a, b, cin) = (ops.u(0)?, ops.u(1)?, lane_mask(w, v, 2)?);
            let res: L<(u32, bool)> = std::array::from_fn(|l| {
                let c = cin >> l & 1;
                let (x, y) = (a[l] as u64, b[l] as u64);
                match op {
                    288 => {
                        let s = x + y + c;
                        (s as u32, s >> 32 != 0)
                    }
                    289 => (x.wrapping_sub(y).wrapping_sub(c) as u32, y + c > x),
                    _ => (y.wrapping_sub(x).wrapping_sub(c) as u32, x + c > y),
                }
            });
            out_u(w, v, &map(&res, |p| p.0))?;
            out_mask(w, v.sdst, &map(&res, |p| p.1))
        }
        // Integer adds and subtracts: clamp saturates instead of wrapping.
        293 => {
            let f = if saturating(w, v) { u32::saturating_add } else { u32::wrapping_add };
            let r = map2(&ops.u(0)?, &ops.u(1)?, f);
            out_u(w, v, &r)
        }
        294 => {
            let f = if saturating(w, v) { u32::saturating_sub } else { u32::wrapping_sub };
            let r = map2(&ops.u(0)?, &ops.u(1)?, f);
            out_u(w, v, &r)
        }
        295 => {
            let f = if saturating(w, v) { u32::saturating_sub } else { u32::wrapping_sub };
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| f(b, a));
            out_u(w, v, &r)
        }
        // fmac (src2 = vdst) and fmaak (src2 = K): fma(src0, src1, src2); fmamk: fma(src0, K, src1).
        299 | 301 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, f32::mul_add);
            out_f(w, v, r)
        }
        300 => {
            let r = map3(&ops.f(0)?, &ops.f(2)?, &ops.f(1)?, f32::mul_add);
            out_f(w, v, r)
        }
        303 => {
            // Round toward zero conversion of two f32 into packed halves.
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| {
                f32_to_f16_rtz(a) as u32 | (f32_to_f16_rtz(b) as u32) << 16
            });
            out_u(w, v, &r)
        }
        // f16 arithmetic: operands are exact in f64 and so are sums and products of two halves;
        // out_h rounds once.
        306 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| a as f64 + b as f64);
            out_h(w, v, r)
        }
        307 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| a as f64 - b as f64);
            out_h(w, v, r)
        }
        308 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| b as f64 - a as f64);
            out_h(w, v, r)
        }
        309 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| a as f64 * b as f64);
            out_h(w, v, r)
        }
        310 | 312 => {
            let r = map3(&ops.h(0)?, &ops.h(1)?, &ops.h(2)?, |a, b, c| a as f64 * b as f64 + c as f64);
            out_h(w, v, r)
        }
        311 => {
            let r = map3(&ops.h(0)?, &ops.h(2)?, &ops.h(1)?, |a, b, c| a as f64 * b as f64 + c as f64);
            out_h(w, v, r)
        }
        313 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| minmax32(a, b, true, ie) as f64);
            out_h(w, v, r)
        }
        314 => {
            let r = map2(&ops.h(0)?, &ops.h(1)?, |a, b| minmax32(a, b, false, ie) as f64);
            out_h(w, v, r)
        }
        // ---- VOP1 ----
        384 => Ok(()),
        385 => {
            let r = ops.u(0)?;
            out_u(w, v, &r)
        }
        386 => {
            let a = ops.u(0)?;
            let exec = w.exec();
            let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
            w.write_sgpr(v.vdst, a[lane])
        }
        387 => {
            let r = map(&ops.d(0)?, |x| x as i32 as u32);
            out_u_f(w, v, &r)
        }
        388 => {
            let r = map(&ops.u(0)?, |x| x as i32 as f64);
            out_d(w, v, r)
        }
        389 => {
            let r = map(&ops.u(0)?, |x| x as i32 as f32);
            out_f(w, v, r)
        }
        390 => {
            let r = map(&ops.u(0)?, |x| x as f32);
            out_f(w, v, r)
        }
        391 => {
            let r = map(&ops.f(0)?, |x| x as u32);
            out_u_f(w, v, &r)
        }
        392 => {
            let r = map(&ops.f(0)?, |x| x as i32 as u32);
            out_u_f(w, v, &r)
        }
        394 => {
            let a = ops.f(0)?;
            out_h(w, v, map(&a, |x| x as f64))
        }
        395 => {
            let r = ops.h(0)?;
            out_f(w, v, r)
        }
        396 => {
            let r = map(&ops.f(0)?, |x| (x + 0.5).floor() as i32 as u32);
            out_u_f(w, v, &r)
        }
        397 => {
            let r = map(&ops.f(0)?, |x| x.floor() as i32 as u32);
            out_u_f(w, v, &r)
        }
        399 => {
            let r = map(&ops.d(0)?, |x| x as f32);
            out_f(w, v, r)
        }
        400 => {
            let r = map(&ops.f(0)?, |x| x as f64);
            out_d(w, v, r)
        }
        401..=404 => {
            let s = (op - 401) * 8;
            let r = map(&ops.u(0)?, |x| ((x >> s) & 0xff) as f32);
            out_f(w, v, r)
        }
        405 => {
            let r = map(&ops.d(0)?, |x| x as u32);
            out_u_f(w, v, &r)
        }
        406 => {
            let r = map(&ops.u(0)?, |x| x as f64);
            out_d(w, v, r)
        }
        407 => {
            let r = map(&ops.d(0)?, f64::trunc);
            out_d(w, v, r)
        }
        408 => {
            let r = map(&ops.d(0)?, f64::ceil);
            out_d(w, v, r)
        }
        409 => {
            let r = map(&ops.d(0)?, f64::round_ties_even);
            out_d(w, v, r)
        }
        410 => {
            let r = map(&ops.d(0)?, f64::floor);
            out_d(w, v, r)
        }
        416 => {
            let r = map(&ops.f(0)?, |x| {
                if x.is_infinite() {
                    f32::NAN
                } else {
                    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
                }
            });
            out_f(w, v, r)
        }
        417 => {
            let r = map(&ops.f(0)?, f32::trunc);
            out_f(w, v, r)
        }
        418 => {
            let r = map(&ops.f(0)?, f32::ceil);
            out_f(w, v, r)
        }
        419 => {
            let r = map(&ops.f(0)?, rounding_int);
            out_f(w, v, r)
        }
        420 => {
            let r = map(&ops.f(0)?, f32::floor);
            out_f(w, v, r)
        }
        // Transcendentals: the hardware approximates (about 1 ulp); these are correctly rounded.
        421 => {
            let r = map(&ops.f(0)?, f32::exp2);
            out_f(w, v, r)
        }
        423 => {
            let r = map(&ops.f(0)?, f32::log2);
            out_f(w, v, r)
        }
        426 | 427 => {
            let r = map(&ops.f(0)?, |x| 1.0 / x);
            out_f(w, v, r)
        }
        430 => {
            let r = map(&ops.f(0)?, |x| 1.0 / x.sqrt());
            out_f(w, v, r)
        }
        431 => {
            let r = map(&ops.d(0)?, |x| 1.0 / x);
            out_d(w, v, r)
        }
        433 => {
            let r = map(&ops.d(0)?, |x| 1.0 / x.sqrt());
            out_d(w, v, r)
        }
        435 => {
            let r = map(&ops.f(0)?, f32::sqrt);
            out_f(w, v, r)
        }
        436 => {
            let r = map(&ops.d(0)?, f64::sqrt);
            out_d(w, v, r)
        }
        // v_sin/v_cos take the angle in revolutions (x * 2 pi radians).
        437 => {
            let r = map(&ops.f(0)?, |x| ((x as f64) * std::f64::consts::TAU).sin() as f32);
            out_f(w, v, r)
        }
        438 => {
            let r = map(&ops.f(0)?, |x| ((x as f64) * std::f64::consts::TAU).cos() as f32);
            out_f(w, v, r)
        }
        439 => {
            let r = map(&ops.u(0)?, |x| !x);
            out_u(w, v, &r)
        }
        440 => {
            let r = map(&ops.u(0)?, u32::reverse_bits);
            out_u(w, v, &r)
        }
        441 => {
            let r = map(&ops.u(0)?, |x| if x == 0 { u32::MAX } else { x.leading_zeros() });
            out_u(w, v, &r)
        }
        442 => {
            let r = map(&ops.u(0)?, |x| if x == 0 { u32::MAX } else { x.trailing_zeros() });
            out_u(w, v, &r)
        }
        443 => {
            let r = map(&ops.u(0)?, |x| {
                let n = if (x as i32) < 0 { (!x).leading_zeros() } else { x.leading_zeros() };
                // Leading bits equal to the sign bit (the sign bit included); -1 when all are.
                if n == 32 {
                    u32::MAX
                } else {
                    n
                }
            });
            out_u(w, v, &r)
        }
        447 => {
            let r = map(&ops.f(0)?, |x| if x == 0.0 || !x.is_finite() { 0 } else { frexp32(x).1 as u32 });
            out_u_f(w, v, &r)
        }
        444 => {
            let r = map(&ops.d(0)?, |x| if x == 0.0 || !x.is_finite() { 0 } else { frexp64(x).1 as u32 });
            out_u_f(w, v, &r)
        }
        445 => {
            let r = map(&ops.d(0)?, |x| if x == 0.0 || !x.is_finite() { x } else { frexp64(x).0 });
            out_d(w, v, r)
        }
        446 => {
            let r = map(&ops.d(0)?, |x| {
                if x.is_infinite() {
                    f64::NAN
                } else {
                    (x - x.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff))
                }
            });
            out_d(w, v, r)
        }
        448 => {
            let r = map(&ops.f(0)?, |x| if x == 0.0 || !x.is_finite() { x } else { frexp32(x).0 });
            out_f(w, v, r)
        }
        450..=452 => {
            // v_movreld (write v[D + M0]), v_movrels (read v[S0 + M0]), v_movrelsd (both).
            let m0 = w.read_sgpr(super::operand::M0) as usize;
            let idx = |base: usize| -> ExecResult<usize> {
                if base + m0 > 255 {
                    return Err(Fault::unsupported(format!("v_movrel: v{base} + M0 ({m0}) is past v255")));
                }
                Ok(base + m0)
            };
            let src_row = match (op, v.src[0]) {
                (450, _) => None,
                (_, super::operand::Src::Vgpr(r)) => Some(idx(r as usize)?),
                _ => return Err(Fault::unsupported("v_movrels needs a VGPR source")),
            };
            let vals = match src_row {
                Some(r) => w.vgpr[r],
                None => ops.u(0)?,
            };
            let dst = if op == 451 { v.vdst as usize } else { idx(v.vdst as usize)? };
            int_only(v)?;
            let exec = w.exec();
            w.write_vgpr(dst, &vals, exec);
            Ok(())
        }
        485 => {
            // v_swap_b32: exchange vdst and src0 (a VGPR).
            let a = ops.u(0)?;
            let d = w.vgpr[v.vdst as usize];
            let exec = w.exec();
            if let super::operand::Src::Vgpr(s) = v.src[0] {
                w.write_vgpr(s as usize, &d, exec);
            }
            w.write_vgpr(v.vdst as usize, &a, exec);
            Ok(())
        }
        412 => {
            let r = ops.u16(0)?;
            out_half(w, v, &r)
        }
        490 => {
            let r = map(&ops.u16(0)?, |x| x as u16 as i16 as i32 as u32);
            out_u(w, v, &r)
        }
        491 => {
            let r = ops.u16(0)?;
            out_u(w, v, &r)
        }
        // ---- VOP3 only ----
        522 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                s24(a).wrapping_mul(s24(b)).wrapping_add(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        523 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c)
            });
            out_u(w, v, &r)
        }
        528 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| bfe32(a, b & 31, c & 31, false));
            out_u(w, v, &r)
        }
        529 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| bfe32(a, b & 31, c & 31, true));
            out_u(w, v, &r)
        }
        530 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| (a & b) | (!a & c));
            out_u(w, v, &r)
        }
        531 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, f32::mul_add);
            out_f(w, v, r)
        }
        532 => {
            let r = map3(&ops.d(0)?, &ops.d(1)?, &ops.d(2)?, f64::mul_add);
            out_d(w, v, r)
        }
        534 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                ((((a as u64) << 32) | b as u64) >> (c & 31)) as u32
            });
            out_u(w, v, &r)
        }
        535 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                ((((a as u64) << 32) | b as u64) >> (8 * (c & 3))) as u32
            });
            out_u(w, v, &r)
        }
        537 | 540 => {
            let mx = op == 540;
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| {
                minmax32(minmax32(a, b, mx, ie), c, mx, ie)
            });
            out_f(w, v, r)
        }
        538 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (a as i32).min(b as i32).min(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        539 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.min(b).min(c));
            out_u(w, v, &r)
        }
        541 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (a as i32).max(b as i32).max(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        542 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.max(b).max(c));
            out_u(w, v, &r)
        }
        543 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| med3_32(a, b, c, ie));
            out_f(w, v, r)
        }
        544 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                let (a, b, c) = (a as i32, b as i32, c as i32);
                a.min(b).max(a.max(b).min(c)) as u32
            });
            out_u(w, v, &r)
        }
        545 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.min(b).max(a.max(b).min(c)));
            out_u(w, v, &r)
        }
        551 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, division::div_fixup32);
            out_f(w, v, r)
        }
        567 | 568 => {
            let vcc = w.vcc();
            let lanes: L<bool> = std::array::from_fn(|l| vcc >> l & 1 != 0);
            if op == 567 {
                let (a, b, c) = (ops.f(0)?, ops.f(1)?, ops.f(2)?);
                let r = std::array::from_fn(|l| {
                    let fma = |a: f64, b: f64, c: f64| (a as f32).mul_add(b as f32, c as f32) as f64;
                    division::div_fmas(division::F32, a[l] as f64, b[l] as f64, c[l] as f64, lanes[l], fma)
                        as f32
                });
                out_f(w, v, r)
            } else {
                let (a, b, c) = (ops.d(0)?, ops.d(1)?, ops.d(2)?);
                let r = std::array::from_fn(|l| {
                    division::div_fmas(division::F64, a[l], b[l], c[l], lanes[l], f64::mul_add)
                });
                out_d(w, v, r)
            }
        }
        552 => {
            let r = map3(&ops.d(0)?, &ops.d(1)?, &ops.d(2)?, division::div_fixup64);
            out_d(w, v, r)
        }
        576 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a ^ b ^ c);
            out_u(w, v, &r)
        }
        584 => {
            let r = map3(&ops.h(0)?, &ops.h(1)?, &ops.h(2)?, |a, b, c| a as f64 * b as f64 + c as f64);
            out_h(w, v, r)
        }
        601 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u(2)?, |a, b, c| (a * b).wrapping_add(c));
            out_u(w, v, &r)
        }
        // 16-bit adds and subtracts, unsigned (771, 772) and signed (781, 782): clamp
        // saturates instead of wrapping.
        771 | 772 | 781 | 782 => {
            let sat = saturating(w, v);
            let r = map2(&ops.u16(0)?, &ops.u16(1)?, |a, b| {
                let (ua, ub) = (a as u16, b as u16);
                let (ia, ib) = (ua as i16, ub as i16);
                (match (op, sat) {
                    (771, false) => ua.wrapping_add(ub),
                    (771, true) => ua.saturating_add(ub),
                    (772, false) => ua.wrapping_sub(ub),
                    (772, true) => ua.saturating_sub(ub),
                    (781, false) => ia.wrapping_add(ib) as u16,
                    (781, true) => ia.saturating_add(ib) as u16,
                    (_, false) => ia.wrapping_sub(ib) as u16,
                    (_, true) => ia.saturating_sub(ib) as u16,
                }) as u32
            });
            out_half(w, v, &r)
        }
        866..=868 => {
            let (a, b) = (ops.u16(0)?, ops.u16(1)?);
            let r = map2(&a, &b, |a, b| match op {
                866 => a & b,
                867 => a | b,
                _ => a ^ b,
            });
            out_half(w, v, &r)
        }
        777..=780 => {
            let (a, b) = (ops.u16(0)?, ops.u16(1)?);
            let s = |x: u32| x as u16 as i16;
            let r = map2(&a, &b, |a, b| match op {
                777 => a.max(b),
                778 => s(a).max(s(b)) as u16 as u32,
                779 => a.min(b),
                _ => s(a).min(s(b)) as u16 as u32,
            });
            out_half(w, v, &r)
        }
        469 | 475..=478 => {
            // f16 square root and rounding: exact in f64, rounded once to f16.
            let r = map(&ops.h(0)?, |x| {
                let x = x as f64;
                match op {
                    469 => x.sqrt(),
                    475 => x.floor(),
                    476 => x.ceil(),
                    477 => x.trunc(),
                    _ => x.round_ties_even(),
                }
            });
            out_h(w, v, r)
        }
        596 => {
            let r = map3(&ops.h(0)?, &ops.h(1)?, &ops.h(2)?, |q, den, num| {
                division::div_fixup64(q as f64, den as f64, num as f64)
            });
            out_h(w, v, r)
        }
        824 => {
            let r = map2(&ops.u16(0)?, &ops.u16(1)?, |a, b| (b << (a & 15)) & 0xffff);
            out_half(w, v, &r)
        }
        825 => {
            let r = map2(&ops.u16(0)?, &ops.u16(1)?, |a, b| b >> (a & 15));
            out_half(w, v, &r)
        }
        605 => {
            // v_cndmask_b16: per-lane select of halves, bits moved as they are (a signalling
            // NaN stays one); abs and neg act on the f16 sign bit.
            let half_bits = |i: usize| ops.half_bits(i);
            let (a, b, m) = (half_bits(0)?, half_bits(1)?, lane_mask(w, v, 2)?);
            let r: L<u32> = std::array::from_fn(|l| if m >> l & 1 != 0 { b[l] } else { a[l] });
            out_half(w, v, &r)
        }
        580 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, perm);
            out_u(w, v, &r)
        }
        581 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| (a ^ b).wrapping_add(c));
            out_u(w, v, &r)
        }
        582 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| (a << (b & 31)).wrapping_add(c));
            out_u(w, v, &r)
        }
        583 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.wrapping_add(b) << (c & 31));
            out_u(w, v, &r)
        }
        597 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.wrapping_add(b).wrapping_add(c));
            out_u(w, v, &r)
        }
        598 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| (a << (b & 31)) | c);
            out_u(w, v, &r)
        }
        599 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| (a & b) | c);
            out_u(w, v, &r)
        }
        600 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a | b | c);
            out_u(w, v, &r)
        }
        606 | 607 => {
            // maxmin: min(max(a, b), c); minmax: max(min(a, b), c).
            let first_max = op == 606;
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| {
                minmax32(minmax32(a, b, first_max, ie), c, !first_max, ie)
            });
            out_f(w, v, r)
        }
        610 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.max(b).min(c));
            out_u(w, v, &r)
        }
        611 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| a.min(b).max(c));
            out_u(w, v, &r)
        }
        612 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (a as i32).max(b as i32).min(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        613 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (a as i32).min(b as i32).max(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        764 => {
            let (a, den, num) = (ops.f(0)?, ops.f(1)?, ops.f(2)?);
            let res: L<(f32, bool)> = std::array::from_fn(|l| {
                let (d, vcc) = division::div_scale(division::F32, a[l] as f64, den[l] as f64, num[l] as f64);
                (d as f32, vcc)
            });
            out_f(w, v, map(&res, |p| p.0))?;
            out_mask(w, v.sdst, &map(&res, |p| p.1))
        }
        765 => {
            let (a, den, num) = (ops.d(0)?, ops.d(1)?, ops.d(2)?);
            let res: L<(f64, bool)> =
                std::array::from_fn(|l| division::div_scale(division::F64, a[l], den[l], num[l]));
            out_d(w, v, map(&res, |p| p.0))?;
            out_mask(w, v.sdst, &map(&res, |p| p.1))
        }
        766 | 767 => {
            let signed = op == 767;
            let (a, b) = (ops.u(0)?, ops.u(1)?);
            let c = ops.q(2)?;
            let res: L<(u64, bool)> = std::array::from_fn(|l| {
                if signed {
                    let p = a[l] as i32 as i128 * b[l] as i32 as i128 + c[l] as i64 as i128;
                    (p as u64, p != p as i64 as i128)
                } else {
                    let p = a[l] as u128 * b[l] as u128 + c[l] as u128;
                    (p as u64, p >> 64 != 0)
                }
            });
            out_q(w, v, &map(&res, |p| p.0))?;
            out_mask(w, v.sdst, &map(&res, |p| p.1))
        }
        768..=770 => {
            let (a, b) = (ops.u(0)?, ops.u(1)?);
            let res: L<(u32, bool)> = std::array::from_fn(|l| match op {
                768 => a[l].overflowing_add(b[l]),
                769 => a[l].overflowing_sub(b[l]),
                _ => b[l].overflowing_sub(a[l]),
            });
            out_u(w, v, &map(&res, |p| p.0))?;
            out_mask(w, v.sdst, &map(&res, |p| p.1))
        }
        773 => {
            let r = map2(&ops.u16(0)?, &ops.u16(1)?, |a, b| (a as u16).wrapping_mul(b as u16) as u32);
            out_half(w, v, &r)
        }
        785 => {
            // v_pack_b32_f16: the two halves side by side, bits moved as they are (abs and neg
            // act on each half's sign; no rounding or quieting).
            if v.opsel & 8 != 0 || v.clamp || v.omod != 0 {
                return Err(Fault::unsupported("opsel, clamp or omod on the destination of v_pack_b32_f16"));
            }
            let half = |i: usize| ops.half_bits(i);
            let r = map2(&half(0)?, &half(1)?, |lo, hi| lo | hi << 16);
            let exec = w.exec();
            w.write_vgpr(v.vdst as usize, &r, exec);
            Ok(())
        }
        796 => {
            let r = map2(&ops.f(0)?, &ops.u(1)?, |a, b| ldexp32(a, b as i32));
            out_f(w, v, r)
        }
        797 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| ((1u32 << (a & 31)).wrapping_sub(1)) << (b & 31));
            out_u(w, v, &r)
        }
        798 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| a.count_ones().wrapping_add(b));
            out_u(w, v, &r)
        }
        799 | 800 => {
            let (a, b) = (ops.u(0)?, ops.u(1)?);
            // v_mbcnt_lo counts the mask bits of lanes 0..31 below this lane, v_mbcnt_hi those
            // of lanes 32..63 (only wave64 has lanes past 31).
            let below = |mask: u32, lanes: usize| (mask as u64 & ((1u64 << lanes.min(32)) - 1)) as u32;
            let r: L<u32> = std::array::from_fn(|l| {
                let counted = if op == 799 { below(a[l], l) } else { below(a[l], l.saturating_sub(32)) };
                counted.count_ones().wrapping_add(b[l])
            });
            out_u(w, v, &r)
        }
        803 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| a.min(0xffff) | b.min(0xffff) << 16);
            out_u(w, v, &r)
        }
        804 => {
            let sat = |x: u32| (x as i32).clamp(-32768, 32767) as u16 as u32;
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| sat(a) | sat(b) << 16);
            out_u(w, v, &r)
        }
        805 => {
            let f = if saturating(w, v) { i32::saturating_sub } else { i32::wrapping_sub };
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| f(a as i32, b as i32) as u32);
            out_u(w, v, &r)
        }
        806 => {
            let f = if saturating(w, v) { i32::saturating_add } else { i32::wrapping_add };
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| f(a as i32, b as i32) as u32);
            out_u(w, v, &r)
        }
        807 => {
            let r = map2(&ops.d(0)?, &ops.d(1)?, |a, b| a + b);
            out_d(w, v, r)
        }
        808 => {
            let r = map2(&ops.d(0)?, &ops.d(1)?, |a, b| a * b);
            out_d(w, v, r)
        }
        809 => {
            let r = map2(&ops.d(0)?, &ops.d(1)?, |a, b| minmax64(a, b, false, ie));
            out_d(w, v, r)
        }
        810 => {
            let r = map2(&ops.d(0)?, &ops.d(1)?, |a, b| minmax64(a, b, true, ie));
            out_d(w, v, r)
        }
        811 => {
            let r = map2(&ops.d(0)?, &ops.u(1)?, |a, e| ldexp64(a, e as i32));
            out_d(w, v, r)
        }
        812 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, u32::wrapping_mul);
            out_u(w, v, &r)
        }
        813 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| ((a as u64 * b as u64) >> 32) as u32);
            out_u(w, v, &r)
        }
        814 => {
            let r = map2(&ops.u(0)?, &ops.u(1)?, |a, b| ((a as i32 as i64 * b as i32 as i64) >> 32) as u32);
            out_u(w, v, &r)
        }
        828 => {
            let r = map2(&ops.u(0)?, &ops.q(1)?, |a, b| b << (a & 63));
            out_q(w, v, &r)
        }
        829 => {
            let r = map2(&ops.u(0)?, &ops.q(1)?, |a, b| b >> (a & 63));
            out_q(w, v, &r)
        }
        830 => {
            let r = map2(&ops.u(0)?, &ops.q(1)?, |a, b| ((b as i64) >> (a & 63)) as u64);
            out_q(w, v, &r)
        }
        864 => {
            let a = ops.u(0)?;
            let lane = w.scalar32(&v.src[1])? as usize % w.lanes();
            w.write_sgpr(v.vdst, a[lane])
        }
        865 => {
            let val = w.scalar32(&v.src[0])?;
            let lane = w.scalar32(&v.src[1])? as usize % w.lanes();
            w.vgpr[v.vdst as usize][lane] = val;
            Ok(())
        }
        // gfx10.3's v_dot4c_i32_i8: D += the products of the signed bytes of S0 and S1.
        super::decode_gfx10::GFX10_DOT4C_I32_I8 if w.gfx == Gfx::Gfx10_3 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (0..4).fold(c as i32, |sum, k| {
                    let byte = |x: u32| (x >> (8 * k)) as u8 as i8 as i32;
                    sum.wrapping_add(byte(a) * byte(b))
                }) as u32
            });
            out_u(w, v, &r)
        }
        op if super::valu16::handles(op) => super::valu16::exec(w, v, word),
        op if super::valu_more::handles(op) => super::valu_more::exec(w, v, word),
        _ => Err(Fault::Unknown { encoding: enc_name(v), opcode: op as u32, word }),
    }
}

/// Float-to-int conversions: clamp does not apply; omod must be off.
fn out_u_f(w: &mut Wave, v: &Valu, r: &L<u32>) -> ExecResult {
    out_u(w, v, r)
}

pub(crate) fn enc_name(v: &Valu) -> &'static str {
    match v.enc {
        super::decode::ValuEnc::Vop1 => "VOP1",
        super::decode::ValuEnc::Vop2 => "VOP2",
        super::decode::ValuEnc::Vopc => "VOPC",
        super::decode::ValuEnc::Vop3 => "VOP3",
        super::decode::ValuEnc::Vop3p => "VOP3P",
    }
}

fn s24(x: u32) -> i32 {
    ((x << 8) as i32) >> 8
}

fn perm(a: u32, b: u32, sel: u32) -> u32 {
    let bytes = ((a as u64) << 32) | b as u64;
    let mut out = 0u32;
    for i in 0..4 {
        let s = (sel >> (8 * i)) & 0xff;
        let byte: u32 = match s {
            0..=7 => ((bytes >> (8 * s)) & 0xff) as u32,
            8..=11 => {
                // Sign of a 16-bit half replicated: bytes 1, 3, 5, 7.
                let src_byte = ((bytes >> (8 * (2 * (s - 8) + 1))) & 0xff) as u32;
                if src_byte & 0x80 != 0 {
                    0xff
                } else {
                    0
                }
            }
            12 => 0,
            _ => 0xff,
        };
        out |= byte << (8 * i);
    }
    out
}

pub(super) fn frexp32(x: f32) -> (f32, i32) {
    let (m, e) = frexp64(x as f64);
    (m as f32, e)
}

pub(super) fn frexp64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        let (m, e) = frexp64(x * 2f64.powi(64));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, exp - 1022)
}

pub(super) fn ldexp32(x: f32, e: i32) -> f32 {
    // Exact scaling through f64 (f32's range fits), then one rounding to f32.
    let e = e.clamp(-400, 400);
    ((x as f64) * 2f64.powi(e)) as f32
}

/// 2^k as an exact f64 for k in -1074..=1023.
pub(super) fn pow2(k: i64) -> f64 {
    if k >= -1022 {
        f64::from_bits(((k + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (k + 1074))
    }
}

/// a * 2^e with one rounding: a = m * 2^ea with m in [0.5, 1), so the product is m * 2^(ea + e).
pub(super) fn ldexp64(a: f64, e: i32) -> f64 {
    if a == 0.0 || !a.is_finite() {
        return a;
    }
    let (m, ea) = frexp64(a);
    let k = ea as i64 + e as i64;
    if k > 1024 {
        f64::INFINITY.copysign(a)
    } else if k < -1074 {
        // |m * 2^k| < 2^-1075: rounds to zero.
        0.0f64.copysign(a)
    } else if k == 1024 {
        (m * 2.0) * pow2(1023)
    } else {
        m * pow2(k)
    }
}

fn f32_to_f16_rtz(x: f32) -> u16 {
    let h = f32_to_f16(x);
    // Round-to-nearest may have rounded away from zero: step back toward zero if so.
    let back = f16_to_f32(h);
    if x.is_finite() && back.abs() > x.abs() {
        if h & 0x7fff == 0x7c00 {
            return (h & 0x8000) | 0x7bff;
        }
        h - 1
    } else {
        h
    }
}
