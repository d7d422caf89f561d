//! The executor's guarantees, checked against the fake backend (`fake`), whose submissions run
//! (an element-wise add) only when the test, or a simulated GPU thread, completes their fences:
//! results in order under random batch sizes and GPU timings, equality with the serial path,
//! backpressure, errors on the batch they belong to (device failure, fence timeout, refused
//! submission, compile error, read-back and callback errors), and no buffer outliving a stream.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::fake::{self, Gpu};
use sparkle::hal::BufferUsage;
use sparkle::runtime::{Pipeline, Stage, DEFAULT_DEPTH};
use sparkle::{
    Access, Arg, Buffer, Commands, Error, ErrorKind, KernelSpec, Program, Result, Runtime, ScalarType,
};

fn runtime() -> (Runtime, Arc<Gpu>) {
    fake::runtime(7, Duration::from_secs(5))
}

/// A simulated GPU: completes submissions one by one, after random short delays.
struct GpuThread {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl GpuThread {
    fn spawn(gpu: &Arc<Gpu>, seed: u64) -> Self {
        let (gpu, stop) = (gpu.clone(), Arc::new(AtomicBool::new(false)));
        let stopping = stop.clone();
        let handle = thread::spawn(move || {
            let mut rng = Rng(seed);
            while !stopping.load(Ordering::SeqCst) {
                let (completed, issued) = (gpu.timeline.completed(), gpu.timeline.issued());
                if completed < issued {
                    thread::sleep(Duration::from_micros(rng.below(400)));
                    gpu.complete(completed + 1);
                } else {
                    thread::sleep(Duration::from_micros(50));
                }
            }
        });
        Self { stop, handle: Some(handle) }
    }
}

impl Drop for GpuThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(handle) = self.handle.take() {
            handle.join().unwrap();
        }
    }
}

/// SplitMix64, for reproducible random sizes and delays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound
    }
}

const MAX_BATCH: usize = 256;

fn add_kernel(name: &str, body: &str) -> KernelSpec {
    KernelSpec::new(name, [64, 1, 1])
        .glsl(body)
        .storage("src", Access::ReadOnly)
        .storage("dst", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
        .scalar("add", ScalarType::U32)
}

const ADD_SOURCE: &str = "buffer src ro\nbuffer dst rw\nscalar n u32\nscalar add u32";

/// Batches of up to `MAX_BATCH` u32s; each comes back with `add` added to every element.
struct AddStage {
    program: Program,
    add: u32,
    /// Batch (counted by `record` calls) whose kernel variant does not compile.
    broken_batch: Option<u64>,
    recorded: AtomicU64,
    /// Fails the read-back of this batch (counted by `download` calls).
    failing_download: Option<u64>,
    /// Panics in the upload or the read-back of this batch.
    panicking_upload: Option<u32>,
    panicking_download: Option<u64>,
    downloaded: AtomicU64,
}

struct AddSet {
    src: Buffer,
    dst: Buffer,
    len: usize,
}

impl AddStage {
    fn new(runtime: &Runtime, add: u32) -> Self {
        Self {
            program: runtime.program(&add_kernel("add", ADD_SOURCE)).unwrap(),
            add,
            broken_batch: None,
            recorded: AtomicU64::new(0),
            failing_download: None,
            panicking_upload: None,
            panicking_download: None,
            downloaded: AtomicU64::new(0),
        }
    }
}

impl Stage for AddStage {
    type Input = Vec<u32>;
    type Output = Vec<u32>;
    type Set = AddSet;

    fn create_set(&self, runtime: &Runtime) -> Result<AddSet> {
        let bytes = (MAX_BATCH * 4) as u64;
        Ok(AddSet {
            src: runtime.create_buffer(bytes, BufferUsage::Input)?,
            dst: runtime.create_buffer(bytes, BufferUsage::Output)?,
            len: 0,
        })
    }

    fn upload(&self, runtime: &Runtime, set: &mut AddSet, input: Vec<u32>) -> Result<()> {
        if self.panicking_upload.is_some_and(|marker| input[0] == marker) {
            panic!("a bug in upload");
        }
        runtime.write_buffer(&set.src, 0, bytemuck::cast_slice(&input))?;
        set.len = input.len();
        Ok(())
    }

    fn record(&self, runtime: &Runtime, set: &AddSet, commands: &mut Commands) -> Result<()> {
        let batch = self.recorded.fetch_add(1, Ordering::SeqCst);
        let program = if self.broken_batch == Some(batch) {
            runtime.program(&add_kernel("add_variant", &format!("{ADD_SOURCE}\nerror")))?
        } else {
            self.program.clone()
        };
        let args =
            [Arg::Buffer(&set.src), Arg::Buffer(&set.dst), Arg::U32(set.len as u32), Arg::U32(self.add)];
        commands.dispatch(&program, &args, [set.len.div_ceil(64) as u32, 1, 1])?;
        Ok(())
    }

    fn download(&self, runtime: &Runtime, set: &mut AddSet) -> Result<Vec<u32>> {
        let batch = self.downloaded.fetch_add(1, Ordering::SeqCst);
        if self.failing_download == Some(batch) {
            return Err(Error::new(ErrorKind::Io, "the fake read-back failed"));
        }
        if self.panicking_download == Some(batch) {
            panic!("a bug in download");
        }
        let mut out = vec![0u32; set.len];
        runtime.read_buffer(&set.dst, 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out)
    }
}

fn random_batches(count: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let len = 1 + rng.below(MAX_BATCH as u64) as usize;
            (0..len).map(|_| rng.below(1 << 31) as u32).collect()
        })
        .collect()
}

