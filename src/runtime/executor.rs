//! The pipelined executor: a [`Pipeline`] runs a stream of batches through a user's [`Stage`]
//! (how to upload a batch into a buffer set, what to record for it, how to read its result
//! back) with up to `depth` buffer sets in flight, so that batch i+1 is uploaded while batch i
//! computes and batch i−1 is read back. Results come back in order, to a callback
//! ([`Pipeline::run`]) or an iterator ([`Pipeline::start`]); [`Pipeline::run_serial`] is the
//! synchronous path with the same stage, one batch at a time.
//!
//! Guarantees: memory is bounded by `depth` buffer sets (a producer faster than the GPU waits
//! for a set to come back instead of allocating another); a failure — while uploading,
//! recording (a compile error), submitting, on the device, a fence timeout, while reading back,
//! or a panic in one of the stage's methods — is reported on the batch it belongs to, after
//! every earlier batch's result, and ends the stream; nothing is read from a set whose work has
//! not completed successfully; dropping a stream waits (up to the batch timeout) for its
//! outstanding work, and buffers of work still running after that are released by the runtime
//! once it completes.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::executor_stream::{self, Feeder, KeptSets, Results};
use super::{Commands, Runtime};
use crate::{Error, ErrorKind, Result};

/// Buffer sets in flight by default: one being uploaded, one computing, one being read back.
pub const DEFAULT_DEPTH: usize = 3;

/// How long a batch's work may take on the device, by default, before its wait fails with
/// [`ErrorKind::Timeout`].
pub const DEFAULT_BATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// How to run one batch: the part of a pipelined job that knows the kernel.
///
/// A *set* is the device memory one batch in flight needs (input and output buffers, for
/// example). The pipeline creates at most `depth` sets and hands each back to the stage for a
/// later batch only after that set's previous batch was read back, so a stage may overwrite or
/// even reallocate the buffers of a set it is given.
pub trait Stage: Send + Sync + 'static {
    /// What the caller feeds in for one batch.
    type Input: Send + 'static;
    /// What comes back for one batch.
    type Output: Send + 'static;
    /// The buffers of one batch in flight, plus whatever the stage remembers about the batch
    /// they hold (its size, for instance).
    type Set: Send + 'static;

    /// Makes one buffer set; called at most `depth` times per stream.
    fn create_set(&self, runtime: &Runtime) -> Result<Self::Set>;

    /// Puts `input` into `set` (host writes: [`Runtime::write_buffer`] and the like).
    fn upload(&self, runtime: &Runtime, set: &mut Self::Set, input: Self::Input) -> Result<()>;

    /// Records the batch's device work (dispatches, copies) into `commands`; the pipeline
    /// submits them. Compiling here (a kernel variant per batch) is allowed: a compile error
    /// becomes this batch's error.
    fn record(&self, runtime: &Runtime, set: &Self::Set, commands: &mut Commands) -> Result<()>;

    /// Reads the batch's result out of `set`; called only once the batch's work has completed
    /// successfully.
    fn download(&self, runtime: &Runtime, set: &mut Self::Set) -> Result<Self::Output>;
}

/// A failure that belongs to one batch of a stream (counted from 0). Earlier batches' results
/// were all delivered; no later batch's result will be.
#[derive(Debug, Clone)]
pub struct BatchError {
    /// The batch, counted from 0 in the order it was fed.
    pub index: u64,
    /// What went wrong with it.
    pub error: Error,
}

impl BatchError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch {}: {}", self.index, self.error)
    }
}

impl std::error::Error for BatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<BatchError> for Error {
    fn from(err: BatchError) -> Self {
        let index = err.index;
        err.error.context(format!("batch {index}"))
    }
}

