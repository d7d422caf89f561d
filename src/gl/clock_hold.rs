//! Holding an NVIDIA GPU at its top clocks while Sparkle runs on it, when the user asks
//! (`SPARKLE_HOLD_CLOCKS=1`).
//!
//! NVIDIA's OpenGL driver raises the GPU's clocks for a few seconds when a context is made and
//! then follows how busy the GPU is. Under light or bursty work (the GPU busy a fifth of the
//! time, say a pipeline that waits on the host) an H100 fell from 1980 MHz to its lowest clock,
//! 345 MHz, about five seconds into a process and stayed there, and a GPU stage took up to
//! 2.1× longer than in a fresh process. CUDA asks the driver for top clocks for as long as a
//! context exists (PyTorch at the same duty cycle kept 1980 MHz), and so does Sparkle when asked:
//! it retains the CUDA primary context of the same GPU, through the CUDA driver library, and
//! never uses it. That context takes about half a GiB of GPU memory and keeps the clocks up
//! while the process is idle too, so it is never taken unasked. Asked for but impossible (no
//! CUDA driver, another vendor's GPU, a CPU renderer), opening the device fails and says why.
//!
//! The CUDA device is the one whose UUID is the GL device's (`GL_EXT_memory_object`), which
//! holds whatever `CUDA_VISIBLE_DEVICES` renumbers; where the driver gives no UUID or none
//! matches, the one the EGL device names (`EGL_NV_device_cuda`), else the only one, and then its
//! name must be the GL renderer's.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

use super::GlError;

/// The environment variable that asks for the hold: `1` (or `on`); `0`, `off` or unset: the
/// driver's own clock policy.
pub const HOLD_CLOCKS_ENV: &str = "SPARKLE_HOLD_CLOCKS";

/// The CUDA driver library; the soname every NVIDIA driver installs.
const CUDA_LIBRARY: &str = "libcuda.so.1";

/// Whether `SPARKLE_HOLD_CLOCKS` asks for the hold.
pub(crate) fn asked() -> Result<bool, GlError> {
    match std::env::var(HOLD_CLOCKS_ENV) {
        Ok(value) => parse(&value).ok_or_else(|| {
            GlError::ClockHold(format!("{HOLD_CLOCKS_ENV}={value:?} is neither 1 (hold the clocks) nor 0"))
        }),
        Err(_) => Ok(false),
    }
}

fn parse(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "off" | "no" | "false" => Some(false),
        "1" | "on" | "yes" | "true" => Some(true),
        _ => None,
    }
}

/// The GPU whose clocks to hold, as the GL side knows it.
pub(crate) struct Target<'a> {
    /// `GL_VENDOR`.
    pub vendor: &'a str,
    /// `GL_RENDERER`: NVIDIA's is the CUDA device name followed by `/PCIe/SSE2` or similar.
    pub renderer: &'a str,
    /// A software renderer computes on the host: it has no clocks of its own to hold.
    pub cpu_renderer: bool,
    /// The CUDA ordinal the EGL device gave (`EGL_NV_device_cuda`), if it gave one.
    pub cuda_device: Option<i32>,
    /// The GL device's UUID (`GL_EXT_memory_object`), if the driver gave one.
    pub device_uuid: Option<[u8; 16]>,
}

/// A retained CUDA primary context; released when dropped.
pub(crate) struct ClockHold {
    release: unsafe extern "C" fn(c_int) -> c_int,
    device: c_int,
    name: String,
}

