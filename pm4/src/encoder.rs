//! `PacketWriter`: appends well-formed packets to a caller's buffer without allocating per packet.
//!
//! Every packet's header is computed from the payload the writer itself emits, so the count field
//! cannot disagree with the payload. The writer appends to a `Vec<u32>` (growing it) or fills a
//! `&mut [u32]` (reporting [`EncodeError::BufferFull`] instead of writing a partial packet).

use crate::error::EncodeError;
use crate::header::{Header, MAX_PAYLOAD, NOP_HEADER_ONLY};
use crate::opcode::Opcode;
use crate::packets::{
    AcquireMem, CopyData, DispatchDirect, DispatchIndirect, DmaData, EventWrite, IndirectBuffer, ReleaseMem,
    WaitRegMem,
};
use crate::registers::Space;

/// Header plus the longest fixed payload (ACQUIRE_MEM / RELEASE_MEM: 7 dwords).
const FIXED_MAX: usize = 8;

/// Somewhere packets can be written to.
pub trait Sink {
    /// Appends one whole packet (header first), entirely or not at all.
    fn put(&mut self, packet: &[u32]) -> Result<(), EncodeError>;
    /// Dwords written so far.
    fn len(&self) -> usize;
    /// Whether nothing has been written.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sink for Vec<u32> {
    #[inline(always)]
    fn put(&mut self, packet: &[u32]) -> Result<(), EncodeError> {
        self.extend_from_slice(packet);
        Ok(())
    }

    fn len(&self) -> usize {
        Vec::len(self)
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    #[inline(always)]
    fn put(&mut self, packet: &[u32]) -> Result<(), EncodeError> {
        (**self).put(packet)
    }

    fn len(&self) -> usize {
        (**self).len()
    }
}

/// A fixed-capacity sink over a caller's slice.
#[derive(Debug)]
pub struct SliceSink<'a> {
    buf: &'a mut [u32],
    pos: usize,
}

impl<'a> SliceSink<'a> {
    /// Writes from the start of `buf`.
    pub fn new(buf: &'a mut [u32]) -> Self {
        SliceSink { buf, pos: 0 }
    }

    /// The dwords written so far.
    pub fn written(&self) -> &[u32] {
        self.buf.get(..self.pos).unwrap_or(&[])
    }
}

impl Sink for SliceSink<'_> {
    #[inline(always)]
    fn put(&mut self, packet: &[u32]) -> Result<(), EncodeError> {
        let (pos, capacity) = (self.pos, self.buf.len());
        let full = || EncodeError::BufferFull { needed: packet.len(), offset: pos, capacity };
        let end = pos.checked_add(packet.len()).ok_or_else(full)?;
        let Some(dst) = self.buf.get_mut(pos..end) else { return Err(full()) };
        dst.copy_from_slice(packet);
        self.pos = end;
        Ok(())
    }

    fn len(&self) -> usize {
        self.pos
    }
}

/// Writes PM4 type-3 packets into a [`Sink`].
#[derive(Debug)]
pub struct PacketWriter<S> {
    sink: S,
    compute_shader_type: bool,
}

impl<S: Sink> PacketWriter<S> {
    /// A writer for a compute queue (headers without the shader-type bit).
    pub fn new(sink: S) -> Self {
        PacketWriter { sink, compute_shader_type: false }
    }

    /// Sets the shader-type bit on compute packets (SET_SH_REG, DISPATCH_*). A compute queue
    /// ignores it; on the graphics ring it tells the CP that the state and launch are for compute.
    pub fn with_shader_type_compute(mut self, on: bool) -> Self {
        self.compute_shader_type = on;
        self
    }

    /// Whether compute packets carry the shader-type bit.
    pub fn shader_type_compute(&self) -> bool {
        self.compute_shader_type
    }

    /// The sink, for reading what was written.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// Gives the sink back.
    pub fn into_inner(self) -> S {
        self.sink
    }

    /// Dwords written so far.
    pub fn len(&self) -> usize {
        self.sink.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.sink.is_empty()
    }

    /// Emits a fixed-size packet; the header and payload are assembled on the stack so the sink
    /// sees one contiguous copy.
    #[inline(always)]
    fn emit<const N: usize>(
        &mut self,
        op: Opcode,
        compute: bool,
        payload: [u32; N],
    ) -> Result<(), EncodeError> {
        const { assert!(N >= 1 && N < FIXED_MAX) };
        let mut packet = [0u32; FIXED_MAX];
        packet[0] = Header::encode_raw(op as u8, N, compute && self.compute_shader_type);
        packet[1..=N].copy_from_slice(&payload);
        self.sink.put(&packet[..=N])
    }

