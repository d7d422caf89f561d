//! DS instructions: loads, stores and atomics on the workgroup's LDS, one lane after another.

use super::decode::Ds;
use super::error::{ExecResult, Fault};
use super::float::{minmax32, minmax64};
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
        // ds_cmpstore_f32: compared as floats (+0 equals -0, a NaN equals nothing).
        17 => {
            if f(old) == f(data2) {
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

fn rmw64(kind: u8, old: u64, data: u64, data2: u64, ieee: bool) -> Option<u64> {
    let f = f64::from_bits;
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
        17 => {
            if f(old) == f(data2) {
                data
            } else {
                old
            }
        }
        18 => minmax64(f(old), f(data), false, ieee).to_bits(),
        19 => minmax64(f(old), f(data), true, ieee).to_bits(),
        _ => return None,
    })
}

/// ds_swizzle_b32's source lane for lane `i` (0..64) under `offset`, as the ISA guide defines
/// the four modes: FFT, rotate, quad permute, and and/or/xor masks within 32 lanes.
fn swizzle_source(offset: u32, i: usize) -> usize {
    let i = i as u32;
    let j = if offset >= 0xe000 {
        let mask = offset & 0x1f;
        let reversed = (i & 0x1f).reverse_bits() >> 27;
        ((reversed >> mask.count_ones()) | (i & mask)) | (i & 0x20)
    } else if offset >= 0xc000 {
        let mut rotate = (offset >> 5) & 0x1f;
        let mask = offset & 0x1f;
        if offset >> 10 & 1 != 0 {
            rotate = rotate.wrapping_neg();
        }
        (i & mask) | (i.wrapping_add(rotate) & !mask & 0x1f) | (i & 0x20)
    } else if offset >> 15 & 1 != 0 {
        (i & !3) + ((offset >> (2 * (i & 3))) & 3)
    } else {
        let (and, or, xor) = (offset & 0x1f, (offset >> 5) & 0x1f, (offset >> 10) & 0x1f);
        ((((i & 0x1f) & and) | or) ^ xor) | (i & 0x20)
    };
    j as usize
}

/// ds_swizzle_b32: each active lane reads the value (in the ADDR operand, the instruction's
/// one VGPR source) of the lane the offset's pattern names (0 from an inactive one).
fn swizzle(w: &mut Wave, d: &Ds) {
    let exec = w.exec();
    let offset = (d.offset0 as u32) | (d.offset1 as u32) << 8;
    let data = w.vgpr[d.addr as usize];
    let out: [u32; LANES] = std::array::from_fn(|l| {
        let j = swizzle_source(offset, l);
        if j < w.lanes() && exec >> j & 1 != 0 {
            data[j]
        } else {
            0
        }
    });
    w.write_vgpr(d.vdst as usize, &out, exec);
}

