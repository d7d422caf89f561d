//! The simulated command processor: decodes each IB of a submission with the `pm4` decoder and
//! executes it packet by packet against the submission's view of GPU memory.
//!
//! Modelled: SET_SH_REG (the compute registers, fresh for every submission, since another
//! process may run between two submissions on hardware); DISPATCH_DIRECT and DISPATCH_INDIRECT
//! (address form), run by the ISA interpreter to completion — the simulator is sequential, so a
//! dispatch has finished before the next packet; ACQUIRE_MEM and EVENT_WRITE
//! (CS_PARTIAL_FLUSH), no-ops for memory that has no caches, with their fields validated;
//! RELEASE_MEM at end of pipe writing 32/64-bit data or a clock value; WAIT_REG_MEM on memory,
//! which must already hold (nothing else could change it while the queue waits);
//! INDIRECT_BUFFER calls (one level, as on hardware) and chains (a chain that loops is a hang);
//! COPY_DATA and DMA_DATA between memory, immediates and fills; NOP and type-2 fillers.
//! Everything else — unknown opcodes, registers, selectors, predication — stops the submission
//! with an error naming the packet, its dword offset and the IB, as a real CP would hang on it.

use std::time::Instant;

use pm4::packets::{
    AcquireMem, CompareFunc, CopyData, DataSel, DispatchIndirect, DmaData, DstSel, EventType, EventWrite,
    GcrCntl, IndirectBuffer, IntSel, ReleaseMem, WaitRegMem, EVENT_INDEX_END_OF_PIPE,
    EVENT_INDEX_PARTIAL_FLUSH,
};
use pm4::{Body, Decoder, Gfx, Packet};

use crate::isa::{self, Access, Dispatch, MemoryFault, SimError};
use crate::kernel_names::kernel_at;
use crate::vm::SubmissionMemory;

/// First byte address of the SH register space.
const SH_BASE: u32 = 0xB000;
/// SH registers the CP keeps.
const SH_COUNT: usize = 0x400;
/// The hardware runs at most two IB levels: the submitted IB and one it calls.
const MAX_IB_LEVEL: u32 = 2;
/// INDIRECT_BUFFER chains one submission may follow: only a chain that loops reaches it, which
/// would hang a real CP.
const MAX_CHAINS: u64 = 1 << 16;
/// GCR_CNTL bits that name a field (bits 0..18).
const GCR_KNOWN_BITS: u32 = (1 << 19) - 1;
/// The reference clock the device reports (`gpu_counter_freq`, kHz) ticks every 10 ns.
const CLOCK_TICK_NS: u128 = 10;

/// Why a submission stopped; each variant's text is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpFailure {
    /// A GPU page fault (a wave's or the CP's own access).
    PageFault(String),
    /// A kernel ran past its instruction budget: a hung GPU.
    Hang(String),
    /// Something the hardware would hang on or misbehave with: an unknown packet or register, a
    /// bad field, an unknown instruction, a dispatch the interpreter does not model.
    Invalid(String),
}

impl CpFailure {
    pub fn message(&self) -> &str {
        match self {
            Self::PageFault(m) | Self::Hang(m) | Self::Invalid(m) => m,
        }
    }
}

impl std::fmt::Display for CpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// What one submission did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpStats {
    pub packets: u64,
    pub chains: u64,
    pub dispatches: u64,
    pub wave_instructions: u64,
}

/// Where a packet sits, for messages.
#[derive(Debug, Clone, Copy)]
struct Site {
    ib: u64,
    offset: usize,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dword {} of the IB at {:#x}", self.offset, self.ib)
    }
}

/// The command processor of one submission.
pub struct CommandProcessor<'m, 'a> {
    memory: &'m mut SubmissionMemory<'a>,
    sh: Box<[u32; SH_COUNT]>,
    instruction_budget: u64,
    gfx: Gfx,
    started: Instant,
    stats: CpStats,
}

impl<'m, 'a> CommandProcessor<'m, 'a> {
    /// A CP with all SH registers zero; `started` is the device's clock origin.
    pub fn new(
        memory: &'m mut SubmissionMemory<'a>,
        gfx: Gfx,
        instruction_budget: u64,
        started: Instant,
    ) -> Self {
        Self {
            memory,
            sh: Box::new([0; SH_COUNT]),
            instruction_budget,
            gfx,
            started,
            stats: CpStats::default(),
        }
    }

