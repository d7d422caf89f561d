//! The modifiers of a VALU instruction (abs, neg, op_sel of each operand, clamp, omod, and
//! VOP3P's neg_hi) and the check that every one an instruction carries was applied.
//!
//! The executors mark each modifier as they apply it (`Wave::handled`); after the instruction
//! ran, whatever is set in its encoding but was not marked refuses it. Loading a kernel
//! trial-executes every distinct instruction, so a modifier the interpreter would ignore
//! refuses the kernel at load, naming the instruction and the modifier, instead of producing a
//! wrong value as if it were right. VOP3P's op_sel_hi is not tracked: every packed operand is
//! read through it, and on operands an instruction does not read it means nothing.

use super::decode::{Valu, ValuEnc};
use super::error::{ExecResult, Fault};
use super::valu::enc_name;

/// abs of source `i`.
pub(crate) const fn abs(i: usize) -> u16 {
    1 << i
}

/// neg of source `i` (for VOP3P: of its low half).
pub(crate) const fn neg(i: usize) -> u16 {
    1 << (3 + i)
}

/// op_sel of source `i` (0..=2), or of the destination (`i` = 3).
pub(crate) const fn opsel(i: usize) -> u16 {
    1 << (6 + i)
}

/// The clamp bit (saturation for integer results, [0, 1] for float results).
pub(crate) const CLAMP: u16 = 1 << 10;
/// A non-zero output modifier (multiply by 2, 4 or 0.5).
pub(crate) const OMOD: u16 = 1 << 11;

/// VOP3P's neg_hi of source `i` (the high half's negation; fma_mix's abs).
pub(crate) const fn neg_hi(i: usize) -> u16 {
    1 << (12 + i)
}

/// The modifiers `v`'s encoding carries, as the bits above.
pub(crate) fn present(v: &Valu) -> u16 {
    let mut bits = 0u16;
    for i in 0..3 {
        if v.abs >> i & 1 != 0 {
            bits |= abs(i);
        }
        if v.neg >> i & 1 != 0 {
            bits |= neg(i);
        }
        if v.neg_hi >> i & 1 != 0 {
            bits |= neg_hi(i);
        }
    }
    let opsel_fields = if v.enc == ValuEnc::Vop3p { 3 } else { 4 };
    for i in 0..opsel_fields {
        if v.opsel >> i & 1 != 0 {
            bits |= opsel(i);
        }
    }
    if v.clamp {
        bits |= CLAMP;
    }
    if v.omod != 0 {
        bits |= OMOD;
    }
    bits
}

/// The modifiers in `bits`, in words ("clamp, abs of source 1").
pub(crate) fn describe(bits: u16) -> String {
    let mut names = Vec::new();
    let source = |i: usize| if i == 3 { "the destination".to_string() } else { format!("source {i}") };
    for i in 0..3 {
        if bits & abs(i) != 0 {
            names.push(format!("abs of {}", source(i)));
        }
        if bits & neg(i) != 0 {
            names.push(format!("neg of {}", source(i)));
        }
        if bits & neg_hi(i) != 0 {
            names.push(format!("neg_hi of {}", source(i)));
        }
    }
    for i in 0..4 {
        if bits & opsel(i) != 0 {
            names.push(format!("op_sel of {}", source(i)));
        }
    }
    if bits & CLAMP != 0 {
        names.push("clamp".into());
    }
    if bits & OMOD != 0 {
        names.push("the output modifier (omod)".into());
    }
    names.join(", ")
}

/// Refuses `v` when a modifier it carries is not among `handled`.
pub(crate) fn check(v: &Valu, handled: u16) -> ExecResult {
    let ignored = present(v) & !handled;
    if ignored == 0 {
        return Ok(());
    }
    Err(Fault::unsupported(format!(
        "{} on {} opcode {} is not modelled (the interpreter would ignore it)",
        describe(ignored),
        enc_name(v),
        v.op
    )))
}

/// Applies the clamp modifier to a float result: [0, 1]; a NaN becomes 0 when the MODE
/// register's DX10_CLAMP is set and stays NaN otherwise. -0 stays -0 (it is not below 0).
pub(crate) fn clamp_float(x: f64, dx10: bool) -> f64 {
    if x.is_nan() {
        if dx10 {
            0.0
        } else {
            x
        }
    } else {
        x.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::decode::plain_valu;

    #[test]
    fn present_modifiers_not_handled_are_named() {
        let mut v = plain_valu(ValuEnc::Vop3, 772);
        v.clamp = true;
        v.opsel = 0b1010;
        assert_eq!(present(&v), CLAMP | opsel(1) | opsel(3));
        assert!(check(&v, CLAMP | opsel(1) | opsel(3)).is_ok());
        let err = check(&v, opsel(1) | opsel(3)).unwrap_err();
        assert!(matches!(&err, Fault::Unsupported(m) if m.contains("clamp") && m.contains("772")), "{err:?}");
        v.omod = 2;
        v.abs = 4;
        let err = check(&v, CLAMP | opsel(1) | opsel(3)).unwrap_err();
        assert!(
            matches!(&err, Fault::Unsupported(m) if m.contains("omod") && m.contains("abs of source 2")),
            "{err:?}"
        );
    }

    #[test]
    fn vop3p_has_no_destination_op_sel() {
        let mut v = plain_valu(ValuEnc::Vop3p, 15);
        v.opsel = 0b111;
        v.neg_hi = 0b001;
        assert_eq!(present(&v), opsel(0) | opsel(1) | opsel(2) | neg_hi(0));
    }

    #[test]
    fn float_clamp_follows_dx10_clamp() {
        assert_eq!(clamp_float(2.5, true), 1.0);
        assert_eq!(clamp_float(-3.0, false), 0.0);
        assert_eq!(clamp_float(f64::NAN, true), 0.0);
        assert!(clamp_float(f64::NAN, false).is_nan());
        assert!(clamp_float(-0.0, true).is_sign_negative());
        assert_eq!(clamp_float(0.25, true), 0.25);
    }
}
