//! Typed payloads of the packets a compute queue uses: their dword layouts, encode and decode.
//!
//! Each type knows its fixed payload length, so a header built from it always carries the right
//! count. Decoding is total: every bit pattern yields a value (unknown selector values are kept
//! raw), so only the packet length can make a payload invalid.

use crate::error::{EncodeError, FieldError};
use crate::fields::DispatchInitiator;
use crate::registers::Field;

/// Splits a 64-bit address into (low, high) dwords.
#[inline(always)]
const fn split(addr: u64) -> (u32, u32) {
    (addr as u32, (addr >> 32) as u32)
}

#[inline(always)]
const fn join(lo: u32, hi: u32) -> u64 {
    lo as u64 | ((hi as u64) << 32)
}

const fn check(field: Field, value: u32) -> Result<u32, FieldError> {
    field.set(0, value)
}

fn aligned(addr: u64, align: u64) -> Result<(), EncodeError> {
    if addr % align == 0 {
        Ok(())
    } else {
        Err(EncodeError::Misaligned { addr, align })
    }
}

/// A VGT event type, as carried by EVENT_WRITE and RELEASE_MEM (6 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventType(pub u8);

impl EventType {
    /// Flush caches and write a timestamp.
    pub const CACHE_FLUSH_TS: EventType = EventType(0x04);
    /// Wait until all previously launched compute work has finished.
    pub const CS_PARTIAL_FLUSH: EventType = EventType(0x07);
    /// Flush and invalidate caches, then signal at end of pipe.
    pub const CACHE_FLUSH_AND_INV_TS_EVENT: EventType = EventType(0x14);
    /// Signal at bottom of pipe.
    pub const BOTTOM_OF_PIPE_TS: EventType = EventType(0x28);

    /// The event's name, if it is one this crate knows.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0x04 => Some("CACHE_FLUSH_TS"),
            0x07 => Some("CS_PARTIAL_FLUSH"),
            0x14 => Some("CACHE_FLUSH_AND_INV_TS_EVENT"),
            0x28 => Some("BOTTOM_OF_PIPE_TS"),
            _ => None,
        }
    }
}

/// EVENT_WRITE dword 1 layout.
pub mod event_fields {
    use crate::registers::Field;
    /// The event.
    pub const EVENT_TYPE: Field = Field::new("EVENT_TYPE", 0, 5);
    /// Event class: 4 for partial flushes, 5 for end-of-pipe timestamp events.
    pub const EVENT_INDEX: Field = Field::new("EVENT_INDEX", 8, 11);
}

/// EVENT_INDEX for `*_PARTIAL_FLUSH` events.
pub const EVENT_INDEX_PARTIAL_FLUSH: u8 = 4;
/// EVENT_INDEX for end-of-pipe timestamp events (RELEASE_MEM).
pub const EVENT_INDEX_END_OF_PIPE: u8 = 5;

/// EVENT_WRITE: signals a pipeline event; some events also carry an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventWrite {
    /// The event.
    pub event: EventType,
    /// EVENT_INDEX (4 bits).
    pub index: u8,
    /// Address for events that write to memory; `None` for plain events.
    pub address: Option<u64>,
}

impl EventWrite {
    /// The partial flush that waits for all earlier dispatches to finish.
    pub const CS_PARTIAL_FLUSH: EventWrite =
        EventWrite { event: EventType::CS_PARTIAL_FLUSH, index: EVENT_INDEX_PARTIAL_FLUSH, address: None };

    pub(crate) fn dword1(&self) -> Result<u32, EncodeError> {
        Ok(check(event_fields::EVENT_TYPE, self.event.0 as u32)?
            | check(event_fields::EVENT_INDEX, self.index as u32)?)
    }

    pub(crate) fn decode(p: &[u32]) -> Option<EventWrite> {
        let dw1 = *p.first()?;
        let event = EventType(event_fields::EVENT_TYPE.get(dw1) as u8);
        let index = event_fields::EVENT_INDEX.get(dw1) as u8;
        match p {
            [_] => Some(EventWrite { event, index, address: None }),
            [_, lo, hi] => Some(EventWrite { event, index, address: Some(join(*lo, *hi)) }),
            _ => None,
        }
    }
}

/// GCR_CNTL: the gfx10+ cache controls carried by ACQUIRE_MEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GcrCntl(pub u32);

