//! Recording: a [`Commands`] list gathers dispatches, copies and barriers for one submission,
//! checking each as it is added, and puts a barrier wherever a command touches a buffer that an
//! earlier command of the same list writes, or writes a buffer that an earlier command reads
//! (without one, a GPU may start the writer while the reader still runs: an H100 did, and the
//! reader saw the later writes). [`Submission`] is its fence: poll it or wait with a timeout.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::device::DynDevice;
use super::validate::{self, Arg};
use super::{Buffer, Program};
use crate::hal::ScalarValue;
use crate::kernel::TexelFormat;
use crate::{Error, ErrorKind, Result};

/// A storage buffer bound to one recorded dispatch.
pub(crate) struct RecordedBuffer {
    pub buffer: Buffer,
    pub slot: usize,
    pub offset: u64,
    pub size: u64,
    pub writes: bool,
    pub texels: Option<TexelFormat>,
}

pub(crate) enum Recorded {
    Dispatch {
        program: Program,
        buffers: Vec<RecordedBuffer>,
        scalars: Vec<(usize, ScalarValue)>,
        groups: [u32; 3],
    },
    Copy {
        src: Buffer,
        src_offset: u64,
        dst: Buffer,
        dst_offset: u64,
        size: u64,
    },
    Barrier,
}

/// Commands recorded for one submission. Nothing reaches the device until
/// [`Runtime::submit`](super::Runtime::submit).
pub struct Commands {
    pub(crate) device: Arc<dyn DynDevice>,
    pub(crate) list: Vec<Recorded>,
    /// Buffers written since the last barrier (by identity).
    written: Vec<usize>,
    /// Buffers read since the last barrier (by identity).
    read: Vec<usize>,
}

fn identity(buffer: &Buffer) -> usize {
    Arc::as_ptr(&buffer.shared) as *const () as usize
}

impl Commands {
    pub(crate) fn new(device: Arc<dyn DynDevice>) -> Self {
        Self { device, list: Vec::new(), written: Vec::new(), read: Vec::new() }
    }

    fn check_owner(&self, buffer: &Buffer) -> Result<()> {
        self.device.check_buffer(buffer)
    }

    /// Orders a command that reads `reads` and writes `writes` after earlier commands that
    /// write what it touches or read what it writes, then notes what it touches.
    fn order<'b>(
        &mut self,
        reads: impl IntoIterator<Item = &'b Buffer>,
        writes: impl IntoIterator<Item = &'b Buffer>,
    ) {
        let reads: Vec<usize> = reads.into_iter().map(identity).collect();
        let writes: Vec<usize> = writes.into_iter().map(identity).collect();
        let after_write = reads.iter().chain(&writes).any(|b| self.written.contains(b));
        let after_read = writes.iter().any(|b| self.read.contains(b));
        if after_write || after_read {
            self.barrier();
        }
        self.read.extend(reads);
        self.written.extend(writes);
    }

    /// Records a dispatch of `groups` workgroups; arguments are checked now.
    pub fn dispatch(&mut self, program: &Program, args: &[Arg<'_>], groups: [u32; 3]) -> Result<&mut Self> {
        self.device.check_program(program)?;
        let spec = program.spec();
        let checked =
            validate::check_dispatch(spec, &program.shared.plan, &self.device.info().limits, args, groups)?;
        for bound in &checked.buffers {
            self.check_owner(bound.buffer)?;
        }
        self.order(
            checked.buffers.iter().filter(|b| !b.writes).map(|b| b.buffer),
            checked.buffers.iter().filter(|b| b.writes).map(|b| b.buffer),
        );
        let buffers: Vec<RecordedBuffer> = checked
            .buffers
            .into_iter()
            .map(|b| RecordedBuffer {
                buffer: b.buffer.clone(),
                slot: b.slot,
                offset: b.offset,
                size: b.size,
                writes: b.writes,
                texels: b.texels,
            })
            .collect();
        self.list.push(Recorded::Dispatch {
            program: program.clone(),
            buffers,
            scalars: checked.scalars,
            groups,
        });
        Ok(self)
    }

    /// Records a copy of `size` bytes between two buffers (or within one, without overlap).
    pub fn copy(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<&mut Self> {
        self.check_owner(src)?;
        self.check_owner(dst)?;
        src.check_range(src_offset, size)?;
        dst.check_range(dst_offset, size)?;
        if size == 0 {
            return Err(Error::new(ErrorKind::InvalidArgument, "a copy of 0 bytes"));
        }
        if identity(src) == identity(dst) && src_offset < dst_offset + size && dst_offset < src_offset + size
        {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "the source and destination ranges of a copy overlap",
            ));
        }
        self.order([src], [dst]);
        self.list.push(Recorded::Copy { src: src.clone(), src_offset, dst: dst.clone(), dst_offset, size });
        Ok(self)
    }

    /// Makes every write recorded so far visible to every command recorded after.
    pub fn barrier(&mut self) -> &mut Self {
        if !matches!(self.list.last(), None | Some(Recorded::Barrier)) {
            self.list.push(Recorded::Barrier);
        }
        self.written.clear();
        self.read.clear();
        self
    }

    /// Dispatches and copies recorded (barriers not counted).
    pub fn len(&self) -> usize {
        self.list.iter().filter(|c| !matches!(c, Recorded::Barrier)).count()
    }

    /// Whether no dispatch or copy is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the submission holds, for messages about it (written out only when one is needed:
    /// this runs on every submission).
    pub(crate) fn contents(&self) -> Contents {
        let mut contents = Contents { kernels: Vec::new(), copies: 0 };
        for command in &self.list {
            match command {
                Recorded::Dispatch { program, .. } => {
                    if !contents.kernels.iter().any(|k| **k == *program.name()) {
                        contents.kernels.push(program.shared.name.clone());
                    }
                }
                Recorded::Copy { .. } => contents.copies += 1,
                Recorded::Barrier => {}
            }
        }
        contents
    }
}

