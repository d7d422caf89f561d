//! Storage ranges read as texels ([`Access::Texels`](crate::Access::Texels)): one buffer texture
//! per texture unit, attached to a dispatch's range with `glTexBufferRange` (GL 4.3, which glow
//! does not wrap) before the dispatch and detached after it, so that a texture never keeps a
//! buffer the runtime has freed alive.

use std::cell::RefCell;
use std::ffi::{c_void, CStr};

use glow::HasContext;

use super::GlError;
use crate::kernel::TexelFormat;

type TexBufferRange = unsafe extern "system" fn(u32, u32, u32, isize, isize);

/// One range to read as texels in one dispatch: (texture unit, buffer, offset, size, format).
pub(crate) type TexelRange = (u32, glow::NativeBuffer, i32, i32, TexelFormat);

/// The buffer textures of one context, one per texture unit used so far.
pub(crate) struct TexelUnits {
    tex_buffer_range: TexBufferRange,
    /// Filled on the GL thread only, as units are first used.
    textures: RefCell<Vec<Option<glow::NativeTexture>>>,
}

/// The GL internal format of `format`.
fn internal_format(format: TexelFormat) -> u32 {
    match format {
        TexelFormat::R32F => glow::R32F,
        TexelFormat::Rgba32F => glow::RGBA32F,
        TexelFormat::R32Ui => glow::R32UI,
        TexelFormat::Rgba32Ui => glow::RGBA32UI,
        TexelFormat::R32I => glow::R32I,
        TexelFormat::Rgba32I => glow::RGBA32I,
    }
}

impl TexelUnits {
    pub fn load(mut get_proc_address: impl FnMut(&CStr) -> *const c_void) -> Result<Self, GlError> {
        let pointer = get_proc_address(c"glTexBufferRange");
        if pointer.is_null() {
            return Err(GlError::NoContext("the driver has no glTexBufferRange".to_owned()));
        }
        // SAFETY: EGL returned this entry point for glTexBufferRange, whose GL 4.3 core signature
        // is the one declared above (GLenum = u32, GLuint = u32, GLintptr/GLsizeiptr = isize).
        let tex_buffer_range = unsafe { std::mem::transmute::<*const c_void, TexBufferRange>(pointer) };
        Ok(Self { tex_buffer_range, textures: RefCell::new(Vec::new()) })
    }

    /// Attaches each range to its unit's buffer texture, after a barrier that makes earlier
    /// shader writes visible to texel fetches; on an error, none stays attached.
    ///
    /// # Safety
    /// The context these entry points came from must be current on this thread, and every
    /// range must lie inside its live buffer, its offset aligned as the device requires.
    pub unsafe fn attach(&self, gl: &glow::Context, ranges: &[TexelRange]) -> Result<(), GlError> {
        if ranges.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller guarantees the context; the ranges were checked against their
        // buffers and the device's alignment when the dispatch was recorded.
        unsafe {
            gl.memory_barrier(glow::TEXTURE_FETCH_BARRIER_BIT);
            for (attached, &(unit, buffer, offset, size, format)) in ranges.iter().enumerate() {
                let texture = match self.texture(gl, unit) {
                    Ok(texture) => texture,
                    Err(err) => {
                        self.detach(gl, &ranges[..attached]);
                        return Err(err);
                    }
                };
                gl.active_texture(glow::TEXTURE0 + unit);
                gl.bind_texture(glow::TEXTURE_BUFFER, Some(texture));
                (self.tex_buffer_range)(
                    glow::TEXTURE_BUFFER,
                    internal_format(format),
                    buffer.0.get(),
                    offset as isize,
                    size as isize,
                );
            }
            gl.active_texture(glow::TEXTURE0);
        }
        Ok(())
    }

    /// Detaches the buffers `attach` attached.
    ///
    /// # Safety
    /// As for [`attach`](Self::attach).
    pub unsafe fn detach(&self, gl: &glow::Context, ranges: &[TexelRange]) {
        if ranges.is_empty() {
            return;
        }
        // SAFETY: the caller guarantees the context; detaching names no buffer.
        unsafe {
            for &(unit, _, _, _, format) in ranges {
                gl.active_texture(glow::TEXTURE0 + unit);
                gl.tex_buffer(glow::TEXTURE_BUFFER, internal_format(format), None);
                gl.bind_texture(glow::TEXTURE_BUFFER, None);
            }
            gl.active_texture(glow::TEXTURE0);
        }
    }

    /// Unit `unit`'s buffer texture, made the first time the unit is used.
    unsafe fn texture(&self, gl: &glow::Context, unit: u32) -> Result<glow::NativeTexture, GlError> {
        let index = unit as usize;
        let mut textures = self.textures.borrow_mut();
        if textures.len() <= index {
            textures.resize(index + 1, None);
        }
        if let Some(texture) = textures[index] {
            return Ok(texture);
        }
        // SAFETY: the caller guarantees the context.
        let texture =
            unsafe { gl.create_texture() }.map_err(|reason| GlError::TextureCreation { unit, reason })?;
        textures[index] = Some(texture);
        Ok(texture)
    }
}