impl GcrCntl {
    /// Invalidate the instruction cache (GLI_INV = 1, "all").
    pub const GLI_INV: GcrCntl = GcrCntl(1);
    /// Write back the metadata cache.
    pub const GLM_WB: GcrCntl = GcrCntl(1 << 4);
    /// Invalidate the metadata cache.
    pub const GLM_INV: GcrCntl = GcrCntl(1 << 5);
    /// Write back the scalar cache.
    pub const GLK_WB: GcrCntl = GcrCntl(1 << 6);
    /// Invalidate the scalar cache.
    pub const GLK_INV: GcrCntl = GcrCntl(1 << 7);
    /// Invalidate the vector L0 cache.
    pub const GLV_INV: GcrCntl = GcrCntl(1 << 8);
    /// Invalidate GL1.
    pub const GL1_INV: GcrCntl = GcrCntl(1 << 9);
    /// Invalidate GL2.
    pub const GL2_INV: GcrCntl = GcrCntl(1 << 14);
    /// Write back GL2.
    pub const GL2_WB: GcrCntl = GcrCntl(1 << 15);

    /// Field layout.
    pub const FIELDS: &'static [Field] = &[
        Field::new("GLI_INV", 0, 1),
        Field::new("GL1_RANGE", 2, 3),
        Field::new("GLM_WB", 4, 4),
        Field::new("GLM_INV", 5, 5),
        Field::new("GLK_WB", 6, 6),
        Field::new("GLK_INV", 7, 7),
        Field::new("GLV_INV", 8, 8),
        Field::new("GL1_INV", 9, 9),
        Field::new("GL2_US", 10, 10),
        Field::new("GL2_RANGE", 11, 12),
        Field::new("GL2_DISCARD", 13, 13),
        Field::new("GL2_INV", 14, 14),
        Field::new("GL2_WB", 15, 15),
        Field::new("SEQ", 16, 17),
        Field::new("RANGE_IS_PA", 18, 18),
    ];

    /// Union of two sets of controls.
    pub const fn union(self, other: GcrCntl) -> GcrCntl {
        GcrCntl(self.0 | other.0)
    }

    /// Everything a kernel launch needs to see fresh code, constants and data: invalidate the
    /// instruction, scalar, vector and GL1 caches and write back + invalidate metadata and GL2.
    pub const INVALIDATE_ALL: GcrCntl = GcrCntl(
        Self::GLI_INV.0
            | Self::GLM_WB.0
            | Self::GLM_INV.0
            | Self::GLK_WB.0
            | Self::GLK_INV.0
            | Self::GLV_INV.0
            | Self::GL1_INV.0
            | Self::GL2_INV.0
            | Self::GL2_WB.0,
    );
}

impl core::ops::BitOr for GcrCntl {
    type Output = GcrCntl;
    fn bitor(self, rhs: GcrCntl) -> GcrCntl {
        self.union(rhs)
    }
}

/// ACQUIRE_MEM (gfx10+ form): wait for and perform cache actions over an address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireMem {
    /// CP_COHER_CNTL (legacy action bits; 0 on gfx10+, where GCR_CNTL carries them).
    pub coher_cntl: u32,
    /// Range size in 256-byte units: CP_COHER_SIZE in the low half, CP_COHER_SIZE_HI in the high.
    pub size: u64,
    /// Range base in 256-byte units: CP_COHER_BASE low half, CP_COHER_BASE_HI high.
    pub base: u64,
    /// Poll interval.
    pub poll_interval: u32,
    /// Cache controls.
    pub gcr_cntl: GcrCntl,
}

impl AcquireMem {
    /// Payload length.
    pub const LEN: usize = 7;

    /// Applies `gcr_cntl` to the whole address space.
    pub const fn full_range(gcr_cntl: GcrCntl) -> AcquireMem {
        AcquireMem { coher_cntl: 0, size: 0x00FF_FFFF_FFFF_FFFF, base: 0, poll_interval: 0x0A, gcr_cntl }
    }

    pub(crate) const fn payload(&self) -> [u32; Self::LEN] {
        let (size_lo, size_hi) = split(self.size);
        let (base_lo, base_hi) = split(self.base);
        [self.coher_cntl, size_lo, size_hi, base_lo, base_hi, self.poll_interval, self.gcr_cntl.0]
    }

    pub(crate) fn decode(p: &[u32]) -> Option<AcquireMem> {
        let &[coher_cntl, size_lo, size_hi, base_lo, base_hi, poll_interval, gcr] = p else { return None };
        Some(AcquireMem {
            coher_cntl,
            size: join(size_lo, size_hi),
            base: join(base_lo, base_hi),
            poll_interval,
            gcr_cntl: GcrCntl(gcr),
        })
    }
}

