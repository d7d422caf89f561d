//! What the backend knows about its GPU: DEV_INFO and HW_IP_INFO turned into the exact gfx
//! target (from the kernel's IP discovery version, else from family + external revision), the
//! VA range, memory sizes, and the cache identity ([`GpuId`]). Refuses targets the backend does
//! not support.

use crate::cache::GpuId;

use super::error::{AmdgpuError, Result};
use super::gfx_target::{family_name, gc_from_family, GcVersion, GfxTarget};
use super::kmd::{DriverVersion, HwIp, KernelDriver};
use super::uapi;

/// Name of the backend in cache identities.
#[cfg(test)]
pub const BACKEND_NAME: &str = "amdgpu";

/// How the GC version was learnt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcSource {
    /// `ip_discovery_version` of HW_IP_INFO (kernels 6.2+).
    IpDiscovery,
    /// Derived from DEV_INFO's family and external revision.
    FamilyTable,
}

/// The device, as the backend uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub pci_device_id: u32,
    pub pci_revision: u32,
    pub chip_revision: u32,
    pub external_revision: u32,
    pub family: u32,
    pub gc_version: GcVersion,
    pub gc_source: GcSource,
    pub target: GfxTarget,
    pub driver: DriverVersion,
    /// First GPU virtual address user space may use.
    pub va_start: u64,
    /// One past the last.
    pub va_end: u64,
    /// Required VA alignment (bytes).
    pub va_alignment: u64,
    pub vram_bytes: u64,
    pub cpu_visible_vram_bytes: u64,
    pub gtt_bytes: u64,
    pub compute_units: u32,
    pub shader_engines: u32,
    pub max_engine_clock_khz: u64,
    /// Frequency of the GPU clock counter RELEASE_MEM timestamps read (kHz; 0: unknown).
    pub gpu_counter_khz: u32,
    pub is_apu: bool,
}

impl DeviceInfo {
    /// Asks the driver.
    pub fn query(kmd: &dyn KernelDriver) -> Result<Self> {
        let dev = kmd.device_info()?;
        let gfx = kmd.hw_ip_info(HwIp::Gfx)?;
        let compute = kmd.hw_ip_info(HwIp::Compute)?;
        let memory = kmd.memory_info()?;
        Self::from_raw(&dev, &gfx, &compute, &memory, kmd.driver_version())
    }

    /// Interprets the kernel's answers; fails when the GC version cannot be determined.
    pub fn from_raw(
        dev: &uapi::drm_amdgpu_info_device,
        gfx: &uapi::drm_amdgpu_info_hw_ip,
        compute: &uapi::drm_amdgpu_info_hw_ip,
        memory: &uapi::drm_amdgpu_memory_info,
        driver: DriverVersion,
    ) -> Result<Self> {
        let discovered = GcVersion::from_ip_discovery(gfx.ip_discovery_version)
            .or_else(|| GcVersion::from_ip_discovery(compute.ip_discovery_version));
        let (gc_version, gc_source) = match discovered {
            Some(gc) => (gc, GcSource::IpDiscovery),
            None => match gc_from_family(dev.family, dev.external_rev) {
                Some(gc) => (gc, GcSource::FamilyTable),
                None => {
                    return Err(AmdgpuError::Unavailable(format!(
                        "unsupported GPU: PCI id {:#06x}, family {} ({}), external revision {:#x}; the kernel ({driver}) does not report its GC version and the chip is not a known RDNA2/RDNA3 part (supported: {})",
                        dev.device_id,
                        dev.family,
                        family_name(dev.family),
                        dev.external_rev,
                        GfxTarget::supported_list()
                    )))
                }
            },
        };
        let target = gc_version.llvm_target().ok_or_else(|| {
            AmdgpuError::Unavailable(format!(
                "unsupported GPU: GC {gc_version} (PCI id {:#06x}, family {}) has no known LLVM target; supported: {}",
                dev.device_id,
                family_name(dev.family),
                GfxTarget::supported_list()
            ))
        })?;
        let compute_units = dev.cu_active_number;
        Ok(Self {
            pci_device_id: dev.device_id,
            pci_revision: dev.pci_rev,
            chip_revision: dev.chip_rev,
            external_revision: dev.external_rev,
            family: dev.family,
            gc_version,
            gc_source,
            target,
            driver,
            va_start: dev.virtual_address_offset,
            va_end: dev.virtual_address_max,
            va_alignment: u64::from(dev.virtual_address_alignment.max(4096)),
            vram_bytes: memory.vram.total_heap_size,
            cpu_visible_vram_bytes: memory.cpu_accessible_vram.total_heap_size,
            gtt_bytes: memory.gtt.total_heap_size,
            compute_units,
            shader_engines: dev.num_shader_engines,
            max_engine_clock_khz: dev.max_engine_clock,
            gpu_counter_khz: dev.gpu_counter_freq,
            is_apu: dev.ids_flags & uapi::AMDGPU_IDS_FLAGS_FUSION != 0,
        })
    }

    /// Fails with a clear message unless the backend runs code on this target.
    pub fn require_supported(&self) -> Result<()> {
        if self.target.is_supported() {
            return Ok(());
        }
        Err(AmdgpuError::Unavailable(format!(
            "unsupported gfx target {} (GC {}, PCI id {:#06x}, family {}): the amdgpu backend supports {}",
            self.target,
            self.gc_version,
            self.pci_device_id,
            family_name(self.family),
            GfxTarget::supported_list()
        )))
    }