impl ClockHold {
    /// Retains the primary context of `target`'s CUDA device, or says why it cannot.
    pub fn take(target: &Target<'_>) -> Result<ClockHold, GlError> {
        let refuse = |why: String| GlError::ClockHold(why);
        if target.cpu_renderer || !target.vendor.to_ascii_lowercase().contains("nvidia") {
            return Err(refuse(format!(
                "{HOLD_CLOCKS_ENV} holds an NVIDIA GPU's clocks through CUDA, and this device is {} ({}); \
                 unset it",
                target.renderer, target.vendor
            )));
        }
        let library = Library::open(CUDA_LIBRARY).map_err(|why| {
            refuse(format!("{HOLD_CLOCKS_ENV} needs NVIDIA's CUDA driver library, and {why}; unset it"))
        })?;
        // SAFETY: the signatures are those of the CUDA driver API (cuda.h): CUresult is an int,
        // CUdevice an int, CUcontext a pointer.
        let api = unsafe {
            Api {
                init: library.symbol(c"cuInit")?,
                device_count: library.symbol(c"cuDeviceGetCount")?,
                device_get: library.symbol(c"cuDeviceGet")?,
                device_name: library.symbol(c"cuDeviceGetName")?,
                retain: library.symbol(c"cuDevicePrimaryCtxRetain")?,
                release: library
                    .symbol(c"cuDevicePrimaryCtxRelease_v2")
                    .or_else(|_| library.symbol(c"cuDevicePrimaryCtxRelease"))?,
                error_name: library.symbol(c"cuGetErrorName").ok(),
                device_uuid: library
                    .symbol(c"cuDeviceGetUuid_v2")
                    .or_else(|_| library.symbol(c"cuDeviceGetUuid"))
                    .ok(),
            }
        };
        let check = |what: &str, status: c_int| -> Result<(), GlError> {
            if status == 0 {
                return Ok(());
            }
            Err(refuse(format!("{HOLD_CLOCKS_ENV}: {what} failed with {}; unset it", api.describe(status))))
        };
        // SAFETY: cuInit takes flags, and 0 is the only value defined.
        check("cuInit", unsafe { (api.init)(0) })?;
        let mut count: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        check("cuDeviceGetCount", unsafe { (api.device_count)(&mut count) })?;
        let by_uuid = target.device_uuid.and_then(|uuid| api.find_by_uuid(uuid, count));
        let ordinal = match (by_uuid, target.cuda_device) {
            (Some(ordinal), _) => ordinal,
            (None, Some(ordinal)) if (0..count).contains(&ordinal) => ordinal,
            (None, Some(ordinal)) => {
                return Err(refuse(format!(
                    "{HOLD_CLOCKS_ENV}: the EGL device is CUDA device {ordinal}, and CUDA sees {count} \
                     (CUDA_VISIBLE_DEVICES hides it?); unset one of them"
                )))
            }
            (None, None) if count == 1 => 0,
            (None, None) => {
                return Err(refuse(format!(
                    "{HOLD_CLOCKS_ENV}: the EGL device does not say which CUDA device it is \
                     (EGL_NV_device_cuda), and CUDA sees {count} devices"
                )))
            }
        };
        let mut device: c_int = 0;
        // SAFETY: the out-pointer is a live local; the ordinal is below the device count.
        check("cuDeviceGet", unsafe { (api.device_get)(&mut device, ordinal) })?;
        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer is live and its length is passed; the driver writes at most that.
        check("cuDeviceGetName", unsafe {
            (api.device_name)(name.as_mut_ptr(), name.len() as c_int, device)
        })?;
        // SAFETY: cuDeviceGetName wrote a NUL-terminated string into the buffer it was given.
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        // GL_RENDERER is the device name, then `/PCIe/SSE2` or similar. A UUID match needs no
        // name check.
        let gl_name = target.renderer.split('/').next().unwrap_or_default().trim();
        if by_uuid.is_none() && gl_name != name {
            return Err(refuse(format!(
                "{HOLD_CLOCKS_ENV}: CUDA device {ordinal} is {name}, and the GL context runs on {}; \
                 pick matching devices with SPARKLE_EGL_DEVICE and CUDA_VISIBLE_DEVICES, or unset it",
                target.renderer
            )));
        }
        let mut context: *mut c_void = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local and `device` came from cuDeviceGet.
        check("cuDevicePrimaryCtxRetain", unsafe { (api.retain)(&mut context, device) })?;
        tracing::info!(
            cuda_device = ordinal,
            %name,
            matched_by = if by_uuid.is_some() { "device UUID" } else { "EGL device and name" },
            "holding the GPU's clocks through its CUDA primary context"
        );
        Ok(ClockHold { release: api.release, device, name })
    }

    /// What `sparkle info` says about the clocks while the hold lasts.
    pub fn describe(&self) -> String {
        format!(
            "held at the top through a CUDA context on {} ({HOLD_CLOCKS_ENV}=1; about 0.5 GiB of GPU memory)",
            self.name
        )
    }
}

impl Drop for ClockHold {
    fn drop(&mut self) {
        // SAFETY: `release` comes from the CUDA driver library, which stays loaded (`Library`),
        // and the device's primary context was retained once by `take`.
        let status = unsafe { (self.release)(self.device) };
        if status != 0 {
            tracing::debug!(status, "releasing the CUDA primary context failed");
        }
    }
}

/// What `sparkle info` says about the clocks of a device nobody holds.
pub(crate) fn describe_unheld(vendor: &str, cpu_renderer: bool) -> String {
    if !cpu_renderer && vendor.to_ascii_lowercase().contains("nvidia") {
        format!(
            "the driver's (under light load it lowers them within seconds; {HOLD_CLOCKS_ENV}=1 holds them \
             through CUDA)"
        )
    } else {
        "the driver's".to_owned()
    }
}

/// The CUDA driver functions the hold uses.
struct Api {
    init: unsafe extern "C" fn(c_uint) -> c_int,
    device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> c_int,
    device_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
    retain: unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int,
    release: unsafe extern "C" fn(c_int) -> c_int,
    error_name: Option<unsafe extern "C" fn(c_int, *mut *const c_char) -> c_int>,
    device_uuid: Option<unsafe extern "C" fn(*mut [u8; 16], c_int) -> c_int>,
}