/// RELEASE_MEM destination (DST_SEL, 2 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DstSel(pub u8);

impl DstSel {
    /// Write through the memory controller.
    pub const MEMORY: DstSel = DstSel(0);
    /// Write into GL2.
    pub const TC_L2: DstSel = DstSel(1);
    /// Name, if known.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0 => Some("MEMORY"),
            1 => Some("TC_L2"),
            _ => None,
        }
    }
}

/// RELEASE_MEM interrupt selection (INT_SEL, 3 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IntSel(pub u8);

impl IntSel {
    /// No interrupt.
    pub const NONE: IntSel = IntSel(0);
    /// Interrupt only (no data written).
    pub const INTERRUPT: IntSel = IntSel(1);
    /// Interrupt once the data write is confirmed.
    pub const INTERRUPT_AFTER_WRITE_CONFIRM: IntSel = IntSel(2);
    /// Send data and interrupt once the write is confirmed.
    pub const DATA_AND_INTERRUPT_AFTER_WRITE_CONFIRM: IntSel = IntSel(3);
    /// Name, if known.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0 => Some("NONE"),
            1 => Some("INTERRUPT"),
            2 => Some("INTERRUPT_AFTER_WRITE_CONFIRM"),
            3 => Some("DATA_AND_INTERRUPT_AFTER_WRITE_CONFIRM"),
            _ => None,
        }
    }
}

/// RELEASE_MEM data selection (DATA_SEL, 3 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataSel(pub u8);

impl DataSel {
    /// Write nothing.
    pub const NONE: DataSel = DataSel(0);
    /// Write the low 32 bits of the data.
    pub const VALUE_32: DataSel = DataSel(1);
    /// Write all 64 bits of the data.
    pub const VALUE_64: DataSel = DataSel(2);
    /// Write the 64-bit GPU clock counter.
    pub const GPU_CLOCK: DataSel = DataSel(3);
    /// Write the 64-bit system clock counter.
    pub const SYSTEM_CLOCK: DataSel = DataSel(4);
    /// Name, if known.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0 => Some("NONE"),
            1 => Some("VALUE_32"),
            2 => Some("VALUE_64"),
            3 => Some("GPU_CLOCK"),
            4 => Some("SYSTEM_CLOCK"),
            _ => None,
        }
    }
    /// Bytes written at the address.
    pub const fn bytes(self) -> u64 {
        match self.0 {
            0 => 0,
            1 => 4,
            _ => 8,
        }
    }
}

/// RELEASE_MEM dword layouts.
pub mod release_fields {
    use crate::registers::Field;
    /// Dword 1: the event, its class and the cache actions (gfx10 bits; gfx11 adds the upper ones).
    pub const DW1: &[Field] = &[
        Field::new("EVENT_TYPE", 0, 5),
        Field::new("WAIT_SYNC", 7, 7),
        Field::new("EVENT_INDEX", 8, 11),
        Field::new("GLM_WB", 12, 12),
        Field::new("GLM_INV", 13, 13),
        Field::new("GLV_INV", 14, 14),
        Field::new("GL1_INV", 15, 15),
        Field::new("GL2_US", 16, 16),
        Field::new("GL2_RANGE", 17, 18),
        Field::new("GL2_DISCARD", 19, 19),
        Field::new("GL2_INV", 20, 20),
        Field::new("GL2_WB", 21, 21),
        Field::new("SEQ", 22, 23),
        Field::new("GLK_WB", 24, 24),
        Field::new("CACHE_POLICY", 25, 26),
        Field::new("EXECUTE", 28, 29),
        Field::new("GLK_INV", 30, 30),
        Field::new("PWS_ENABLE", 31, 31),
    ];
    /// Dword 2 destination select.
    pub const DST_SEL: Field = Field::new("DST_SEL", 16, 17);
    /// Dword 2 interrupt select.
    pub const INT_SEL: Field = Field::new("INT_SEL", 24, 26);
    /// Dword 2 data select.
    pub const DATA_SEL: Field = Field::new("DATA_SEL", 29, 31);
}

/// RELEASE_MEM dword-1 cache actions (every bit of dword 1 outside EVENT_TYPE and EVENT_INDEX).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReleaseCache(pub u32);

