//! The device's queue: one CS ioctl per submission (one IB on the compute ring, a BO list of
//! everything it touches), the runtime's fence values 1, 2, 3… mapped to the kernel's sequence
//! numbers, WAIT_CS for completion (a zero timeout to poll), the context's reset status when a
//! wait fails, and the IB and kernarg buffers of each submission kept until it completed (then
//! reused by later submissions). The queue also owns the scratch buffer kernels with private
//! memory use: one ring of wave slots, grown to the largest slot a submission needs (a
//! high-water mark) and kept; a buffer it outgrows lives until the submissions that may use it
//! completed.
//!
//! While a trace is written (`crate::trace`), a submission the runtime traces also stamps the
//! GPU clock (RELEASE_MEM) before its first command and after each dispatch and copy; the stamps
//! become the device's GPU track once it completed, placed on the host's clock by bounds: the
//! work began after it was submitted and ended before its completion was seen
//! (`GpuClock::bound`). On the simulator that clock is the simulation's own, and its track says
//! so. Each stamp waits for the command before it (a partial flush), so a traced submission's
//! dispatches do not overlap.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::error::{AmdgpuError, Result};
use super::ib::{scratch_wave_bytes, ScratchRing, SubmissionEncoder};
use super::kernarg::ArgValue;
use super::kernarg::HiddenBuffers;
use super::kmd::{BoHandle, ContextId, HwIp, IbDesc, KernelDriver, SeqNo, Submission, Timeout, WaitStatus};
use super::memory::{Buffer, BufferKind, Memory};
use super::printf::{self, PrintfFormats, PrintfOutput, PrintfSink};
use super::program::AmdgpuProgram;
use crate::ErrorKind;

/// Command buffers and arenas are allocated in multiples of this, so that they can be reused.
const POOL_GRANULE: u64 = 64 * 1024;
/// Spare buffers kept for reuse.
const MAX_SPARE: usize = 8;
/// GPU times of timed submissions kept until taken.
const MAX_UNTAKEN_TIMES: usize = 1024;

/// One command of a submission, with the buffers resolved.
pub(crate) enum Op<'a> {
    Dispatch {
        program: &'a AmdgpuProgram,
        /// The user arguments in kernarg order.
        args: Vec<ArgValue>,
        groups: [u32; 3],
        /// Every data buffer the dispatch binds.
        buffers: Vec<BoHandle>,
    },
    Copy {
        src: &'a Buffer,
        src_offset: u64,
        dst: &'a Buffer,
        dst_offset: u64,
        size: u64,
    },
    Barrier,
}

struct Pending {
    fence: u64,
    seq: SeqNo,
    /// The IB and the kernarg arena, alive until the GPU is done with them.
    buffers: Vec<Buffer>,
    /// The printf buffers of its dispatches, in dispatch order.
    printf: Vec<PrintfJob>,
    /// A timed submission's two GPU clock timestamps (start, end).
    timer: Option<Buffer>,
    /// A traced submission's GPU clock stamps.
    stamps: Option<Stamps>,
}

/// A traced submission's GPU clock stamps: one before its first command and one after each
/// dispatch and copy, so command `i` ran from stamp `i` to stamp `i + 1`.
struct Stamps {
    buffer: Buffer,
    names: Vec<String>,
    submitter: crate::trace::Submitter,
    /// When it was handed to the kernel (host clock, trace nanoseconds).
    issued_ns: u64,
}

/// A dispatch's printf buffer and what its records mean.
struct PrintfJob {
    kernel: String,
    formats: Arc<PrintfFormats>,
    buffer: Buffer,
}

struct State {
    issued: u64,
    completed: u64,
    pending: VecDeque<Pending>,
    spare: Vec<Buffer>,
    lost: Option<crate::Error>,
    /// A reset lost VRAM: even completed submissions' results are gone.
    vram_lost: bool,
    encoder: SubmissionEncoder,
    dispatch_id: u64,
    /// The scratch ring's buffer, once a kernel needed one.
    scratch: Option<Buffer>,
    /// GPU times of completed timed submissions not taken yet, by fence.
    gpu_times: BTreeMap<u64, Duration>,
    /// The GPU's clock on the trace's track for this device.
    clock: crate::trace::GpuClock,
}

