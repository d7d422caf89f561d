//! Decoding: a dword stream becomes packets with opcode names, register names and fields.
//!
//! The decoder never panics and never trusts a count: every slice is bounds-checked and every
//! offset computed with checked arithmetic. Errors carry the dword offset of the packet's header.
//! After an error whose packet length is known (unknown opcode or register, bad length) decoding
//! resumes at the next packet; after a bad header or a truncated packet it stops.

use core::fmt;

use crate::error::{DecodeError, DecodeErrorKind, ParseHexError};
use crate::fields::{self, DispatchInitiator};
use crate::gfx::Gfx;
use crate::header::{Header, TYPE2_FILLER};
use crate::opcode::Opcode;
use crate::packets::{
    copy_fields, dma_fields, event_fields, ib_fields, release_fields, wait_fields, AcquireMem, CopyData,
    DispatchDirect, DispatchIndirect, DmaData, EventWrite, GcrCntl, IndirectBuffer, ReleaseMem, WaitRegMem,
};
use crate::registers::{self, Field, Register, Space};

/// One register write inside a SET_*_REG packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegWrite {
    /// The register.
    pub reg: &'static Register,
    /// The value written.
    pub value: u32,
}

/// What a packet does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// NOP with this many payload dwords (0 for the header-only form).
    Nop {
        /// Payload dwords skipped.
        payload_len: usize,
    },
    /// A one-dword type-2 filler.
    Filler,
    /// SET_SH_REG.
    SetShReg(Vec<RegWrite>),
    /// SET_UCONFIG_REG.
    SetUconfigReg(Vec<RegWrite>),
    /// DISPATCH_DIRECT.
    DispatchDirect(DispatchDirect),
    /// DISPATCH_INDIRECT.
    DispatchIndirect(DispatchIndirect),
    /// ACQUIRE_MEM.
    AcquireMem(AcquireMem),
    /// RELEASE_MEM.
    ReleaseMem(ReleaseMem),
    /// EVENT_WRITE.
    EventWrite(EventWrite),
    /// WAIT_REG_MEM.
    WaitRegMem(WaitRegMem),
    /// INDIRECT_BUFFER.
    IndirectBuffer(IndirectBuffer),
    /// COPY_DATA.
    CopyData(CopyData),
    /// DMA_DATA.
    DmaData(DmaData),
}

/// A decoded packet and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Dword offset of the header.
    pub offset: usize,
    /// The raw header dword.
    pub header: u32,
    /// Total length in dwords, header included.
    pub len: usize,
    /// Shader-type bit (compute on the graphics ring).
    pub compute: bool,
    /// Predicate bit.
    pub predicate: bool,
    /// The generation whose register map named the registers.
    pub gfx: Gfx,
    /// What the packet does.
    pub body: Body,
}

impl Packet {
    /// The packet's name.
    pub fn name(&self) -> &'static str {
        match &self.body {
            Body::Nop { .. } => Opcode::Nop.name(),
            Body::Filler => "TYPE2_FILLER",
            Body::SetShReg(_) => Opcode::SetShReg.name(),
            Body::SetUconfigReg(_) => Opcode::SetUconfigReg.name(),
            Body::DispatchDirect(_) => Opcode::DispatchDirect.name(),
            Body::DispatchIndirect(_) => Opcode::DispatchIndirect.name(),
            Body::AcquireMem(_) => Opcode::AcquireMem.name(),
            Body::ReleaseMem(_) => Opcode::ReleaseMem.name(),
            Body::EventWrite(_) => Opcode::EventWrite.name(),
            Body::WaitRegMem(_) => Opcode::WaitRegMem.name(),
            Body::IndirectBuffer(_) => Opcode::IndirectBuffer.name(),
            Body::CopyData(_) => Opcode::CopyData.name(),
            Body::DmaData(_) => Opcode::DmaData.name(),
        }
    }
}

/// Iterates over the packets of a dword stream.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    words: &'a [u32],
    pos: usize,
    gfx: Gfx,
    done: bool,
}

impl<'a> Decoder<'a> {
    /// A decoder over `words`, naming registers from `gfx`'s map.
    pub fn new(words: &'a [u32], gfx: Gfx) -> Self {
        Decoder { words, pos: 0, gfx, done: false }
    }

    fn err(&self, offset: usize, kind: DecodeErrorKind) -> DecodeError {
        DecodeError { offset, kind }
    }

