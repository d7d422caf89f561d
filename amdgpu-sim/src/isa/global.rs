//! FLAT / SCRATCH / GLOBAL instructions: per-lane loads, stores and atomics. GLOBAL addresses
//! go to [`GlobalMemory`]; FLAT (generic) addresses in the shared aperture reach the workgroup's
//! LDS and those in the private aperture the lane's private segment, as SCRATCH addresses do.
//! A lane's private segment is its own slice of its wave's scratch slot: an access past it is
//! a page fault.

use super::decode::Flat;
use super::error::{Access, MemoryFault};
use super::error::{ExecResult, Fault};
use pm4::Gfx;

use super::decode_gfx10::{GFX10_ATOMIC_CMPSWAP_F64, GFX10_ATOMIC_MAX_F64, GFX10_ATOMIC_MIN_F64};
use super::float::minmax64;
use super::lds::rmw32;
use super::memory::GlobalMemory;
use super::operand::{NULL, PRIVATE_APERTURE_HI, SHARED_APERTURE_HI};
use super::private::PrivateLane;
use super::wave::{Wave, LANES};

fn known(op: u8) -> bool {
    matches!(op, 16..=37 | 51..=77 | 80..=82 | 86) || F64_ATOMICS.contains(&op)
}

/// gfx10.3's f64 atomics (compare-swap, min, max), in the opcodes its decoder gives them.
const F64_ATOMICS: [u8; 3] = [GFX10_ATOMIC_CMPSWAP_F64, GFX10_ATOMIC_MIN_F64, GFX10_ATOMIC_MAX_F64];

/// One lane's view of memory for a FLAT or SCRATCH access: routes an address by aperture.
struct LaneView<'a> {
    mem: &'a mut dyn GlobalMemory,
    lds: &'a mut [u8],
    /// The lane's private segment.
    private: PrivateLane,
}

enum Target {
    Global(u64),
    Lds(usize),
    /// Pieces of the lane's private segment: (GPU address, offset in the access, length).
    Private(Vec<(u64, usize, usize)>),
}

impl LaneView<'_> {
    fn route(&self, addr: u64, len: usize, access: Access) -> Result<Target, MemoryFault> {
        let fault = MemoryFault { addr, access };
        let offset = addr & 0xffff_ffff;
        match (addr >> 32) as u32 {
            SHARED_APERTURE_HI => match (offset as usize).checked_add(len) {
                Some(end) if end <= self.lds.len() => Ok(Target::Lds(offset as usize)),
                _ => Err(fault),
            },
            PRIVATE_APERTURE_HI => self.private.pieces(offset, len, access).map(Target::Private),
            _ => Ok(Target::Global(addr)),
        }
    }
}

impl GlobalMemory for LaneView<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        match self.route(addr, buf.len(), Access::Read)? {
            Target::Global(a) => self.mem.read(a, buf),
            Target::Lds(o) => {
                buf.copy_from_slice(&self.lds[o..o + buf.len()]);
                Ok(())
            }
            Target::Private(pieces) => {
                for (a, at, n) in pieces {
                    self.mem.read(a, &mut buf[at..at + n])?;
                }
                Ok(())
            }
        }
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), MemoryFault> {
        match self.route(addr, data.len(), Access::Write)? {
            Target::Global(a) => self.mem.write(a, data),
            Target::Lds(o) => {
                self.lds[o..o + data.len()].copy_from_slice(data);
                Ok(())
            }
            Target::Private(pieces) => {
                for (a, at, n) in pieces {
                    self.mem.write(a, &data[at..at + n])?;
                }
                Ok(())
            }
        }
    }

    fn fetch(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        self.mem.fetch(addr, buf)
    }

    // Global atomics go to the memory's own (possibly locked) implementation.
    fn atomic32(&mut self, addr: u64, op: &mut dyn FnMut(u32) -> u32) -> Result<u32, MemoryFault> {
        match self.route(addr, 4, Access::Write)? {
            Target::Global(a) => self.mem.atomic32(a, op),
            Target::Private(pieces) => match pieces[..] {
                [(a, _, 4)] => self.mem.atomic32(a, op),
                _ => Err(MemoryFault { addr, access: Access::Write }),
            },
            Target::Lds(o) => {
                let old =
                    u32::from_le_bytes([self.lds[o], self.lds[o + 1], self.lds[o + 2], self.lds[o + 3]]);
                self.lds[o..o + 4].copy_from_slice(&op(old).to_le_bytes());
                Ok(old)
            }
        }
    }

    fn atomic64(&mut self, addr: u64, op: &mut dyn FnMut(u64) -> u64) -> Result<u64, MemoryFault> {
        match self.route(addr, 8, Access::Write)? {
            Target::Global(a) => self.mem.atomic64(a, op),
            Target::Private(pieces) => match pieces[..] {
                [(a, _, 8)] => self.mem.atomic64(a, op),
                // A 64-bit atomic on dword-interleaved scratch would be two accesses.
                _ => Err(MemoryFault { addr, access: Access::Write }),
            },
            Target::Lds(o) => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.lds[o..o + 8]);
                let old = u64::from_le_bytes(b);
                self.lds[o..o + 8].copy_from_slice(&op(old).to_le_bytes());
                Ok(old)
            }
        }
    }
}