pub(crate) struct Queue {
    kmd: Arc<dyn KernelDriver>,
    memory: Memory,
    ctx: ContextId,
    /// The end-of-pipe RELEASE_MEM of each submission stores its fence value here.
    signal: Buffer,
    /// Scratch wave slots: as many waves as the device can hold at once.
    scratch_waves: ScratchWaves,
    /// Where printf output goes; `delivery` keeps outputs in submission order across threads.
    printf_sink: PrintfSink,
    delivery: Mutex<()>,
    /// The GPU clock counter's frequency (kHz) that timestamps tick at; 0 when unknown.
    counter_khz: u32,
    state: Mutex<State>,
}

/// How many waves of a device hold scratch slots at once: as many as it can run (`per_engine`
/// in each of its `engines` shader engines; COMPUTE_TMPRING_SIZE.WAVES counts per engine on
/// gfx11), fewer when slots are so large that the ring would pass [`MAX_SCRATCH_BYTES`] (the
/// hardware then launches no more waves with scratch than there are slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScratchWaves {
    per_engine: u32,
    engines: u32,
}

/// The scratch ring stops growing its wave count here; slots themselves are never cut.
const MAX_SCRATCH_BYTES: u64 = 1 << 30;

impl ScratchWaves {
    /// Waves a wave32 CU holds at once on RDNA (16 per SIMD, 2 SIMDs).
    const PER_CU: u32 = 32;
    /// The 12-bit WAVES field.
    const MAX_REGISTER: u32 = 0xfff;
    /// Slots per engine however large they are: a whole work-group of wave32s.
    const MIN_PER_ENGINE: u32 = 32;

    /// For a device with `compute_units` CUs in `shader_engines` shader engines.
    pub fn for_device(compute_units: u32, shader_engines: u32) -> Self {
        let engines = shader_engines.max(1);
        let per_engine = (compute_units.max(1) * Self::PER_CU).div_ceil(engines).min(Self::MAX_REGISTER);
        Self { per_engine, engines }
    }

    /// The COMPUTE_TMPRING_SIZE.WAVES value (slots per engine) for slots of `wave_bytes`.
    pub fn register(&self, wave_bytes: u64) -> u32 {
        let fitting = MAX_SCRATCH_BYTES / wave_bytes.max(1) / u64::from(self.engines);
        let fitting = u32::try_from(fitting).unwrap_or(u32::MAX);
        self.per_engine.min(fitting).max(Self::MIN_PER_ENGINE.min(self.per_engine))
    }

    /// Bytes of the ring for slots of `wave_bytes`.
    pub fn ring_bytes(&self, wave_bytes: u64) -> u64 {
        wave_bytes * u64::from(self.register(wave_bytes)) * u64::from(self.engines)
    }
}

/// Where the kernel runs submissions.
const IP: HwIp = HwIp::Compute;
const RING: u32 = 0;

