//! Headless EGL: picks an EGL device (hardware before Mesa's software rasterizer, or the one
//! `SPARKLE_EGL_DEVICE` names), falls back to the default display, and creates the newest core
//! OpenGL context from 4.6 down to 4.3, current without a surface.
//!
//! Everything here runs on the GL thread: glutin's current context is neither `Send` nor `Sync`.

use std::ffi::CStr;

use glutin::api::egl::config::Config;
use glutin::api::egl::context::{NotCurrentContext, PossiblyCurrentContext};
use glutin::api::egl::{device::Device, display::Display};
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::error::ErrorKind;
use glutin::prelude::*;

use super::GlError;

/// The environment variable that pins an EGL device by its index in enumeration order.
pub const DEVICE_ENV: &str = "SPARKLE_EGL_DEVICE";

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
    /// The CUDA device the EGL device says it is (`EGL_NV_device_cuda`), for holding its
    /// clocks (`clock_hold.rs`); `None` where the driver does not say.
    pub cuda_device: Option<i32>,
    /// GL 4.3 program introspection, which glow does not wrap usably.
    pub introspection: super::interface::Introspection,
    /// Buffer textures for ranges read as texels (`glTexBufferRange`, which glow does not wrap).
    pub texel_units: super::texels::TexelUnits,
    context: PossiblyCurrentContext,
    display: Display,
    config: Config,
    version: (u8, u8),
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
        match super::error::take_error(&self.gl) {
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

/// One EGL device seen during enumeration.
struct Candidate {
    index: usize,
    device: Device,
    software: bool,
}

impl Candidate {
    fn describe(&self) -> String {
        let kind = if self.software { "software" } else { "hardware" };
        let node = self
            .device
            .drm_render_device_node_path()
            .map(|p| format!(", {}", p.display()))
            .unwrap_or_default();
        let name = self.device.name().or(self.device.vendor()).unwrap_or("unnamed");
        format!("EGL device {} ({name}, {kind}{node})", self.index)
    }
}

/// Creates a context on device `pinned`, or on the first device that gives one.
pub(crate) fn create(pinned: Option<usize>) -> Result<EglContext, GlError> {
    let mut candidates = match Device::query_devices() {
        Ok(devices) => devices
            .enumerate()
            .map(|(index, device)| {
                let software = device.extensions().contains("EGL_MESA_device_software");
                Candidate { index, device, software }
            })
            .collect::<Vec<_>>(),
        Err(err) if err.error_kind() == ErrorKind::NotFound => return Err(GlError::EglMissing),
        Err(err) => {
            tracing::info!(error = %err, "EGL device enumeration unavailable");
            Vec::new()
        }
    };
    for candidate in &candidates {
        tracing::debug!("found {}", candidate.describe());
    }

    if let Some(index) = pinned {
        let Some(position) = candidates.iter().position(|c| c.index == index) else {
            return Err(GlError::BadDevice {
                value: index.to_string(),
                available: list_candidates(&candidates),
            });
        };
        let candidate = candidates.swap_remove(position);
        return context_on_device(&candidate);
    }

    // Hardware devices first; enumeration order otherwise.
    candidates.sort_by_key(|c| (c.software, c.index));
    let mut failures = Vec::new();
    for candidate in &candidates {
        match context_on_device(candidate) {
            Ok(context) => return Ok(context),
            Err(err) => {
                tracing::info!("{} gave no context: {err}", candidate.describe());
                failures.push(format!("{}: {err}", candidate.describe()));
            }
        }
    }
    match context_on_default_display() {
        Ok(context) => Ok(context),
        Err(err) => {
            failures.push(format!("default EGL display: {err}"));
            Err(GlError::NoContext(failures.join("; ")))
        }
    }
}

/// The device index `SPARKLE_EGL_DEVICE` names, if it is set.
pub(crate) fn pinned_device_index() -> Result<Option<usize>, GlError> {
    match std::env::var(DEVICE_ENV) {
        Ok(value) if !value.trim().is_empty() => {
            value.trim().parse().map(Some).map_err(|_| GlError::BadDevice {
                value,
                available: "set it to a device index such as 0 (`sparkle info` lists them)".into(),
            })
        }
        _ => Ok(None),
    }
}

fn list_candidates(candidates: &[Candidate]) -> String {
    if candidates.is_empty() {
        return "EGL lists no devices on this machine".into();
    }
    let names: Vec<String> = candidates.iter().map(Candidate::describe).collect();
    format!("the devices are: {}", names.join(", "))
}

fn context_on_device(candidate: &Candidate) -> Result<EglContext, GlError> {
    // SAFETY: `None` is allowed (no DRM master fd); the device comes from this EGL's enumeration.
    let display = unsafe { Display::with_device(&candidate.device, None) }.map_err(egl_error)?;
    let cuda_device = cuda_device_of(&display, &candidate.device);
    let mut context = finish(display, candidate.describe(), Some(candidate.index))?;
    context.cuda_device = cuda_device;
    Ok(context)
}

/// `EGL_CUDA_DEVICE_NV` of `EGL_NV_device_cuda`: the CUDA device ordinal of an EGL device.
const EGL_CUDA_DEVICE_NV: i32 = 0x323A;

/// The CUDA device ordinal `device` says it is, where its driver offers `EGL_NV_device_cuda`.
fn cuda_device_of(display: &Display, device: &Device) -> Option<i32> {
    if !device.extensions().contains("EGL_NV_device_cuda") {
        return None;
    }
    let mut ordinal: isize = 0;
    // SAFETY: the device comes from this EGL's enumeration and has the extension that defines
    // the attribute; the value is written to a live local.
    let found =
        unsafe { display.egl().QueryDeviceAttribEXT(device.raw_device(), EGL_CUDA_DEVICE_NV, &mut ordinal) };
    if found == 0 {
        tracing::debug!("EGL_NV_device_cuda offered but the CUDA device query failed");
        return None;
    }
    i32::try_from(ordinal).ok()
}

/// `GL_DEVICE_UUID_EXT` of `GL_EXT_memory_object`.
const GL_DEVICE_UUID_EXT: u32 = 0x9597;

/// `glGetUnsignedBytei_vEXT(target, index, data)`, which glow does not wrap.
type GetUnsignedBytei = unsafe extern "system" fn(u32, u32, *mut u8);

/// The device [`create`] would try first without a pinned index: the first hardware device in
/// enumeration order, else the first software one; `None` if EGL lists none.
pub(crate) fn preferred_device_index() -> Option<usize> {
    let devices = Device::query_devices().ok()?;
    devices
        .enumerate()
        .map(|(index, device)| (device.extensions().contains("EGL_MESA_device_software"), index))
        .min()
        .map(|(_, index)| index)
}

/// The default display. Mesa picks its platform from `EGL_PLATFORM` here, so
/// `EGL_PLATFORM=surfaceless` selects its surfaceless platform on a headless machine.
fn context_on_default_display() -> Result<EglContext, GlError> {
    let handle = raw_window_handle::RawDisplayHandle::Android(raw_window_handle::AndroidDisplayHandle::new());
    // SAFETY: an Android handle carries no pointer; on this platform glutin ends in
    // eglGetDisplay(EGL_DEFAULT_DISPLAY), which takes no native object.
    let display = unsafe { Display::new(handle) }.map_err(egl_error)?;
    finish(display, "default EGL display".into(), None)
}

fn finish(display: Display, source: String, device_index: Option<usize>) -> Result<EglContext, GlError> {
    let template = ConfigTemplateBuilder::new()
        .with_surface_type(ConfigSurfaceTypes::empty())
        .with_api(Api::OPENGL)
        .build();
    // SAFETY: the template holds no native window; the display is initialized.
    let config = unsafe { display.find_configs(template) }
        .map_err(egl_error)?
        .next()
        .ok_or_else(|| GlError::NoContext("no surfaceless OpenGL config".into()))?;

    let mut refusals = Vec::new();
    for (major, minor) in VERSIONS {
        let attributes = ContextAttributesBuilder::new()
            .with_profile(GlProfile::Core)
            .with_context_api(ContextApi::OpenGl(Some(Version::new(major, minor))))
            .build(None);
        // SAFETY: no raw window handle is passed; config and display belong together.
        match unsafe { display.create_context(&config, &attributes) } {
            Ok(context) => {
                let context = context.make_current_surfaceless().map_err(egl_error)?;
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
                    cuda_device: None,
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

fn egl_error(err: glutin::error::Error) -> GlError {
    if err.error_kind() == ErrorKind::NotFound {
        GlError::EglMissing
    } else {
        GlError::NoContext(err.to_string())
    }
}
