//! Shader storage buffers: creation with a usage hint, uploads and downloads, and deletion from
//! any thread when the last handle drops.

use glow::HasContext;

use super::thread::{GlState, GlThread};
use super::GlError;
use crate::backend::BufferUsage;

/// A GL buffer object; lives inside a [`crate::Buffer`].
pub(crate) struct GlBuffer {
    pub id: glow::NativeBuffer,
    pub size: u64,
    thread: GlThread,
}

impl Drop for GlBuffer {
    fn drop(&mut self) {
        let id = self.id;
        self.thread.post(move |state| {
            // SAFETY: the context is current on the GL thread and `id` was created by it. GL
            // defers the deletion while a queued dispatch still uses the buffer.
            unsafe { state.gl().delete_buffer(id) }
        });
    }
}

/// glow takes sizes and offsets as `i32`.
const MAX_BYTES: u64 = i32::MAX as u64;

impl GlBuffer {
    pub fn create(thread: &GlThread, size: u64, usage: BufferUsage, max_bytes: u64) -> Result<Self, GlError> {
        let limit = max_bytes.min(MAX_BYTES);
        if size == 0 || size > limit {
            return Err(GlError::BufferCreation {
                size,
                reason: format!("the size must be between 1 and {limit} bytes on this device"),
            });
        }
        let hint = match usage {
            BufferUsage::Input => glow::STATIC_DRAW,
            BufferUsage::Output => glow::STATIC_READ,
            BufferUsage::InOut => glow::DYNAMIC_COPY,
        };
        let id = thread.call(move |state| create(state, size, hint))??;
        Ok(Self { id, size, thread: thread.clone() })
    }

    pub fn write(&self, offset: u64, data: Vec<u8>) -> Result<(), GlError> {
        self.check_range(offset, data.len())?;
        let id = self.id;
        self.thread.call(move |state| {
            // SAFETY: the context is current on the GL thread; the range was checked against the
            // buffer's size, which fits in i32.
            unsafe {
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
                state.gl().buffer_sub_data_u8_slice(glow::COPY_WRITE_BUFFER, offset as i32, &data);
                state.gl().bind_buffer(glow::COPY_WRITE_BUFFER, None);
            }
            state.check("buffer upload")
        })?
    }

    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, GlError> {
        self.check_range(offset, len)?;
        let id = self.id;
        self.thread.call(move |state| {
            let mut out = vec![0u8; len];
            // SAFETY: the context is current on the GL thread; the range was checked. Shader
            // writes are made visible by the barrier every dispatch issues.
            unsafe {
                state.gl().bind_buffer(glow::COPY_READ_BUFFER, Some(id));
                state.gl().get_buffer_sub_data(glow::COPY_READ_BUFFER, offset as i32, &mut out);
                state.gl().bind_buffer(glow::COPY_READ_BUFFER, None);
            }
            state.check("buffer download").map(|()| out)
        })?
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<(), GlError> {
        let end = offset.saturating_add(len as u64);
        if end > self.size {
            return Err(GlError::OutOfBounds { offset, end, size: self.size });
        }
        Ok(())
    }
}

fn create(state: &mut GlState, size: u64, hint: u32) -> Result<glow::NativeBuffer, GlError> {
    state.take_error();
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread; size ≤ i32::MAX was checked.
    let id = unsafe {
        let id = gl.create_buffer().map_err(|reason| GlError::BufferCreation {
            size,
            reason: format!("glGenBuffers failed: {reason}"),
        })?;
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(id));
        gl.buffer_data_size(glow::COPY_WRITE_BUFFER, size as i32, hint);
        gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
        id
    };
    if let Some(code) = state.take_error() {
        // SAFETY: as above; `id` was just created.
        unsafe { state.gl().delete_buffer(id) };
        return Err(GlError::BufferCreation { size, reason: super::error::error_name(code).to_owned() });
    }
    Ok(id)
}
