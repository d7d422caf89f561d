//! The command buffer (IB) and kernel-argument arena of one submission, built on the CPU with
//! the `pm4` crate: a CU-enable preamble and a cache invalidate, then per dispatch its kernarg
//! segment (and dispatch packet when the descriptor enables the dispatch pointer) in the arena
//! and its registers, user SGPRs and DISPATCH_DIRECT in the IB; CP DMA copies; a partial flush
//! with cache writeback per barrier; and at the end a partial flush and an end-of-pipe
//! RELEASE_MEM that writes back every cache and stores the submission's fence value.
//!
//! Nothing here touches the driver: the caller allocates the arena at a known GPU address
//! first (the user SGPRs point into it), then uploads [`SubmissionEncoder::words`] and
//! [`SubmissionEncoder::kernargs`].
//!
//! Public (and hidden from the documentation) only for the dispatch-encoding benchmark
//! (`benches/amdgpu_dispatch.rs`), which times [`SubmissionEncoder`] without a driver; it is not
//! part of the library's API and may change at any time.

use pm4::fields::{DispatchInitiator, PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
use pm4::packets::{
    AcquireMem, DataSel, DispatchDirect, DmaData, DstSel, EventType, EventWrite, GcrCntl, IntSel,
    ReleaseCache, ReleaseMem, EVENT_INDEX_END_OF_PIPE,
};
use pm4::registers as r;
use pm4::{Gfx, PacketWriter};

use super::descriptor::UserSgpr;
use super::error::{AmdgpuError, Result};
use super::gfx_target::GfxTarget;
use super::kernarg::{
    dispatch_packet, ArgValue, DispatchGrid, HiddenBuffers, PacketAddresses, DISPATCH_PACKET_SIZE,
};
use super::program::AmdgpuProgram;
use super::submit::ScratchWaves;

/// Alignment of each dispatch's kernarg segment and dispatch packet in the arena (a cache line;
/// at least what any kernel's `.kernarg_segment_align` asks).
pub const KERNARG_ALIGNMENT: u64 = 64;

/// Where generic (flat) addresses reach the work-group's LDS: the shared aperture Linux's
/// amdgpu driver programs (SH_MEM_BASES) for the VMIDs of render-node contexts on every gfx9+
/// GPU, 4 GiB from here. Kernels read it from the SRC_SHARED_BASE register; the backend writes
/// it into the queue descriptor of the kernels that ask for a queue pointer.
pub const SHARED_APERTURE: u64 = 0x2000_0000_0000_0000;
/// Where generic addresses reach a work-item's private segment: amdgpu's private aperture.
pub const PRIVATE_APERTURE: u64 = 0x1000_0000_0000_0000;

/// Bytes of the queue descriptor (`amd_queue_t`) a kernel asking for the queue pointer gets.
const QUEUE_DESCRIPTOR_SIZE: usize = 256;

/// The queue descriptor of a PM4 dispatch, for kernels that ask for a queue pointer (code
/// built at -O0 keeps every implicit input): an `amd_queue_t` with no AQL ring (a PM4
/// submission has none), KERNEL_DISPATCH as its feature, and the aperture bases at the offsets
/// LLVM reads them from (64 for the shared aperture, 68 for the private one). Read-only.
fn queue_descriptor() -> [u8; QUEUE_DESCRIPTOR_SIZE] {
    let mut q = [0u8; QUEUE_DESCRIPTOR_SIZE];
    // hsa_queue_t: type 0 (multiple producers), features 1 (kernel dispatch).
    q[4..8].copy_from_slice(&1u32.to_le_bytes());
    q[64..68].copy_from_slice(&((SHARED_APERTURE >> 32) as u32).to_le_bytes());
    q[68..72].copy_from_slice(&((PRIVATE_APERTURE >> 32) as u32).to_le_bytes());
    q
}

/// Scratch slots are sized in these units: COMPUTE_TMPRING_SIZE.WAVESIZE counts 1 KiB on
/// gfx10.3 (256 bytes on gfx11, of which this is a multiple).
const SCRATCH_WAVE_GRANULE: u64 = 1024;

/// The private segment buffer a gfx10.3 kernel addresses its scratch through: the ring of
/// `bytes` from `address`, lanes interleaved by dword (SWIZZLE_ENABLE, ADD_TID_ENABLE,
/// INDEX_STRIDE = the wave size, which an AQL queue's packet processor would fill in), 32-bit
/// elements, the raw out-of-bounds mode, which does not check swizzled accesses. The kernel adds
/// its wave's slot offset to the base itself. The fields are those ROCm's runtime sets for its
/// queues on gfx10.
fn private_segment_buffer(address: u64, bytes: u64, wave_size: u32) -> [u32; 4] {
    const SWIZZLE_ENABLE: u32 = 1 << 31;
    // DST_SEL X, Y, Z, W; BUF_FMT_32_UINT; INDEX_STRIDE 32 (2) or 64 (3) lanes; ADD_TID_ENABLE;
    // RESOURCE_LEVEL 1 (required on gfx10); OOB_SELECT 2 (raw).
    let dst_sel = 4 | 5 << 3 | 6 << 6 | 7 << 9;
    let format = 20 << 12;
    let index_stride = if wave_size == 64 { 3 } else { 2 } << 21;
    let word3 = dst_sel | format | index_stride | 1 << 23 | 1 << 24 | 2 << 28;
    let records = u32::try_from(bytes).unwrap_or(u32::MAX);
    [address as u32, (address >> 32) as u32 & 0xffff | SWIZZLE_ENABLE, records, word3]
}

/// The queue's scratch buffer as dispatches see it: `bytes` from `address`, cut into slots of
/// each dispatch's wave size, as many as `waves` says for that size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchRing {
    /// GPU address, 256-byte aligned.
    pub address: u64,
    /// Bytes of the ring.
    pub bytes: u64,
    pub(crate) waves: ScratchWaves,
}

