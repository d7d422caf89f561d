//! The pipelined executor on the simulated amdgpu (`amdgpu-sim`): a batch whose kernel faults
//! (a GPU page fault, reported by the simulated device) is that batch's error, after every
//! earlier batch's result, and the stream ends there; and, below the pipeline, a submission that
//! completed before a later one faulted keeps its result, whatever order the waits come in.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sparkle::amdgpu::kmd::{
    BoHandle, BufferDesc, ContextId, ContextState, CpuMapping, DriverVersion, HwIp, KernelDriver, SeqNo,
    Submission as KmdSubmission, Timeout, VaFlags, WaitStatus,
};
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions, Result as AmdgpuResult};
use sparkle_amdgpu_kmd::uapi;

use sparkle::cache::CacheConfig;
use sparkle::runtime::{Pipeline, Stage};
use sparkle::{
    Access, Arg, Buffer, BufferUsage, Commands, ErrorKind, KernelSpec, Program, Result, Runtime, ScalarType,
};

/// Each batch stores its own number at `out[id + offset]`: an offset far past the buffer faults.
struct StoreAt {
    program: Program,
}

struct Set {
    out: Buffer,
    offset: u32,
}

const ITEMS: u32 = 64;

impl Stage for StoreAt {
    type Input = u32;
    type Output = Vec<u32>;
    type Set = Set;

    fn create_set(&self, rt: &Runtime) -> Result<Set> {
        Ok(Set { out: rt.create_buffer(u64::from(ITEMS) * 4, BufferUsage::Output)?, offset: 0 })
    }

    fn upload(&self, _: &Runtime, set: &mut Set, offset: u32) -> Result<()> {
        set.offset = offset;
        Ok(())
    }

    fn record(&self, _: &Runtime, set: &Set, commands: &mut Commands) -> Result<()> {
        commands.dispatch(&self.program, &[Arg::Buffer(&set.out), Arg::U32(set.offset)], [1, 1, 1])?;
        Ok(())
    }

    fn download(&self, rt: &Runtime, set: &mut Set) -> Result<Vec<u32>> {
        rt.download(&set.out)
    }
}

fn store_at_spec() -> KernelSpec {
    KernelSpec::new("store_at", [ITEMS, 1, 1])
        .opencl(
            "store_at",
            "__kernel void store_at(__global uint *out, uint offset) {
                 out[get_local_id(0) + offset] = 7u;
             }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("offset", ScalarType::U32)
}

/// The simulated kernel driver, with one twist: a GPU that is slow to report. A poll (a wait
/// with no time) says "busy", and a blocking wait first lets every submission made so far
/// settle — so by the time anyone waits for a submission, a later one may already have faulted
/// and made the context guilty. That is the order the pipeline's race had by chance, made certain.
struct SettlesBeforeWaits {
    sim: Arc<SimDriver>,
    last: Mutex<Option<(ContextId, HwIp, u32, SeqNo)>>,
}