    /// The cache identity under this backend's name (tests build it; the backends call
    /// [`gpu_id_for`](Self::gpu_id_for)).
    #[cfg(test)]
    pub fn gpu_id(&self, compiler_identity: &str) -> GpuId {
        self.gpu_id_for(BACKEND_NAME, compiler_identity)
    }

    /// The cache identity under `backend`'s name (a simulator has its own cache folder): PCI id,
    /// revisions, family, full gfx target and GC version, the kernel driver's version, and the
    /// compiler that builds the blobs.
    pub fn gpu_id_for(&self, backend: &str, compiler_identity: &str) -> GpuId {
        GpuId::new(
            backend,
            vec![
                ("pci device id".into(), format!("{:#06x}", self.pci_device_id)),
                ("pci revision".into(), format!("{:#04x}", self.pci_revision)),
                ("chip revision".into(), format!("{:#x}", self.chip_revision)),
                ("external revision".into(), format!("{:#x}", self.external_revision)),
                ("family".into(), format!("{} ({})", self.family, family_name(self.family))),
                ("gfx target".into(), self.target.name()),
                ("gc version".into(), self.gc_version.to_string()),
                ("kernel driver".into(), self.driver.to_string()),
                ("compiler".into(), compiler_identity.to_string()),
            ],
        )
    }

    /// One line for `sparkle info`.
    #[cfg(test)]
    pub fn summary(&self) -> String {
        format!(
            "{} (GC {}, PCI {:#06x} rev {:#04x}, {} CUs, {} MiB VRAM, {})",
            self.target,
            self.gc_version,
            self.pci_device_id,
            self.pci_revision,
            self.compute_units,
            self.vram_bytes >> 20,
            self.driver
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(
        family: u32,
        external_rev: u32,
        ip_discovery: u32,
    ) -> (uapi::drm_amdgpu_info_device, uapi::drm_amdgpu_info_hw_ip) {
        let dev = uapi::drm_amdgpu_info_device {
            device_id: 0x744c,
            chip_rev: 0,
            external_rev,
            pci_rev: 0xc8,
            family,
            cu_active_number: 96,
            virtual_address_offset: 0x20_0000,
            virtual_address_max: 0x8000_0000_0000,
            virtual_address_alignment: 4096,
            ..Default::default()
        };
        let hw = uapi::drm_amdgpu_info_hw_ip { ip_discovery_version: ip_discovery, ..Default::default() };
        (dev, hw)
    }

    fn driver() -> DriverVersion {
        DriverVersion { name: "amdgpu".into(), major: 3, minor: 57, patch: 0 }
    }

    #[test]
    fn ip_discovery_wins_and_family_is_the_fallback() {
        let mem = uapi::drm_amdgpu_memory_info::default();
        let (dev, hw) = raw(uapi::AMDGPU_FAMILY_GC_11_0_0, 0x20, 0x000b_0003);
        let info = DeviceInfo::from_raw(&dev, &hw, &hw, &mem, driver()).unwrap();
        assert_eq!((info.target.name(), info.gc_source), ("gfx1101".into(), GcSource::IpDiscovery));
        let (dev, hw) = raw(uapi::AMDGPU_FAMILY_GC_11_0_0, 0x01, 0);
        let info = DeviceInfo::from_raw(&dev, &hw, &hw, &mem, driver()).unwrap();
        assert_eq!((info.target.name(), info.gc_source), ("gfx1100".into(), GcSource::FamilyTable));
        info.require_supported().unwrap();
    }

    #[test]
    fn unsupported_gpus_say_what_they_are() {
        let mem = uapi::drm_amdgpu_memory_info::default();
        let (dev, hw) = raw(uapi::AMDGPU_FAMILY_NV, 0x01, 0);
        let info = DeviceInfo::from_raw(&dev, &hw, &hw, &mem, driver()).unwrap();
        let err = info.require_supported().unwrap_err().to_string();
        assert!(err.contains("gfx1010") && err.contains("gfx1100"), "{err}");
        let (dev, hw) = raw(uapi::AMDGPU_FAMILY_AI, 0x01, 0);
        let err = DeviceInfo::from_raw(&dev, &hw, &hw, &mem, driver()).unwrap_err().to_string();
        assert!(err.contains("AI (gfx9)") && err.contains("0x744c"), "{err}");
    }

    #[test]
    fn gpu_id_changes_with_every_identity_field() {
        let mem = uapi::drm_amdgpu_memory_info::default();
        let (dev, hw) = raw(uapi::AMDGPU_FAMILY_GC_11_0_0, 0x01, 0x000b_0000);
        let base = DeviceInfo::from_raw(&dev, &hw, &hw, &mem, driver()).unwrap();
        let id = base.gpu_id("clang 22");
        assert_eq!(id.backend(), "amdgpu");
        assert!(id.describe().contains("gfx target: gfx1100"), "{}", id.describe());
        let mut variants = vec![base.gpu_id("clang 23")];
        let mut other = base.clone();
        other.pci_revision = 0xc0;
        variants.push(other.gpu_id("clang 22"));
        let mut other = base.clone();
        other.driver.minor = 58;
        variants.push(other.gpu_id("clang 22"));
        let mut other = base.clone();
        other.target = GfxTarget::new(11, 0, 1);
        variants.push(other.gpu_id("clang 22"));
        let mut other = base.clone();
        other.pci_device_id = 0x7448;
        variants.push(other.gpu_id("clang 22"));
        for variant in variants {
            assert_ne!(variant.hash(), id.hash(), "{}", variant.describe());
        }
    }
}