/// Bytes of scratch one wave of `program` needs (0 when it needs none): its private segment per
/// work-item for every lane, in whole granules.
pub fn scratch_wave_bytes(program: &AmdgpuProgram) -> u64 {
    let kd = &program.descriptor;
    if !kd.uses_scratch() {
        return 0;
    }
    // Scratch enabled with an empty fixed segment still gets a slot.
    let lane = u64::from(kd.private_segment_fixed_size.max(4));
    (lane * u64::from(kd.wave_size())).next_multiple_of(SCRATCH_WAVE_GRANULE)
}

/// The `pm4` generation of a target.
pub fn generation(target: GfxTarget) -> Result<Gfx> {
    match target.major {
        10 => Ok(Gfx::Gfx10_3),
        11 => Ok(Gfx::Gfx11),
        _ => Err(AmdgpuError::Unavailable(format!("no PM4 register map for {target}"))),
    }
}

fn encode_error(what: &str, err: impl std::fmt::Display) -> AmdgpuError {
    AmdgpuError::invalid_kernel(what, format!("building the command buffer failed: {err}"))
}

/// Builds one submission. Reuse it across submissions to keep its allocations.
#[derive(Debug)]
pub struct SubmissionEncoder {
    gfx: Gfx,
    words: Vec<u32>,
    kernargs: Vec<u8>,
    kernarg_base: u64,
    dispatches: usize,
}

impl SubmissionEncoder {
    /// An empty encoder for command buffers of generation `gfx`.
    pub fn new(gfx: Gfx) -> Self {
        Self {
            gfx,
            words: Vec::with_capacity(256),
            kernargs: Vec::with_capacity(1024),
            kernarg_base: 0,
            dispatches: 0,
        }
    }

    /// Bytes a dispatch of `program` takes in the arena.
    pub fn arena_bytes(program: &AmdgpuProgram) -> u64 {
        let mut bytes =
            u64::from(program.layout.size()).next_multiple_of(KERNARG_ALIGNMENT).max(KERNARG_ALIGNMENT);
        if program.descriptor.uses_dispatch_ptr() {
            bytes += DISPATCH_PACKET_SIZE as u64;
        }
        bytes
    }