fn expected(batches: &[Vec<u32>], add: u32) -> Vec<Vec<u32>> {
    batches.iter().map(|b| b.iter().map(|v| v.wrapping_add(add)).collect()).collect()
}

/// Waits until `condition` holds (or panics after 5 s).
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_depth_of_zero_is_refused_with_the_fix_in_the_message() {
    let (runtime, _gpu) = runtime();
    let err = Pipeline::new(&runtime, AddStage::new(&runtime, 1)).with_depth(0).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("at least 1 buffer set"), "{err}");
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 1));
    assert_eq!(pipeline.depth(), DEFAULT_DEPTH);
    assert_eq!(pipeline.with_depth(1).unwrap().depth(), 1);
}

#[test]
fn results_come_back_in_order_under_random_batch_sizes_and_equal_the_serial_path() {
    for (depth, seed) in [(1, 1), (2, 2), (3, 3), (5, 4)] {
        let (runtime, gpu) = runtime();
        let _gpu_thread = GpuThread::spawn(&gpu, seed);
        let batches = random_batches(40, seed);
        let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 17)).with_depth(depth).unwrap();

        let mut pipelined = Vec::new();
        let count = pipeline
            .run(batches.clone(), |index, output| {
                assert_eq!(index as usize, pipelined.len(), "indices count up from 0");
                pipelined.push(output);
                Ok(())
            })
            .unwrap();
        assert_eq!(count, 40);
        let mut serial = Vec::new();
        pipeline
            .run_serial(batches.clone(), |_, output| {
                serial.push(output);
                Ok(())
            })
            .unwrap();
        assert_eq!(pipelined, expected(&batches, 17), "depth {depth}");
        assert_eq!(serial, pipelined, "depth {depth}");
        assert_eq!(gpu.premature_reads.load(Ordering::SeqCst), 0);
        // Two buffers per set: never more than `depth` sets at once (plus the serial run's one).
        assert!(gpu.peak_buffers.load(Ordering::SeqCst) <= 2 * depth, "depth {depth}");
    }
}

#[test]
fn the_iterator_form_delivers_in_order_while_a_producer_thread_pushes() {
    let (runtime, gpu) = runtime();
    let _gpu_thread = GpuThread::spawn(&gpu, 9);
    let batches = random_batches(30, 9);
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 5));
    let (mut feeder, results) = pipeline.start().unwrap();
    let producer = {
        let batches = batches.clone();
        thread::spawn(move || {
            for (i, batch) in batches.into_iter().enumerate() {
                assert_eq!(feeder.push(batch).unwrap(), i as u64);
            }
        })
    };
    let got: Vec<Vec<u32>> = results.map(|r| r.unwrap()).collect();
    producer.join().unwrap();
    assert_eq!(got, expected(&batches, 5));
}

