//! What the simulated device says it is — a Navi31-class gfx1100 (family 145, GC 11.0.0) by
//! default, or a Navi21-class gfx1030 (family 143, GC 10.3.0) — in the kernel's DEV_INFO,
//! HW_IP_INFO and MEMORY answers, with a driver name that says it is a simulator. Numbers a real
//! board reports that the simulator has no use for (clocks, shader engine counts) are those of a
//! Radeon RX 7900 XTX or RX 6900 XT, so that code printing them sees plausible values.

use pm4::Gfx;
use sparkle_amdgpu_kmd::kmd::{DriverVersion, HwIp};
use sparkle_amdgpu_kmd::uapi;

/// The driver's name in DRM_IOCTL_VERSION terms.
pub const DRIVER_NAME: &str = "amdgpu-sim";
/// Mirrors the amdgpu kernel driver's version the simulated uapi follows.
pub const DRIVER_VERSION: (i32, i32, i32) = (3, 57, 0);
/// The GPU a simulated device is, and whose ISA it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SimGpu {
    /// RDNA3, Navi31 (Radeon RX 7900 XTX).
    #[default]
    Gfx1100,
    /// RDNA2, Navi21 (Radeon RX 6900 XT).
    Gfx1030,
}

impl SimGpu {
    /// The generation whose command packets and ISA it runs.
    pub fn gfx(self) -> Gfx {
        match self {
            SimGpu::Gfx1100 => Gfx::Gfx11,
            SimGpu::Gfx1030 => Gfx::Gfx10_3,
        }
    }

    /// The LLVM target name (`gfx1100`).
    pub fn name(self) -> &'static str {
        match self {
            SimGpu::Gfx1100 => "gfx1100",
            SimGpu::Gfx1030 => "gfx1030",
        }
    }

    /// Parses an LLVM target name the simulator can be.
    pub fn parse(name: &str) -> Option<SimGpu> {
        [SimGpu::Gfx1100, SimGpu::Gfx1030].into_iter().find(|g| g.name() == name)
    }

    /// The (GC major, minor) version of its graphics IP.
    fn gc_version(self) -> (u32, u32) {
        match self {
            SimGpu::Gfx1100 => (11, 0),
            SimGpu::Gfx1030 => (10, 3),
        }
    }
}
/// First GPU address user space may map (the kernel reserves the bottom 2 MiB).
pub const VA_START: u64 = 0x20_0000;
/// One past the last address of the low half of the 48-bit VA space.
pub const VA_END: u64 = 0x8000_0000_0000;
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
pub fn describe(gpu: SimGpu) -> String {
    let isa = match gpu {
        SimGpu::Gfx1100 => "RDNA3",
        SimGpu::Gfx1030 => "RDNA2",
    };
    format!("simulated {} (no GPU: the {isa} ISA interpreted on the CPU, for tests)", gpu.name())
}

/// What `AMDGPU_INFO_DEV_INFO` answers.
pub fn device_info(gpu: SimGpu) -> uapi::drm_amdgpu_info_device {
    // PCI id and revision, external revision (the first of the chip's range in the family's
    // table), family, shader engines, CUs.
    let (device_id, pci_rev, external_rev, family, engines, cus) = match gpu {
        SimGpu::Gfx1100 => (0x744c, 0xc8, 0x01, uapi::AMDGPU_FAMILY_GC_11_0_0, 6, 96),
        SimGpu::Gfx1030 => (0x73bf, 0xc0, 0x28, uapi::AMDGPU_FAMILY_NV, 4, 80),
    };
    uapi::drm_amdgpu_info_device {
        device_id,
        chip_rev: 0,
        external_rev,
        pci_rev,
        family,
        num_shader_engines: engines,
        num_shader_arrays_per_engine: 2,
        gpu_counter_freq: GPU_COUNTER_KHZ,
        max_engine_clock: 2_500_000,
        max_memory_clock: 1_250_000,
        cu_active_number: cus,
        num_cu_per_sh: cus / (engines * 2),
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
pub fn hw_ip_info(gpu: SimGpu, _ip: HwIp) -> uapi::drm_amdgpu_info_hw_ip {
    let (major, minor) = gpu.gc_version();
    uapi::drm_amdgpu_info_hw_ip {
        hw_ip_version_major: major,
        hw_ip_version_minor: minor,
        capabilities_flags: 0,
        ib_start_alignment: IB_ALIGNMENT,
        ib_size_alignment: IB_ALIGNMENT,
        // One ring per IP: the simulator runs one submission at a time.
        available_rings: 1,
        ip_discovery_version: major << 16 | minor << 8,
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
