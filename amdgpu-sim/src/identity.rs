//! What the simulated device says it is: a Navi31-class gfx1100 (family 145, GC 11.0.0) in the
//! kernel's DEV_INFO, HW_IP_INFO and MEMORY answers, with a driver name that says it is a
//! simulator. Numbers a real board reports that the simulator has no use for (clocks, shader
//! engine counts) are those of a Radeon RX 7900 XTX, so that code printing them sees plausible
//! values.

use sparkle_amdgpu_kmd::kmd::{DriverVersion, HwIp};
use sparkle_amdgpu_kmd::uapi;

/// The driver's name in DRM_IOCTL_VERSION terms.
pub const DRIVER_NAME: &str = "amdgpu-sim";
/// Mirrors the amdgpu kernel driver's version the simulated uapi follows.
pub const DRIVER_VERSION: (i32, i32, i32) = (3, 57, 0);
/// Navi31 (Radeon RX 7900 XTX).
pub const PCI_DEVICE_ID: u32 = 0x744c;
/// The PCI revision of that board.
pub const PCI_REVISION: u32 = 0xc8;
/// Navi31's external revision range starts at 0x01 (family 145 table).
pub const EXTERNAL_REVISION: u32 = 0x01;
/// First GPU address user space may map (the kernel reserves the bottom 2 MiB).
pub const VA_START: u64 = 0x20_0000;
/// One past the last address of the low half of the 48-bit VA space.
pub const VA_END: u64 = 0x8000_0000_0000;
/// `ip_discovery_version` for GC 11.0.0.
pub const GC_11_0_0: u32 = 11 << 16;
/// IB start and size alignment the kernel reports for GFX and compute rings.
const IB_ALIGNMENT: u32 = 32;
/// The reference clock in kHz (100 MHz, one tick per 10 ns).
pub const GPU_COUNTER_KHZ: u32 = 100_000;

/// What DRM_IOCTL_VERSION answers: [`DRIVER_NAME`] at [`DRIVER_VERSION`].
pub fn driver_version() -> DriverVersion {
    let (major, minor, patch) = DRIVER_VERSION;
    DriverVersion { name: DRIVER_NAME.into(), major, minor, patch }
}

/// The device in a sentence, for `sparkle info` and messages.
pub fn describe() -> String {
    "simulated gfx1100 (no GPU: the RDNA3 ISA interpreted on the CPU, for tests)".into()
}

/// What `AMDGPU_INFO_DEV_INFO` answers.
pub fn device_info() -> uapi::drm_amdgpu_info_device {
    uapi::drm_amdgpu_info_device {
        device_id: PCI_DEVICE_ID,
        chip_rev: 0,
        external_rev: EXTERNAL_REVISION,
        pci_rev: PCI_REVISION,
        family: uapi::AMDGPU_FAMILY_GC_11_0_0,
        num_shader_engines: 6,
        num_shader_arrays_per_engine: 2,
        gpu_counter_freq: GPU_COUNTER_KHZ,
        max_engine_clock: 2_500_000,
        max_memory_clock: 1_250_000,
        cu_active_number: 96,
        num_cu_per_sh: 8,
        virtual_address_offset: VA_START,
        virtual_address_max: VA_END,
        virtual_address_alignment: 4096,
        pte_fragment_size: 2 * 1024 * 1024,
        gart_page_size: 4096,
        wave_front_size: 32,
        num_shader_visible_vgprs: 1536,
        num_tcc_blocks: 24,
        ..Default::default()
    }
}

/// The same for GFX and compute: both run the same command processor here.
pub fn hw_ip_info(_ip: HwIp) -> uapi::drm_amdgpu_info_hw_ip {
    uapi::drm_amdgpu_info_hw_ip {
        hw_ip_version_major: 11,
        hw_ip_version_minor: 0,
        capabilities_flags: 0,
        ib_start_alignment: IB_ALIGNMENT,
        ib_size_alignment: IB_ALIGNMENT,
        // One ring per IP: the simulator runs one submission at a time.
        available_rings: 1,
        ip_discovery_version: GC_11_0_0,
        ..Default::default()
    }
}

/// Heap sizes and usage.
pub fn memory_info(vram: (u64, u64), gtt: (u64, u64)) -> uapi::drm_amdgpu_memory_info {
    let heap = |(total, used): (u64, u64)| uapi::drm_amdgpu_heap_info {
        total_heap_size: total,
        usable_heap_size: total,
        heap_usage: used,
        max_allocation: total,
    };
    uapi::drm_amdgpu_memory_info { vram: heap(vram), cpu_accessible_vram: heap(vram), gtt: heap(gtt) }
}