impl ReleaseCache {
    /// Write back the metadata cache.
    pub const GLM_WB: ReleaseCache = ReleaseCache(1 << 12);
    /// Invalidate the metadata cache.
    pub const GLM_INV: ReleaseCache = ReleaseCache(1 << 13);
    /// Invalidate the vector L0 cache.
    pub const GLV_INV: ReleaseCache = ReleaseCache(1 << 14);
    /// Invalidate GL1.
    pub const GL1_INV: ReleaseCache = ReleaseCache(1 << 15);
    /// Invalidate GL2.
    pub const GL2_INV: ReleaseCache = ReleaseCache(1 << 20);
    /// Write back GL2.
    pub const GL2_WB: ReleaseCache = ReleaseCache(1 << 21);
    /// Perform the actions in sequence.
    pub const SEQ: ReleaseCache = ReleaseCache(1 << 22);
    /// Bits that belong to EVENT_TYPE and EVENT_INDEX, which this type must not carry.
    pub const EVENT_BITS: u32 = 0x0000_0F3F;

    /// Union of two sets of actions.
    pub const fn union(self, other: ReleaseCache) -> ReleaseCache {
        ReleaseCache(self.0 | other.0)
    }

    /// Make every result of earlier work visible to the host: write back and invalidate GL2 and
    /// the metadata cache, invalidate the L0/GL1 caches, in sequence.
    pub const FLUSH_ALL: ReleaseCache = ReleaseCache(
        Self::GLM_WB.0
            | Self::GLM_INV.0
            | Self::GLV_INV.0
            | Self::GL1_INV.0
            | Self::GL2_INV.0
            | Self::GL2_WB.0
            | Self::SEQ.0,
    );
}

impl core::ops::BitOr for ReleaseCache {
    type Output = ReleaseCache;
    fn bitor(self, rhs: ReleaseCache) -> ReleaseCache {
        self.union(rhs)
    }
}

/// RELEASE_MEM: at an event, perform cache actions, then write data and/or raise an interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseMem {
    /// The event (usually an end-of-pipe timestamp event).
    pub event: EventType,
    /// EVENT_INDEX (5 = end of pipe).
    pub event_index: u8,
    /// Cache actions.
    pub cache: ReleaseCache,
    /// Where the data goes.
    pub dst_sel: DstSel,
    /// Interrupt selection.
    pub int_sel: IntSel,
    /// What is written.
    pub data_sel: DataSel,
    /// Destination address.
    pub address: u64,
    /// Data for VALUE_32 / VALUE_64.
    pub data: u64,
    /// Context id delivered with the interrupt.
    pub int_ctxid: u32,
}

impl ReleaseMem {
    /// Payload length.
    pub const LEN: usize = 7;

    /// The usual fence: at end of pipe, flush every cache and write a 32-bit value.
    pub const fn fence32(address: u64, value: u32) -> ReleaseMem {
        ReleaseMem {
            event: EventType::CACHE_FLUSH_AND_INV_TS_EVENT,
            event_index: EVENT_INDEX_END_OF_PIPE,
            cache: ReleaseCache::FLUSH_ALL,
            dst_sel: DstSel::MEMORY,
            int_sel: IntSel::NONE,
            data_sel: DataSel::VALUE_32,
            address,
            data: value as u64,
            int_ctxid: 0,
        }
    }

    pub(crate) fn payload(&self) -> Result<[u32; Self::LEN], EncodeError> {
        if self.cache.0 & ReleaseCache::EVENT_BITS != 0 {
            return Err(FieldError {
                field: "RELEASE_MEM cache actions",
                value: self.cache.0 as u64,
                bits: 32,
            }
            .into());
        }
        aligned(self.address, self.data_sel.bytes().max(4))?;
        let dw1 = check(event_fields::EVENT_TYPE, self.event.0 as u32)?
            | check(event_fields::EVENT_INDEX, self.event_index as u32)?
            | self.cache.0;
        let dw2 = check(release_fields::DST_SEL, self.dst_sel.0 as u32)?
            | check(release_fields::INT_SEL, self.int_sel.0 as u32)?
            | check(release_fields::DATA_SEL, self.data_sel.0 as u32)?;
        let (addr_lo, addr_hi) = split(self.address);
        let (data_lo, data_hi) = split(self.data);
        Ok([dw1, dw2, addr_lo, addr_hi, data_lo, data_hi, self.int_ctxid])
    }

