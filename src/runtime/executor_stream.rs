//! One running stream of a [`Pipeline`](super::Pipeline): the [`Feeder`] uploads and submits
//! batches on the caller's thread, a reader thread waits for each batch's fence in submission
//! order, reads the result back and returns the set to the feeder, and [`Results`] hands the
//! results out in order.
//!
//! Sets travel in a loop — feeder (upload, submit) → reader (wait, read back) → feeder — so at
//! most `depth` exist, and a feeder with none free blocks until the reader returns one: that
//! is the backpressure. A failure becomes a message in the same ordered channel as the
//! submitted batches, so it reaches the results after every earlier batch's result.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::executor::{BatchError, Stage};
use super::{Runtime, Submission};
use crate::{Error, ErrorKind, Result};

/// How often an idle reader looks whether its stream was cancelled.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// What the feeder hands the reader, in batch order.
enum Flight<S: Stage> {
    Submitted {
        index: u64,
        set: S::Set,
        submission: Submission,
    },
    /// The batch failed before its work was submitted; the stream ends here.
    Failed {
        index: u64,
        error: Error,
    },
}

/// Flags both ends of a stream read.
#[derive(Default)]
struct Control {
    /// A batch failed: the feeder takes no more batches.
    failed: AtomicBool,
    /// The results were dropped: nothing more is read back.
    cancelled: AtomicBool,
}

impl Control {
    fn refusal(&self) -> Error {
        if self.cancelled.load(Ordering::Acquire) {
            Error::new(
                ErrorKind::InvalidArgument,
                "the pipeline's results were dropped: the stream is cancelled",
            )
        } else {
            Error::new(
                ErrorKind::InvalidArgument,
                "the stream stopped because a batch failed (its error comes back, in order, from the \
                 results); start a new stream to go on",
            )
        }
    }

    fn stopped(&self) -> bool {
        self.failed.load(Ordering::Acquire) || self.cancelled.load(Ordering::Acquire)
    }
}

/// Starts the reader thread of a new stream.
pub(super) fn start<S: Stage>(
    runtime: Runtime,
    stage: Arc<S>,
    kept: Arc<KeptSets<S::Set>>,
    depth: usize,
    timeout: Duration,
) -> Result<(Feeder<S>, Results<S>)> {
    let control = Arc::new(Control::default());
    let (flights_tx, flights_rx) = mpsc::channel();
    let (free_tx, free_rx) = mpsc::channel();
    let reused = kept.take(depth);
    let created = reused.len();
    for set in reused {
        // The receiver is alive: it is `free_rx` below.
        let _ = free_tx.send(set);
    }
    // The reader may run up to `depth` results ahead of the consumer; then it stops returning
    // sets, and the feeder stops with it.
    let (results_tx, results_rx) = mpsc::sync_channel(depth);
    let reader = Reader {
        runtime: runtime.clone(),
        stage: stage.clone(),
        timeout,
        flights: flights_rx,
        free: free_tx,
        kept: kept.clone(),
        results: results_tx,
        control: control.clone(),
        failed: false,
        drain_deadline: None,
    };
    let handle = std::thread::Builder::new()
        .name("sparkle-pipeline".into())
        .spawn(move || reader.serve())
        .map_err(|err| {
            Error::new(ErrorKind::Unavailable, format!("could not start the pipeline's reader thread: {err}"))
        })?;
    let feeder = Feeder {
        runtime,
        stage,
        depth,
        created,
        free: free_rx,
        kept,
        flights: flights_tx,
        next_index: 0,
        control: control.clone(),
    };
    let results = Results { results: Some(results_rx), reader: Some(handle), control };
    Ok((feeder, results))
}

/// Runs one of the stage's methods; a panic in it becomes the batch's error, so that it stops
/// the stream in order instead of ending it early without a word.
fn guarded<T>(what: &str, call: impl FnOnce() -> Result<T>) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_owned());
        Err(Error::new(ErrorKind::InvalidArgument, format!("the stage panicked in {what}: {message}")))
    })
}

/// Records a batch's work and submits it.
pub(super) fn record_and_submit<S: Stage>(runtime: &Runtime, stage: &S, set: &S::Set) -> Result<Submission> {
    let mut commands = runtime.commands();
    stage.record(runtime, set, &mut commands).map_err(|e| e.context("recording"))?;
    runtime.submit(commands).map_err(|e| e.context("submitting"))
}

/// The input end of a stream. [`push`](Self::push) blocks while every buffer set is in flight.
pub struct Feeder<S: Stage> {
    runtime: Runtime,
    stage: Arc<S>,
    depth: usize,
    created: usize,
    free: Receiver<S::Set>,
    kept: Arc<KeptSets<S::Set>>,
    flights: Sender<Flight<S>>,
    next_index: u64,
    control: Arc<Control>,
}

