//! The library's view of the simulated driver's identity: the GPU information the backend
//! queries from it (`device_info`) says gfx1100 from IP discovery, the simulator's VA range and
//! heaps, and the family table agrees. The simulator's kernel-like rules themselves are
//! `tests/amdgpu_sim_driver.rs`.

use std::sync::Arc;

use sparkle_amdgpu_sim::{identity, SimDriver, SimOptions};

use crate::amdgpu::device_info::{DeviceInfo, GcSource};
use crate::amdgpu::gfx_target;
use crate::amdgpu::kmd::{HwIp, KernelDriver};
use crate::amdgpu::uapi;

fn driver() -> Arc<dyn KernelDriver> {
    SimDriver::new(SimOptions::default())
}

#[test]
fn the_device_is_a_gfx1100_that_says_it_is_simulated() {
    let kmd = driver();
    let info = DeviceInfo::query(&*kmd).unwrap();
    assert_eq!(info.target.name(), "gfx1100");
    assert_eq!(info.gc_source, GcSource::IpDiscovery);
    assert_eq!(info.family, uapi::AMDGPU_FAMILY_GC_11_0_0);
    info.require_supported().unwrap();
    // The family table agrees with the IP discovery version.
    let dev = kmd.device_info().unwrap();
    let gc = gfx_target::gc_from_family(dev.family, dev.external_rev).unwrap();
    assert_eq!(gc.llvm_target().unwrap().name(), "gfx1100");
    assert_eq!((info.va_start, info.va_end), (identity::VA_START, identity::VA_END));
    assert!(info.vram_bytes > 0 && info.gtt_bytes > 0);
    assert!(kmd.describe().contains("simulated"), "{}", kmd.describe());
    assert_eq!(kmd.driver_version().name, "amdgpu-sim");
    let compute = kmd.hw_ip_info(HwIp::Compute).unwrap();
    assert_eq!((compute.hw_ip_version_major, compute.available_rings), (11, 1));
}