    pub(crate) fn decode(p: &[u32]) -> Option<ReleaseMem> {
        let &[dw1, dw2, addr_lo, addr_hi, data_lo, data_hi, int_ctxid] = p else { return None };
        Some(ReleaseMem {
            event: EventType(event_fields::EVENT_TYPE.get(dw1) as u8),
            event_index: event_fields::EVENT_INDEX.get(dw1) as u8,
            cache: ReleaseCache(dw1 & !ReleaseCache::EVENT_BITS),
            dst_sel: DstSel(release_fields::DST_SEL.get(dw2) as u8),
            int_sel: IntSel(release_fields::INT_SEL.get(dw2) as u8),
            data_sel: DataSel(release_fields::DATA_SEL.get(dw2) as u8),
            address: join(addr_lo, addr_hi),
            data: join(data_lo, data_hi),
            int_ctxid,
        })
    }
}

/// WAIT_REG_MEM comparison (FUNCTION, 3 bits), applied as `(value & mask) OP reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompareFunc(pub u8);

impl CompareFunc {
    /// Always true.
    pub const ALWAYS: CompareFunc = CompareFunc(0);
    /// `<`.
    pub const LESS: CompareFunc = CompareFunc(1);
    /// `<=`.
    pub const LESS_EQUAL: CompareFunc = CompareFunc(2);
    /// `==`.
    pub const EQUAL: CompareFunc = CompareFunc(3);
    /// `!=`.
    pub const NOT_EQUAL: CompareFunc = CompareFunc(4);
    /// `>=`.
    pub const GREATER_EQUAL: CompareFunc = CompareFunc(5);
    /// `>`.
    pub const GREATER: CompareFunc = CompareFunc(6);
    /// Name.
    pub const fn name(self) -> Option<&'static str> {
        match self.0 {
            0 => Some("ALWAYS"),
            1 => Some("LESS"),
            2 => Some("LESS_EQUAL"),
            3 => Some("EQUAL"),
            4 => Some("NOT_EQUAL"),
            5 => Some("GREATER_EQUAL"),
            6 => Some("GREATER"),
            _ => None,
        }
    }
}

/// WAIT_REG_MEM dword 1 layout.
pub mod wait_fields {
    use crate::registers::Field;
    /// Comparison.
    pub const FUNCTION: Field = Field::new("FUNCTION", 0, 2);
    /// 0 = register, 1 = memory.
    pub const MEM_SPACE: Field = Field::new("MEM_SPACE", 4, 5);
    /// 0 = wait, 1 = write, wait, write.
    pub const OPERATION: Field = Field::new("OPERATION", 6, 7);
    /// 0 = ME, 1 = PFP.
    pub const ENGINE: Field = Field::new("ENGINE", 8, 9);
    /// Every field.
    pub const ALL: &[Field] = &[FUNCTION, MEM_SPACE, OPERATION, ENGINE];
}

/// WAIT_REG_MEM: poll a register or memory dword until `(value & mask) FUNCTION reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitRegMem {
    /// Comparison.
    pub function: CompareFunc,
    /// 0 = register (address is a dword register offset), 1 = memory.
    pub mem_space: u8,
    /// 0 = plain wait.
    pub operation: u8,
    /// 0 = ME, 1 = PFP.
    pub engine: u8,
    /// Address (memory: 4-byte aligned) or register dword offset.
    pub address: u64,
    /// Reference value.
    pub reference: u32,
    /// Mask applied to the polled value.
    pub mask: u32,
    /// Poll interval.
    pub poll_interval: u32,
}

impl WaitRegMem {
    /// Payload length.
    pub const LEN: usize = 6;

    /// Waits until the dword at `address` is `>= value` (a timeline fence).
    pub const fn memory_geq(address: u64, value: u32) -> WaitRegMem {
        WaitRegMem {
            function: CompareFunc::GREATER_EQUAL,
            mem_space: 1,
            operation: 0,
            engine: 0,
            address,
            reference: value,
            mask: u32::MAX,
            poll_interval: 4,
        }
    }

    pub(crate) fn payload(&self) -> Result<[u32; Self::LEN], EncodeError> {
        if self.mem_space == 1 {
            aligned(self.address, 4)?;
        }
        let dw1 = check(wait_fields::FUNCTION, self.function.0 as u32)?
            | check(wait_fields::MEM_SPACE, self.mem_space as u32)?
            | check(wait_fields::OPERATION, self.operation as u32)?
            | check(wait_fields::ENGINE, self.engine as u32)?;
        let (lo, hi) = split(self.address);
        Ok([dw1, lo, hi, self.reference, self.mask, self.poll_interval])
    }