    fn decode_one(&mut self) -> Result<Packet, DecodeError> {
        let offset = self.pos;
        let Some(&word) = self.words.get(offset) else {
            // `next` never calls this at the end; treat it as a truncation rather than panic.
            return Err(
                self.err(offset, DecodeErrorKind::Truncated { name: "header", expected: 1, available: 0 })
            );
        };
        if word == TYPE2_FILLER {
            self.pos = offset.saturating_add(1);
            return Ok(Packet {
                offset,
                header: word,
                len: 1,
                compute: false,
                predicate: false,
                gfx: self.gfx,
                body: Body::Filler,
            });
        }
        let Some(header) = Header::decode(word) else {
            self.done = true;
            return Err(self.err(offset, DecodeErrorKind::BadHeader { header: word, ty: word >> 30 }));
        };
        let start = offset.saturating_add(1);
        let available = self.words.len().saturating_sub(start);
        let name = Opcode::from_u8(header.opcode).map_or("packet", Opcode::name);
        if header.payload_len > available {
            self.done = true;
            return Err(self
                .err(offset, DecodeErrorKind::Truncated { name, expected: header.payload_len, available }));
        }
        let end = start.saturating_add(header.payload_len);
        let payload = self.words.get(start..end).unwrap_or(&[]);
        // The packet's extent is known from here on, so the next packet can always be found.
        self.pos = end;
        let Some(op) = Opcode::from_u8(header.opcode) else {
            return Err(
                self.err(offset, DecodeErrorKind::UnknownOpcode { header: word, opcode: header.opcode })
            );
        };
        let bad_len = |expected: &'static str| DecodeError {
            offset,
            kind: DecodeErrorKind::BadLength { name: op.name(), expected, got: header.payload_len },
        };
        let body = match op {
            Opcode::Nop => Body::Nop { payload_len: header.payload_len },
            Opcode::SetShReg => Body::SetShReg(self.regs(offset, op, Space::Sh, payload)?),
            Opcode::SetUconfigReg => Body::SetUconfigReg(self.regs(offset, op, Space::Uconfig, payload)?),
            Opcode::DispatchDirect => {
                Body::DispatchDirect(DispatchDirect::decode(payload).ok_or_else(|| bad_len("4"))?)
            }
            Opcode::DispatchIndirect => {
                Body::DispatchIndirect(DispatchIndirect::decode(payload).ok_or_else(|| bad_len("2 or 3"))?)
            }
            Opcode::AcquireMem => Body::AcquireMem(AcquireMem::decode(payload).ok_or_else(|| bad_len("7"))?),
            Opcode::ReleaseMem => Body::ReleaseMem(ReleaseMem::decode(payload).ok_or_else(|| bad_len("7"))?),
            Opcode::EventWrite => {
                Body::EventWrite(EventWrite::decode(payload).ok_or_else(|| bad_len("1 or 3"))?)
            }
            Opcode::WaitRegMem => Body::WaitRegMem(WaitRegMem::decode(payload).ok_or_else(|| bad_len("6"))?),
            Opcode::IndirectBuffer => {
                Body::IndirectBuffer(IndirectBuffer::decode(payload).ok_or_else(|| bad_len("3"))?)
            }
            Opcode::CopyData => Body::CopyData(CopyData::decode(payload).ok_or_else(|| bad_len("5"))?),
            Opcode::DmaData => Body::DmaData(DmaData::decode(payload).ok_or_else(|| bad_len("6"))?),
        };
        Ok(Packet {
            offset,
            header: word,
            len: header.payload_len.saturating_add(1),
            compute: header.compute,
            predicate: header.predicate,
            gfx: self.gfx,
            body,
        })
    }

    fn regs(
        &self,
        offset: usize,
        op: Opcode,
        space: Space,
        payload: &[u32],
    ) -> Result<Vec<RegWrite>, DecodeError> {
        let Some((&index, values)) = payload.split_first().filter(|(_, v)| !v.is_empty()) else {
            return Err(self.err(
                offset,
                DecodeErrorKind::BadLength { name: op.name(), expected: "at least 2", got: payload.len() },
            ));
        };
        let mut out = Vec::with_capacity(values.len());
        for (i, &value) in values.iter().enumerate() {
            // index < 2^32 and i < 2^14, so the dword address fits in u64; anything past the space
            // is simply not found in the register table.
            let byte = (space.base() as u64) + 4 * (index as u64 + i as u64);
            let reg = u32::try_from(byte)
                .ok()
                .filter(|&b| b < space.end())
                .and_then(|b| registers::lookup(self.gfx, b))
                .filter(|r| r.offset >= space.base() && r.offset < space.end());
            let Some(reg) = reg else {
                return Err(self.err(
                    offset,
                    DecodeErrorKind::UnknownRegister {
                        name: op.name(),
                        offset: u32::try_from(byte).unwrap_or(u32::MAX),
                        gfx: self.gfx.name(),
                    },
                ));
            };
            out.push(RegWrite { reg, value });
        }
        Ok(out)
    }
}

