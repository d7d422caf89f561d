//! Vector compares (VOPC and their VOP3 forms): V_CMP writes a lane mask to VCC or an SGPR,
//! V_CMPX writes it to EXEC. Inactive lanes always produce 0.

use super::decode::Valu;
use super::error::{ExecResult, Fault};
use super::float::class_bit;
use super::operand::NULL;
use super::valu::{enc_name, Ops};
use super::wave::{Wave, LANES};

fn float_cond(cond: u16, a: f64, b: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    // None when either operand is NaN (unordered): the "n" conditions are then true.
    let o = a.partial_cmp(&b);
    match cond {
        0 => false,
        1 => o == Some(Less),
        2 => o == Some(Equal),
        3 => matches!(o, Some(Less | Equal)),
        4 => o == Some(Greater),
        5 => matches!(o, Some(Less | Greater)),
        6 => matches!(o, Some(Greater | Equal)),
        7 => o.is_some(),
        8 => o.is_none(),
        9 => !matches!(o, Some(Greater | Equal)),
        10 => !matches!(o, Some(Less | Greater)),
        11 => o != Some(Greater),
        12 => !matches!(o, Some(Less | Equal)),
        13 => o != Some(Equal),
        14 => o != Some(Less),
        _ => true,
    }
}

fn int_cond(cond: u16, a: i128, b: i128) -> bool {
    match cond {
        0 => false,
        1 => a < b,
        2 => a == b,
        3 => a <= b,
        4 => a > b,
        5 => a != b,
        6 => a >= b,
        _ => true,
    }
}

pub(crate) fn exec_vcmp(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    let op = v.op & 127;
    let ops = Ops { w, v };
    let res: [bool; LANES] = match op {
        0..=15 => {
            let (a, b) = (ops.h(0)?, ops.h(1)?);
            std::array::from_fn(|l| float_cond(op, a[l] as f64, b[l] as f64))
        }
        16..=31 => {
            let (a, b) = (ops.f(0)?, ops.f(1)?);
            std::array::from_fn(|l| float_cond(op - 16, a[l] as f64, b[l] as f64))
        }
        32..=47 => {
            let (a, b) = (ops.d(0)?, ops.d(1)?);
            std::array::from_fn(|l| float_cond(op - 32, a[l], b[l]))
        }
        49..=54 | 57..=62 => {
            let (a, b) = (ops.u16(0)?, ops.u16(1)?);
            let signed = op < 56;
            let ext = |x: u32| if signed { x as u16 as i16 as i128 } else { x as u16 as i128 };
            std::array::from_fn(|l| int_cond(op & 7, ext(a[l]), ext(b[l])))
        }
        64..=79 => {
            let (a, b) = (ops.u(0)?, ops.u(1)?);
            let signed = op < 72;
            let ext = |x: u32| if signed { x as i32 as i128 } else { x as i128 };
            std::array::from_fn(|l| int_cond(op & 7, ext(a[l]), ext(b[l])))
        }
        80..=95 => {
            let (a, b) = (ops.q(0)?, ops.q(1)?);
            let signed = op < 88;
            let ext = |x: u64| if signed { x as i64 as i128 } else { x as i128 };
            std::array::from_fn(|l| int_cond(op & 7, ext(a[l]), ext(b[l])))
        }
        125 => {
            let (a, m) = (ops.h(0)?, ops.u(1)?);
            // The raw half, for its fraction; the sign as the modifiers left it.
            let raw = ops.w.src16(&v.src[0])?;
            let bits = |l: usize| (raw[l] as u64 & 0x7fff) | (a[l].is_sign_negative() as u64) << 15;
            std::array::from_fn(|l| m[l] >> class_bit(bits(l), 5, 10) & 1 != 0)
        }
        126 => {
            let (a, m) = (ops.f(0)?, ops.u(1)?);
            std::array::from_fn(|l| m[l] >> class_bit(a[l].to_bits() as u64, 8, 23) & 1 != 0)
        }
        127 => {
            let (a, m) = (ops.d(0)?, ops.u(1)?);
            std::array::from_fn(|l| m[l] >> class_bit(a[l].to_bits(), 11, 52) & 1 != 0)
        }
        _ => return Err(Fault::Unknown { encoding: enc_name(v), opcode: v.op as u32, word }),
    };
    let exec = w.exec();
    let mut mask = 0u64;
    for (l, r) in res.iter().enumerate() {
        if *r {
            mask |= 1 << l;
        }
    }
    mask &= exec;
    if v.op >= 128 {
        w.set_exec(mask);
        Ok(())
    } else if v.sdst == NULL {
        Ok(())
    } else {
        w.write_mask(v.sdst, mask)
    }
}