    /// NOP with `payload_len` zero dwords of payload; `payload_len == 0` writes the header-only form.
    pub fn nop(&mut self, payload_len: usize) -> Result<(), EncodeError> {
        if payload_len == 0 {
            return self.sink.put(&[NOP_HEADER_ONLY]);
        }
        if payload_len > MAX_PAYLOAD {
            return Err(EncodeError::PayloadTooLong { len: payload_len, max: MAX_PAYLOAD });
        }
        let header = Header::encode_raw(Opcode::Nop as u8, payload_len, false);
        let mut short = [0u32; 65];
        if let Some(packet) = short.get_mut(..=payload_len) {
            packet[0] = header;
            return self.sink.put(packet);
        }
        // Longer padding is rare; one zeroed buffer keeps the packet atomic.
        let mut long = vec![0; payload_len + 1];
        long[0] = header;
        self.sink.put(&long)
    }

    #[inline(always)]
    fn set_regs(&mut self, op: Opcode, space: Space, offset: u32, values: &[u32]) -> Result<(), EncodeError> {
        if values.is_empty() {
            return Err(EncodeError::EmptyRegisterRun);
        }
        if values.len() >= MAX_PAYLOAD {
            return Err(EncodeError::PayloadTooLong { len: values.len() + 1, max: MAX_PAYLOAD });
        }
        if !space.contains_run(offset, values.len()) {
            return Err(EncodeError::RegisterOutOfSpace { offset, len: values.len(), space: space.name() });
        }
        let header = Header::encode_raw(
            op as u8,
            values.len() + 1,
            op == Opcode::SetShReg && self.compute_shader_type,
        );
        let index = (offset - space.base()) >> 2;
        // Short runs (the common case) are assembled on the stack and go out as one copy.
        let mut buf = [0u32; 18];
        if let Some(dst) = buf.get_mut(2..values.len() + 2) {
            dst.copy_from_slice(values);
            buf[0] = header;
            buf[1] = index;
            return self.sink.put(&buf[..values.len() + 2]);
        }
        let mut packet = Vec::with_capacity(values.len() + 2);
        packet.extend_from_slice(&[header, index]);
        packet.extend_from_slice(values);
        self.sink.put(&packet)
    }

    /// SET_SH_REG: writes `values` to consecutive SH registers starting at byte offset `offset`.
    #[inline(always)]
    pub fn set_sh_reg(&mut self, offset: u32, values: &[u32]) -> Result<(), EncodeError> {
        self.set_regs(Opcode::SetShReg, Space::Sh, offset, values)
    }

    /// SET_UCONFIG_REG: writes `values` to consecutive user-config registers from `offset`.
    pub fn set_uconfig_reg(&mut self, offset: u32, values: &[u32]) -> Result<(), EncodeError> {
        self.set_regs(Opcode::SetUconfigReg, Space::Uconfig, offset, values)
    }

    /// DISPATCH_DIRECT.
    #[inline]
    pub fn dispatch_direct(&mut self, d: &DispatchDirect) -> Result<(), EncodeError> {
        self.emit(Opcode::DispatchDirect, true, d.payload())
    }

    /// DISPATCH_INDIRECT, in the form the variant names.
    pub fn dispatch_indirect(&mut self, d: &DispatchIndirect) -> Result<(), EncodeError> {
        match *d {
            DispatchIndirect::Address { address, initiator } => {
                if address % 4 != 0 {
                    return Err(EncodeError::Misaligned { addr: address, align: 4 });
                }
                self.emit(
                    Opcode::DispatchIndirect,
                    true,
                    [address as u32, (address >> 32) as u32, initiator.bits()],
                )
            }
            DispatchIndirect::Offset { offset, initiator } => {
                self.emit(Opcode::DispatchIndirect, true, [offset, initiator.bits()])
            }
        }
    }

    /// ACQUIRE_MEM.
    #[inline]
    pub fn acquire_mem(&mut self, a: &AcquireMem) -> Result<(), EncodeError> {
        self.emit(Opcode::AcquireMem, false, a.payload())
    }

    /// RELEASE_MEM.
    #[inline]
    pub fn release_mem(&mut self, r: &ReleaseMem) -> Result<(), EncodeError> {
        let p = r.payload()?;
        self.emit(Opcode::ReleaseMem, false, p)
    }

    /// EVENT_WRITE.
    #[inline]
    pub fn event_write(&mut self, e: &EventWrite) -> Result<(), EncodeError> {
        let dw1 = e.dword1()?;
        match e.address {
            None => self.emit(Opcode::EventWrite, false, [dw1]),
            Some(addr) => {
                if addr % 8 != 0 {
                    return Err(EncodeError::Misaligned { addr, align: 8 });
                }
                self.emit(Opcode::EventWrite, false, [dw1, addr as u32, (addr >> 32) as u32])
            }
        }
    }