    /// Starts a submission whose arena is mapped at `kernarg_base`: the CU-enable preamble and
    /// a cache invalidate, so that kernels see what the host wrote.
    pub fn begin(&mut self, kernarg_base: u64) -> Result<()> {
        self.words.clear();
        self.kernargs.clear();
        self.kernarg_base = kernarg_base;
        self.dispatches = 0;
        let mut w = PacketWriter::new(&mut self.words);
        pm4::dispatch::write_preamble(&mut w, self.gfx).map_err(|e| encode_error("<preamble>", e))?;
        w.acquire_mem(&AcquireMem::full_range(GcrCntl::INVALIDATE_ALL))
            .map_err(|e| encode_error("<preamble>", e))
    }

    /// Appends a dispatch of `program` over `groups` work-groups with the user arguments
    /// `args` (in the kernel's argument order); `dispatch_id` fills the dispatch-id SGPRs. A
    /// kernel that needs scratch gets its slots in `scratch`, which must hold
    /// [`scratch_wave_bytes`] for each of its waves; `hidden` holds the addresses of its
    /// per-dispatch buffers (printf).
    pub fn dispatch(
        &mut self,
        program: &AmdgpuProgram,
        args: &[ArgValue],
        groups: [u32; 3],
        dispatch_id: u64,
        scratch: Option<ScratchRing>,
        hidden: &HiddenBuffers,
    ) -> Result<()> {
        let kernel = program.kernel.as_str();
        let grid =
            DispatchGrid::from_groups(groups, program.workgroup_size).map_err(|e| rename(e, kernel))?;
        // Kernarg segment, then the dispatch packet, each at a cache-line boundary.
        let offset = self.kernargs.len().next_multiple_of(KERNARG_ALIGNMENT as usize);
        let size = program.layout.size() as usize;
        let kernarg_address = self.kernarg_base + offset as u64;
        self.kernargs.resize(
            offset + size.next_multiple_of(KERNARG_ALIGNMENT as usize).max(KERNARG_ALIGNMENT as usize),
            0,
        );
        program
            .layout
            .fill(args, &grid, hidden, &mut self.kernargs[offset..offset + size])
            .map_err(|e| rename(e, kernel))?;
        let descriptor = &program.descriptor;
        let mut packet_address = 0;
        if descriptor.uses_dispatch_ptr() {
            let at = self.kernargs.len();
            packet_address = self.kernarg_base + at as u64;
            let packet = dispatch_packet(
                &grid,
                &PacketAddresses {
                    private_segment_size: 0,
                    group_segment_size: descriptor.group_segment_fixed_size,
                    kernel_object: program.descriptor_address,
                    kernarg_address,
                },
            )
            .map_err(|e| rename(e, kernel))?;
            self.kernargs.extend_from_slice(&packet);
        }
        let mut queue_address = 0;
        if program.user_sgprs.contains(&UserSgpr::QueuePtr) {
            let at = self.kernargs.len().next_multiple_of(KERNARG_ALIGNMENT as usize);
            self.kernargs.resize(at, 0);
            queue_address = self.kernarg_base + at as u64;
            self.kernargs.extend_from_slice(&queue_descriptor());
        }

        // User SGPRs in the order the descriptor enables them.
        let wave_bytes = scratch_wave_bytes(program);
        let ring = scratch.filter(|_| wave_bytes > 0);
        let private_buffer = match (self.gfx, ring) {
            (Gfx::Gfx10_3, Some(ring)) => {
                private_segment_buffer(ring.address, ring.bytes, program.descriptor.wave_size())
            }
            _ => [0; 4],
        };
        let flat_scratch_init = match (self.gfx, ring) {
            (Gfx::Gfx10_3, Some(ring)) => [ring.address as u32, (ring.address >> 32) as u32],
            _ => [0; 2],
        };
        let mut user_data = [0u32; 16];
        let mut count = 0usize;
        for sgpr in &program.user_sgprs {
            let words: &[u32] = match sgpr {
                UserSgpr::PrivateSegmentBuffer => &private_buffer,
                // gfx10.3: the ring's address; the kernel adds its wave's offset and sets
                // FLAT_SCRATCH from it.
                UserSgpr::FlatScratchInit if self.gfx == Gfx::Gfx10_3 => &flat_scratch_init,
                UserSgpr::DispatchPtr => &[packet_address as u32, (packet_address >> 32) as u32],
                UserSgpr::QueuePtr => &[queue_address as u32, (queue_address >> 32) as u32],
                UserSgpr::KernargSegmentPtr => &[kernarg_address as u32, (kernarg_address >> 32) as u32],
                UserSgpr::DispatchId => &[dispatch_id as u32, (dispatch_id >> 32) as u32],
                UserSgpr::PrivateSegmentSize => &[0],
                UserSgpr::FlatScratchInit => {
                    return Err(AmdgpuError::invalid_kernel(
                        kernel,
                        format!("it asks for the {sgpr:?} user SGPRs, which the backend does not provide"),
                    ))
                }
            };
            let Some(slots) = user_data.get_mut(count..count + words.len()) else {
                return Err(AmdgpuError::invalid_kernel(kernel, "its user SGPRs do not fit in 16 registers"));
            };
            slots.copy_from_slice(words);
            count += words.len();
        }

        let mut rsrc1 = PgmRsrc1::from_bits(descriptor.compute_pgm_rsrc1);
        if self.gfx == Gfx::Gfx11 {
            rsrc1 = rsrc1.with_priv(true);
        }
        let rsrc2 = PgmRsrc2::from_bits(descriptor.compute_pgm_rsrc2)
            .with_lds_bytes(descriptor.group_segment_fixed_size)
            .map_err(|e| encode_error(kernel, e))?;
        let rsrc3 = PgmRsrc3::from_bits(descriptor.compute_pgm_rsrc3);
        let wavesize_unit = match self.gfx {
            Gfx::Gfx10_3 => 1024,
            Gfx::Gfx11 => 256,
        };
        let tmpring = match (wave_bytes, scratch) {
            (0, _) => TmpringSize::new(self.gfx),
            (_, Some(ring)) if ring.waves.ring_bytes(wave_bytes) <= ring.bytes => TmpringSize::new(self.gfx)
                .with_waves(ring.waves.register(wave_bytes))
                .and_then(|t| t.with_wavesize((wave_bytes / wavesize_unit) as u32))
                .map_err(|e| encode_error(kernel, e))?,
            _ => {
                return Err(AmdgpuError::invalid_kernel(
                    kernel,
                    format!(
                    "it needs {wave_bytes} bytes of scratch per wave, and no scratch ring was set up for it"
                ),
                ))
            }
        };
        let pgm = program.entry_address >> 8;
        let [x, y, z] = program.workgroup_size;
        let mut w = PacketWriter::new(&mut self.words);
        let result = (|| {
            w.set_sh_reg(r::COMPUTE_PGM_LO, &[pgm as u32, (pgm >> 32) as u32])?;
            w.set_sh_reg(r::COMPUTE_PGM_RSRC1, &[rsrc1.bits(), rsrc2.bits()])?;
            w.set_sh_reg(r::COMPUTE_PGM_RSRC3, &[rsrc3.bits()])?;
            if let (Some(ring), Gfx::Gfx11) = (ring, self.gfx) {
                // gfx11 architected flat scratch: each wave's FLAT_SCRATCH is its slot.
                let base = ring.address >> 8;
                w.set_sh_reg(
                    pm4::registers::gfx11::COMPUTE_DISPATCH_SCRATCH_BASE_LO,
                    &[base as u32, (base >> 32) as u32],
                )?;
            }
            w.set_sh_reg(r::COMPUTE_TMPRING_SIZE, &[tmpring.bits()])?;
            if count > 0 {
                w.set_sh_reg(r::COMPUTE_USER_DATA_0, &user_data[..count])?;
            }
            w.set_sh_reg(r::COMPUTE_RESOURCE_LIMITS, &[ResourceLimits::default().bits()])?;
            w.set_sh_reg(r::COMPUTE_START_X, &[0, 0, 0, x, y, z])?;
            let [gx, gy, gz] = grid.groups();
            w.dispatch_direct(&DispatchDirect {
                x: gx,
                y: gy,
                z: gz,
                initiator: DispatchInitiator::launch(descriptor.wave_size() == 32),
            })
        })();
        result.map_err(|e| encode_error(kernel, e))?;
        self.dispatches += 1;
        Ok(())
    }