/// A stage bound to a runtime, with the number of buffer sets in flight and the batch timeout.
/// Cheap to clone; every [`start`](Self::start) or [`run`](Self::run) is an independent stream.
///
/// Buffer sets outlive their stream: the pipeline (and its clones) keeps up to `depth` of them
/// for the next stream, so a series of streams allocates once; dropping the pipeline frees them.
///
/// ```no_run
/// use sparkle::{Access, Arg, BufferUsage, Commands, KernelSpec, Pipeline, Runtime, ScalarType, Stage};
///
/// /// Doubles every float of a batch.
/// struct Double {
///     program: sparkle::Program,
/// }
///
/// struct Set {
///     data: sparkle::Buffer,
///     len: usize,
/// }
///
/// impl Stage for Double {
///     type Input = Vec<f32>;
///     type Output = Vec<f32>;
///     type Set = Set;
///
///     fn create_set(&self, runtime: &Runtime) -> sparkle::Result<Set> {
///         Ok(Set { data: runtime.create_buffer(4 << 20, BufferUsage::InOut)?, len: 0 })
///     }
///
///     fn upload(&self, runtime: &Runtime, set: &mut Set, input: Vec<f32>) -> sparkle::Result<()> {
///         set.len = input.len();
///         runtime.write_buffer(&set.data, 0, bytemuck::cast_slice(&input))
///     }
///
///     fn record(&self, _: &Runtime, set: &Set, commands: &mut Commands) -> sparkle::Result<()> {
///         let args = [Arg::Buffer(&set.data), Arg::U32(set.len as u32)];
///         commands.dispatch(&self.program, &args, [(set.len as u32).div_ceil(64), 1, 1])?;
///         Ok(())
///     }
///
///     fn download(&self, runtime: &Runtime, set: &mut Set) -> sparkle::Result<Vec<f32>> {
///         runtime.read_vec(&set.data, 0, set.len)
///     }
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = Runtime::from_env()?;
/// let kernel = KernelSpec::new("double", [64, 1, 1])
///     .glsl("layout(std430, binding = 0) buffer Data { float v[]; };
///            uniform uint n;
///            void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= 2.0; }")
///     .storage("v", Access::ReadWrite)
///     .scalar("n", ScalarType::U32);
/// let pipeline = Pipeline::new(&runtime, Double { program: runtime.program(&kernel)? }).with_depth(3)?;
/// let batches = (0..100).map(|i| vec![i as f32; 1000]);
/// pipeline.run(batches, |index, output| {
///     assert_eq!(output[0], 2.0 * index as f32); // in order
///     Ok(())
/// })?;
///
/// // Or push from one thread and take results on another:
/// let (mut feeder, results) = pipeline.start()?;
/// std::thread::spawn(move || {
///     for i in 0..100 {
///         if feeder.push(vec![i as f32; 1000]).is_err() {
///             break; // the stream stopped; the error comes through `results`
///         }
///     }
/// });
/// for output in results {
///     let output = output?; // a BatchError names the batch
///     # let _ = output;
/// }
/// # Ok(()) }
/// ```
pub struct Pipeline<S: Stage> {
    runtime: Runtime,
    stage: Arc<S>,
    depth: usize,
    timeout: Duration,
    kept: Arc<KeptSets<S::Set>>,
}

impl<S: Stage> Clone for Pipeline<S> {
    fn clone(&self) -> Self {
        Self {
            runtime: self.runtime.clone(),
            stage: self.stage.clone(),
            depth: self.depth,
            timeout: self.timeout,
            kept: self.kept.clone(),
        }
    }
}

impl<S: Stage> Pipeline<S> {
    /// A pipeline of `stage` on `runtime` with [`DEFAULT_DEPTH`] sets and [`DEFAULT_BATCH_TIMEOUT`].
    pub fn new(runtime: &Runtime, stage: S) -> Self {
        Self {
            runtime: runtime.clone(),
            stage: Arc::new(stage),
            depth: DEFAULT_DEPTH,
            timeout: DEFAULT_BATCH_TIMEOUT,
            kept: Arc::new(KeptSets::new(DEFAULT_DEPTH)),
        }
    }