impl Api {
    /// The ordinal of the CUDA device whose UUID is `uuid`, among the `count` CUDA sees.
    fn find_by_uuid(&self, uuid: [u8; 16], count: c_int) -> Option<c_int> {
        let device_uuid = self.device_uuid?;
        (0..count).find(|&ordinal| {
            let (mut device, mut found) = (0, [0u8; 16]);
            // SAFETY: live out-pointers; CUuuid is 16 bytes; the ordinal is below the count.
            let read = unsafe {
                (self.device_get)(&mut device, ordinal) == 0 && device_uuid(&mut found, device) == 0
            };
            read && found == uuid
        })
    }

    /// `CUDA_ERROR_…` for a status, with its number.
    fn describe(&self, status: c_int) -> String {
        let mut name: *const c_char = std::ptr::null();
        let known = self.error_name.is_some_and(|error_name| {
            // SAFETY: cuGetErrorName writes a pointer to a static string, or fails.
            unsafe { error_name(status, &mut name) == 0 && !name.is_null() }
        });
        if known {
            // SAFETY: checked non-null above; the driver's error names are static C strings.
            format!("{} ({status})", unsafe { CStr::from_ptr(name) }.to_string_lossy())
        } else {
            format!("CUDA error {status}")
        }
    }
}

/// A shared library opened with `dlopen`, closed never: the CUDA driver keeps threads and
/// handlers of its own, which must not lose their code while the process runs.
struct Library {
    handle: *mut c_void,
}

impl Library {
    fn open(name: &str) -> Result<Library, String> {
        let c_name = CString::new(name).map_err(|_| format!("{name:?} is not a library name"))?;
        // SAFETY: a NUL-terminated name; RTLD_NOW resolves everything up front.
        let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("{name} could not be loaded ({})", last_dl_error()));
        }
        Ok(Library { handle })
    }

    /// The symbol `name` as a function of type `F`.
    ///
    /// # Safety
    /// `F` must be a function pointer type matching the symbol's real signature.
    unsafe fn symbol<F: Copy>(&self, name: &CStr) -> Result<F, GlError> {
        // SAFETY: a live handle and a NUL-terminated name.
        let address = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        if address.is_null() {
            return Err(GlError::ClockHold(format!(
                "{HOLD_CLOCKS_ENV}: {CUDA_LIBRARY} has no {} (a CUDA driver too old?)",
                name.to_string_lossy()
            )));
        }
        debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        // SAFETY: per the contract, F is the symbol's function pointer type, pointer-sized.
        Ok(unsafe { std::mem::transmute_copy(&address) })
    }
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns a thread-local message or null.
    let message = unsafe { libc::dlerror() };
    if message.is_null() {
        "no reason given".to_owned()
    } else {
        // SAFETY: non-null dlerror results are NUL-terminated strings.
        unsafe { CStr::from_ptr(message) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_takes_on_and_off_words_and_nothing_else() {
        for on in ["1", "on", "ON", " yes ", "true"] {
            assert_eq!(parse(on), Some(true), "{on:?}");
        }
        for off in ["", "0", "off", "no", "false"] {
            assert_eq!(parse(off), Some(false), "{off:?}");
        }
        for neither in ["2", "max", "cuda", "-1"] {
            assert_eq!(parse(neither), None, "{neither:?}");
        }
    }

    #[test]
    fn a_cpu_renderer_is_refused_before_any_library_is_loaded() {
        let target = Target {
            vendor: "Mesa",
            renderer: "llvmpipe (LLVM 15.0.6, 256 bits)",
            cpu_renderer: true,
            cuda_device: None,
            device_uuid: None,
        };
        let Err(GlError::ClockHold(why)) = ClockHold::take(&target) else {
            panic!("a CPU renderer's clocks cannot be held")
        };
        assert!(why.contains("llvmpipe") && why.contains(HOLD_CLOCKS_ENV), "{why}");
    }

    #[test]
    fn another_vendors_gpu_is_refused() {
        let target = Target {
            vendor: "AMD",
            renderer: "AMD Radeon RX 7900 XTX",
            cpu_renderer: false,
            cuda_device: None,
            device_uuid: None,
        };
        assert!(
            matches!(ClockHold::take(&target), Err(GlError::ClockHold(why)) if why.contains("AMD Radeon"))
        );
    }

    #[test]
    fn only_nvidia_gpus_are_told_about_the_hold() {
        assert!(describe_unheld("NVIDIA Corporation", false).contains(HOLD_CLOCKS_ENV));
        assert_eq!(describe_unheld("Mesa", true), "the driver's");
    }
}