    /// Appends a CP DMA copy of `size` bytes, split at the generation's packet limit; later
    /// packets wait for it.
    pub fn copy(&mut self, src: u64, dst: u64, size: u64) -> Result<()> {
        let limit = u64::from(match self.gfx {
            Gfx::Gfx10_3 => DmaData::MAX_BYTES_GFX10_3,
            Gfx::Gfx11 => DmaData::MAX_BYTES_GFX11,
        });
        let mut w = PacketWriter::new(&mut self.words);
        let mut done = 0;
        while done < size {
            let chunk = (size - done).min(limit);
            w.dma_data(&DmaData::copy(src + done, dst + done, chunk as u32))
                .map_err(|e| encode_error("<copy>", e))?;
            done += chunk;
        }
        Ok(())
    }

    /// Writes the 64-bit GPU clock counter to `address` once every command before has finished:
    /// one end of a timed submission's interval.
    pub fn timestamp(&mut self, address: u64) -> Result<()> {
        let mut w = PacketWriter::new(&mut self.words);
        w.event_write(&EventWrite::CS_PARTIAL_FLUSH).map_err(|e| encode_error("<timestamp>", e))?;
        w.release_mem(&ReleaseMem {
            event: EventType::BOTTOM_OF_PIPE_TS,
            event_index: EVENT_INDEX_END_OF_PIPE,
            cache: ReleaseCache(0),
            dst_sel: DstSel::MEMORY,
            int_sel: IntSel::NONE,
            data_sel: DataSel::GPU_CLOCK,
            address,
            data: 0,
            int_ctxid: 0,
        })
        .map_err(|e| encode_error("<timestamp>", e))
    }

