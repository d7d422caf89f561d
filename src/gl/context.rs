//! Headless EGL contexts: on a display that discovery chose (`discovery.rs`), the newest core
//! OpenGL context from 4.6 down to 4.3, current without a surface, with the entry points glow
//! does not wrap loaded beside it; a second context sharing its objects for another thread; and
//! the context's end. The GL thread's context and a [`PlainContext`](super::PlainContext) are
//! both made by [`on_display`], so the two cannot drift apart.
//!
//! A context is used on the thread that made it: glutin's current context is neither `Send` nor
//! `Sync`.

use std::ffi::CStr;

use glutin::api::egl::config::Config;
use glutin::api::egl::context::{NotCurrentContext, PossiblyCurrentContext};
use glutin::api::egl::display::Display;
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::error::ErrorKind;
use glutin::prelude::*;

use super::GlError;

/// Core profile versions tried, newest first (Mesa refuses 4.6 but takes 4.5; NVIDIA gives exactly
/// what is asked for).
const VERSIONS: [(u8, u8); 4] = [(4, 6), (4, 5), (4, 4), (4, 3)];

/// A live context, current on the thread that made it.
pub(crate) struct EglContext {
    pub gl: glow::Context,
    /// Which EGL device (or the default display) the context came from, for `info`.
    pub source: String,
    /// The EGL device's index in enumeration order; `None` for the default display.
    pub device_index: Option<usize>,
    /// The EGL device the display is on (`None`: the default display), for
    /// [`cuda_device`](Self::cuda_device).
    pub egl_device: Option<glutin::api::egl::device::Device>,
    /// GL 4.3 program introspection, which glow does not wrap usably.
    pub introspection: super::interface::Introspection,
    /// Buffer textures for ranges read as texels (`glTexBufferRange`, which glow does not wrap).
    pub texel_units: super::texels::TexelUnits,
    context: PossiblyCurrentContext,
    display: Display,
    config: Config,
    /// The core profile version the driver gave.
    pub version: (u8, u8),
}

/// A second context in an [`EglContext`]'s share group, not yet current anywhere; it may move
/// to another thread, where [`SharingContext::make_current`] binds it.
pub(crate) struct SharingContext {
    context: NotCurrentContext,
    display: Display,
}

/// A [`SharingContext`] current on the thread that holds it.
pub(crate) struct CurrentSharingContext {
    pub gl: glow::Context,
    _context: PossiblyCurrentContext,
}

impl SharingContext {
    /// Makes the context current on this thread (surfaceless) and loads its GL functions.
    pub fn make_current(self) -> Result<CurrentSharingContext, GlError> {
        let SharingContext { context, display } = self;
        let context = context.make_current_surfaceless().map_err(egl_error)?;
        // SAFETY: the context is current on this thread; EGL returns function pointers valid
        // for it.
        let gl =
            unsafe { glow::Context::from_loader_function_cstr(|name: &CStr| display.get_proc_address(name)) };
        Ok(CurrentSharingContext { gl, _context: context })
    }
}

impl EglContext {
    /// The CUDA device the EGL device says it is (`EGL_NV_device_cuda`), for holding its
    /// clocks (`clock_hold.rs`); `None` where the driver does not say. Asked only when needed:
    /// on NVIDIA the query starts CUDA in the process, about 100 ms on a GPU no process holds.
    pub fn cuda_device(&self) -> Option<i32> {
        self.egl_device.as_ref().and_then(|device| super::discovery::cuda_device_of(&self.display, device))
    }

    /// The device's UUID, where the driver offers `GL_EXT_memory_object`: CUDA reports the same
    /// for the same GPU whatever `CUDA_VISIBLE_DEVICES` hides or renumbers (`clock_hold.rs`).
    /// Called on the thread where the context is current.
    pub fn device_uuid(&self) -> Option<[u8; 16]> {
        if !glow::HasContext::supported_extensions(&self.gl).contains("GL_EXT_memory_object") {
            return None;
        }
        let pointer = self.display.get_proc_address(c"glGetUnsignedBytei_vEXT");
        if pointer.is_null() {
            return None;
        }
        // SAFETY: EGL returned this entry point for glGetUnsignedBytei_vEXT, whose signature in
        // GL_EXT_memory_object is `GetUnsignedBytei` (GLenum, GLuint, GLubyte *).
        let get = unsafe { std::mem::transmute::<*const std::ffi::c_void, GetUnsignedBytei>(pointer) };
        let mut uuid = [0u8; 16];
        // SAFETY: the context is current on this thread; the extension writes GL_UUID_SIZE_EXT
        // (16) bytes for device index 0, which every implementation has.
        unsafe { get(GL_DEVICE_UUID_EXT, 0, uuid.as_mut_ptr()) };
        // A driver refusing the query must not leave its error to the first real call.
        // SAFETY: the context is current on this thread (as for the query above).
        match unsafe { super::error::take_gl_error(&self.gl) } {
            None => Some(uuid),
            Some(_) => None,
        }
    }

