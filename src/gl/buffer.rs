//! Shader storage buffers: creation with a usage hint, uploads and downloads, and deletion from
//! any thread when the last handle drops (GL defers it while queued work still uses the buffer).

use glow::HasContext;

use super::thread::{GlState, GlThread, LiveGuard};
use super::GlError;
use crate::hal::BufferUsage;

/// A GL buffer object.
pub struct GlBuffer {
    pub(crate) id: glow::NativeBuffer,
    live: LiveGuard,
}

impl Drop for GlBuffer {
    fn drop(&mut self) {
        let id = self.id;
        self.live.thread().post(move |state| {
            // SAFETY: the context is current on the GL thread and `id` was created by it.
            unsafe { state.gl().delete_buffer(id) };
            super::live::buffer_deleted();
        });
    }
}

impl GlBuffer {
    /// A buffer of `size` bytes; the runtime checked `size` against the device limit, which
    /// the gl backend caps at `i32::MAX`.
    pub(crate) fn create(thread: &GlThread, size: u64, usage: BufferUsage) -> Result<Self, GlError> {
        let hint = match usage {
            BufferUsage::Input => glow::STATIC_DRAW,
            BufferUsage::Output => glow::STATIC_READ,
            BufferUsage::InOut => glow::DYNAMIC_COPY,
        };
        let size = i32::try_from(size).map_err(|_| GlError::BufferCreation {
            size,
            reason: "larger than the gl backend's 2 GiB limit".into(),
        })?;
        let id = thread.call(move |state| create(state, size, hint))??;
        super::live::buffer_made();
        Ok(Self { id, live: thread.acquire() })
    }

    /// Writes `data` at `offset` (checked by the runtime).
    pub(crate) fn write(&self, offset: u64, data: Vec<u8>) -> Result<(), GlError> {
        let id = self.id;
        self.live.thread().call(move |state| {
            // SAFETY: the context is current on the GL thread; the runtime checked the range
            // against the buffer's size, which fits in i32.
            unsafe {
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
                state.gl().buffer_sub_data_u8_slice(glow::COPY_WRITE_BUFFER, offset as i32, &data);
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, None);
            }
            state.check("buffer upload")
        })?
    }

    /// Reads `len` bytes at `offset` (checked by the runtime).
    pub(crate) fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, GlError> {
        let id = self.id;
        self.live.thread().call(move |state| {
            let mut out = vec![0u8; len];
            // SAFETY: the context is current on the GL thread; the range was checked. Shader
            // writes are made visible by the barrier that ends every submission.
            unsafe {
                state.gl().bind_buffer(glow::COPY_READ_BUFFER, Some(id));
                state.gl().get_buffer_sub_data(glow::COPY_READ_BUFFER, offset as i32, &mut out);
                state.gl().bind_buffer(glow::COPY_READ_BUFFER, None);
            }
            state.check("buffer download").map(|()| out)
        })?
    }
}

fn create(state: &mut GlState, size: i32, hint: u32) -> Result<glow::NativeBuffer, GlError> {
    state.take_error();
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; size is positive and fits in i32.
    let id = unsafe {
        let id = gl.create_buffer().map_err(|reason| GlError::BufferCreation {
            size: size as u64,
            reason: format!("glGenBuffers failed: {reason}"),
        })?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_data_size(glow::COPY_WRITE_BUFFER, size, hint);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        id
    };
    if let Some(code) = state.take_error() {
        // SAFETY: as above; `id` was just created.
        unsafe { state.gl().delete_buffer(id) };
        return Err(GlError::BufferCreation {
            size: size as u64,
            reason: super::error::error_name(code).to_owned(),
        });
    }
    Ok(id)
}