    pub fn stats(&self) -> CpStats {
        self.stats
    }

    /// Runs the IB of `size_bytes` bytes at `va` (a submission's top-level IB).
    pub fn run_ib(&mut self, va: u64, size_bytes: u32) -> Result<(), CpFailure> {
        if va % 4 != 0 || size_bytes % 4 != 0 {
            return Err(CpFailure::Invalid(format!(
                "the IB at {va:#x} ({size_bytes} bytes) is not dword-aligned"
            )));
        }
        let words = self.read_ib(va, size_bytes as usize / 4, None)?;
        self.run_level(va, words, 1)
    }

    fn read_ib(&mut self, va: u64, dwords: usize, caller: Option<Site>) -> Result<Vec<u32>, CpFailure> {
        let mut bytes = vec![0u8; dwords * 4];
        self.memory.load(va, &mut bytes, Access::Read).map_err(|f| {
            let at = match caller {
                Some(site) => format!("INDIRECT_BUFFER at {site}"),
                None => "the submission".into(),
            };
            self.cp_fault(f, &format!("fetching the {dwords}-dword IB at {va:#x} for {at}"))
        })?;
        Ok(pm4::words_from_le_bytes(&bytes))
    }

    fn run_level(&mut self, va: u64, words: Vec<u32>, level: u32) -> Result<(), CpFailure> {
        let mut ib = (va, words);
        'ibs: loop {
            let (ib_va, words) = ib;
            for packet in Decoder::new(&words, self.gfx) {
                let packet = packet.map_err(|e| {
                    CpFailure::Invalid(format!(
                        "PM4 error at dword {} of the IB at {ib_va:#x}: {}; the simulated command \
                         processor stops here (a real one would hang)",
                        e.offset, e.kind
                    ))
                })?;
                let site = Site { ib: ib_va, offset: packet.offset };
                self.stats.packets += 1;
                if packet.predicate {
                    return Err(unsupported(&packet, site, "predicated packets are not modelled"));
                }
                if let Body::IndirectBuffer(target) = &packet.body {
                    let target = self.indirect_target(&packet, target, site, level)?;
                    if target.chain {
                        self.stats.chains += 1;
                        if self.stats.chains > MAX_CHAINS {
                            return Err(CpFailure::Hang(format!(
                                "the command processor followed {MAX_CHAINS} INDIRECT_BUFFER chains \
                                 without reaching the end of the submission (at {site}): the chain loops"
                            )));
                        }
                        // A chain replaces the rest of this IB.
                        ib = (
                            target.address,
                            self.read_ib(target.address, target.size_dw as usize, Some(site))?,
                        );
                        continue 'ibs;
                    }
                    let called = self.read_ib(target.address, target.size_dw as usize, Some(site))?;
                    self.run_level(target.address, called, level + 1)?;
                    continue;
                }
                self.execute(&packet, site)?;
            }
            return Ok(());
        }
    }

    fn indirect_target(
        &self,
        packet: &Packet,
        target: &IndirectBuffer,
        site: Site,
        level: u32,
    ) -> Result<IndirectBuffer, CpFailure> {
        if !target.valid {
            return Err(invalid(packet, site, "the VALID bit (dword 3 bit 23) is clear"));
        }
        if target.size_dw == 0 {
            return Err(invalid(packet, site, "the target IB is empty"));
        }
        if !target.chain && level >= MAX_IB_LEVEL {
            return Err(invalid(
                packet,
                site,
                "an IB called by INDIRECT_BUFFER cannot call another (the CP runs two levels)",
            ));
        }
        Ok(*target)
    }

    fn execute(&mut self, packet: &Packet, site: Site) -> Result<(), CpFailure> {
        match &packet.body {
            Body::Nop { .. } | Body::Filler => Ok(()),
            Body::SetShReg(writes) => {
                for w in writes {
                    let index = w.reg.offset.checked_sub(SH_BASE).map(|o| (o / 4) as usize);
                    match index.and_then(|i| self.sh.get_mut(i)) {
                        Some(slot) => *slot = w.value,
                        None => {
                            return Err(invalid(
                                packet,
                                site,
                                &format!("register {} is not an SH register", w.reg.name),
                            ))
                        }
                    }
                }
                Ok(())
            }
            Body::DispatchDirect(d) => self.dispatch(packet, site, [d.x, d.y, d.z], d.initiator.bits()),
            Body::DispatchIndirect(DispatchIndirect::Address { address, initiator }) => {
                let mut bytes = [0u8; 12];
                self.memory.load(*address, &mut bytes, Access::Read).map_err(|f| {
                    self.cp_fault(f, &format!("reading the group counts of DISPATCH_INDIRECT at {site}"))
                })?;
                let groups = [0, 1, 2].map(|i| {
                    u32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]])
                });
                self.dispatch(packet, site, groups, initiator.bits())
            }
            Body::DispatchIndirect(DispatchIndirect::Offset { .. }) => Err(unsupported(
                packet,
                site,
                "the SET_BASE-relative form is not modelled (use the address form on compute queues)",
            )),
            Body::AcquireMem(a) => check_acquire(packet, site, a),
            Body::EventWrite(e) => check_event(packet, site, e),
            Body::ReleaseMem(r) => self.release(packet, site, r),
            Body::WaitRegMem(w) => self.wait_reg_mem(packet, site, w),
            Body::CopyData(c) => self.copy_data(packet, site, c),
            Body::DmaData(d) => self.dma_data(packet, site, d),
            Body::SetUconfigReg(_) => {
                Err(unsupported(packet, site, "user-config registers are not modelled"))
            }
            Body::IndirectBuffer(_) => {
                Err(invalid(packet, site, "nested INDIRECT_BUFFER reached the executor"))
            }
        }
    }

    fn reg(&self, byte_address: u32) -> u32 {
        byte_address.checked_sub(SH_BASE).and_then(|o| self.sh.get((o / 4) as usize)).copied().unwrap_or(0)
    }

    fn dispatch(
        &mut self,
        packet: &Packet,
        site: Site,
        groups: [u32; 3],
        initiator: u32,
    ) -> Result<(), CpFailure> {
        let code = ((self.reg(isa::regs::COMPUTE_PGM_HI) as u64) << 32
            | self.reg(isa::regs::COMPUTE_PGM_LO) as u64)
            << 8;
        let kernel =
            match self.memory.mapped_buffer(code).and_then(|(image, offset)| kernel_at(image, offset)) {
                Some(name) => name,
                None => format!("<code at {code:#x}>"),
            };
        let dispatch = Dispatch::from_registers(
            &kernel,
            self.gfx,
            |r| self.reg(r),
            groups,
            initiator,
            self.instruction_budget,
        )
        .map_err(|e| invalid(packet, site, &e.to_string()))?;
        tracing::debug!(kernel = %kernel, ?groups, code = format_args!("{code:#x}"), "simulated dispatch");
        self.stats.dispatches += 1;
        match isa::run_dispatch(&dispatch, &mut *self.memory) {
            Ok(stats) => {
                self.stats.wave_instructions += stats.instructions;
                Ok(())
            }
            Err(err) => Err(self.kernel_failure(err, packet, site)),
        }
    }

    fn kernel_failure(&self, err: SimError, packet: &Packet, site: Site) -> CpFailure {
        let launch = format!("{} at {site}", packet.name());
        let text = format!("{err} ({launch})");
        match &err {
            SimError::PageFault { addr, access, .. } => {
                let why = isa::aperture_fault(*addr)
                    .or_else(|| self.memory.explain(&MemoryFault { addr: *addr, access: *access }));
                CpFailure::PageFault(match why {
                    Some(why) => format!("{err}: {why} ({launch})"),
                    None => text,
                })
            }
            SimError::Timeout { .. } => CpFailure::Hang(text),
            _ => CpFailure::Invalid(text),
        }
    }

    fn cp_fault(&self, fault: MemoryFault, doing: &str) -> CpFailure {
        let why = self.memory.explain(&fault).unwrap_or("no buffer is mapped there");
        CpFailure::PageFault(format!(
            "GPU page fault at {:#x} ({}) by the command processor {doing}: {why}",
            fault.addr, fault.access
        ))
    }

    fn release(&mut self, packet: &Packet, site: Site, r: &ReleaseMem) -> Result<(), CpFailure> {
        let end_of_pipe = [
            EventType::CACHE_FLUSH_TS,
            EventType::CACHE_FLUSH_AND_INV_TS_EVENT,
            EventType::BOTTOM_OF_PIPE_TS,
        ];
        if !end_of_pipe.contains(&r.event) || r.event_index != EVENT_INDEX_END_OF_PIPE {
            return Err(unsupported(
                packet,
                site,
                &format!(
                    "event {:#x} index {}: only end-of-pipe timestamp events (CACHE_FLUSH_TS, \
                     CACHE_FLUSH_AND_INV_TS_EVENT, BOTTOM_OF_PIPE_TS with index 5) are modelled",
                    r.event.0, r.event_index
                ),
            ));
        }
        if r.dst_sel != DstSel::MEMORY && r.dst_sel != DstSel::TC_L2 {
            return Err(unsupported(packet, site, &format!("DST_SEL {} is not memory", r.dst_sel.0)));
        }
        if r.int_sel.0 > IntSel::DATA_AND_INTERRUPT_AFTER_WRITE_CONFIRM.0 {
            return Err(unsupported(packet, site, &format!("INT_SEL {} is not modelled", r.int_sel.0)));
        }
        let data = match r.data_sel {
            DataSel::NONE => return Ok(()),
            DataSel::VALUE_32 => (r.data as u32).to_le_bytes().to_vec(),
            DataSel::VALUE_64 => r.data.to_le_bytes().to_vec(),
            DataSel::GPU_CLOCK | DataSel::SYSTEM_CLOCK => {
                let ticks = self.started.elapsed().as_nanos() / CLOCK_TICK_NS;
                (ticks as u64).to_le_bytes().to_vec()
            }
            other => return Err(unsupported(packet, site, &format!("DATA_SEL {} is not modelled", other.0))),
        };
        if r.address % data.len() as u64 != 0 {
            return Err(invalid(
                packet,
                site,
                &format!("address {:#x} is not aligned to the {}-byte data", r.address, data.len()),
            ));
        }
        self.memory
            .store(r.address, &data)
            .map_err(|f| self.cp_fault(f, &format!("writing RELEASE_MEM data at {site}")))
    }

    fn wait_reg_mem(&mut self, packet: &Packet, site: Site, w: &WaitRegMem) -> Result<(), CpFailure> {
        if w.mem_space != 1 {
            return Err(unsupported(
                packet,
                site,
                "waiting on a register is not modelled (only MEM_SPACE 1)",
            ));
        }
        if w.operation != 0 {
            return Err(unsupported(packet, site, &format!("OPERATION {} is not modelled", w.operation)));
        }
        if w.address % 4 != 0 {
            return Err(invalid(packet, site, &format!("address {:#x} is not dword-aligned", w.address)));
        }
        let mut bytes = [0u8; 4];
        self.memory
            .load(w.address, &mut bytes, Access::Read)
            .map_err(|f| self.cp_fault(f, &format!("polling for WAIT_REG_MEM at {site}")))?;
        let value = u32::from_le_bytes(bytes) & w.mask;
        let holds = match w.function {
            CompareFunc::ALWAYS => true,
            CompareFunc::LESS => value < w.reference,
            CompareFunc::LESS_EQUAL => value <= w.reference,
            CompareFunc::EQUAL => value == w.reference,
            CompareFunc::NOT_EQUAL => value != w.reference,
            CompareFunc::GREATER_EQUAL => value >= w.reference,
            CompareFunc::GREATER => value > w.reference,
            other => return Err(invalid(packet, site, &format!("FUNCTION {} is reserved", other.0))),
        };
        if holds {
            return Ok(());
        }
        Err(CpFailure::Hang(format!(
            "WAIT_REG_MEM at {site} would wait forever: the dword at {:#x} masked with {:#x} is {value:#x}, \
             and {value:#x} {} {:#x} is false; the simulated GPU runs one submission at a time, so \
             nothing could change it",
            w.address,
            w.mask,
            w.function.name().unwrap_or("?"),
            w.reference
        )))
    }

    fn copy_data(&mut self, packet: &Packet, site: Site, c: &CopyData) -> Result<(), CpFailure> {
        let len = if c.count_64 { 8 } else { 4 };
        let mut value = [0u8; 8];
        match c.src_sel {
            CopyData::SEL_IMM => value = c.src.to_le_bytes(),
            CopyData::SEL_SRC_MEM | CopyData::SEL_TC_L2 => self
                .memory
                .load(c.src, &mut value[..len], Access::Read)
                .map_err(|f| self.cp_fault(f, &format!("reading the source of COPY_DATA at {site}")))?,
            other => return Err(unsupported(packet, site, &format!("SRC_SEL {other} is not modelled"))),
        }
        match c.dst_sel {
            CopyData::SEL_DST_MEM | CopyData::SEL_TC_L2 => self
                .memory
                .store(c.dst, &value[..len])
                .map_err(|f| self.cp_fault(f, &format!("writing the destination of COPY_DATA at {site}"))),
            other => Err(unsupported(packet, site, &format!("DST_SEL {other} is not modelled"))),
        }
    }

    fn dma_data(&mut self, packet: &Packet, site: Site, d: &DmaData) -> Result<(), CpFailure> {
        let len = d.byte_count as usize;
        let data = match d.src_sel {
            DmaData::SRC_ADDR | DmaData::SRC_ADDR_TC_L2 => {
                let mut bytes = vec![0u8; len];
                self.memory
                    .load(d.src, &mut bytes, Access::Read)
                    .map_err(|f| self.cp_fault(f, &format!("reading the source of DMA_DATA at {site}")))?;
                bytes
            }
            DmaData::SRC_DATA => (d.src as u32).to_le_bytes().iter().copied().cycle().take(len).collect(),
            other => return Err(unsupported(packet, site, &format!("SRC_SEL {other} is not modelled"))),
        };
        match d.dst_sel {
            DmaData::DST_ADDR | DmaData::DST_ADDR_TC_L2 => self
                .memory
                .store(d.dst, &data)
                .map_err(|f| self.cp_fault(f, &format!("writing the destination of DMA_DATA at {site}"))),
            other => Err(unsupported(packet, site, &format!("DST_SEL {other} is not modelled"))),
        }
    }
}