    /// WAIT_REG_MEM.
    pub fn wait_reg_mem(&mut self, w: &WaitRegMem) -> Result<(), EncodeError> {
        let p = w.payload()?;
        self.emit(Opcode::WaitRegMem, false, p)
    }

    /// INDIRECT_BUFFER.
    pub fn indirect_buffer(&mut self, ib: &IndirectBuffer) -> Result<(), EncodeError> {
        let p = ib.payload()?;
        self.emit(Opcode::IndirectBuffer, false, p)
    }

    /// COPY_DATA.
    pub fn copy_data(&mut self, c: &CopyData) -> Result<(), EncodeError> {
        let p = c.payload()?;
        self.emit(Opcode::CopyData, false, p)
    }

    /// DMA_DATA.
    pub fn dma_data(&mut self, d: &DmaData) -> Result<(), EncodeError> {
        let p = d.payload()?;
        self.emit(Opcode::DmaData, false, p)
    }
}

impl<'a> PacketWriter<SliceSink<'a>> {
    /// A writer that fills `buf` from its start.
    pub fn on_slice(buf: &'a mut [u32]) -> Self {
        PacketWriter::new(SliceSink::new(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registers::{COMPUTE_PGM_LO, GRBM_GFX_INDEX};

    #[test]
    fn header_count_follows_payload() {
        let mut v = Vec::new();
        let mut w = PacketWriter::new(&mut v);
        w.set_sh_reg(COMPUTE_PGM_LO, &[1, 2]).unwrap();
        w.set_uconfig_reg(GRBM_GFX_INDEX, &[0xE000_0000]).unwrap();
        assert_eq!(v, [0xC002_7600, 0x20C, 1, 2, 0xC001_7900, 0x200, 0xE000_0000]);
    }

    #[test]
    fn shader_type_bit_only_on_compute_packets() {
        let mut v = Vec::new();
        let mut w = PacketWriter::new(&mut v).with_shader_type_compute(true);
        w.set_sh_reg(COMPUTE_PGM_LO, &[1]).unwrap();
        w.event_write(&EventWrite::CS_PARTIAL_FLUSH).unwrap();
        assert_eq!(v[0], 0xC001_7602);
        assert_eq!(v[3], 0xC000_4600);
    }

    #[test]
    fn slice_sink_refuses_partial_packets() {
        let mut buf = [0u32; 4];
        let mut w = PacketWriter::on_slice(&mut buf);
        w.set_sh_reg(COMPUTE_PGM_LO, &[1]).unwrap();
        let err = w.set_sh_reg(COMPUTE_PGM_LO, &[1]).unwrap_err();
        assert_eq!(err, EncodeError::BufferFull { needed: 3, offset: 3, capacity: 4 });
        assert_eq!(w.sink().written().len(), 3);
    }

    #[test]
    fn register_runs_are_checked() {
        let mut v = Vec::new();
        let mut w = PacketWriter::new(&mut v);
        assert_eq!(w.set_sh_reg(COMPUTE_PGM_LO, &[]), Err(EncodeError::EmptyRegisterRun));
        assert!(w.set_sh_reg(0xA000, &[1]).is_err());
        assert!(w.set_sh_reg(0xBFFC, &[1, 2]).is_err());
        assert!(w.set_sh_reg(0xB831, &[1]).is_err());
        assert!(w.set_sh_reg(0xC000, &[1]).is_err());
        assert!(w.set_sh_reg(u32::MAX, &[1]).is_err());
        assert!(w.set_uconfig_reg(COMPUTE_PGM_LO, &[1]).is_err());
        w.set_sh_reg(0xBFFC, &[1]).unwrap();
        w.set_sh_reg(0xB000, &[7; 100]).unwrap();
        assert_eq!(v.len(), 3 + 102);
        assert_eq!(v[3], 0xC064_7600);
    }

    #[test]
    fn nop_forms() {
        let mut v = Vec::new();
        let mut w = PacketWriter::new(&mut v);
        w.nop(0).unwrap();
        w.nop(1).unwrap();
        w.nop(100).unwrap();
        assert_eq!(v[0], 0xFFFF_1000);
        assert_eq!(&v[1..3], &[0xC000_1000, 0]);
        assert_eq!(v[3], 0xC063_1000);
        assert_eq!(v.len(), 104);
        assert!(PacketWriter::new(Vec::new()).nop(MAX_PAYLOAD + 1).is_err());
    }
}