/// The kernels (each name once) and copies of a submission; displays as
/// "kernel `a`, `b` and 2 copies".
pub(crate) struct Contents {
    kernels: Vec<Arc<str>>,
    copies: usize,
}

impl fmt::Display for Contents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, kernel) in self.kernels.iter().enumerate() {
            let lead = if i == 0 { "kernel " } else { ", " };
            write!(f, "{lead}`{kernel}`")?;
        }
        if self.copies > 0 {
            let and = if self.kernels.is_empty() { "" } else { " and " };
            let plural = if self.copies == 1 { "y" } else { "ies" };
            write!(f, "{and}{} cop{plural}", self.copies)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Commands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Commands").field("commands", &self.len()).finish()
    }
}

/// Submitted work: a fence to poll or wait on. Dropping it does not cancel the work; buffers and
/// programs it uses stay alive until it completes.
pub struct Submission {
    pub(crate) device: Arc<dyn DynDevice>,
    pub(crate) fence: u64,
    pub(crate) contents: Contents,
    /// Submitted with [`Runtime::submit_timed`](super::Runtime::submit_timed) on a device that
    /// measures GPU time.
    pub(crate) timed: bool,
    /// The measured GPU time, once taken from the device.
    pub(crate) gpu_time: OnceLock<Option<Duration>>,
}

impl Submission {
    /// The time the GPU spent on this submission's commands, measured by the device (GL:
    /// `GL_TIME_ELAPSED`). `None` until the work completed, and always `None` when it was not
    /// submitted with [`Runtime::submit_timed`](super::Runtime::submit_timed) or the device
    /// cannot measure.
    pub fn gpu_time(&self) -> Option<Duration> {
        if !self.timed {
            return None;
        }
        if let Some(time) = self.gpu_time.get() {
            return *time;
        }
        if !self.is_done() {
            return None;
        }
        *self.gpu_time.get_or_init(|| self.device.take_gpu_time(self.fence))
    }

    /// The fence value: submissions of one device complete in increasing order.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Whether the work has completed (successfully or not); never blocks.
    pub fn is_done(&self) -> bool {
        self.device.completed() >= self.fence
    }

    /// Waits for the work: `Ok` once it completed, its error if it failed, a
    /// [`Timeout`](ErrorKind::Timeout) error once `timeout` passed.
    pub fn wait(&self, timeout: Duration) -> Result<()> {
        if self.device.wait(self.fence, timeout)? {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "the submission of {} did not finish within {} ms",
                    self.contents,
                    timeout.as_millis()
                ),
            ))
        }
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        // A measured time nobody read would otherwise stay with the device.
        if self.timed && self.gpu_time.get().is_none() && self.is_done() {
            let _ = self.device.take_gpu_time(self.fence);
        }
    }
}

impl fmt::Debug for Submission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submission")
            .field("fence", &self.fence)
            .field("contents", &self.contents.to_string())
            .finish()
    }
}