    pub(crate) fn decode(p: &[u32]) -> Option<WaitRegMem> {
        let &[dw1, lo, hi, reference, mask, poll_interval] = p else { return None };
        Some(WaitRegMem {
            function: CompareFunc(wait_fields::FUNCTION.get(dw1) as u8),
            mem_space: wait_fields::MEM_SPACE.get(dw1) as u8,
            operation: wait_fields::OPERATION.get(dw1) as u8,
            engine: wait_fields::ENGINE.get(dw1) as u8,
            address: join(lo, hi),
            reference,
            mask,
            poll_interval,
        })
    }
}

/// INDIRECT_BUFFER dword 3 layout.
pub mod ib_fields {
    use crate::registers::Field;
    /// Size of the buffer in dwords.
    pub const IB_SIZE: Field = Field::new("IB_SIZE", 0, 19);
    /// The buffer replaces the rest of the current one instead of returning to it.
    pub const CHAIN: Field = Field::new("CHAIN", 20, 20);
    /// Preamble enable.
    pub const PRE_ENA: Field = Field::new("PRE_ENA", 21, 21);
    /// Must be set.
    pub const VALID: Field = Field::new("VALID", 23, 23);
    /// Cache policy (0 LRU, 1 stream, 2 bypass).
    pub const CACHE_POLICY: Field = Field::new("CACHE_POLICY", 28, 29);
    /// Every field.
    pub const ALL: &[Field] = &[IB_SIZE, CHAIN, PRE_ENA, VALID, CACHE_POLICY];
}

/// INDIRECT_BUFFER: run another command buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndirectBuffer {
    /// GPU address of the buffer (4-byte aligned).
    pub address: u64,
    /// Length in dwords (20 bits).
    pub size_dw: u32,
    /// Chain instead of call.
    pub chain: bool,
    /// Preamble enable.
    pub pre_ena: bool,
    /// VALID bit; the CP ignores buffers without it.
    pub valid: bool,
    /// Cache policy (2 bits).
    pub cache_policy: u8,
}

impl IndirectBuffer {
    /// Payload length.
    pub const LEN: usize = 3;

    /// Calls the `size_dw`-dword buffer at `address`.
    pub const fn call(address: u64, size_dw: u32) -> IndirectBuffer {
        IndirectBuffer { address, size_dw, chain: false, pre_ena: false, valid: true, cache_policy: 0 }
    }

    pub(crate) fn payload(&self) -> Result<[u32; Self::LEN], EncodeError> {
        aligned(self.address, 4)?;
        let dw3 = check(ib_fields::IB_SIZE, self.size_dw)?
            | ((self.chain as u32) << 20)
            | ((self.pre_ena as u32) << 21)
            | ((self.valid as u32) << 23)
            | check(ib_fields::CACHE_POLICY, self.cache_policy as u32)?;
        let (lo, hi) = split(self.address);
        Ok([lo, hi, dw3])
    }

    pub(crate) fn decode(p: &[u32]) -> Option<IndirectBuffer> {
        let &[lo, hi, dw3] = p else { return None };
        Some(IndirectBuffer {
            address: join(lo, hi),
            size_dw: ib_fields::IB_SIZE.get(dw3),
            chain: ib_fields::CHAIN.get(dw3) != 0,
            pre_ena: ib_fields::PRE_ENA.get(dw3) != 0,
            valid: ib_fields::VALID.get(dw3) != 0,
            cache_policy: ib_fields::CACHE_POLICY.get(dw3) as u8,
        })
    }
}

/// COPY_DATA dword 1 layout.
pub mod copy_fields {
    use crate::registers::Field;
    /// Source kind.
    pub const SRC_SEL: Field = Field::new("SRC_SEL", 0, 3);
    /// Destination kind.
    pub const DST_SEL: Field = Field::new("DST_SEL", 8, 11);
    /// 0 = copy 32 bits, 1 = copy 64 bits.
    pub const COUNT_SEL: Field = Field::new("COUNT_SEL", 16, 16);
    /// Wait for the write to be confirmed.
    pub const WR_CONFIRM: Field = Field::new("WR_CONFIRM", 20, 20);
    /// Engine (0 ME, 1 PFP).
    pub const ENGINE_SEL: Field = Field::new("ENGINE_SEL", 30, 31);
    /// Every field.
    pub const ALL: &[Field] = &[SRC_SEL, DST_SEL, COUNT_SEL, WR_CONFIRM, ENGINE_SEL];
}