fn check_acquire(packet: &Packet, site: Site, a: &AcquireMem) -> Result<(), CpFailure> {
    if a.coher_cntl != 0 {
        return Err(invalid(
            packet,
            site,
            &format!("COHER_CNTL {:#x}: gfx11 takes cache actions from GCR_CNTL only", a.coher_cntl),
        ));
    }
    let GcrCntl(bits) = a.gcr_cntl;
    if bits & !GCR_KNOWN_BITS != 0 {
        return Err(invalid(packet, site, &format!("GCR_CNTL {bits:#x} sets bits above RANGE_IS_PA (18)")));
    }
    if a.size == 0 {
        return Err(invalid(packet, site, "the range is empty (size 0)"));
    }
    Ok(())
}

fn check_event(packet: &Packet, site: Site, e: &EventWrite) -> Result<(), CpFailure> {
    if e.event == EventType::CS_PARTIAL_FLUSH && e.index == EVENT_INDEX_PARTIAL_FLUSH && e.address.is_none() {
        // Dispatches run to completion before the next packet: the flush has already happened.
        return Ok(());
    }
    Err(unsupported(
        packet,
        site,
        &format!(
            "event {} ({:#x}) index {}{}: only CS_PARTIAL_FLUSH with index 4 is modelled",
            e.event.name().unwrap_or("unknown"),
            e.event.0,
            e.index,
            if e.address.is_some() { " with an address" } else { "" }
        ),
    ))
}

fn opcode_of(packet: &Packet) -> u32 {
    (packet.header >> 8) & 0xff
}

fn invalid(packet: &Packet, site: Site, why: &str) -> CpFailure {
    CpFailure::Invalid(format!("{} (opcode {:#04x}) at {site}: {why}", packet.name(), opcode_of(packet)))
}

fn unsupported(packet: &Packet, site: Site, why: &str) -> CpFailure {
    CpFailure::Invalid(format!(
        "{} (opcode {:#04x}) at {site}: {why}; the simulated command processor does not run it",
        packet.name(),
        opcode_of(packet)
    ))
}