impl Iterator for Decoder<'_> {
    type Item = Result<Packet, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.words.len() {
            return None;
        }
        Some(self.decode_one())
    }
}

/// Decodes a whole stream, stopping at the first error.
pub fn decode(words: &[u32], gfx: Gfx) -> Result<Vec<Packet>, DecodeError> {
    Decoder::new(words, gfx).collect()
}

/// Reads little-endian dwords from bytes; a trailing partial dword is ignored.
pub fn words_from_le_bytes(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).filter_map(|c| <[u8; 4]>::try_from(c).ok()).map(u32::from_le_bytes).collect()
}

/// Reads a hex text dump: one dword per line, with or without `0x`; blank lines and text after
/// `#` or `//` are ignored.
pub fn words_from_hex_text(text: &str) -> Result<Vec<u32>, ParseHexError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let cut = raw.find('#').into_iter().chain(raw.find("//")).min().unwrap_or(raw.len());
        let item = raw.get(..cut).unwrap_or(raw).trim();
        if item.is_empty() {
            continue;
        }
        let digits = item.strip_prefix("0x").or_else(|| item.strip_prefix("0X")).unwrap_or(item);
        let word = u32::from_str_radix(&digits.replace('_', ""), 16)
            .map_err(|_| ParseHexError { line: i + 1, text: item.to_owned() })?;
        out.push(word);
    }
    Ok(out)
}

/// Writes the fields that are not zero; an all-zero value prints nothing beyond its raw form.
fn write_fields(f: &mut fmt::Formatter<'_>, value: u32, fields: &[Field]) -> fmt::Result {
    for field in fields {
        match field.get(value) {
            0 => {}
            v if v < 10 => write!(f, " {}={}", field.name, v)?,
            v => write!(f, " {}={:#x}", field.name, v)?,
        }
    }
    Ok(())
}

fn line(f: &mut fmt::Formatter<'_>, label: &str, value: u32, fields: &[Field]) -> fmt::Result {
    write!(f, "\n        {label} = 0x{value:08x}")?;
    if fields.iter().any(|field| field.get(value) != 0) {
        f.write_str(" ")?;
        write_fields(f, value, fields)?;
    }
    Ok(())
}

fn named(name: Option<&'static str>, raw: u8) -> String {
    match name {
        Some(n) => n.to_owned(),
        None => format!("unknown({raw})"),
    }
}

/// Decoded field layout of a register for the generation (initiator, RSRC3 and TMPRING differ).
fn initiator_fields(gfx: Gfx) -> &'static [Field] {
    match gfx {
        Gfx::Gfx10_3 => fields::initiator::GFX10_3,
        Gfx::Gfx11 => fields::initiator::GFX11,
    }
}