    /// A context of the same version sharing this one's objects (sync objects among them),
    /// for another thread.
    pub fn sharing(&self) -> Result<SharingContext, GlError> {
        let (major, minor) = self.version;
        let attributes = ContextAttributesBuilder::new()
            .with_profile(GlProfile::Core)
            .with_context_api(ContextApi::OpenGl(Some(Version::new(major, minor))))
            .with_sharing(&self.context)
            .build(None);
        // SAFETY: no raw window handle is passed; config and display belong together and the
        // shared context was made on them.
        let context = unsafe { self.display.create_context(&self.config, &attributes) }.map_err(egl_error)?;
        Ok(SharingContext { context, display: self.display.clone() })
    }

    /// Ends a context that will not be used (its device failed the probe) on the thread that
    /// made it: not current any more (EGL destroys only contexts no thread has current),
    /// destroyed, and the thread's EGL state released.
    pub fn close(self) {
        let EglContext { gl, context, display, .. } = self;
        drop(gl);
        match context.make_not_current() {
            Ok(not_current) => drop(not_current),
            Err(err) => tracing::warn!(error = %err, "could not release the GL context"),
        }
        // SAFETY: called on the thread that used the context, after it stopped being current;
        // eglReleaseThread only resets this thread's EGL state.
        unsafe { display.egl().ReleaseThread() };
    }
}

/// `GL_DEVICE_UUID_EXT` of `GL_EXT_memory_object`.
const GL_DEVICE_UUID_EXT: u32 = 0x9597;

/// `glGetUnsignedBytei_vEXT(target, index, data)`, which glow does not wrap.
type GetUnsignedBytei = unsafe extern "system" fn(u32, u32, *mut u8);

/// The newest core context (4.6 down to 4.3) on `display`, current on this thread without a
/// surface; `source` and `device_index` say where the display came from.
pub(super) fn on_display(
    display: Display,
    source: String,
    device_index: Option<usize>,
) -> Result<EglContext, GlError> {
    let template = ConfigTemplateBuilder::new()
        .with_surface_type(ConfigSurfaceTypes::empty())
        .with_api(Api::OPENGL)
        .build();
    let choosing = crate::trace::phase("gl", "choose an EGL config");
    // SAFETY: the template holds no native window; the display is initialized.
    let config = unsafe { display.find_configs(template) }
        .map_err(egl_error)?
        .next()
        .ok_or_else(|| GlError::NoContext("no surfaceless OpenGL config".into()))?;
    drop(choosing);

    let mut refusals = Vec::new();
    for (major, minor) in VERSIONS {
        let attributes = ContextAttributesBuilder::new()
            .with_profile(GlProfile::Core)
            .with_context_api(ContextApi::OpenGl(Some(Version::new(major, minor))))
            .build(None);
        let mut creating = crate::trace::phase("gl", "create the GL context");
        creating.detail("version", format!("{major}.{minor}"));
        // SAFETY: no raw window handle is passed; config and display belong together.
        let created = unsafe { display.create_context(&config, &attributes) };
        drop(creating);
        match created {
            Ok(context) => {
                let current = crate::trace::phase("gl", "make the context current");
                let context = context.make_current_surfaceless().map_err(egl_error)?;
                drop(current);
                let _loading = crate::trace::phase("gl", "load the GL functions");
                // SAFETY: the context is current on this thread; EGL returns function pointers
                // valid for it.
                let gl = unsafe {
                    glow::Context::from_loader_function_cstr(|name: &CStr| display.get_proc_address(name))
                };
                let introspection =
                    super::interface::Introspection::load(|name| display.get_proc_address(name))?;
                let texel_units = super::texels::TexelUnits::load(|name| display.get_proc_address(name))?;
                tracing::debug!("OpenGL {major}.{minor} core context on {source}");
                return Ok(EglContext {
                    gl,
                    source,
                    device_index,
                    egl_device: None,
                    introspection,
                    texel_units,
                    context,
                    display,
                    config,
                    version: (major, minor),
                });
            }
            Err(err) => refusals.push(format!("{major}.{minor}: {err}")),
        }
    }
    Err(GlError::NoContext(format!("no core context 4.3 or newer ({})", refusals.join(", "))))
}

pub(super) fn egl_error(err: glutin::error::Error) -> GlError {
    if err.error_kind() == ErrorKind::NotFound {
        GlError::EglMissing
    } else {
        GlError::NoContext(err.to_string())
    }
}
