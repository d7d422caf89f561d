//! Dispatch: binds a program's storage buffers and scalars, launches the workgroups, orders the
//! writes for later dispatches and reads, and fences the work so it can be waited on with a
//! timeout.

use std::time::{Duration, Instant};

use glow::HasContext;

use super::program::GlProgram;
use super::thread::{GlState, GlThread};
use super::GlError;
use crate::backend::PendingWork;

/// One argument, owned so it can travel to the GL thread.
pub(crate) enum BoundArg {
    Buffer(glow::NativeBuffer),
    U32(u32),
    I32(i32),
    F32(f32),
}

/// Records the dispatch on the GL thread and returns its fence's id.
pub(crate) fn record(
    state: &mut GlState,
    program: &GlProgram,
    args: &[BoundArg],
    groups: [u32; 3],
) -> Result<u64, GlError> {
    state.take_error();
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; the program and buffers are live GL names
    // (their handles are held by the caller for the duration of this call), and argument kinds
    // and workgroup counts were validated against the spec and the device limits.
    let fence = unsafe {
        gl.use_program(Some(program.id));
        let mut storage_slot = 0;
        for (arg, location) in args.iter().zip(&program.uniforms) {
            match arg {
                BoundArg::Buffer(id) => {
                    gl.bind_buffer_base(glow::SHADER_STORAGE_BUFFER, storage_slot, Some(*id));
                    storage_slot += 1;
                }
                BoundArg::U32(v) => gl.uniform_1_u32(location.as_ref(), *v),
                BoundArg::I32(v) => gl.uniform_1_i32(location.as_ref(), *v),
                BoundArg::F32(v) => gl.uniform_1_f32(location.as_ref(), *v),
            }
        }
        gl.dispatch_compute(groups[0], groups[1], groups[2]);
        // Storage writes must be visible to the next dispatch and to glGetBufferSubData.
        gl.memory_barrier(glow::SHADER_STORAGE_BARRIER_BIT | glow::BUFFER_UPDATE_BARRIER_BIT);
        let fence = gl.fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0);
        gl.flush();
        fence
    };
    state.check("glDispatchCompute")?;
    let fence = fence.map_err(|reason| GlError::Driver {
        operation: format!("glFenceSync ({reason})"),
        code: 0,
        name: "no fence",
    })?;
    Ok(state.adopt_fence(fence))
}

/// A dispatch in flight.
pub(crate) struct GlSubmission {
    pub thread: GlThread,
    pub fence: u64,
    pub kernel: String,
    pub done: bool,
    /// Holds the program (and with it its cache entry) until the work is done.
    pub _program: crate::Program,
    pub _buffers: Vec<crate::Buffer>,
}

/// Each wait occupies the GL thread for at most this long, so that other threads' GL work is
/// not held up behind a long kernel.
const WAIT_SLICE: Duration = Duration::from_millis(2);

impl PendingWork for GlSubmission {
    fn wait(&mut self, timeout: Duration) -> crate::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut flags = glow::SYNC_FLUSH_COMMANDS_BIT;
        while !self.done {
            let slice = deadline.saturating_duration_since(Instant::now()).min(WAIT_SLICE);
            let fence = self.fence;
            let status = self.thread.call(move |state| {
                state.fence(fence).map(|fence| {
                    // SAFETY: the context is current on the GL thread; the fence lives in its table.
                    unsafe { state.gl().client_wait_sync(fence, flags, slice.as_nanos() as i32) }
                })
            })?;
            flags = 0;
            match status {
                Some(glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED) | None => self.done = true,
                Some(glow::TIMEOUT_EXPIRED) if Instant::now() < deadline => {}
                Some(glow::TIMEOUT_EXPIRED) => {
                    return Err(GlError::Timeout {
                        kernel: self.kernel.clone(),
                        timeout_ms: timeout.as_millis(),
                    }
                    .into())
                }
                Some(code) => {
                    return Err(GlError::Driver {
                        operation: "glClientWaitSync".into(),
                        code,
                        name: super::error::error_name(code),
                    }
                    .into())
                }
            }
        }
        Ok(())
    }
}

impl Drop for GlSubmission {
    fn drop(&mut self) {
        let fence = self.fence;
        self.thread.post(move |state| state.delete_fence(fence));
    }
}
