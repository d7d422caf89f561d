//! Discovery: which EGL display the gl backend opens. Lists the EGL devices, takes the one
//! `SPARKLE_EGL_DEVICE` names or else tries hardware devices before Mesa's software rasterizer
//! (in enumeration order), falls back to the default display, and turns "nothing gave a context"
//! into one error that lists what each device said. The context on the chosen display is
//! `context.rs`'s.

use glutin::api::egl::{device::Device, display::Display};
use glutin::error::ErrorKind;

use super::context::{egl_error, on_display, EglContext};
use super::GlError;

/// The environment variable that pins an EGL device by its index in enumeration order.
pub const DEVICE_ENV: &str = "SPARKLE_EGL_DEVICE";

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

/// Creates a context on device `pinned`, or on the first device that gives one (hardware
/// first), else on the default display.
pub(crate) fn open(pinned: Option<usize>) -> Result<EglContext, GlError> {
    let listing = crate::trace::phase("gl", "list the EGL devices");
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
    drop(listing);
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
    let initializing = crate::trace::phase("gl", "initialize the EGL display");
    // SAFETY: `None` is allowed (no DRM master fd); the device comes from this EGL's enumeration.
    let display = unsafe { Display::with_device(&candidate.device, None) }.map_err(egl_error)?;
    drop(initializing);
    let mut context = on_display(display, candidate.describe(), Some(candidate.index))?;
    context.egl_device = Some(candidate.device.clone());
    Ok(context)
}

/// `EGL_CUDA_DEVICE_NV` of `EGL_NV_device_cuda`: the CUDA device ordinal of an EGL device.
const EGL_CUDA_DEVICE_NV: i32 = 0x323A;

/// The CUDA device ordinal `device` says it is, where its driver offers `EGL_NV_device_cuda`.
pub(super) fn cuda_device_of(display: &Display, device: &Device) -> Option<i32> {
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

/// The device [`open`] would try first without a pinned index: the first hardware device in
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
    let initializing = crate::trace::phase("gl", "initialize the EGL display");
    // SAFETY: an Android handle carries no pointer; on this platform glutin ends in
    // eglGetDisplay(EGL_DEFAULT_DISPLAY), which takes no native object.
    let display = unsafe { Display::new(handle) }.map_err(egl_error)?;
    drop(initializing);
    on_display(display, "default EGL display".into(), None)
}
