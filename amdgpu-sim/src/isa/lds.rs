//! DS instructions: loads, stores and atomics on the workgroup's LDS, one lane after another.

use super::decode::Ds;
use super::error::{ExecResult, Fault};
use super::float::minmax32;
use super::wave::{Wave, LANES};

fn check(lds: &[u8], addr: u64, size: u32) -> ExecResult<usize> {
    if addr + size as u64 > lds.len() as u64 {
        return Err(Fault::LdsRange { addr, size, lds_bytes: lds.len() as u32 });
    }
    Ok(addr as usize)
}

fn load(lds: &[u8], addr: u64, out: &mut [u8]) -> ExecResult {
    let a = check(lds, addr, out.len() as u32)?;
    out.copy_from_slice(&lds[a..a + out.len()]);
    Ok(())
}

fn store(lds: &mut [u8], addr: u64, data: &[u8]) -> ExecResult {
    let a = check(lds, addr, data.len() as u32)?;
    lds[a..a + data.len()].copy_from_slice(data);
    Ok(())
}

fn ld32(lds: &[u8], addr: u64) -> ExecResult<u32> {
    let mut b = [0u8; 4];
    load(lds, addr, &mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn ld64(lds: &[u8], addr: u64) -> ExecResult<u64> {
    let mut b = [0u8; 8];
    load(lds, addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// The new memory value of a 32-bit DS atomic (`kind` is the non-returning opcode 0..=21).
pub(crate) fn rmw32(kind: u8, old: u32, data: u32, data2: u32, ieee: bool) -> Option<u32> {
    let f = f32::from_bits;
    Some(match kind {
        0 => old.wrapping_add(data),
        1 => old.wrapping_sub(data),
        2 => data.wrapping_sub(old),
        3 => {
            if old >= data {
                0
            } else {
                old + 1
            }
        }
        4 => {
            if old == 0 || old > data {
                data
            } else {
                old - 1
            }
        }
        5 => (old as i32).min(data as i32) as u32,
        6 => (old as i32).max(data as i32) as u32,
        7 => old.min(data),
        8 => old.max(data),
        9 => old & data,
        10 => old | data,
        11 => old ^ data,
        12 => (old & !data) | data2,
        13 => data,
        16 => {
            if old == data2 {
                data
            } else {
                old
            }
        }
        18 => minmax32(f(old), f(data), false, ieee).to_bits(),
        19 => minmax32(f(old), f(data), true, ieee).to_bits(),
        21 => (f(old) + f(data)).to_bits(),
        _ => return None,
    })
}

fn rmw64(kind: u8, old: u64, data: u64, data2: u64) -> Option<u64> {
    Some(match kind {
        0 => old.wrapping_add(data),
        1 => old.wrapping_sub(data),
        2 => data.wrapping_sub(old),
        3 => {
            if old >= data {
                0
            } else {
                old + 1
            }
        }
        4 => {
            if old == 0 || old > data {
                data
            } else {
                old - 1
            }
        }
        5 => (old as i64).min(data as i64) as u64,
        6 => (old as i64).max(data as i64) as u64,
        7 => old.min(data),
        8 => old.max(data),
        9 => old & data,
        10 => old | data,
        11 => old ^ data,
        12 => (old & !data) | data2,
        13 => data,
        16 => {
            if old == data2 {
                data
            } else {
                old
            }
        }
        _ => return None,
    })
}

/// ds_permute_b32 (178: lane i sends data to lane addr/4) and ds_bpermute_b32 (179: lane i
/// fetches from lane addr/4). They use the LDS crossbar but not LDS memory. Reading an inactive
/// lane gives 0; when several lanes send to one lane, the highest sender wins.
fn permute(w: &mut Wave, d: &Ds) {
    let exec = w.exec();
    let offset = (d.offset0 as u32) | (d.offset1 as u32) << 8;
    let addr = w.vgpr[d.addr as usize];
    let data = w.vgpr[d.data0 as usize];
    let lanes = w.lanes();
    let lane_of = |l: usize| (addr[l].wrapping_add(offset) >> 2) as usize % lanes;
    let mut out = [0u32; LANES];
    if d.op == 179 {
        for (l, o) in out.iter_mut().enumerate().take(lanes) {
            let src = lane_of(l);
            *o = if exec >> src & 1 != 0 { data[src] } else { 0 };
        }
    } else {
        for l in (0..lanes).filter(|&l| exec >> l & 1 != 0) {
            out[lane_of(l)] = data[l];
        }
    }
    w.write_vgpr(d.vdst as usize, &out, exec);
}

// Lanes index several register rows at once, so a range loop reads best.
#[allow(clippy::needless_range_loop)]
pub(crate) fn exec_ds(w: &mut Wave, lds: &mut [u8], d: &Ds, word: u32) -> ExecResult {
    if d.gds {
        return Err(Fault::unsupported("GDS (global data share) is not modelled"));
    }
    let unknown = || Fault::Unknown { encoding: "DS", opcode: d.op as u32, word };
    if matches!(d.op, 178 | 179) {
        permute(w, d);
        return Ok(());
    }
    let known = matches!(
        d.op,
        0..=16 | 18 | 19 | 21 | 30..=45 | 48 | 50 | 51 | 54..=60 | 64..=80 | 96..=109 | 112 | 118..=121 | 222 | 223 | 254 | 255
    );
    if !known {
        return Err(unknown());
    }
    let exec = w.exec();
    let ieee = w.mode >> 9 & 1 != 0;
    let off16 = (d.offset0 as u64) | (d.offset1 as u64) << 8;
    let addr = w.vgpr[d.addr as usize];
    let (dv, d0, d1) = (d.vdst as usize, d.data0 as usize, d.data1 as usize);
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        // LDS addresses are 32-bit: VGPR + offset wraps (LLVM relies on it, e.g. a negative
        // VGPR with a positive offset).
        let at = |extra: u64| u64::from(addr[l].wrapping_add(extra as u32));
        let a = at(off16);
        let vg = |w: &Wave, r: usize| w.vgpr[r][l];
        let vg64 = |w: &Wave, r: usize| w.vgpr[r][l] as u64 | (w.vgpr[r + 1][l] as u64) << 32;
        match d.op {
            // 32-bit atomics without and with return (32..=51 return the old value).
            0..=12 | 16 | 18 | 19 | 21 | 32..=44 | 45 | 48 | 50 | 51 | 121 => {
                let (kind, rtn) = match d.op {
                    121 => (21, true),
                    45 => (13, true),
                    op if op >= 32 => (op - 32, true),
                    op => (op, false),
                };
                let old = ld32(lds, a)?;
                let new = rmw32(kind, old, vg(w, d0), vg(w, d1), ieee).ok_or_else(unknown)?;
                store(lds, a, &new.to_le_bytes())?;
                if rtn {
                    w.vgpr[dv][l] = old;
                }
            }
            13 => store(lds, a, &vg(w, d0).to_le_bytes())?,
            30 => store(lds, a, &[vg(w, d0) as u8])?,
            31 => store(lds, a, &(vg(w, d0) as u16).to_le_bytes())?,
            14 | 15 => {
                let stride = if d.op == 15 { 256 } else { 4 };
                store(lds, at(d.offset0 as u64 * stride), &vg(w, d0).to_le_bytes())?;
                store(lds, at(d.offset1 as u64 * stride), &vg(w, d1).to_le_bytes())?;
            }
            77 => store(lds, a, &vg64(w, d0).to_le_bytes())?,
            78 | 79 => {
                let stride = if d.op == 79 { 512 } else { 8 };
                store(lds, at(d.offset0 as u64 * stride), &vg64(w, d0).to_le_bytes())?;
                store(lds, at(d.offset1 as u64 * stride), &vg64(w, d1).to_le_bytes())?;
            }
            222 | 223 => {
                let n = if d.op == 222 { 3 } else { 4 };
                for i in 0..n {
                    store(lds, at(off16 + 4 * i as u64), &vg(w, d0 + i).to_le_bytes())?;
                }
            }
            54 => w.vgpr[dv][l] = ld32(lds, a)?,
            55 | 56 => {
                let stride = if d.op == 56 { 256 } else { 4 };
                w.vgpr[dv][l] = ld32(lds, at(d.offset0 as u64 * stride))?;
                w.vgpr[dv + 1][l] = ld32(lds, at(d.offset1 as u64 * stride))?;
            }
            57..=60 => {
                let mut b = [0u8; 2];
                let n = if d.op <= 58 { 1 } else { 2 };
                load(lds, a, &mut b[..n])?;
                w.vgpr[dv][l] = match d.op {
                    57 => b[0] as i8 as i32 as u32,
                    58 => b[0] as u32,
                    59 => i16::from_le_bytes(b) as i32 as u32,
                    _ => u16::from_le_bytes(b) as u32,
                };
            }
            118 => {
                let v = ld64(lds, a)?;
                w.vgpr[dv][l] = v as u32;
                w.vgpr[dv + 1][l] = (v >> 32) as u32;
            }
            119 | 120 => {
                let stride = if d.op == 120 { 512 } else { 8 };
                let x = ld64(lds, at(d.offset0 as u64 * stride))?;
                let y = ld64(lds, at(d.offset1 as u64 * stride))?;
                for (i, v) in [x as u32, (x >> 32) as u32, y as u32, (y >> 32) as u32].into_iter().enumerate()
                {
                    w.vgpr[dv + i][l] = v;
                }
            }
            254 | 255 => {
                let n = if d.op == 254 { 3 } else { 4 };
                for i in 0..n {
                    w.vgpr[dv + i][l] = ld32(lds, at(off16 + 4 * i as u64))?;
                }
            }
            // 64-bit atomics: 64..=80 without return, 96..=112 with.
            64..=76 | 80 | 96..=108 | 109 | 112 => {
                let (kind, rtn) = match d.op {
                    109 => (13, true),
                    op if op >= 96 => (op - 96, true),
                    op => (op - 64, false),
                };
                let old = ld64(lds, a)?;
                let new = rmw64(kind, old, vg64(w, d0), vg64(w, d1)).ok_or_else(unknown)?;
                store(lds, a, &new.to_le_bytes())?;
                if rtn {
                    w.vgpr[dv][l] = old as u32;
                    w.vgpr[dv + 1][l] = (old >> 32) as u32;
                }
            }
            _ => return Err(unknown()),
        }
    }
    Ok(())
}