#[test]
fn a_producer_faster_than_the_gpu_waits_while_depth_sets_are_in_flight() {
    let (runtime, gpu) = runtime();
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 1)).with_depth(3).unwrap();
    let (mut feeder, results) = pipeline.start().unwrap();
    let pushed = Arc::new(AtomicU64::new(0));
    let producer = {
        let pushed = pushed.clone();
        thread::spawn(move || {
            for i in 0..5u32 {
                feeder.push(vec![i; 8]).unwrap();
                pushed.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    eventually("three batches are in flight", || pushed.load(Ordering::SeqCst) == 3);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(pushed.load(Ordering::SeqCst), 3, "the fourth push waits for a set");
    assert_eq!(gpu.live_buffers.load(Ordering::SeqCst), 6, "no fourth set was allocated");

    gpu.complete(1);
    eventually("the fourth batch got the first set", || pushed.load(Ordering::SeqCst) == 4);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(pushed.load(Ordering::SeqCst), 4);
    assert_eq!(gpu.peak_buffers.load(Ordering::SeqCst), 6);

    let _gpu_thread = GpuThread::spawn(&gpu, 3);
    producer.join().unwrap();
    let got: Vec<Vec<u32>> = results.map(|r| r.unwrap()).collect();
    assert_eq!(got, (0..5u32).map(|i| vec![i + 1; 8]).collect::<Vec<_>>());
}

#[test]
fn a_fence_timeout_surfaces_on_its_batch_and_nothing_unfinished_is_read() {
    let (runtime, gpu) = runtime();
    let pipeline =
        Pipeline::new(&runtime, AddStage::new(&runtime, 1)).with_timeout(Duration::from_millis(50));
    let (mut feeder, mut results) = pipeline.start().unwrap();
    feeder.push(vec![1; 4]).unwrap();
    gpu.complete(1);
    assert_eq!(results.next().unwrap().unwrap(), vec![2; 4]);
    // Batches 1 and 2 never finish.
    feeder.push(vec![2; 4]).unwrap();
    feeder.push(vec![3; 4]).unwrap();
    let err = results.next().unwrap().unwrap_err();
    assert_eq!((err.index, err.kind()), (1, ErrorKind::Timeout), "{err}");
    assert!(err.to_string().starts_with("batch 1: "), "{err}");
    assert!(results.next().is_none(), "nothing follows a failure");
    let refused = feeder.push(vec![4; 4]).unwrap_err();
    assert!(refused.to_string().contains("a batch failed"), "{refused}");
    assert_eq!(gpu.reads.load(Ordering::SeqCst), 1, "only batch 0 was read back");

    gpu.complete_all();
    drop((feeder, results));
    drop(pipeline);
    runtime.poll(); // retires finished work
    assert_eq!(gpu.live_buffers.load(Ordering::SeqCst), 0);
    assert_eq!(gpu.premature_reads.load(Ordering::SeqCst), 0);
}

#[test]
fn a_submission_failing_on_the_device_stops_the_stream_after_the_earlier_results() {
    let (runtime, gpu) = runtime();
    gpu.failing.lock().unwrap().insert(3); // batch 2
    let _gpu_thread = GpuThread::spawn(&gpu, 5);
    let batches = random_batches(8, 5);
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 2));
    let mut got = Vec::new();
    let err = pipeline
        .run(batches.clone(), |_, output| {
            got.push(output);
            Ok(())
        })
        .unwrap_err();
    assert_eq!((err.index, err.kind()), (2, ErrorKind::DeviceLost), "{err}");
    assert_eq!(got, expected(&batches[..2], 2));
    assert!(gpu.timeline.issued() <= 2 + 1 + DEFAULT_DEPTH as u64, "the feeder stopped");
    drop(pipeline);
    eventually("every buffer is released", || {
        runtime.poll();
        gpu.live_buffers.load(Ordering::SeqCst) == 0
    });
    assert_eq!(gpu.premature_reads.load(Ordering::SeqCst), 0);
}

#[test]
fn a_refused_submission_surfaces_on_its_batch_from_push_and_from_the_results() {
    let (runtime, gpu) = runtime();
    gpu.refuse_submit.store(3, Ordering::SeqCst); // batch 2
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 1));
    let (mut feeder, mut results) = pipeline.start().unwrap();
    feeder.push(vec![1; 4]).unwrap();
    feeder.push(vec![2; 4]).unwrap();
    let err = feeder.push(vec![3; 4]).unwrap_err();
    assert_eq!((err.index, err.kind()), (2, ErrorKind::OutOfMemory), "{err}");
    assert!(err.to_string().contains("submitting"), "{err}");
    gpu.complete_all();
    assert_eq!(results.next().unwrap().unwrap(), vec![2; 4]);
    assert_eq!(results.next().unwrap().unwrap(), vec![3; 4]);
    let err = results.next().unwrap().unwrap_err();
    assert_eq!((err.index, err.kind()), (2, ErrorKind::OutOfMemory));
    assert!(results.next().is_none());
}

#[test]
fn a_compile_error_of_a_batchs_kernel_variant_is_that_batchs_error() {
    let (runtime, gpu) = runtime();
    let _gpu_thread = GpuThread::spawn(&gpu, 6);
    let mut stage = AddStage::new(&runtime, 1);
    stage.broken_batch = Some(3);
    let mut delivered = 0;
    let err = Pipeline::new(&runtime, stage)
        .run(random_batches(10, 6), |_, _| {
            delivered += 1;
            Ok(())
        })
        .unwrap_err();
    assert_eq!((err.index, err.kind()), (3, ErrorKind::Compile), "{err}");
    assert!(err.to_string().contains("syntax error"), "{err}");
    assert_eq!(delivered, 3);
}