    /// Everything before is finished and written back before anything after starts.
    pub fn barrier(&mut self) -> Result<()> {
        let mut w = PacketWriter::new(&mut self.words);
        w.event_write(&EventWrite::CS_PARTIAL_FLUSH).map_err(|e| encode_error("<barrier>", e))?;
        w.acquire_mem(&AcquireMem::full_range(GcrCntl::INVALIDATE_ALL))
            .map_err(|e| encode_error("<barrier>", e))
    }

    /// Ends the submission: waits for every dispatch, writes back every cache and stores
    /// `value` at `signal_address` at end of pipe.
    pub fn finish(&mut self, signal_address: u64, value: u32) -> Result<()> {
        let mut w = PacketWriter::new(&mut self.words);
        w.event_write(&EventWrite::CS_PARTIAL_FLUSH).map_err(|e| encode_error("<end>", e))?;
        w.release_mem(&ReleaseMem::fence32(signal_address, value)).map_err(|e| encode_error("<end>", e))
    }

    /// The IB.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The arena's contents, to upload at the base given to [`begin`](Self::begin).
    pub fn kernargs(&self) -> &[u8] {
        &self.kernargs
    }

    /// Dispatches appended since [`begin`](Self::begin).
    pub fn dispatches(&self) -> usize {
        self.dispatches
    }
}

fn rename(err: AmdgpuError, kernel: &str) -> AmdgpuError {
    match err {
        AmdgpuError::InvalidKernel { reason, .. } => {
            AmdgpuError::InvalidKernel { kernel: kernel.to_owned(), reason }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::private_segment_buffer;

    #[test]
    fn the_private_segment_buffer_interleaves_the_wave_s_lanes() {
        let v = private_segment_buffer(0x0001_2345_6789_a000, 1 << 20, 32);
        assert_eq!(v[0], 0x6789_a000);
        assert_eq!(v[1], 0x8000_2345, "base bits 32..48, swizzled, stride 0");
        assert_eq!(v[2], 1 << 20, "the ring's bytes");
        // X/Y/Z/W, 32-bit uint format, 32-lane index stride, ADD_TID, resource level 1, raw
        // bounds mode.
        assert_eq!(v[3], 0x21c1_4fac);
        assert_eq!(private_segment_buffer(0, 1 << 40, 64)[3], 0x21e1_4fac, "64-lane index stride");
        assert_eq!(private_segment_buffer(0, 1 << 40, 64)[2], u32::MAX, "a ring past 4 GiB says all");
    }
}