/// COPY_DATA: copy one or two dwords between registers, memory, immediates and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyData {
    /// Source kind (see the `SEL_*` constants).
    pub src_sel: u8,
    /// Destination kind.
    pub dst_sel: u8,
    /// Copy 64 bits instead of 32.
    pub count_64: bool,
    /// Wait for write confirmation.
    pub wr_confirm: bool,
    /// Engine (2 bits).
    pub engine: u8,
    /// Source address, register offset or immediate value.
    pub src: u64,
    /// Destination address or register offset.
    pub dst: u64,
}

impl CopyData {
    /// Payload length.
    pub const LEN: usize = 5;
    /// Memory-mapped register.
    pub const SEL_REG: u8 = 0;
    /// Memory (source only; as destination use [`CopyData::SEL_DST_MEM`]).
    pub const SEL_SRC_MEM: u8 = 1;
    /// Through GL2.
    pub const SEL_TC_L2: u8 = 2;
    /// Performance counter.
    pub const SEL_PERF: u8 = 4;
    /// Immediate (source only).
    pub const SEL_IMM: u8 = 5;
    /// Memory (destination).
    pub const SEL_DST_MEM: u8 = 5;
    /// GPU timestamp (source only).
    pub const SEL_TIMESTAMP: u8 = 9;

    pub(crate) fn payload(&self) -> Result<[u32; Self::LEN], EncodeError> {
        let dw1 = check(copy_fields::SRC_SEL, self.src_sel as u32)?
            | check(copy_fields::DST_SEL, self.dst_sel as u32)?
            | ((self.count_64 as u32) << 16)
            | ((self.wr_confirm as u32) << 20)
            | check(copy_fields::ENGINE_SEL, self.engine as u32)?;
        let (slo, shi) = split(self.src);
        let (dlo, dhi) = split(self.dst);
        Ok([dw1, slo, shi, dlo, dhi])
    }

    pub(crate) fn decode(p: &[u32]) -> Option<CopyData> {
        let &[dw1, slo, shi, dlo, dhi] = p else { return None };
        Some(CopyData {
            src_sel: copy_fields::SRC_SEL.get(dw1) as u8,
            dst_sel: copy_fields::DST_SEL.get(dw1) as u8,
            count_64: copy_fields::COUNT_SEL.get(dw1) != 0,
            wr_confirm: copy_fields::WR_CONFIRM.get(dw1) != 0,
            engine: copy_fields::ENGINE_SEL.get(dw1) as u8,
            src: join(slo, shi),
            dst: join(dlo, dhi),
        })
    }
}

/// DMA_DATA dword 1 (control) and dword 6 (command) layouts.
pub mod dma_fields {
    use crate::registers::Field;
    /// Engine (0 ME, 1 PFP).
    pub const ENGINE_SEL: Field = Field::new("ENGINE_SEL", 0, 0);
    /// Destination kind.
    pub const DST_SEL: Field = Field::new("DST_SEL", 20, 21);
    /// Source kind.
    pub const SRC_SEL: Field = Field::new("SRC_SEL", 29, 30);
    /// Later packets wait until the copy is done.
    pub const CP_SYNC: Field = Field::new("CP_SYNC", 31, 31);
    /// Control fields.
    pub const CONTROL: &[Field] = &[ENGINE_SEL, DST_SEL, SRC_SEL, CP_SYNC];
    /// Bytes to copy (gfx9 and later: 26 bits).
    pub const BYTE_COUNT: Field = Field::new("BYTE_COUNT", 0, 25);
    /// Wait for earlier DMA writes before reading (read-after-write).
    pub const RAW_WAIT: Field = Field::new("RAW_WAIT", 30, 30);
    /// Command fields.
    pub const COMMAND: &[Field] = &[BYTE_COUNT, RAW_WAIT];
}

/// DMA_DATA: the command processor copies bytes between GPU addresses (or fills with a dword).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaData {
    /// Source kind (see the `SRC_*` constants).
    pub src_sel: u8,
    /// Destination kind (see the `DST_*` constants).
    pub dst_sel: u8,
    /// Later packets wait for the copy to finish.
    pub cp_sync: bool,
    /// Engine (0 ME, 1 PFP).
    pub engine: u8,
    /// Source address, or the fill value when `src_sel` is [`DmaData::SRC_DATA`].
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// Bytes to copy.
    pub byte_count: u32,
    /// Wait for earlier DMA writes before reading.
    pub raw_wait: bool,
}

