//! The plain-GL side's own headless context, made with glutin and glow directly: on the EGL
//! device the gl backend would pick (`SPARKLE_EGL_DEVICE`, else hardware devices before Mesa's
//! software rasterizer, else the default display), the newest core context from 4.6 down to
//! 4.3, current without a surface on the thread that made it.

use std::ffi::{c_char, c_void, CStr, CString};

use glow::HasContext;
use glutin::api::egl::context::PossiblyCurrentContext;
use glutin::api::egl::{device::Device, display::Display};
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::error::ErrorKind;
use glutin::prelude::*;

use super::PlainGlError;

/// Core profile versions tried, newest first, as the gl backend tries them.
const VERSIONS: [(u8, u8); 4] = [(4, 6), (4, 5), (4, 4), (4, 3)];

/// `glGetProgramResourceIndex`, which glow does not wrap.
type GetProgramResourceIndex = unsafe extern "system" fn(u32, u32, *const c_char) -> u32;
/// `glGetProgramResourceiv`, which glow wraps in a way that returns nothing (it asks for the
/// count with a zero-sized buffer, and GL writes no count then).
type GetProgramResourceiv =
    unsafe extern "system" fn(u32, u32, u32, i32, *const u32, i32, *mut i32, *mut i32);

/// A context current on the thread that made it.
pub struct PlainContext {
    pub gl: glow::Context,
    /// Which EGL device (or the default display) the context came from.
    pub source: String,
    resource_index: GetProgramResourceIndex,
    resource_iv: GetProgramResourceiv,
    // Kept alive with the functions loaded from them.
    _context: PossiblyCurrentContext,
    _display: Display,
}

impl PlainContext {
    /// The binding of the storage block that `name` names: a member of the block (`x` of
    /// `buffer X { float x[]; }`) or the block itself.
    ///
    /// # Safety
    /// The context must be current on this thread and `program` linked in it.
    pub unsafe fn storage_binding(&self, program: glow::NativeProgram, name: &str) -> Option<u32> {
        let id = program.0.get();
        for variable in [format!("{name}[0]"), name.to_owned()] {
            let Ok(variable) = CString::new(variable) else { return None };
            // SAFETY: per this function's contract; the name is NUL-terminated.
            let index = unsafe { (self.resource_index)(id, glow::BUFFER_VARIABLE, variable.as_ptr()) };
            if index == glow::INVALID_INDEX {
                continue;
            }
            // SAFETY: per this function's contract; `index` is a buffer variable of `program`.
            let block = unsafe { self.property(id, glow::BUFFER_VARIABLE, index, glow::BLOCK_INDEX) }?;
            // SAFETY: as above; `block` is a storage block of `program`.
            return unsafe { self.property(id, glow::SHADER_STORAGE_BLOCK, block, glow::BUFFER_BINDING) };
        }
        // SAFETY: per this function's contract.
        let block = unsafe { self.gl.get_shader_storage_block_index(program, name) }?;
        // SAFETY: as above; `block` is a storage block of `program`.
        unsafe { self.property(id, glow::SHADER_STORAGE_BLOCK, block, glow::BUFFER_BINDING) }
    }

