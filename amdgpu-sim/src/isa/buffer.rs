//! MUBUF instructions (and s_buffer_load) through a buffer resource (V#, four SGPRs).
//!
//! gfx10.3's private segment buffer: a descriptor with ADD_TID_ENABLE whose lanes are
//! interleaved by dword (kernels add their wave's byte offset to its base first), addressed by a
//! VGPR byte offset, a wave-scaled SGPR offset (the stack or frame pointer) and the
//! instruction's offset. Loads and stores of that form run; each lane is confined to its own
//! private bytes (a page fault past them).
//!
//! Untyped buffers (what `__builtin_amdgcn_raw_buffer_*` and `struct_buffer_*` make): loads,
//! stores and atomics of bytes to 16 bytes at base + index * stride + offset (index from the
//! first VGPR with IDXEN, offset from the next with OFFEN, plus the SGPR and instruction
//! offsets). An access inside the buffer — within NUM_RECORDS bytes for a raw buffer (stride
//! 0), within its record (index below NUM_RECORDS, offset within the stride) for a structured
//! one — runs; what the hardware returns for one outside depends on OOB_SELECT in ways the ISA
//! guide leaves open, so it stops the dispatch saying so rather than guess. Swizzled and typed
//! (format) accesses are refused; the cache invalidates are no-ops.

use pm4::Gfx;

use super::decode::Mubuf;
use super::decode_gfx10::{GFX10_ATOMIC_CMPSWAP_F64, GFX10_ATOMIC_MAX_F64, GFX10_ATOMIC_MIN_F64};
use super::error::{Access, ExecResult, Fault, MemoryFault};
use super::global::{lane_access, LaneOp};
use super::memory::GlobalMemory;
use super::private::PrivateLane;
use super::wave::{Wave, LANES};

const BUFFER_GL0_INV: u8 = 43;
const BUFFER_GL1_INV: u8 = 44;

/// The fields of a buffer resource the interpreter reads.
#[derive(Debug, Clone, Copy)]
struct BufferResource {
    base: u64,
    stride: u32,
    swizzle: bool,
    /// Lanes interleaved per row when ADD_TID_ENABLE is set: 8 << INDEX_STRIDE.
    add_tid: Option<u32>,
    /// Records (structured) or bytes (raw).
    num_records: u32,
}

impl BufferResource {
    fn read(w: &Wave, srsrc: u8) -> ExecResult<BufferResource> {
        if srsrc % 4 != 0 || usize::from(srsrc) + 3 >= 106 {
            return Err(Fault::unsupported(format!("buffer resource at s{srsrc} is not four aligned SGPRs")));
        }
        let d: [u32; 4] = std::array::from_fn(|i| w.read_sgpr(srsrc + i as u8));
        Ok(BufferResource {
            base: u64::from(d[0]) | u64::from(d[1] & 0xffff) << 32,
            stride: (d[1] >> 16) & 0x3fff,
            // SWIZZLE_ENABLE: bit 31 on gfx10.3 (bit 30 is CACHE_SWIZZLE), bits 30-31 on gfx11.
            swizzle: match w.gfx {
                Gfx::Gfx10_3 => d[1] >> 31 != 0,
                Gfx::Gfx11 => d[1] >> 30 != 0,
            },
            add_tid: (d[3] >> 23 & 1 != 0).then(|| 8 << ((d[3] >> 21) & 3)),
            num_records: d[2],
        })
    }