/// ds_append (62) and ds_consume (61): one atomic add (or subtract) of the number of active
/// lanes to the dword at M0[15:0] + offset; every active lane gets the old value.
fn append(w: &mut Wave, lds: &mut [u8], d: &Ds) -> ExecResult {
    let exec = w.exec();
    if exec == 0 {
        return Ok(());
    }
    let offset = (d.offset0 as u32) | (d.offset1 as u32) << 8;
    let addr = u64::from((w.read_sgpr(super::operand::M0) & 0xffff).wrapping_add(offset));
    let old = ld32(lds, addr)?;
    let count = exec.count_ones();
    let new = if d.op == 62 { old.wrapping_add(count) } else { old.wrapping_sub(count) };
    store(lds, addr, &new.to_le_bytes())?;
    w.write_vgpr(d.vdst as usize, &[old; LANES], exec);
    Ok(())
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
    match d.op {
        178 | 179 => {
            permute(w, d);
            return Ok(());
        }
        53 => {
            swizzle(w, d);
            return Ok(());
        }
        61 | 62 => return append(w, lds, d),
        // ds_nop.
        20 => return Ok(()),
        _ => {}
    }
    let known = matches!(
        d.op,
        0..=19 | 21 | 30..=52 | 54..=60 | 64..=83 | 96..=115 | 118..=121 | 126 | 160..=167 | 176 | 177 | 222 | 223 | 254 | 255
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
            0..=12 | 16..=19 | 21 | 32..=44 | 45 | 48..=51 | 121 => {
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
            // ds_wrap_rtn_b32: subtract DATA if the value reaches it, else add DATA2.
            52 => {
                let old = ld32(lds, a)?;
                let (x, y) = (vg(w, d0), vg(w, d1));
                let new = if old >= x { old - x } else { old.wrapping_add(y) };
                store(lds, a, &new.to_le_bytes())?;
                w.vgpr[dv][l] = old;
            }
            // ds_storexchg_2addr(_stride64)_rtn_b32/b64: two exchanges, the old values back.
            46 | 47 => {
                let stride = if d.op == 47 { 256 } else { 4 };
                let (a1, a2) = (at(d.offset0 as u64 * stride), at(d.offset1 as u64 * stride));
                let (t1, t2) = (ld32(lds, a1)?, ld32(lds, a2)?);
                store(lds, a1, &vg(w, d0).to_le_bytes())?;
                store(lds, a2, &vg(w, d1).to_le_bytes())?;
                w.vgpr[dv][l] = t1;
                w.vgpr[dv + 1][l] = t2;
            }
            110 | 111 => {
                let stride = if d.op == 111 { 512 } else { 8 };
                let (a1, a2) = (at(d.offset0 as u64 * stride), at(d.offset1 as u64 * stride));
                let (t1, t2) = (ld64(lds, a1)?, ld64(lds, a2)?);
                store(lds, a1, &vg64(w, d0).to_le_bytes())?;
                store(lds, a2, &vg64(w, d1).to_le_bytes())?;
                for (i, v) in
                    [t1 as u32, (t1 >> 32) as u32, t2 as u32, (t2 >> 32) as u32].into_iter().enumerate()
                {
                    w.vgpr[dv + i][l] = v;
                }
            }
            // ds_condxchg32_rtn_b64: two dwords at an 8-byte aligned address; each is replaced
            // (bit 31 cleared) where its DATA word has bit 31 set.
            126 => {
                let a0 = a & 0xfff8;
                let data = vg64(w, d0);
                for k in 0..2u64 {
                    let at_k = a0 + 4 * k;
                    let old = ld32(lds, at_k)?;
                    let word = (data >> (32 * k)) as u32;
                    if word >> 31 != 0 {
                        store(lds, at_k, &(word & 0x7fff_ffff).to_le_bytes())?;
                    }
                    w.vgpr[dv + k as usize][l] = old;
                }
            }
            // D16 stores of the high half, loads into one half keeping the other.
            160 => store(lds, a, &[(vg(w, d0) >> 16) as u8])?,
            161 => store(lds, a, &((vg(w, d0) >> 16) as u16).to_le_bytes())?,
            162..=167 => {
                let mut b = [0u8; 2];
                let n = if d.op <= 165 { 1 } else { 2 };
                load(lds, a, &mut b[..n])?;
                let half = match d.op {
                    162 | 163 => u32::from(b[0]),
                    164 | 165 => b[0] as i8 as i16 as u16 as u32,
                    _ => u32::from(u16::from_le_bytes(b)),
                };
                let old = w.vgpr[dv][l];
                w.vgpr[dv][l] =
                    if d.op % 2 == 1 { (old & 0xffff) | half << 16 } else { (old & 0xffff_0000) | half };
            }
            // ds_store/load_addtid_b32: at M0[15:0] + offset + 4 * lane.
            176 | 177 => {
                let base = (w.read_sgpr(super::operand::M0) & 0xffff).wrapping_add(off16 as u32);
                let at_lane = u64::from(base.wrapping_add(4 * l as u32));
                if d.op == 176 {
                    store(lds, at_lane, &vg(w, d0).to_le_bytes())?;
                } else {
                    w.vgpr[dv][l] = ld32(lds, at_lane)?;
                }
            }
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
            64..=76 | 80..=83 | 96..=108 | 109 | 112..=115 => {
                let (kind, rtn) = match d.op {
                    109 => (13, true),
                    op if op >= 96 => (op - 96, true),
                    op => (op - 64, false),
                };
                let old = ld64(lds, a)?;
                let new = rmw64(kind, old, vg64(w, d0), vg64(w, d1), ieee).ok_or_else(unknown)?;
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

#[cfg(test)]
mod tests {
    use super::swizzle_source;

    #[test]
    fn swizzle_patterns() {
        // BITMASK_PERM "00i11": and 0b00100, or 0b00011, xor 0b00100.
        assert_eq!(swizzle_source(0x1064, 0), 7);
        assert_eq!(swizzle_source(0x1064, 4), 3);
        assert_eq!(swizzle_source(0x1064, 36), 35);
        // QUAD_PERM 3, 2, 1, 0.
        assert_eq!(swizzle_source(0x801b, 5), 6);
    }
}