impl fmt::Display for Packet {
    /// Multi-line text: `offset  header  NAME [flags]`, then one indented line per register or
    /// payload item with its value and fields.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:06x}  {:08x}  {}", self.offset, self.header, self.name())?;
        if self.compute {
            f.write_str(" [compute]")?;
        }
        if self.predicate {
            f.write_str(" [predicated]")?;
        }
        match &self.body {
            Body::Nop { payload_len } => write!(f, " ({payload_len} payload dwords)"),
            Body::Filler => Ok(()),
            Body::SetShReg(regs) | Body::SetUconfigReg(regs) => {
                for w in regs {
                    let label = format!("{} [{:#07x}]", w.reg.name, w.reg.offset);
                    line(f, &label, w.value, w.reg.fields)?;
                }
                Ok(())
            }
            Body::DispatchDirect(d) => {
                write!(f, "\n        groups = {} x {} x {}", d.x, d.y, d.z)?;
                line(f, "DISPATCH_INITIATOR", d.initiator.bits(), initiator_fields(self.gfx))
            }
            Body::DispatchIndirect(d) => {
                let init: DispatchInitiator = match *d {
                    DispatchIndirect::Address { address, initiator } => {
                        write!(f, "\n        args address = 0x{address:012x}")?;
                        initiator
                    }
                    DispatchIndirect::Offset { offset, initiator } => {
                        write!(f, "\n        args offset = 0x{offset:x} (from SET_BASE)")?;
                        initiator
                    }
                };
                line(f, "DISPATCH_INITIATOR", init.bits(), initiator_fields(self.gfx))
            }
            Body::AcquireMem(a) => {
                line(f, "COHER_CNTL", a.coher_cntl, &[])?;
                write!(f, "\n        range = base 0x{:x}, size 0x{:x} (256-byte units)", a.base, a.size)?;
                write!(f, "\n        poll interval = {}", a.poll_interval)?;
                line(f, "GCR_CNTL", a.gcr_cntl.0, GcrCntl::FIELDS)
            }
            Body::ReleaseMem(r) => {
                let [dw1, dw2, ..] = r.payload_lossless();
                write!(f, "\n        event = {} index {}", named(r.event.name(), r.event.0), r.event_index)?;
                line(f, "dw1", dw1, release_fields::DW1)?;
                line(
                    f,
                    "dw2",
                    dw2,
                    &[release_fields::DST_SEL, release_fields::INT_SEL, release_fields::DATA_SEL],
                )?;
                write!(
                    f,
                    "\n        dst = {}, int = {}, data = {}",
                    named(r.dst_sel.name(), r.dst_sel.0),
                    named(r.int_sel.name(), r.int_sel.0),
                    named(r.data_sel.name(), r.data_sel.0)
                )?;
                write!(f, "\n        address = 0x{:012x}", r.address)?;
                write!(f, "\n        data = 0x{:x}", r.data)?;
                write!(f, "\n        int ctxid = {}", r.int_ctxid)
            }
            Body::EventWrite(e) => {
                write!(f, "\n        event = {} index {}", named(e.event.name(), e.event.0), e.index)?;
                let dw1 = ((e.event.0 as u32) & 0x3F) | (((e.index as u32) & 0xF) << 8);
                line(f, "dw1", dw1, &[event_fields::EVENT_TYPE, event_fields::EVENT_INDEX])?;
                if let Some(a) = e.address {
                    write!(f, "\n        address = 0x{a:012x}")?;
                }
                Ok(())
            }
            Body::WaitRegMem(w) => {
                let space = if w.mem_space == 1 { "memory" } else { "register" };
                write!(
                    f,
                    "\n        wait until ({space} 0x{:x} & 0x{:08x}) {} 0x{:x}",
                    w.address,
                    w.mask,
                    named(w.function.name(), w.function.0),
                    w.reference
                )?;
                let dw1 = (w.function.0 as u32 & 7)
                    | ((w.mem_space as u32 & 3) << 4)
                    | ((w.operation as u32 & 3) << 6)
                    | ((w.engine as u32 & 3) << 8);
                line(f, "dw1", dw1, wait_fields::ALL)?;
                write!(f, "\n        poll interval = {}", w.poll_interval)
            }
            Body::IndirectBuffer(ib) => {
                write!(f, "\n        address = 0x{:012x}, {} dwords", ib.address, ib.size_dw)?;
                let dw3 = (ib.size_dw & 0xF_FFFF)
                    | ((ib.chain as u32) << 20)
                    | ((ib.pre_ena as u32) << 21)
                    | ((ib.valid as u32) << 23)
                    | ((ib.cache_policy as u32 & 3) << 28);
                line(f, "control", dw3, ib_fields::ALL)
            }
            Body::CopyData(c) => {
                let dw1 = (c.src_sel as u32 & 0xF)
                    | ((c.dst_sel as u32 & 0xF) << 8)
                    | ((c.count_64 as u32) << 16)
                    | ((c.wr_confirm as u32) << 20)
                    | ((c.engine as u32 & 3) << 30);
                line(f, "control", dw1, copy_fields::ALL)?;
                write!(f, "\n        src = 0x{:x}, dst = 0x{:x}", c.src, c.dst)
            }
            Body::DmaData(d) => {
                let control = (d.engine as u32 & 1)
                    | ((d.dst_sel as u32 & 3) << 20)
                    | ((d.src_sel as u32 & 3) << 29)
                    | ((d.cp_sync as u32) << 31);
                line(f, "control", control, dma_fields::CONTROL)?;
                let command = (d.byte_count & 0x3FF_FFFF) | ((d.raw_wait as u32) << 30);
                line(f, "command", command, dma_fields::COMMAND)?;
                write!(f, "\n        src = 0x{:x}, dst = 0x{:x}, {} bytes", d.src, d.dst, d.byte_count)
            }
        }
    }
}

impl ReleaseMem {
    /// The payload as decoded, without the encoder's validity checks.
    fn payload_lossless(&self) -> [u32; 2] {
        let dw1 = ((self.event.0 as u32) & 0x3F) | (((self.event_index as u32) & 0xF) << 8) | self.cache.0;
        let dw2 = (((self.dst_sel.0 as u32) & 3) << 16)
            | (((self.int_sel.0 as u32) & 7) << 24)
            | (((self.data_sel.0 as u32) & 7) << 29);
        [dw1, dw2]
    }
}