// Lanes index several register rows at once, so a range loop reads best.
#[allow(clippy::needless_range_loop)]
pub(crate) fn exec_flat(
    w: &mut Wave,
    global: &mut dyn GlobalMemory,
    lds: &mut [u8],
    f: &Flat,
    word: u32,
) -> ExecResult {
    let enc = match f.seg {
        0 => "FLAT",
        1 => "SCRATCH",
        _ => "GLOBAL",
    };
    // global_load/store_addtid_b32: one dword per lane at SADDR + offset + 4 * lane.
    if f.seg == 2 && matches!(f.op, 40 | 41) {
        return addtid(w, global, f);
    }
    // SCRATCH has loads and stores only.
    if !known(f.op) || f.seg == 3 || (f.seg == 1 && f.op > 37) {
        return Err(Fault::Unknown { encoding: enc, opcode: f.op as u32, word });
    }
    let exec = w.exec();
    let sbase = if f.seg == 2 && f.saddr != NULL { Some(w.read_sgpr64(f.saddr)) } else { None };
    let (dv, dd, va) = (f.vdst as usize, f.data as usize, f.addr as usize);
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let a = if f.seg == 1 {
            // A 32-bit offset into the lane's private segment: VGPR (if SVE) + SGPR + offset.
            let mut offset = f.offset as u32;
            if f.sve {
                offset = offset.wrapping_add(w.vgpr[va][l]);
            }
            if f.saddr != NULL {
                offset = offset.wrapping_add(w.read_sgpr(f.saddr));
            }
            (PRIVATE_APERTURE_HI as u64) << 32 | offset as u64
        } else {
            let base = match sbase {
                Some(s) => s.wrapping_add(w.vgpr[va][l] as u64),
                None => w.vgpr[va][l] as u64 | (w.vgpr[va + 1][l] as u64) << 32,
            };
            base.wrapping_add(f.offset as i64 as u64)
        };
        // GLOBAL addresses are global whatever their value; FLAT and SCRATCH go by aperture.
        let mut view;
        let mem: &mut dyn GlobalMemory = if f.seg == 2 {
            &mut *global
        } else {
            view = LaneView { mem: &mut *global, lds: &mut *lds, private: w.private_lane(l) };
            &mut view
        };
        lane_access(
            w,
            mem,
            LaneOp { op: f.op, addr: a, lane: l, vdst: dv, data: dd, glc: f.glc },
            enc,
            word,
        )?;
    }
    Ok(())
}

/// global_load_addtid_b32 (40) and global_store_addtid_b32 (41): the address is the SGPR pair
/// (none: 0) plus the offset plus four times the lane's index; no VGPR address.
fn addtid(w: &mut Wave, global: &mut dyn GlobalMemory, f: &Flat) -> ExecResult {
    let base = if f.saddr == NULL { 0 } else { w.read_sgpr64(f.saddr) };
    let exec = w.exec();
    for l in (0..w.lanes()).filter(|&l| exec >> l & 1 != 0) {
        let a = base.wrapping_add(f.offset as i64 as u64).wrapping_add(4 * l as u64);
        if f.op == 40 {
            let mut b = [0u8; 4];
            global.read(a, &mut b)?;
            w.vgpr[f.vdst as usize][l] = u32::from_le_bytes(b);
        } else {
            global.write(a, &w.vgpr[f.data as usize][l].to_le_bytes())?;
        }
    }
    Ok(())
}