    /// One property of a program resource, if the driver gives a non-negative value.
    ///
    /// # Safety
    /// As for [`storage_binding`](Self::storage_binding); `index` a resource of `interface`.
    unsafe fn property(&self, program: u32, interface: u32, index: u32, property: u32) -> Option<u32> {
        let (mut value, mut written) = (-1i32, 0i32);
        // SAFETY: one property is asked for and one GLint of room given; the caller guarantees
        // context, program and index.
        unsafe { (self.resource_iv)(program, interface, index, 1, &property, 1, &mut written, &mut value) };
        if written == 1 {
            u32::try_from(value).ok()
        } else {
            None
        }
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

/// The device index `SPARKLE_EGL_DEVICE` names, if it is set.
pub fn pinned_device_index() -> Result<Option<usize>, PlainGlError> {
    match std::env::var(sparkle::gl::DEVICE_ENV) {
        Ok(value) if !value.trim().is_empty() => value.trim().parse().map(Some).map_err(|_| {
            PlainGlError::NoContext(format!(
                "{}={value:?} names no EGL device; set it to a device index such as 0 \
                 (`sparkle info` lists them)",
                sparkle::gl::DEVICE_ENV
            ))
        }),
        _ => Ok(None),
    }
}

/// A context on device `pinned`, or on the first device that gives one (hardware first).
pub fn create(pinned: Option<usize>) -> Result<PlainContext, PlainGlError> {
    let mut candidates = match Device::query_devices() {
        Ok(devices) => devices
            .enumerate()
            .map(|(index, device)| {
                let software = device.extensions().contains("EGL_MESA_device_software");
                Candidate { index, device, software }
            })
            .collect::<Vec<_>>(),
        Err(err) if err.error_kind() == ErrorKind::NotFound => return Err(PlainGlError::EglMissing),
        Err(err) => {
            tracing::info!(error = %err, "EGL device enumeration unavailable");
            Vec::new()
        }
    };
    if let Some(index) = pinned {
        let Some(position) = candidates.iter().position(|c| c.index == index) else {
            return Err(PlainGlError::NoContext(format!(
                "{}={index} names no EGL device",
                sparkle::gl::DEVICE_ENV
            )));
        };
        let candidate = candidates.swap_remove(position);
        return on_device(&candidate);
    }
    candidates.sort_by_key(|c| (c.software, c.index));
    let mut failures = Vec::new();
    for candidate in &candidates {
        match on_device(candidate) {
            Ok(context) => return Ok(context),
            Err(err) => failures.push(format!("{}: {err}", candidate.describe())),
        }
    }
    match on_default_display() {
        Ok(context) => Ok(context),
        Err(err) => {
            failures.push(format!("default EGL display: {err}"));
            Err(PlainGlError::NoContext(failures.join("; ")))
        }
    }
}

fn on_device(candidate: &Candidate) -> Result<PlainContext, PlainGlError> {
    // SAFETY: `None` is allowed (no DRM master fd); the device comes from this EGL's enumeration.
    let display = unsafe { Display::with_device(&candidate.device, None) }.map_err(egl_error)?;
    finish(display, candidate.describe())
}

/// The default display (Mesa picks its platform from `EGL_PLATFORM` here).
fn on_default_display() -> Result<PlainContext, PlainGlError> {
    let handle = raw_window_handle::RawDisplayHandle::Android(raw_window_handle::AndroidDisplayHandle::new());
    // SAFETY: an Android handle carries no pointer; on this platform glutin ends in
    // eglGetDisplay(EGL_DEFAULT_DISPLAY), which takes no native object.
    let display = unsafe { Display::new(handle) }.map_err(egl_error)?;
    finish(display, "default EGL display".into())
}

fn finish(display: Display, source: String) -> Result<PlainContext, PlainGlError> {
    let template = ConfigTemplateBuilder::new()
        .with_surface_type(ConfigSurfaceTypes::empty())
        .with_api(Api::OPENGL)
        .build();
    // SAFETY: the template holds no native window; the display is initialized.
    let config = unsafe { display.find_configs(template) }
        .map_err(egl_error)?
        .next()
        .ok_or_else(|| PlainGlError::NoContext("no surfaceless OpenGL config".into()))?;
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
                let load = |name: &CStr| {
                    let pointer = display.get_proc_address(name);
                    if pointer.is_null() {
                        Err(PlainGlError::NoContext(format!("the driver has no {}", name.to_string_lossy())))
                    } else {
                        Ok(pointer)
                    }
                };
                let (index, iv) = (load(c"glGetProgramResourceIndex")?, load(c"glGetProgramResourceiv")?);
                // SAFETY: EGL returned these entry points for the names asked for; their
                // signatures are the GL 4.3 core ones declared above (GLuint/GLenum = u32,
                // GLint/GLsizei = i32, GLchar = c_char).
                let (resource_index, resource_iv) = unsafe {
                    (
                        std::mem::transmute::<*const c_void, GetProgramResourceIndex>(index),
                        std::mem::transmute::<*const c_void, GetProgramResourceiv>(iv),
                    )
                };
                return Ok(PlainContext {
                    gl,
                    source,
                    resource_index,
                    resource_iv,
                    _context: context,
                    _display: display,
                });
            }
            Err(err) => refusals.push(format!("{major}.{minor}: {err}")),
        }
    }
    Err(PlainGlError::NoContext(format!("no core context 4.3 or newer ({})", refusals.join(", "))))
}

fn egl_error(err: glutin::error::Error) -> PlainGlError {
    if err.error_kind() == ErrorKind::NotFound {
        PlainGlError::EglMissing
    } else {
        PlainGlError::NoContext(err.to_string())
    }
}