    /// The GPU address of an access of `size` bytes at record `index`, byte `offset`, when it
    /// lies inside the buffer in every reading of the bounds (see the module's comment).
    fn address(&self, index: Option<u32>, offset: u32, size: u32) -> Result<u64, String> {
        let inside = match (self.stride, index) {
            (0, None) => u64::from(offset) + u64::from(size) <= u64::from(self.num_records),
            (0, Some(_)) => false,
            (stride, index) => {
                index.unwrap_or(0) < self.num_records
                    && u64::from(offset) + u64::from(size) <= u64::from(stride)
            }
        };
        if !inside {
            return Err(format!(
                "a {size}-byte buffer access at record {}, offset {offset:#x} of a buffer of {} {}                  (stride {}) is out of range: what the hardware returns there depends on OOB_SELECT,                  which is not modelled",
                index.unwrap_or(0),
                self.num_records,
                if self.stride == 0 { "bytes" } else { "records" },
                self.stride
            ));
        }
        let at = u64::from(index.unwrap_or(0)) * u64::from(self.stride) + u64::from(offset);
        Ok(self.base.wrapping_add(at))
    }
}

/// Bytes a MUBUF load, store or atomic (the FLAT numbering) moves per lane.
fn access_size(op: u8) -> u32 {
    match op {
        16 | 17 | 24 | 30 | 31 | 33 | 34 | 36 => 1,
        18 | 19 | 25 | 32 | 35 | 37 => 2,
        21 | 27 | 65..=77 => 8,
        22 | 28 => 12,
        23 | 29 => 16,
        _ => 4,
    }
}

/// s_buffer_load_b32..b512 (SMEM opcodes 8..12): `dwords` at base + `offset` of the buffer at
/// `srsrc`, into SGPRs from `sdata` (none when NULL).
pub(crate) fn s_buffer_load(
    w: &mut Wave,
    mem: &mut dyn GlobalMemory,
    srsrc: u8,
    sdata: Option<u8>,
    offset: u32,
    dwords: u32,
) -> ExecResult {
    let rsrc = BufferResource::read(w, srsrc)?;
    if rsrc.add_tid.is_some() || rsrc.stride != 0 {
        return Err(Fault::UnmodelledOperands(format!(
            "s_buffer_load through a buffer with a stride ({}) or ADD_TID_ENABLE: only raw buffers are modelled",
            rsrc.stride
        )));
    }
    let at = rsrc.address(None, offset & !3, 4 * dwords).map_err(Fault::UnmodelledOperands)?;
    for i in 0..dwords {
        let mut b = [0u8; 4];
        mem.read(at + 4 * u64::from(i), &mut b)?;
        if let Some(s) = sdata {
            w.write_sgpr(s + i as u8, u32::from_le_bytes(b))?;
        }
    }
    Ok(())
}

/// Resolves a lane's segment offsets through its private bytes.
struct SegmentView<'a> {
    mem: &'a mut dyn GlobalMemory,
    lane: PrivateLane,
}

impl GlobalMemory for SegmentView<'_> {
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        for (a, at, n) in self.lane.pieces(offset, buf.len(), Access::Read)? {
            self.mem.read(a, &mut buf[at..at + n])?;
        }
        Ok(())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), MemoryFault> {
        for (a, at, n) in self.lane.pieces(offset, data.len(), Access::Write)? {
            self.mem.write(a, &data[at..at + n])?;
        }
        Ok(())
    }

    fn fetch(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), MemoryFault> {
        self.mem.fetch(addr, buf)
    }

    fn atomic32(&mut self, offset: u64, _: &mut dyn FnMut(u32) -> u32) -> Result<u32, MemoryFault> {
        Err(MemoryFault { addr: offset, access: Access::Write })
    }

    fn atomic64(&mut self, offset: u64, _: &mut dyn FnMut(u64) -> u64) -> Result<u64, MemoryFault> {
        Err(MemoryFault { addr: offset, access: Access::Write })
    }
}