#[test]
fn read_back_and_callback_errors_stop_the_stream_on_their_batch() {
    let (runtime, gpu) = runtime();
    let _gpu_thread = GpuThread::spawn(&gpu, 8);
    let mut stage = AddStage::new(&runtime, 1);
    stage.failing_download = Some(4);
    let err = Pipeline::new(&runtime, stage).run(random_batches(10, 8), |_, _| Ok(())).unwrap_err();
    assert_eq!((err.index, err.kind()), (4, ErrorKind::Io), "{err}");
    assert!(err.to_string().contains("read-back"), "{err}");

    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 1));
    let err = pipeline
        .run(random_batches(10, 8), |index, _| {
            if index == 5 {
                Err(Error::new(ErrorKind::InvalidArgument, "the consumer gave up"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
    assert_eq!((err.index, err.kind()), (5, ErrorKind::InvalidArgument), "{err}");
    assert!(err.to_string().contains("the consumer gave up"), "{err}");
    drop(pipeline);
    eventually("every buffer is released", || {
        runtime.poll();
        gpu.live_buffers.load(Ordering::SeqCst) == 0
    });
}

#[test]
fn dropping_a_stream_mid_way_waits_for_its_work_and_frees_every_buffer() {
    let (runtime, gpu) = runtime();
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 1)).with_timeout(Duration::from_secs(10));
    let (mut feeder, results) = pipeline.start().unwrap();
    for i in 0..3u32 {
        feeder.push(vec![i; 16]).unwrap();
    }
    assert_eq!(gpu.live_buffers.load(Ordering::SeqCst), 6);
    let completer = {
        let gpu = gpu.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            gpu.complete_all();
        })
    };
    let started = Instant::now();
    drop(results);
    assert!(started.elapsed() >= Duration::from_millis(80), "the drop waited for the work in flight");
    assert!(feeder.push(vec![9; 16]).is_err(), "a cancelled stream takes no more batches");
    drop(feeder);
    completer.join().unwrap();
    assert_eq!(gpu.live_buffers.load(Ordering::SeqCst), 0, "every set was freed");
    assert_eq!(gpu.reads.load(Ordering::SeqCst), 0, "a cancelled stream reads nothing back");
}

#[test]
fn sets_are_kept_between_streams_up_to_the_depth_and_freed_with_the_pipeline() {
    let (runtime, gpu) = runtime();
    let _gpu_thread = GpuThread::spawn(&gpu, 10);
    let pipeline = Pipeline::new(&runtime, AddStage::new(&runtime, 3)).with_depth(2).unwrap();
    for round in 0..4u64 {
        let batches = random_batches(9, 20 + round);
        let mut got = Vec::new();
        pipeline
            .run(batches.clone(), |_, output| {
                got.push(output);
                Ok(())
            })
            .unwrap();
        assert_eq!(got, expected(&batches, 3), "round {round}");
        let mut serial = Vec::new();
        pipeline
            .run_serial(batches.clone(), |_, output| {
                serial.push(output);
                Ok(())
            })
            .unwrap();
        assert_eq!(serial, got, "round {round}");
        eventually("the sets are back in the pipeline", || {
            runtime.poll();
            gpu.live_buffers.load(Ordering::SeqCst) == 4
        });
    }
    assert_eq!(gpu.peak_buffers.load(Ordering::SeqCst), 4, "two sets, made once, served every stream");
    drop(pipeline);
    assert_eq!(gpu.live_buffers.load(Ordering::SeqCst), 0);
}

#[test]
fn a_stage_that_panics_fails_its_batch_instead_of_ending_the_stream_quietly() {
    let (runtime, gpu) = runtime();
    let _gpu_thread = GpuThread::spawn(&gpu, 12);
    let mut stage = AddStage::new(&runtime, 1);
    stage.panicking_download = Some(2);
    let mut delivered = 0;
    let err = Pipeline::new(&runtime, stage)
        .run(random_batches(8, 12), |_, _| {
            delivered += 1;
            Ok(())
        })
        .unwrap_err();
    assert_eq!((err.index, delivered), (2, 2), "{err}");
    assert!(err.to_string().contains("panicked in read-back: a bug in download"), "{err}");

    let mut stage = AddStage::new(&runtime, 1);
    stage.panicking_upload = Some(77);
    let pipeline = Pipeline::new(&runtime, stage);
    let (mut feeder, mut results) = pipeline.start().unwrap();
    feeder.push(vec![1; 4]).unwrap();
    let err = feeder.push(vec![77; 4]).unwrap_err();
    assert_eq!(err.index, 1);
    assert!(err.to_string().contains("panicked in upload: a bug in upload"), "{err}");
    assert_eq!(results.next().unwrap().unwrap(), vec![2; 4]);
    assert_eq!(results.next().unwrap().unwrap_err().index, 1);
    assert!(results.next().is_none());
}
