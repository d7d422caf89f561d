//! A plain GL context for code that makes its own GL calls and must run them where the gl backend
//! would: the benchmark lab's plain-GL loops and driver studies, which compare the backend with
//! the same calls made directly with glow.
//!
//! [`PlainContext::open`] goes through the backend's own discovery and context creation
//! (`discovery.rs`, `context.rs`: the device `SPARKLE_EGL_DEVICE` names, else hardware before
//! Mesa's software rasterizer, else the default display; the newest core context from 4.6 down
//! to 4.3, current without a surface), so the two sides never disagree about which device or
//! which context version they measure. It reads a program's storage bindings with the
//! introspection the backend reads program interfaces with (`interface.rs`). Everything else —
//! the GL thread, the program cache, validation — is left out: what runs on this context is the
//! caller's business, with [`driver_glsl`](super::driver_glsl) for the exact text the backend
//! compiles and [`check_gl_error`](super::check_gl_error) for its errors.

use super::context::EglContext;
use super::{discovery, interface, GlError};

/// A headless core OpenGL 4.3+ context, current on the thread that opened it, for code that
/// calls GL itself through [`gl`](Self::gl).
///
/// It is neither `Send` nor `Sync`: it stays on the thread that made it current. Opening a
/// second context on that thread makes the second one current there instead.
pub struct PlainContext {
    context: EglContext,
}

impl PlainContext {
    /// Opens a context on the EGL device with index `pinned` (in EGL's enumeration order), or,
    /// with `None`, on the device the gl backend would pick without `SPARKLE_EGL_DEVICE`: the
    /// first hardware device that gives a context, else a software one, else the default
    /// display. The context is current on the calling thread.
    ///
    /// # Errors
    /// [`GlError::EglMissing`] without an EGL loader, [`GlError::BadDevice`] when `pinned` is no
    /// listed device, [`GlError::NoContext`] when no device gives a 4.3+ core context (with
    /// what each one said).
    pub fn open(pinned: Option<usize>) -> Result<Self, GlError> {
        discovery::open(pinned).map(|context| PlainContext { context })
    }

    /// [`open`](Self::open) on the device `SPARKLE_EGL_DEVICE` names ([`pinned_device_index`]),
    /// as the gl backend opens its own.
    ///
    /// # Errors
    /// As for [`open`](Self::open), and [`GlError::BadDevice`] when the variable is not an index.
    pub fn open_from_env() -> Result<Self, GlError> {
        Self::open(pinned_device_index()?)
    }

    /// The context's GL functions. Every call is `unsafe` in glow: make them on the thread that
    /// opened this context.
    pub fn gl(&self) -> &glow::Context {
        &self.context.gl
    }

    /// Which EGL device (index, name, hardware or software, render node) or the default display
    /// the context is on, for reports.
    pub fn source(&self) -> &str {
        &self.context.source
    }

    /// The EGL device's index in enumeration order; `None` for the default display.
    pub fn device_index(&self) -> Option<usize> {
        self.context.device_index
    }

    /// The core profile version the driver gave, as (major, minor).
    pub fn version(&self) -> (u8, u8) {
        self.context.version
    }

    /// The binding point of the storage block that `name` names — the block's name or one of
    /// its top-level members (`x` of `buffer X { float x[]; }`), as a kernel spec names its
    /// buffers — read from the linked program with the backend's introspection; `None` if no
    /// storage block of `program` answers to `name`.
    ///
    /// # Safety
    /// `program` must be a program linked on this context, and the call made on the thread that
    /// opened it.
    pub unsafe fn storage_binding(&self, program: glow::NativeProgram, name: &str) -> Option<u32> {
        // Source declarations only add instance names and `readonly`; the binding is GL's.
        let (interface, _) = interface::read(&self.context.gl, &self.context.introspection, program, &[]);
        interface
            .storage
            .into_iter()
            .find(|slot| slot.texels.is_none() && slot.names.iter().any(|n| n == name))
            .map(|slot| slot.binding)
    }

    /// Ends the context on the thread that opened it: no longer current, destroyed, and the
    /// thread's EGL state released, as the gl backend ends a context it will not use. Dropping
    /// a `PlainContext` instead leaves the destruction to EGL once no thread has it current.
    pub fn close(self) {
        self.context.close();
    }

    /// Drains `glGetError` on this context and fails naming `operation` with the first error
    /// seen ([`check_gl_error`](super::check_gl_error)).
    ///
    /// # Errors
    /// [`GlError::Driver`] when GL reported an error since the last drain.
    pub fn check(&self, operation: &str) -> Result<(), GlError> {
        // SAFETY: a `PlainContext` is neither `Send` nor `Sync`, so this runs on the thread that
        // opened it, where it was made current.
        unsafe { super::check_gl_error(&self.context.gl, operation) }
    }
}

/// The EGL device index `SPARKLE_EGL_DEVICE` names; `None` when it is unset or empty.
///
/// # Errors
/// [`GlError::BadDevice`] when it is set to something other than a number.
pub fn pinned_device_index() -> Result<Option<usize>, GlError> {
    discovery::pinned_device_index()
}

#[cfg(test)]
mod tests {
    use glow::HasContext;

    use super::*;

    /// A plain context comes from the backend's own discovery, and reads a program's storage
    /// bindings by block and member name as a spec names them.
    #[test]
    fn a_plain_context_finds_storage_bindings_by_block_and_member_name() {
        let context = PlainContext::open(None).expect("a GL context (Mesa's llvmpipe is enough)");
        assert!(context.version() >= (4, 3));
        assert!(!context.source().is_empty());
        let gl = context.gl();
        let glsl = "#version 430 core\nlayout(local_size_x = 1) in;\n\
                    layout(std430, binding = 3) buffer X { float x[]; };\n\
                    layout(std430, binding = 5) buffer Y { float y[]; };\n\
                    void main() { y[0] = x[0]; }\n";
        // SAFETY: the context was made current on this thread by `open`; the shader and program
        // are made, used and deleted here.
        unsafe {
            let shader = gl.create_shader(glow::COMPUTE_SHADER).unwrap();
            gl.shader_source(shader, glsl);
            gl.compile_shader(shader);
            assert!(gl.get_shader_compile_status(shader), "{}", gl.get_shader_info_log(shader));
            let program = gl.create_program().unwrap();
            gl.attach_shader(program, shader);
            gl.link_program(program);
            assert!(gl.get_program_link_status(program), "{}", gl.get_program_info_log(program));
            assert_eq!(context.storage_binding(program, "x"), Some(3));
            assert_eq!(context.storage_binding(program, "Y"), Some(5));
            assert_eq!(context.storage_binding(program, "z"), None);
            context.check("reading storage bindings").unwrap();
            gl.bind_buffer(0x1234, None);
            let err = context.check("binding to a target GL does not know").unwrap_err();
            assert!(matches!(err, GlError::Driver { code: glow::INVALID_ENUM, .. }), "{err}");
            assert!(context.check("after the drain").is_ok(), "the error was drained");
            gl.delete_shader(shader);
            gl.delete_program(program);
        }
        context.close();
    }

    #[test]
    fn gl_error_codes_have_their_names() {
        assert_eq!(super::super::gl_error_name(glow::OUT_OF_MEMORY), "GL_OUT_OF_MEMORY");
        assert_eq!(super::super::gl_error_name(0x1234), "unknown GL error");
    }
}