/// A MUBUF access to an untyped, unswizzled buffer (see the module's comment).
fn untyped(
    w: &mut Wave,
    global: &mut dyn GlobalMemory,
    m: &Mubuf,
    rsrc: &BufferResource,
    word: u32,
) -> ExecResult {
    if rsrc.swizzle {
        return Err(Fault::UnmodelledOperands(format!(
            "MUBUF through a swizzled buffer resource (base {:#x}) without ADD_TID_ENABLE",
            rsrc.base
        )));
    }
    let soffset = w.src32(&m.soffset)?[0];
    let size = access_size(m.op);
    let exec = w.exec();
    for l in (0..w.lanes()).filter(|&l| exec >> l & 1 != 0) {
        let first = w.vgpr[usize::from(m.vaddr)][l];
        let second = w.vgpr[usize::from(m.vaddr) + 1][l];
        let index = m.idxen.then_some(first);
        let voffset = match (m.offen, m.idxen) {
            (true, true) => second,
            (true, false) => first,
            _ => 0,
        };
        let offset = voffset.wrapping_add(soffset).wrapping_add(u32::from(m.offset));
        let addr = rsrc.address(index, offset, size).map_err(Fault::UnmodelledOperands)?;
        let x = LaneOp {
            op: m.op,
            addr,
            lane: l,
            vdst: usize::from(m.vdata),
            data: usize::from(m.vdata),
            glc: m.glc,
        };
        lane_access(w, global, x, "MUBUF", word)?;
    }
    Ok(())
}

/// Executes a MUBUF instruction.
pub(crate) fn exec_mubuf(w: &mut Wave, global: &mut dyn GlobalMemory, m: &Mubuf, word: u32) -> ExecResult {
    const ENC: &str = "MUBUF";
    match m.op {
        BUFFER_GL0_INV | BUFFER_GL1_INV => return Ok(()),
        // Loads and stores of bytes, shorts, dwords and d16 halves (the FLAT numbering).
        16..=37 => {}
        // Atomics (the FLAT numbering, gfx10.3's f64 ones included).
        51..=77 | 80..=82 | 86 => {}
        op if op == GFX10_ATOMIC_CMPSWAP_F64 || op == GFX10_ATOMIC_MIN_F64 || op == GFX10_ATOMIC_MAX_F64 => {}
        op => {
            return Err(Fault::Unknown {
                encoding: "MUBUF (typed format accesses are not modelled)",
                opcode: u32::from(op),
                word,
            })
        }
    }
    let rsrc = BufferResource::read(w, m.srsrc)?;
    let Some(interleave) = rsrc.add_tid else {
        return untyped(w, global, m, &rsrc, word);
    };
    if m.op > 37 {
        return Err(Fault::UnmodelledOperands("an atomic on the private segment buffer".into()));
    }
    if m.idxen || rsrc.stride != 0 || !rsrc.swizzle || interleave != w.width {
        return Err(Fault::UnmodelledOperands(format!(
            "MUBUF private segment buffer with index {}, stride {}, swizzle {} and {interleave}-lane \
             interleave: only the unindexed, swizzled form a wave{} kernel gets is modelled",
            m.idxen, rsrc.stride, rsrc.swizzle, w.width
        )));
    }
    // The SGPR offset counts bytes of the whole wave: a whole number of interleaved rows.
    let soffset = w.src32(&m.soffset)?[0];
    let row = 4 * interleave;
    if soffset % row != 0 {
        return Err(Fault::UnmodelledOperands(format!(
            "MUBUF private segment offset {soffset:#x} in an SGPR is not a multiple of a {row}-byte row"
        )));
    }
    let lane_offset = u64::from(soffset / interleave);
    let exec = w.exec();
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let offset = if m.offen { w.vgpr[usize::from(m.vaddr)][l] } else { 0 };
        let offset = lane_offset + u64::from(offset) + u64::from(m.offset);
        let lane = PrivateLane {
            base: rsrc.base,
            bytes: w.lane_scratch_bytes,
            swizzle: Some((l as u32, interleave)),
        };
        let mut view = SegmentView { mem: &mut *global, lane };
        let x = LaneOp {
            op: m.op,
            addr: offset,
            lane: l,
            vdst: usize::from(m.vdata),
            data: usize::from(m.vdata),
            glc: m.glc,
        };
        lane_access(w, &mut view, x, ENC, word)?;
    }
    Ok(())
}
