//! MUBUF instructions through a buffer resource (V#, four SGPRs). The one form kernels get from
//! the compiler is gfx10.3's private segment buffer: a descriptor with ADD_TID_ENABLE whose
//! lanes are interleaved by dword (kernels add their wave's byte offset to its base first),
//! addressed by a VGPR byte offset, a wave-scaled SGPR offset (the stack or frame pointer) and
//! the instruction's offset. Loads and stores of that form run; each lane is confined to its
//! own private bytes (a page fault past them). Other descriptors (typed, structured or raw
//! buffers) are refused as not modelled, and the cache invalidates are no-ops.

use pm4::Gfx;

use super::decode::Mubuf;
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
        })
    }
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

/// Executes a MUBUF instruction.
pub(crate) fn exec_mubuf(w: &mut Wave, global: &mut dyn GlobalMemory, m: &Mubuf, word: u32) -> ExecResult {
    const ENC: &str = "MUBUF";
    match m.op {
        BUFFER_GL0_INV | BUFFER_GL1_INV => return Ok(()),
        // Loads and stores of bytes, shorts, dwords and d16 halves (the FLAT numbering).
        16..=37 => {}
        op => {
            return Err(Fault::Unknown {
                encoding: "MUBUF (only private-segment loads and stores are modelled)",
                opcode: u32::from(op),
                word,
            })
        }
    }
    let rsrc = BufferResource::read(w, m.srsrc)?;
    let Some(interleave) = rsrc.add_tid else {
        return Err(Fault::UnmodelledOperands(format!(
            "MUBUF through a buffer resource without ADD_TID_ENABLE (base {:#x}): only the private \
             segment buffer is modelled",
            rsrc.base
        )));
    };
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
