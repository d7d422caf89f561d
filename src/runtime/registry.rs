//! The backends this build has, and the choice among them from `SPARKLE_BACKEND`. Adding a
//! backend is one entry in [`BACKENDS`].

use std::sync::Arc;

use super::device::{Core, DynDevice};
use crate::cache::CacheConfig;
use crate::hal::Api;
use crate::{Error, ErrorKind, Result};

/// The environment variable that picks a backend.
pub const BACKEND_ENV: &str = "SPARKLE_BACKEND";

/// One backend of this build.
pub struct BackendEntry {
    /// Its name in `SPARKLE_BACKEND`.
    pub name: &'static str,
    /// What it is, for `sparkle info`.
    pub summary: &'static str,
    /// Whether `auto` may pick it.
    pub in_auto: bool,
    open: fn(&CacheConfig) -> Result<Arc<dyn DynDevice>>,
}

// A build without any backend (its features all off) names none.
#[cfg_attr(not(any(feature = "gl", feature = "amdgpu", feature = "amdgpu-sim")), allow(dead_code))]
fn open_with<A: Api>(device: A::Device, cache: &CacheConfig) -> Arc<dyn DynDevice> {
    Arc::new(Core::<A>::new(device, cache))
}

/// Every backend this build knows, in the order `auto` tries them.
pub static BACKENDS: &[BackendEntry] = &[
    #[cfg(feature = "amdgpu")]
    BackendEntry {
        name: crate::amdgpu::Amdgpu::NAME,
        summary: "direct PM4 submission to AMD RDNA2/RDNA3 GPUs through the DRM render node (experimental)",
        in_auto: true,
        open: |cache| Ok(open_with::<crate::amdgpu::Amdgpu>(crate::amdgpu::AmdgpuDevice::open()?, cache)),
    },
    #[cfg(feature = "amdgpu-sim")]
    BackendEntry {
        name: crate::amdgpu::sim::AmdgpuSim::NAME,
        summary: "the amdgpu backend on a simulated gfx1100: PM4 and the RDNA3 ISA interpreted on the CPU (for tests; slow)",
        in_auto: false,
        open: |cache| Ok(open_with::<crate::amdgpu::sim::AmdgpuSim>(crate::amdgpu::sim::open()?, cache)),
    },
    #[cfg(feature = "gl")]
    BackendEntry {
        name: crate::gl::Gl::NAME,
        summary: "OpenGL 4.3+ compute on a headless EGL context (any vendor; Mesa llvmpipe on the CPU)",
        in_auto: true,
        // A read-only cache is not offered to the driver: it would write its own cache there.
        open: |cache| {
            let writable_dir = cache.dir.as_deref().filter(|_| !cache.read_only);
            Ok(open_with::<crate::gl::Gl>(crate::gl::GlDevice::open(writable_dir)?, cache))
        },
    },
];

impl BackendEntry {
    pub(crate) fn open(&self, cache: &CacheConfig) -> Result<Arc<dyn DynDevice>> {
        (self.open)(cache)
    }
}

/// What the user asked for in `SPARKLE_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// `auto` or unset: the first backend that opens, in the registry's order, among those
    /// marked [`in_auto`](BackendEntry::in_auto) (amdgpu on a supported AMD card, else gl).
    Auto,
    /// One backend, by name.
    Only(&'static str),
}

impl BackendChoice {
    /// Parses a `SPARKLE_BACKEND` value; unset or empty means `auto`.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        let value = value.map(str::trim).unwrap_or("");
        if value.is_empty() || value.eq_ignore_ascii_case("auto") {
            return Ok(BackendChoice::Auto);
        }
        BACKENDS
            .iter()
            .find(|entry| entry.name.eq_ignore_ascii_case(value))
            .map(|entry| BackendChoice::Only(entry.name))
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "{BACKEND_ENV}={value:?} names no backend of this build; valid values are: {}",
                        valid_choices()
                    ),
                )
            })
    }

    /// Reads `SPARKLE_BACKEND` from the environment.
    pub fn from_env() -> Result<Self> {
        Self::parse(std::env::var(BACKEND_ENV).ok().as_deref())
    }
}

fn valid_choices() -> String {
    let mut names: Vec<&str> = BACKENDS.iter().map(|entry| entry.name).collect();
    names.push("auto");
    names.join(", ")
}

/// The entry called `name`.
pub(crate) fn entry(name: &str) -> Option<&'static BackendEntry> {
    BACKENDS.iter().find(|entry| entry.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_choice_parses_known_values_and_lists_them_for_unknown_ones() {
        assert_eq!(BackendChoice::parse(None).unwrap(), BackendChoice::Auto);
        assert_eq!(BackendChoice::parse(Some(" ")).unwrap(), BackendChoice::Auto);
        assert_eq!(BackendChoice::parse(Some("AUTO")).unwrap(), BackendChoice::Auto);
        #[cfg(feature = "gl")]
        assert_eq!(BackendChoice::parse(Some("gl")).unwrap(), BackendChoice::Only("gl"));
        let err = BackendChoice::parse(Some("vulkan")).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        let message = err.to_string();
        assert!(message.contains("vulkan") && message.contains("auto"), "{message}");
    }
}
