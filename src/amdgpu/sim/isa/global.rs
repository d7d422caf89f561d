//! FLAT / GLOBAL instructions: per-lane loads, stores and atomics through [`GlobalMemory`].
//! FLAT addresses are treated as global (no LDS or scratch apertures are modelled).

use super::decode::Flat;
use super::error::{ExecResult, Fault};
use super::lds::rmw32;
use super::memory::GlobalMemory;
use super::operand::NULL;
use super::wave::{Wave, LANES};

fn known(op: u8) -> bool {
    matches!(op, 16..=37 | 51..=77 | 80..=82 | 86)
}

// Lanes index several register rows at once, so a range loop reads best.
#[allow(clippy::needless_range_loop)]
pub(crate) fn exec_flat(w: &mut Wave, mem: &mut dyn GlobalMemory, f: &Flat, word: u32) -> ExecResult {
    let enc = match f.seg {
        0 => "FLAT",
        1 => "SCRATCH",
        _ => "GLOBAL",
    };
    if !known(f.op) || f.seg == 3 {
        return Err(Fault::Unknown { encoding: enc, opcode: f.op as u32, word });
    }
    if f.seg == 1 {
        return Err(Fault::unsupported("scratch (private segment) memory is not modelled"));
    }
    let exec = w.exec();
    let ieee = w.mode >> 9 & 1 != 0;
    let sbase = if f.seg == 2 && f.saddr != NULL { Some(w.read_sgpr64(f.saddr)) } else { None };
    let (dv, dd, va) = (f.vdst as usize, f.data as usize, f.addr as usize);
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let base = match sbase {
            Some(s) => s.wrapping_add(w.vgpr[va][l] as u64),
            None => w.vgpr[va][l] as u64 | (w.vgpr[va + 1][l] as u64) << 32,
        };
        let a = base.wrapping_add(f.offset as i64 as u64);
        let data = |w: &Wave, i: usize| w.vgpr[dd + i][l];
        let data64 = |w: &Wave, i: usize| w.vgpr[dd + i][l] as u64 | (w.vgpr[dd + i + 1][l] as u64) << 32;
        match f.op {
            16..=19 => {
                let mut b = [0u8; 2];
                let n = if f.op <= 17 { 1 } else { 2 };
                mem.read(a, &mut b[..n])?;
                w.vgpr[dv][l] = match f.op {
                    16 => b[0] as u32,
                    17 => b[0] as i8 as i32 as u32,
                    18 => u16::from_le_bytes(b) as u32,
                    _ => i16::from_le_bytes(b) as i32 as u32,
                };
            }
            20..=23 => {
                let n = (f.op - 19) as usize;
                let mut b = [0u8; 16];
                mem.read(a, &mut b[..4 * n])?;
                for i in 0..n {
                    let v = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
                    w.vgpr[dv + i][l] = v;
                }
            }
            30..=35 => {
                // d16 loads replace one half of the destination and keep the other.
                let mut b = [0u8; 2];
                let byte = matches!(f.op, 30 | 31 | 33 | 34);
                mem.read(a, &mut b[..if byte { 1 } else { 2 }])?;
                let h: u16 = match f.op {
                    30 | 33 => b[0] as u16,
                    31 | 34 => b[0] as i8 as i16 as u16,
                    _ => u16::from_le_bytes(b),
                };
                let old = w.vgpr[dv][l];
                w.vgpr[dv][l] = if f.op >= 33 {
                    (old & 0xffff) | (h as u32) << 16
                } else {
                    (old & 0xffff_0000) | h as u32
                };
            }
            24 => mem.write(a, &[data(w, 0) as u8])?,
            25 => mem.write(a, &(data(w, 0) as u16).to_le_bytes())?,
            36 => mem.write(a, &[(data(w, 0) >> 16) as u8])?,
            37 => mem.write(a, &((data(w, 0) >> 16) as u16).to_le_bytes())?,
            26..=29 => {
                let n = (f.op - 25) as usize;
                let mut b = [0u8; 16];
                for i in 0..n {
                    b[4 * i..4 * i + 4].copy_from_slice(&data(w, i).to_le_bytes());
                }
                mem.write(a, &b[..4 * n])?;
            }
            51..=64 | 80..=82 | 86 => {
                let (src, cmp) = (data(w, 0), data(w, 1));
                let mut op = |old: u32| -> u32 {
                    let ff = f32::from_bits;
                    match f.op {
                        51 => src,
                        52 | 80 => {
                            let equal = if f.op == 80 { ff(old) == ff(cmp) } else { old == cmp };
                            if equal {
                                src
                            } else {
                                old
                            }
                        }
                        53 => old.wrapping_add(src),
                        54 => old.wrapping_sub(src),
                        55 => old.saturating_sub(src),
                        56 => rmw32(5, old, src, 0, ieee).unwrap_or(old),
                        57 => old.min(src),
                        58 => rmw32(6, old, src, 0, ieee).unwrap_or(old),
                        59 => old.max(src),
                        60 => old & src,
                        61 => old | src,
                        62 => old ^ src,
                        63 => rmw32(3, old, src, 0, ieee).unwrap_or(old),
                        64 => rmw32(4, old, src, 0, ieee).unwrap_or(old),
                        81 => rmw32(18, old, src, 0, ieee).unwrap_or(old),
                        82 => rmw32(19, old, src, 0, ieee).unwrap_or(old),
                        _ => (ff(old) + ff(src)).to_bits(),
                    }
                };
                let old = mem.atomic32(a, &mut op)?;
                if f.glc {
                    w.vgpr[dv][l] = old;
                }
            }
            65..=77 => {
                let (src, cmp) = (data64(w, 0), if f.op == 66 { data64(w, 2) } else { 0 });
                let mut op = |old: u64| -> u64 {
                    match f.op {
                        65 => src,
                        66 => {
                            if old == cmp {
                                src
                            } else {
                                old
                            }
                        }
                        67 => old.wrapping_add(src),
                        68 => old.wrapping_sub(src),
                        69 => (old as i64).min(src as i64) as u64,
                        70 => old.min(src),
                        71 => (old as i64).max(src as i64) as u64,
                        72 => old.max(src),
                        73 => old & src,
                        74 => old | src,
                        75 => old ^ src,
                        76 => {
                            if old >= src {
                                0
                            } else {
                                old + 1
                            }
                        }
                        _ => {
                            if old == 0 || old > src {
                                src
                            } else {
                                old - 1
                            }
                        }
                    }
                };
                let old = mem.atomic64(a, &mut op)?;
                if f.glc {
                    w.vgpr[dv][l] = old as u32;
                    w.vgpr[dv + 1][l] = (old >> 32) as u32;
                }
            }
            _ => return Err(Fault::Unknown { encoding: enc, opcode: f.op as u32, word }),
        }
    }
    Ok(())
}