/// One lane's part of a load, store or atomic (FLAT/GLOBAL/SCRATCH opcodes, which MUBUF shares
/// for loads and stores).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneOp {
    pub op: u8,
    /// The address `mem` resolves.
    pub addr: u64,
    pub lane: usize,
    /// First destination and data VGPRs.
    pub vdst: usize,
    pub data: usize,
    /// Atomics return the old value.
    pub glc: bool,
}

/// Performs `x` for its lane through `mem`.
pub(crate) fn lane_access(
    w: &mut Wave,
    mem: &mut dyn GlobalMemory,
    x: LaneOp,
    enc: &'static str,
    word: u32,
) -> ExecResult {
    let (l, a, dv, dd) = (x.lane, x.addr, x.vdst, x.data);
    let ieee = w.mode >> 9 & 1 != 0;
    let data = |w: &Wave, i: usize| w.vgpr[dd + i][l];
    let data64 = |w: &Wave, i: usize| w.vgpr[dd + i][l] as u64 | (w.vgpr[dd + i + 1][l] as u64) << 32;
    match x.op {
        16..=19 => {
            let mut b = [0u8; 2];
            let n = if x.op <= 17 { 1 } else { 2 };
            mem.read(a, &mut b[..n])?;
            w.vgpr[dv][l] = match x.op {
                16 => b[0] as u32,
                17 => b[0] as i8 as i32 as u32,
                18 => u16::from_le_bytes(b) as u32,
                _ => i16::from_le_bytes(b) as i32 as u32,
            };
        }
        20..=23 => {
            let n = (x.op - 19) as usize;
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
            let byte = matches!(x.op, 30 | 31 | 33 | 34);
            mem.read(a, &mut b[..if byte { 1 } else { 2 }])?;
            let h: u16 = match x.op {
                30 | 33 => b[0] as u16,
                31 | 34 => b[0] as i8 as i16 as u16,
                _ => u16::from_le_bytes(b),
            };
            let old = w.vgpr[dv][l];
            w.vgpr[dv][l] =
                if x.op >= 33 { (old & 0xffff) | (h as u32) << 16 } else { (old & 0xffff_0000) | h as u32 };
        }
        24 => mem.write(a, &[data(w, 0) as u8])?,
        25 => mem.write(a, &(data(w, 0) as u16).to_le_bytes())?,
        36 => mem.write(a, &[(data(w, 0) >> 16) as u8])?,
        37 => mem.write(a, &((data(w, 0) >> 16) as u16).to_le_bytes())?,
        26..=29 => {
            let n = (x.op - 25) as usize;
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
                match x.op {
                    51 => src,
                    52 | 80 => {
                        let equal = if x.op == 80 { ff(old) == ff(cmp) } else { old == cmp };
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
            if x.glc {
                w.vgpr[dv][l] = old;
            }
        }
        op if F64_ATOMICS.contains(&op) && w.gfx == Gfx::Gfx10_3 => {
            let cmpswap = op == GFX10_ATOMIC_CMPSWAP_F64;
            let (src, cmp) = (data64(w, 0), if cmpswap { data64(w, 2) } else { 0 });
            let ff = f64::from_bits;
            let mut update = |old: u64| -> u64 {
                match op {
                    GFX10_ATOMIC_CMPSWAP_F64 if ff(old) == ff(cmp) => src,
                    GFX10_ATOMIC_CMPSWAP_F64 => old,
                    GFX10_ATOMIC_MIN_F64 => minmax64(ff(old), ff(src), false, ieee).to_bits(),
                    _ => minmax64(ff(old), ff(src), true, ieee).to_bits(),
                }
            };
            let old = mem.atomic64(a, &mut update)?;
            if x.glc {
                w.vgpr[dv][l] = old as u32;
                w.vgpr[dv + 1][l] = (old >> 32) as u32;
            }
        }
        65..=77 => {
            let (src, cmp) = (data64(w, 0), if x.op == 66 { data64(w, 2) } else { 0 });
            let mut op = |old: u64| -> u64 {
                match x.op {
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
            if x.glc {
                w.vgpr[dv][l] = old as u32;
                w.vgpr[dv + 1][l] = (old >> 32) as u32;
            }
        }
        _ => return Err(Fault::Unknown { encoding: enc, opcode: x.op as u32, word }),
    }
    Ok(())
}