impl<S: Stage> Feeder<S> {
    /// Uploads `input` into a free set and submits its work; returns the batch's index. Waits
    /// for a set when `depth` are in flight. Fails with the batch's error if the upload, the
    /// recording or the submission failed (the results report it too, in order), or at once
    /// if the stream already stopped.
    pub fn push(&mut self, input: S::Input) -> Result<u64, BatchError> {
        let index = self.next_index;
        let refuse = |control: &Control| BatchError { index, error: control.refusal() };
        if self.control.stopped() {
            return Err(refuse(&self.control));
        }
        let started = Instant::now();
        let mut span = crate::trace::span("pipeline", "batch in");
        span.arg("batch", index);
        let waiting = crate::trace::span("pipeline", "wait for a free set");
        let mut set = match self.take_set() {
            Ok(Some(set)) => set,
            Ok(None) => return Err(refuse(&self.control)),
            Err(error) => return Err(self.fail(index, error.context("creating a buffer set"))),
        };
        if self.control.stopped() {
            return Err(refuse(&self.control));
        }
        let (stage, runtime) = (&*self.stage, &self.runtime);
        drop(waiting);
        let got_set = Instant::now();
        let uploading = crate::trace::span("pipeline", "stage upload");
        if let Err(error) = guarded("upload", || stage.upload(runtime, &mut set, input)) {
            return Err(self.fail(index, error.context("upload")));
        }
        drop(uploading);
        let uploaded = Instant::now();
        let submitting = crate::trace::span("pipeline", "stage record and submit");
        let submission = match guarded("recording", || record_and_submit(runtime, stage, &set)) {
            Ok(submission) => submission,
            Err(error) => return Err(self.fail(index, error)),
        };
        drop(submitting);
        tracing::trace!(
            index,
            set_wait_us = (got_set - started).as_micros() as u64,
            upload_us = (uploaded - got_set).as_micros() as u64,
            submit_us = uploaded.elapsed().as_micros() as u64,
            "batch submitted"
        );
        if self.flights.send(Flight::Submitted { index, set, submission }).is_err() {
            // The reader is gone (cancelled); the runtime keeps the set's buffers alive until
            // the work just submitted completes.
            return Err(refuse(&self.control));
        }
        self.next_index += 1;
        Ok(index)
    }

    /// Batches pushed so far.
    pub fn pushed(&self) -> u64 {
        self.next_index
    }

    /// Ends the stream: the results end after the batches already pushed.
    pub fn finish(self) {}

    /// A free set: one returned by the reader, else a new one while fewer than `depth` exist,
    /// else the next one the reader returns. `None`: the stream stopped.
    fn take_set(&mut self) -> Result<Option<S::Set>> {
        match self.free.try_recv() {
            Ok(set) => return Ok(Some(set)),
            Err(TryRecvError::Disconnected) => return Ok(None),
            Err(TryRecvError::Empty) => {}
        }
        if self.created < self.depth {
            let set = guarded("create_set", || self.stage.create_set(&self.runtime))?;
            self.created += 1;
            return Ok(Some(set));
        }
        Ok(self.free.recv().ok())
    }

    /// Stops the stream at batch `index` and queues its error behind the earlier batches.
    fn fail(&mut self, index: u64, error: Error) -> BatchError {
        self.control.failed.store(true, Ordering::Release);
        let _ = self.flights.send(Flight::Failed { index, error: error.clone() });
        BatchError { index, error }
    }
}

impl<S: Stage> Drop for Feeder<S> {
    fn drop(&mut self) {
        // Sets returned so far go back to the pipeline; the reader keeps the later ones.
        for set in self.free.try_iter() {
            self.kept.put(set);
        }
    }
}

impl<S: Stage> fmt::Debug for Feeder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feeder").field("pushed", &self.next_index).field("depth", &self.depth).finish()
    }
}

/// The output end of a stream: each batch's result, in order; a failure is the last item.
/// Dropping it cancels the stream: nothing more is read back, and the drop waits (up to the
/// batch timeout) for the work in flight.
pub struct Results<S: Stage> {
    results: Option<Receiver<Result<S::Output, BatchError>>>,
    reader: Option<JoinHandle<()>>,
    control: Arc<Control>,
}

impl<S: Stage> Iterator for Results<S> {
    type Item = Result<S::Output, BatchError>;

    /// Blocks until the next batch's result is back; `None` once the feeder was dropped and
    /// every batch delivered, or after a failure.
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.results.as_ref()?.recv().ok()?;
        if item.is_err() {
            // Nothing follows a failure, even while the feeder is still alive.
            self.results = None;
        }
        Some(item)
    }
}

impl<S: Stage> Drop for Results<S> {
    fn drop(&mut self) {
        self.control.cancelled.store(true, Ordering::Release);
        // The reader's next send fails instead of blocking on a consumer that is gone.
        drop(self.results.take());
        if let Some(reader) = self.reader.take() {
            if reader.join().is_err() {
                tracing::error!("the pipeline's reader thread panicked");
            }
        }
    }
}