impl DmaData {
    /// Payload length.
    pub const LEN: usize = 6;
    /// Source: memory address.
    pub const SRC_ADDR: u8 = 0;
    /// Source: the dword in the packet (fill).
    pub const SRC_DATA: u8 = 2;
    /// Source: memory address, through GL2.
    pub const SRC_ADDR_TC_L2: u8 = 3;
    /// Destination: memory address.
    pub const DST_ADDR: u8 = 0;
    /// Destination: memory address, through GL2.
    pub const DST_ADDR_TC_L2: u8 = 3;
    /// Largest byte count one packet carries on gfx10.3, rounded down to 32 bytes.
    pub const MAX_BYTES_GFX10_3: u32 = ((1 << 26) - 1) & !31;
    /// Largest byte count one packet carries on gfx11, rounded down to 32 bytes: larger counts
    /// are not reliable there (drivers split copies at this size).
    pub const MAX_BYTES_GFX11: u32 = 32767 & !31;

    /// A synchronous copy of `bytes` bytes through GL2, as compute queues use it.
    pub const fn copy(src: u64, dst: u64, bytes: u32) -> DmaData {
        DmaData {
            src_sel: Self::SRC_ADDR_TC_L2,
            dst_sel: Self::DST_ADDR_TC_L2,
            cp_sync: true,
            engine: 0,
            src,
            dst,
            byte_count: bytes,
            raw_wait: true,
        }
    }

    pub(crate) fn payload(&self) -> Result<[u32; Self::LEN], EncodeError> {
        let control = check(dma_fields::ENGINE_SEL, self.engine as u32)?
            | check(dma_fields::DST_SEL, self.dst_sel as u32)?
            | check(dma_fields::SRC_SEL, self.src_sel as u32)?
            | ((self.cp_sync as u32) << 31);
        let command = check(dma_fields::BYTE_COUNT, self.byte_count)? | ((self.raw_wait as u32) << 30);
        let (slo, shi) = split(self.src);
        let (dlo, dhi) = split(self.dst);
        Ok([control, slo, shi, dlo, dhi, command])
    }

    pub(crate) fn decode(p: &[u32]) -> Option<DmaData> {
        let &[control, slo, shi, dlo, dhi, command] = p else { return None };
        Some(DmaData {
            src_sel: dma_fields::SRC_SEL.get(control) as u8,
            dst_sel: dma_fields::DST_SEL.get(control) as u8,
            cp_sync: dma_fields::CP_SYNC.get(control) != 0,
            engine: dma_fields::ENGINE_SEL.get(control) as u8,
            src: join(slo, shi),
            dst: join(dlo, dhi),
            byte_count: dma_fields::BYTE_COUNT.get(command),
            raw_wait: dma_fields::RAW_WAIT.get(command) != 0,
        })
    }
}

/// DISPATCH_DIRECT: launch a grid of `x * y * z` workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchDirect {
    /// Workgroups in X.
    pub x: u32,
    /// Workgroups in Y.
    pub y: u32,
    /// Workgroups in Z.
    pub z: u32,
    /// DISPATCH_INITIATOR value.
    pub initiator: DispatchInitiator,
}

impl DispatchDirect {
    /// Payload length.
    pub const LEN: usize = 4;

    pub(crate) const fn payload(&self) -> [u32; Self::LEN] {
        [self.x, self.y, self.z, self.initiator.bits()]
    }

    pub(crate) fn decode(p: &[u32]) -> Option<DispatchDirect> {
        let &[x, y, z, init] = p else { return None };
        Some(DispatchDirect { x, y, z, initiator: DispatchInitiator::from_bits(init) })
    }
}

/// DISPATCH_INDIRECT: launch a grid whose size (three dwords) is read from memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatchIndirect {
    /// Compute-queue form: the arguments' GPU address is in the packet.
    Address {
        /// Address of the `[x, y, z]` workgroup counts (4-byte aligned).
        address: u64,
        /// DISPATCH_INITIATOR value.
        initiator: DispatchInitiator,
    },
    /// Graphics-ring form: an offset from the base set by an earlier SET_BASE packet.
    Offset {
        /// Byte offset from the dispatch base.
        offset: u32,
        /// DISPATCH_INITIATOR value.
        initiator: DispatchInitiator,
    },
}

impl DispatchIndirect {
    pub(crate) fn decode(p: &[u32]) -> Option<DispatchIndirect> {
        match *p {
            [lo, hi, init] => Some(DispatchIndirect::Address {
                address: join(lo, hi),
                initiator: DispatchInitiator::from_bits(init),
            }),
            [offset, init] => {
                Some(DispatchIndirect::Offset { offset, initiator: DispatchInitiator::from_bits(init) })
            }
            _ => None,
        }
    }
}