    /// Sets how many buffer sets may be in flight at once (at least 1; 1 runs batches one after
    /// another, 3 overlaps upload, compute and read-back).
    pub fn with_depth(mut self, depth: usize) -> Result<Self> {
        if depth == 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a pipeline needs at least 1 buffer set in flight, got 0; use {DEFAULT_DEPTH} \
                     (one set uploading, one computing, one being read back) unless memory is short"
                ),
            ));
        }
        self.depth = depth;
        self.kept = Arc::new(KeptSets::new(depth));
        Ok(self)
    }

    /// Sets how long one batch's device work may take before its wait fails with a timeout
    /// (which ends the stream).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Batches in flight at once.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// How long one batch may take on the device before it fails with a timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The stage each batch runs through.
    pub fn stage(&self) -> &S {
        &self.stage
    }

    /// The runtime the pipeline runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Starts a stream: push batches into the [`Feeder`] (it blocks while `depth` sets are in
    /// flight) and take results, in order, from the [`Results`] iterator — from two threads, or
    /// from one thread that never pushes more than `depth` batches ahead of what it takes.
    /// Dropping the feeder (or [`Feeder::finish`]) ends the stream once its batches are read
    /// back; dropping the results cancels the stream and waits for the work in flight.
    pub fn start(&self) -> Result<(Feeder<S>, Results<S>)> {
        executor_stream::start(
            self.runtime.clone(),
            self.stage.clone(),
            self.kept.clone(),
            self.depth,
            self.timeout,
        )
    }

    /// Runs every input through the pipeline and hands each result to `on_result` in order,
    /// with its batch index. Returns the number of batches, or the first failure (a batch's
    /// own, or the error `on_result` returned, which stops the stream).
    pub fn run<I, F>(&self, inputs: I, mut on_result: F) -> Result<u64, BatchError>
    where
        I: IntoIterator<Item = S::Input>,
        I::IntoIter: Send,
        F: FnMut(u64, S::Output) -> Result<()>,
    {
        let (mut feeder, mut results) = self.start().map_err(|error| BatchError { index: 0, error })?;
        let inputs = inputs.into_iter();
        std::thread::scope(|scope| {
            let feed = move || {
                for input in inputs {
                    // A failed push means the stream stopped; its error comes through `results`.
                    if feeder.push(input).is_err() {
                        break;
                    }
                }
            };
            // Named, for traces.
            let started =
                std::thread::Builder::new().name("sparkle-pipeline-feed".into()).spawn_scoped(scope, feed);
            if let Err(err) = started {
                return Err(BatchError {
                    index: 0,
                    error: Error::new(
                        ErrorKind::Unavailable,
                        format!("cannot start the thread feeding the pipeline: {err}"),
                    ),
                });
            }
            let mut delivered = 0;
            let mut outcome = Ok(());
            for item in results.by_ref() {
                match item {
                    Ok(output) => {
                        if let Err(error) = on_result(delivered, output) {
                            outcome = Err(BatchError {
                                index: delivered,
                                error: error.context("the result callback failed"),
                            });
                            break;
                        }
                        delivered += 1;
                    }
                    Err(err) => {
                        outcome = Err(err);
                        break;
                    }
                }
            }
            // Cancels what is still in flight (after an error) and waits for it.
            drop(results);
            outcome.map(|()| delivered)
        })
    }

    /// The synchronous path with the same stage: one set; each batch is uploaded, submitted,
    /// waited for and read back before the next is uploaded.
    pub fn run_serial<I, F>(&self, inputs: I, mut on_result: F) -> Result<u64, BatchError>
    where
        I: IntoIterator<Item = S::Input>,
        F: FnMut(u64, S::Output) -> Result<()>,
    {
        let mut set = self.kept.take(1).pop();
        let mut index = 0;
        for input in inputs {
            let fail = |error: Error| BatchError { index, error };
            let set = match &mut set {
                Some(set) => set,
                None => set.insert(
                    self.stage
                        .create_set(&self.runtime)
                        .map_err(|e| fail(e.context("creating a buffer set")))?,
                ),
            };
            let output = run_one(&self.runtime, &*self.stage, set, input, self.timeout).map_err(fail)?;
            on_result(index, output).map_err(|e| fail(e.context("the result callback failed")))?;
            index += 1;
        }
        if let Some(set) = set {
            // Every batch on it was read back: the set is free for the next stream.
            self.kept.put(set);
        }
        Ok(index)
    }
}

/// Upload, record, submit, wait and read back one batch.
fn run_one<S: Stage>(
    runtime: &Runtime,
    stage: &S,
    set: &mut S::Set,
    input: S::Input,
    timeout: Duration,
) -> Result<S::Output> {
    let _span = crate::trace::span("pipeline", "serial batch");
    let uploading = crate::trace::span("pipeline", "stage upload");
    stage.upload(runtime, set, input).map_err(|e| e.context("upload"))?;
    drop(uploading);
    let submitting = crate::trace::span("pipeline", "stage record and submit");
    let submission = executor_stream::record_and_submit(runtime, stage, set)?;
    drop(submitting);
    submission.wait(timeout)?;
    let _reading = crate::trace::span("pipeline", "stage read-back");
    stage.download(runtime, set).map_err(|e| e.context("read-back"))
}

impl<S: Stage> fmt::Debug for Pipeline<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("runtime", &self.runtime)
            .field("depth", &self.depth)
            .field("timeout", &self.timeout)
            .finish()
    }
}