impl KernelDriver for SettlesBeforeWaits {
    fn driver_version(&self) -> DriverVersion {
        self.sim.driver_version()
    }
    fn describe(&self) -> String {
        self.sim.describe()
    }
    fn device_info(&self) -> AmdgpuResult<uapi::drm_amdgpu_info_device> {
        self.sim.device_info()
    }
    fn hw_ip_info(&self, ip: HwIp) -> AmdgpuResult<uapi::drm_amdgpu_info_hw_ip> {
        self.sim.hw_ip_info(ip)
    }
    fn memory_info(&self) -> AmdgpuResult<uapi::drm_amdgpu_memory_info> {
        self.sim.memory_info()
    }
    fn gem_create(&self, desc: &BufferDesc) -> AmdgpuResult<BoHandle> {
        self.sim.gem_create(desc)
    }
    fn gem_close(&self, bo: BoHandle) -> AmdgpuResult<()> {
        self.sim.gem_close(bo)
    }
    fn map_cpu(&self, bo: BoHandle, size: u64) -> AmdgpuResult<Box<dyn CpuMapping>> {
        self.sim.map_cpu(bo, size)
    }
    fn va_map(&self, bo: BoHandle, va: u64, size: u64, flags: VaFlags) -> AmdgpuResult<()> {
        self.sim.va_map(bo, va, size, flags)
    }
    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> AmdgpuResult<()> {
        self.sim.va_unmap(bo, va, size)
    }
    fn ctx_create(&self) -> AmdgpuResult<ContextId> {
        self.sim.ctx_create()
    }
    fn ctx_destroy(&self, ctx: ContextId) -> AmdgpuResult<()> {
        self.sim.ctx_destroy(ctx)
    }
    fn ctx_state(&self, ctx: ContextId) -> AmdgpuResult<ContextState> {
        self.sim.ctx_state(ctx)
    }
    fn submit(&self, submission: &KmdSubmission<'_>) -> AmdgpuResult<SeqNo> {
        let seq = self.sim.submit(submission)?;
        let ib = submission.ibs.last().expect("a submission has an IB");
        *self.last.lock().unwrap() = Some((submission.ctx, ib.ip, ib.ring, seq));
        Ok(seq)
    }
    fn wait(
        &self,
        ctx: ContextId,
        ip: HwIp,
        ring: u32,
        seq: SeqNo,
        timeout: Timeout,
    ) -> AmdgpuResult<WaitStatus> {
        if timeout == Timeout::Relative(Duration::ZERO) {
            return Ok(WaitStatus::Busy);
        }
        let last = *self.last.lock().unwrap();
        if let Some((ctx, ip, ring, last)) = last {
            // Its outcome is not this wait's business.
            let _ = self.sim.wait(ctx, ip, ring, last, Timeout::Relative(Duration::from_secs(60)));
        }
        self.sim.wait(ctx, ip, ring, seq, timeout)
    }
}

#[test]
fn a_completed_submission_keeps_its_result_after_a_later_one_faulted() {
    let sim = SimDriver::new(SimOptions::default());
    let driver = SettlesBeforeWaits { sim, last: Mutex::new(None) };
    let device = AmdgpuDevice::<Simulated>::new(Arc::new(driver), DeviceOptions::default()).unwrap();
    let rt = Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only());
    let program = rt.program(&store_at_spec()).unwrap();
    let (good, bad) = (
        rt.create_buffer(u64::from(ITEMS) * 4, BufferUsage::Output).unwrap(),
        rt.create_buffer(u64::from(ITEMS) * 4, BufferUsage::Output).unwrap(),
    );
    let first = rt.dispatch(&program, &[Arg::Buffer(&good), Arg::U32(0)], [1, 1, 1]).unwrap();
    let faulting = rt.dispatch(&program, &[Arg::Buffer(&bad), Arg::U32(1 << 28)], [1, 1, 1]).unwrap();
    first.wait(Duration::from_secs(60)).expect("the submission before the fault completed");
    let out: Vec<u32> = rt.download(&good).expect("its result is still readable");
    assert!(out.iter().all(|&v| v == 7), "{out:?}");
    let err = faulting.wait(Duration::from_secs(60)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("GPU page fault"), "the fault is its own submission's error: {err}");
    let err = rt.download::<u32>(&bad).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "nothing is read from failed work: {err}");
    let err = rt.dispatch(&program, &[Arg::Buffer(&good), Arg::U32(0)], [1, 1, 1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "the guilty context takes no more work: {err}");
}

#[test]
fn a_faulting_batch_is_its_own_error_after_the_earlier_results() {
    let rt = Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).expect("the simulator opens");
    let pipeline = Pipeline::new(&rt, StoreAt { program: rt.program(&store_at_spec()).unwrap() })
        .with_depth(2)
        .unwrap()
        .with_timeout(Duration::from_secs(60));
    let mut delivered = Vec::new();
    // Batches 0 and 1 are in bounds; batch 2 writes a gigabyte past its buffer.
    let err = pipeline
        .run([0, 0, 1 << 28, 0, 0], |index, out| {
            assert!(out.iter().all(|&v| v == 7), "batch {index}: {out:?}");
            delivered.push(index);
            Ok(())
        })
        .unwrap_err();
    assert_eq!(delivered, [0, 1], "every batch before the faulting one, in order");
    assert_eq!(err.index, 2, "{err}");
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    assert!(err.to_string().contains("GPU page fault") && err.to_string().contains("store_at"), "{err}");
}