impl<S: Stage> fmt::Debug for Results<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Results").finish_non_exhaustive()
    }
}

/// The reader thread's state.
struct Reader<S: Stage> {
    runtime: Runtime,
    stage: Arc<S>,
    timeout: Duration,
    flights: Receiver<Flight<S>>,
    free: Sender<S::Set>,
    kept: Arc<KeptSets<S::Set>>,
    results: SyncSender<Result<S::Output, BatchError>>,
    control: Arc<Control>,
    /// A batch failed: later ones are only waited for, never read back.
    failed: bool,
    /// When waiting for abandoned work gives up (set by the first abandoned batch).
    drain_deadline: Option<Instant>,
}

impl<S: Stage> Reader<S> {
    fn serve(mut self) {
        while let Some(flight) = self.next_flight() {
            match flight {
                Flight::Failed { index, error } => self.fail(BatchError { index, error }),
                Flight::Submitted { index, set, submission } => {
                    if self.failed || self.control.cancelled.load(Ordering::Acquire) {
                        self.abandon(set, submission);
                    } else {
                        self.read_back(index, set, submission);
                    }
                }
            }
        }
    }

    /// The next batch in order; `None` when the feeder is gone and everything was handled, or
    /// when the stream stopped or was cancelled and nothing more is queued.
    fn next_flight(&self) -> Option<Flight<S>> {
        loop {
            if self.failed || self.control.cancelled.load(Ordering::Acquire) {
                return self.flights.try_recv().ok();
            }
            match self.flights.recv_timeout(CANCEL_POLL) {
                Ok(flight) => return Some(flight),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn read_back(&mut self, index: u64, mut set: S::Set, submission: Submission) {
        let started = Instant::now();
        let mut span = crate::trace::span("pipeline", "batch out");
        span.arg("batch", index);
        if let Err(error) = submission.wait(self.timeout) {
            // The set's buffers stay with the runtime until the work is over; nothing is read.
            drop(set);
            return self.fail(BatchError { index, error });
        }
        if self.control.cancelled.load(Ordering::Acquire) {
            // Nobody will take the result.
            return;
        }
        let completed = Instant::now();
        let reading = crate::trace::span("pipeline", "stage read-back");
        let downloaded = guarded("read-back", || self.stage.download(&self.runtime, &mut set));
        drop(reading);
        tracing::trace!(
            index,
            wait_us = (completed - started).as_micros() as u64,
            download_us = completed.elapsed().as_micros() as u64,
            "batch read back"
        );
        match downloaded {
            Ok(output) => {
                if let Err(mpsc::SendError(set)) = self.free.send(set) {
                    // The feeder is gone: the set waits in the pipeline for the next stream.
                    self.kept.put(set);
                }
                self.deliver(Ok(output));
            }
            Err(error) => self.fail(BatchError { index, error: error.context("read-back") }),
        }
    }

    fn fail(&mut self, error: BatchError) {
        if self.failed {
            return;
        }
        tracing::debug!(batch = error.index, error = %error.error, "a pipeline stream stopped");
        self.failed = true;
        self.control.failed.store(true, Ordering::Release);
        self.deliver(Err(error));
    }

    fn deliver(&self, item: Result<S::Output, BatchError>) {
        if self.results.send(item).is_err() {
            self.control.cancelled.store(true, Ordering::Release);
        }
    }

    /// Waits, without reading anything back, for work that will not be delivered, so that its
    /// buffers are released when the stream ends; all such waits share one timeout.
    fn abandon(&mut self, set: S::Set, submission: Submission) {
        let deadline = *self.drain_deadline.get_or_insert_with(|| Instant::now() + self.timeout);
        let left = deadline.saturating_duration_since(Instant::now());
        if let Err(err) = submission.wait(left) {
            if err.kind() == ErrorKind::Timeout {
                tracing::warn!(
                    "work of a stopped pipeline stream is still running after {} ms; its buffers are \
                     released when it completes",
                    self.timeout.as_millis()
                );
            }
        }
        drop(set);
    }
}

/// Sets of finished streams, kept by the [`Pipeline`](super::Pipeline) for its next stream so
/// that buffers (pinned host memory among them) are not made again for every stream; at most
/// `depth` are kept.
pub(super) struct KeptSets<T> {
    sets: Mutex<Vec<T>>,
    limit: usize,
}

impl<T> KeptSets<T> {
    pub(super) fn new(limit: usize) -> Self {
        Self { sets: Mutex::new(Vec::new()), limit }
    }

    /// Up to `count` kept sets.
    pub(super) fn take(&self, count: usize) -> Vec<T> {
        let mut sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        let keep = sets.len().saturating_sub(count);
        sets.split_off(keep)
    }

    /// Keeps `set` for a later stream, or frees it if enough are kept.
    pub(super) fn put(&self, set: T) {
        let mut sets = self.sets.lock().unwrap_or_else(PoisonError::into_inner);
        if sets.len() < self.limit {
            sets.push(set);
        }
    }
}