impl Queue {
    pub fn new(
        kmd: Arc<dyn KernelDriver>,
        memory: Memory,
        gfx: pm4::Gfx,
        scratch_waves: ScratchWaves,
        printf_sink: PrintfSink,
        counter_khz: u32,
    ) -> Result<Self> {
        let signal = memory.allocate(4096, BufferKind::Signals)?;
        let ctx = kmd.ctx_create()?;
        // The simulator describes itself so; its clock is the simulation's, not a GPU's.
        let described = kmd.describe();
        let simulated = described.starts_with("simulated");
        let clock_kind = if simulated { "simulated clock" } else { "RELEASE_MEM timestamps" };
        let track = crate::trace::GpuTrack::new(format!("GPU {described} ({clock_kind})"), simulated);
        Ok(Self {
            kmd,
            memory,
            ctx,
            signal,
            scratch_waves,
            printf_sink,
            delivery: Mutex::new(()),
            counter_khz,
            state: Mutex::new(State {
                issued: 0,
                completed: 0,
                pending: VecDeque::new(),
                spare: Vec::new(),
                lost: None,
                vram_lost: false,
                encoder: SubmissionEncoder::new(gfx),
                dispatch_id: 0,
                scratch: None,
                gpu_times: BTreeMap::new(),
                clock: crate::trace::GpuClock::new(track),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The last fence value the end-of-pipe write stored (for diagnostics).
    pub fn signalled_value(&self) -> Option<u32> {
        let mut bytes = [0u8; 4];
        self.signal.read(0, &mut bytes).ok()?;
        Some(u32::from_le_bytes(bytes))
    }

    /// Whether timed submissions measure anything (the device reports its clock counter's rate).
    pub fn measures_gpu_time(&self) -> bool {
        self.counter_khz > 0
    }

    /// The GPU time of timed submission `fence`, once it completed (taken once).
    pub fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        self.lock().gpu_times.remove(&fence)
    }

    /// Encodes `ops` into one IB and submits it; returns its fence value. A `timed` submission
    /// also writes the GPU clock before its first and after its last command.
    pub fn submit(&self, ops: &[Op<'_>], timed: bool) -> crate::Result<u64> {
        let mut state = self.lock();
        if let Some(lost) = &state.lost {
            return Err(lost.clone());
        }
        let arena_bytes: u64 = ops
            .iter()
            .map(|op| match op {
                Op::Dispatch { program, .. } => SubmissionEncoder::arena_bytes(program),
                _ => 0,
            })
            .sum();
        let arena = match arena_bytes {
            0 => None,
            bytes => Some(take_buffer(&mut state.spare, &self.memory, bytes, BufferKind::KernelArgs)?),
        };
        let ring = self.scratch_ring(&mut state, ops)?;
        let fence = state.issued + 1;
        let st: &mut State = &mut state;
        st.encoder.begin(arena.as_ref().map_or(0, Buffer::gpu_address))?;
        let mut handles: Vec<BoHandle> = vec![self.signal.handle()];
        let timer = if timed && self.measures_gpu_time() {
            let buffer = take_buffer(&mut st.spare, &self.memory, 16, BufferKind::Signals)?;
            st.encoder.timestamp(buffer.gpu_address())?;
            handles.push(buffer.handle());
            Some(buffer)
        } else {
            None
        };
        if let Some((_, handle)) = ring {
            handles.push(handle);
        }
        // Stamps for the trace: before the first command and after each dispatch and copy.
        let mut stamps = match crate::trace::submitting().filter(|_| self.measures_gpu_time()) {
            Some(submitter) => {
                let count = 1 + ops.iter().filter(|op| !matches!(op, Op::Barrier)).count() as u64;
                let buffer = take_buffer(&mut st.spare, &self.memory, 8 * count, BufferKind::Signals)?;
                st.encoder.timestamp(buffer.gpu_address())?;
                handles.push(buffer.handle());
                Some(Stamps { buffer, names: Vec::new(), submitter, issued_ns: 0 })
            }
            None => None,
        };
        let mut printf = Vec::new();
        for op in ops {
            match op {
                Op::Dispatch { program, args, groups, buffers } => {
                    st.dispatch_id += 1;
                    let mut hidden = HiddenBuffers::default();
                    if let Some(formats) = &program.printf {
                        let buffer = take_buffer(
                            &mut st.spare,
                            &self.memory,
                            (printf::HEADER_BYTES as u64) + u64::from(printf::DEFAULT_CAPACITY),
                            BufferKind::Signals,
                        )?;
                        buffer.write(0, &printf::empty_header(printf::DEFAULT_CAPACITY))?;
                        hidden.printf_buffer = buffer.gpu_address();
                        handles.push(buffer.handle());
                        printf.push(PrintfJob {
                            kernel: program.kernel.clone(),
                            formats: formats.clone(),
                            buffer,
                        });
                    }
                    st.encoder.dispatch(
                        program,
                        args,
                        *groups,
                        st.dispatch_id,
                        ring.map(|r| r.0),
                        &hidden,
                    )?;
                    handles.push(program.code.handle());
                    handles.extend_from_slice(buffers);
                    if let Some(stamps) = &mut stamps {
                        stamps.names.push(program.kernel.clone());
                        let at = stamps.buffer.gpu_address() + 8 * stamps.names.len() as u64;
                        st.encoder.timestamp(at)?;
                    }
                }
                Op::Copy { src, src_offset, dst, dst_offset, size } => {
                    st.encoder.copy(src.gpu_address() + src_offset, dst.gpu_address() + dst_offset, *size)?;
                    handles.extend([src.handle(), dst.handle()]);
                    if let Some(stamps) = &mut stamps {
                        stamps.names.push("copy".to_owned());
                        let at = stamps.buffer.gpu_address() + 8 * stamps.names.len() as u64;
                        st.encoder.timestamp(at)?;
                    }
                }
                Op::Barrier => st.encoder.barrier()?,
            }
        }
        if let Some(buffer) = &timer {
            st.encoder.timestamp(buffer.gpu_address() + 8)?;
        }
        st.encoder.finish(self.signal.gpu_address(), fence as u32)?;
        let words = st.encoder.words().len() as u64;
        let mut ib_bytes = Vec::with_capacity(words as usize * 4);
        for word in st.encoder.words() {
            ib_bytes.extend_from_slice(&word.to_le_bytes());
        }
        let kernargs = st.encoder.kernargs().to_vec();
        let ib = take_buffer(&mut state.spare, &self.memory, ib_bytes.len() as u64, BufferKind::Commands)?;
        ib.write(0, &ib_bytes)?;
        let mut keep = vec![ib];
        if let Some(arena) = arena {
            if kernargs.len() as u64 > arena.size() {
                return Err(AmdgpuError::invalid_kernel(
                    "<submission>",
                    format!("kernel arguments need {} bytes, the arena has {}", kernargs.len(), arena.size()),
                )
                .into());
            }
            arena.write(0, &kernargs)?;
            handles.push(arena.handle());
            keep.push(arena);
        }
        handles.push(keep[0].handle());
        handles.sort_unstable();
        handles.dedup();
        let ibs = [IbDesc {
            va: keep[0].gpu_address(),
            size_bytes: u32::try_from(ib_bytes.len()).map_err(|_| {
                crate::Error::new(ErrorKind::InvalidArgument, "the submission's command buffer exceeds 4 GiB")
            })?,
            ip: IP,
            ring: RING,
            flags: 0,
        }];
        if let Some(stamps) = &mut stamps {
            stamps.issued_ns = crate::trace::now_ns();
        }
        let seq = self.kmd.submit(&Submission { ctx: self.ctx, ibs: &ibs, buffers: &handles })?;
        state.issued = fence;
        state.pending.push_back(Pending { fence, seq, buffers: keep, printf, timer, stamps });
        tracing::trace!(fence, seq = seq.0, dwords = words, bos = handles.len(), "submitted");
        Ok(fence)
    }

    /// The scratch ring for `ops` and its buffer's handle, None when no dispatch needs scratch.
    /// Grows the buffer when its slots are too small for one of them: the old buffer then
    /// stays with the last pending submission, the last that may use it.
    fn scratch_ring(&self, state: &mut State, ops: &[Op<'_>]) -> Result<Option<(ScratchRing, BoHandle)>> {
        let wave_bytes = ops
            .iter()
            .map(|op| match op {
                Op::Dispatch { program, .. } => scratch_wave_bytes(program),
                _ => 0,
            })
            .max()
            .unwrap_or(0);
        if wave_bytes == 0 {
            return Ok(None);
        }
        let needed = self.scratch_waves.ring_bytes(wave_bytes);
        if state.scratch.as_ref().is_none_or(|b| b.size() < needed) {
            let grown = self.memory.allocate(needed, BufferKind::Scratch)?;
            tracing::debug!(
                bytes = needed,
                wave_bytes,
                waves_per_engine = self.scratch_waves.register(wave_bytes),
                "scratch buffer grown"
            );
            if let Some(old) = state.scratch.replace(grown) {
                if let Some(last) = state.pending.back_mut() {
                    last.buffers.push(old);
                }
            }
        }
        let Some(buffer) = &state.scratch else { return Ok(None) };
        let ring =
            ScratchRing { address: buffer.gpu_address(), bytes: buffer.size(), waves: self.scratch_waves };
        Ok(Some((ring, buffer.handle())))
    }

    /// Polls the kernel, without blocking, for finished submissions.
    pub fn completed(&self) -> u64 {
        let mut state = self.lock();
        let mut outputs = Vec::new();
        while let Some(front) = state.pending.front() {
            match self.kmd.wait(self.ctx, IP, RING, front.seq, Timeout::Relative(Duration::ZERO)) {
                Ok(WaitStatus::Completed) => {
                    let fence = front.fence;
                    outputs.extend(retire_through(&mut state, fence, self.counter_khz));
                }
                Ok(WaitStatus::Busy) => break,
                Err(err) => {
                    tracing::debug!(error = %err, "polling a submission failed; wait() reports it");
                    break;
                }
            }
        }
        let completed = state.completed;
        self.deliver(state, outputs);
        completed
    }

    /// Hands printf output to the sink outside the state lock (the sink may submit more work),
    /// holding the delivery lock from before the state lock is released, so that outputs of
    /// later submissions never overtake earlier ones.
    fn deliver(&self, state: MutexGuard<'_, State>, outputs: Vec<PrintfOutput>) {
        if outputs.is_empty() {
            return;
        }
        let delivery = self.delivery.lock().unwrap_or_else(PoisonError::into_inner);
        drop(state);
        for output in &outputs {
            self.printf_sink.deliver(output);
        }
        drop(delivery);
    }

    /// Waits for `fence`: `Ok(true)` once it completed, `Ok(false)` after `timeout`; a reset of
    /// the GPU or a failed wait is an error naming the context's state.
    ///
    /// A submission the kernel reports completed (its fence signalled without an error) did its
    /// work even when a later submission of the context has since faulted and the context is
    /// guilty: that later failure is the later submission's, and the earlier result stays
    /// readable unless the reset lost VRAM.
    pub fn wait(&self, fence: u64, timeout: Duration) -> crate::Result<bool> {
        let seq = {
            let state = self.lock();
            if fence <= state.completed && !state.vram_lost {
                return Ok(true);
            }
            if let Some(lost) = &state.lost {
                return Err(lost.clone());
            }
            if fence > state.issued {
                return Err(crate::Error::new(
                    ErrorKind::InvalidArgument,
                    format!("fence {fence} was never issued (the last one is {})", state.issued),
                ));
            }
            match state.pending.iter().find(|p| p.fence == fence) {
                Some(pending) => pending.seq,
                None => return Ok(true),
            }
        };
        // Not holding the lock: other threads keep submitting while this one waits.
        let status = self.kmd.wait(self.ctx, IP, RING, seq, Timeout::Relative(timeout));
        let health = self.kmd.ctx_state(self.ctx);
        let mut state = self.lock();
        let unhealthy = match &health {
            Ok(context) if !context.is_healthy() => Some(context.describe()),
            Ok(_) => None,
            Err(err) => Some(format!("the context state could not be read ({err})")),
        };
        if let Some(reason) = unhealthy {
            let vram_lost = matches!(&health, Ok(context) if context.vram_lost);
            if matches!(status, Ok(WaitStatus::Completed)) && health.is_ok() && !vram_lost {
                // This submission finished before the failure, which belongs to a later one:
                // waiting for that one asks the kernel and reports its own error. Its printf
                // output is delivered like any completed submission's.
                let outputs = retire_through(&mut state, fence, self.counter_khz);
                self.deliver(state, outputs);
                return Ok(true);
            }
            let detail = match &status {
                Ok(WaitStatus::Busy) => format!("the GPU did not finish in {} ms", timeout.as_millis()),
                Ok(WaitStatus::Completed) => "the submission ended".to_owned(),
                Err(err) => format!("waiting failed ({err})"),
            };
            let error = crate::Error::from(AmdgpuError::DeviceLost(format!(
                "{detail}, and {reason}; every unfinished submission of this device is lost: open the device again"
            )));
            state.lost.get_or_insert(error.clone());
            state.vram_lost |= vram_lost;
            return Err(error);
        }
        match status {
            Ok(WaitStatus::Completed) => {
                let outputs = retire_through(&mut state, fence, self.counter_khz);
                self.deliver(state, outputs);
                Ok(true)
            }
            Ok(WaitStatus::Busy) => Ok(false),
            Err(err) => Err(crate::Error::from(err).context(format!("waiting for submission {fence}"))),
        }
    }
}

/// Marks every submission up to `fence` completed (the ring runs in order), keeps their
/// buffers for reuse, and reads their dispatches' printf output, in order.
fn retire_through(state: &mut State, fence: u64, counter_khz: u32) -> Vec<PrintfOutput> {
    let mut outputs = Vec::new();
    while state.pending.front().is_some_and(|p| p.fence <= fence) {
        if let Some(done) = state.pending.pop_front() {
            state.completed = state.completed.max(done.fence);
            if let Some(timer) = done.timer {
                if let Some(time) = read_gpu_time(&timer, counter_khz) {
                    state.gpu_times.insert(done.fence, time);
                    // Times nobody takes must not pile up.
                    while state.gpu_times.len() > MAX_UNTAKEN_TIMES {
                        state.gpu_times.pop_first();
                    }
                }
                if state.spare.len() < MAX_SPARE {
                    state.spare.push(timer);
                }
            }
            if let Some(stamps) = done.stamps {
                write_stamps(state, done.fence, &stamps, counter_khz);
                if state.spare.len() < MAX_SPARE {
                    state.spare.push(stamps.buffer);
                }
            }
            for job in done.printf {
                if let Some(output) = read_printf(&job) {
                    outputs.push(output);
                }
                if state.spare.len() < MAX_SPARE {
                    state.spare.push(job.buffer);
                }
            }
            // Outgrown scratch buffers are freed, not pooled.
            for buffer in done.buffers.into_iter().filter(|b| b.kind() != BufferKind::Scratch) {
                if state.spare.len() < MAX_SPARE {
                    state.spare.push(buffer);
                }
            }
        }
    }
    outputs
}

/// A completed traced submission's stamps, seen complete now: an instant where it was seen, its
/// bounds on the GPU clock's offset, and a GPU slice per stamped command.
fn write_stamps(state: &mut State, fence: u64, stamps: &Stamps, counter_khz: u32) {
    use crate::trace::{self, Arg, Flow, FlowKind, GpuSlice};

    let device = stamps.submitter.device;
    if stamps.submitter.generation != trace::current() || counter_khz == 0 {
        return;
    }
    let seen_ns = trace::instant(
        "gpu",
        "fence signalled",
        vec![("device", Arg::U64(device)), ("fence", Arg::U64(fence))],
    )
    .unwrap_or_else(trace::now_ns);
    let count = stamps.names.len() + 1;
    let mut bytes = vec![0u8; 8 * count];
    if stamps.buffer.read(0, &mut bytes).is_err() {
        return;
    }
    // Ticks of the GPU clock counter (kHz) in nanoseconds.
    let times: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|word| {
            let ticks =
                u64::from_le_bytes([word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7]]);
            u64::try_from(u128::from(ticks) * 1_000_000 / u128::from(counter_khz)).unwrap_or(u64::MAX)
        })
        .collect();
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else { return };
    if times.windows(2).any(|pair| pair[1] < pair[0]) {
        // A clock that went backwards is no measurement.
        return;
    }
    state.clock.bound(first, last, stamps.issued_ns, seen_ns);
    let flow = trace::flow_id(FlowKind::Submission, device, fence);
    for (at, name) in stamps.names.iter().enumerate() {
        state.clock.write(GpuSlice {
            name: name.clone().into(),
            gpu_start_ns: times[at],
            gpu_end_ns: times[at + 1],
            issued_ns: stamps.issued_ns,
            seen_ns,
            args: vec![("device", Arg::U64(device)), ("fence", Arg::U64(fence))],
            flow: (at == 0).then_some(Flow::In(flow)),
        });
    }
}

/// The interval between a timed submission's two timestamps, None when they are not in order
/// (a GPU clock that went backwards is no measurement).
fn read_gpu_time(timer: &Buffer, counter_khz: u32) -> Option<Duration> {
    let mut bytes = [0u8; 16];
    timer.read(0, &mut bytes).ok()?;
    let start = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    let end = u64::from_le_bytes(bytes[8..].try_into().ok()?);
    let ticks = end.checked_sub(start)?;
    // kHz: one tick is 10^6 / khz nanoseconds.
    let nanos = u128::from(ticks) * 1_000_000 / u128::from(counter_khz.max(1));
    Some(Duration::from_nanos(u64::try_from(nanos).ok()?))
}

/// The formatted output of one finished dispatch, None when it printed nothing.
fn read_printf(job: &PrintfJob) -> Option<PrintfOutput> {
    let mut header = [0u8; printf::HEADER_BYTES];
    let output = match job.buffer.read(0, &mut header) {
        Ok(()) => {
            let used = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let used = used.min(printf::DEFAULT_CAPACITY) as usize;
            let mut bytes = vec![0u8; printf::HEADER_BYTES + used];
            match job.buffer.read(0, &mut bytes) {
                Ok(()) => printf::decode(&job.kernel, &job.formats, &bytes),
                Err(err) => unreadable(&job.kernel, err),
            }
        }
        Err(err) => unreadable(&job.kernel, err),
    };
    let printed = !output.text.is_empty() || output.dropped_records > 0 || output.damaged.is_some();
    printed.then_some(output)
}

fn unreadable(kernel: &str, err: AmdgpuError) -> PrintfOutput {
    PrintfOutput {
        kernel: kernel.to_owned(),
        text: String::new(),
        dropped_records: 0,
        damaged: Some(format!("the printf buffer could not be read back: {err}")),
    }
}

/// A spare buffer of `kind` holding at least `bytes`, or a new one.
fn take_buffer(spare: &mut Vec<Buffer>, memory: &Memory, bytes: u64, kind: BufferKind) -> Result<Buffer> {
    let best = spare
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind() == kind && b.size() >= bytes)
        .min_by_key(|(_, b)| b.size())
        .map(|(i, _)| i);
    match best {
        Some(index) => Ok(spare.swap_remove(index)),
        None => memory.allocate(bytes.next_multiple_of(POOL_GRANULE), kind),
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        let last = self.lock().pending.back().map(|p| p.fence);
        if let Some(fence) = last {
            match self.wait(fence, Duration::from_secs(10)) {
                Ok(true) => {}
                Ok(false) => tracing::warn!("GPU work was still running when the amdgpu device was closed"),
                Err(err) => tracing::debug!(error = %err, "closing the amdgpu device after a failure"),
            }
        }
        if let Err(err) = self.kmd.ctx_destroy(self.ctx) {
            tracing::warn!(error = %err, "destroying the amdgpu submission context");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_slots_follow_the_device_and_cap_the_ring() {
        // A 96-CU, 6-engine card: 32 waves per CU, counted per engine.
        let waves = ScratchWaves::for_device(96, 6);
        let slot = 12_544; // 388 bytes per work-item in wave32, in 256-byte units.
        assert_eq!(waves.register(slot), 512);
        assert_eq!(waves.ring_bytes(slot), slot * 512 * 6);
        // 1 MiB slots: 1 GiB holds 1024 of them, 170 per engine.
        assert_eq!(waves.register(1 << 20), 170);
        assert!(waves.ring_bytes(1 << 20) <= MAX_SCRATCH_BYTES);
        // Huge slots still leave a work-group of wave32s per engine.
        assert_eq!(waves.register(8 << 20), 32);
        // The 12-bit register field is never exceeded.
        assert_eq!(ScratchWaves::for_device(1000, 1).register(256), 0xfff);
    }
}
