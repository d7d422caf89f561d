//! The AMDHSA code object reader and metadata parser against arbitrary bytes: parsing, the
//! runnability checks the backend makes before upload, and relocation of the load image. Nothing
//! may panic, and whatever is accepted must be self-consistent (kernel offsets inside the image).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sparkle_amdgpu_codeobj::codeobj::{CodeObject, RunLimits};
use sparkle_amdgpu_codeobj::metadata;

fuzz_target!(|data: &[u8]| {
    let _ = std::hint::black_box(metadata::parse(data).map(|m| format!("{m:?}")).map_err(|e| e.to_string()));
    let object = match CodeObject::parse(data) {
        Ok(object) => object,
        Err(err) => {
            std::hint::black_box(err.to_string());
            return;
        }
    };
    let image = object.image();
    let limits = RunLimits::backend_default(object.target());
    for kernel in object.kernels() {
        assert!(kernel.entry_offset < image.len() as u64, "entry outside the image");
        assert!(kernel.descriptor_offset < image.len() as u64, "descriptor outside the image");
        if let Ok(layout) = kernel.check_runnable(&limits) {
            std::hint::black_box(format!("{layout:?}"));
        }
        std::hint::black_box(kernel.check_workgroup_size([64, 1, 1]).is_ok());
        std::hint::black_box(object.check_runnable(&kernel.name, &limits).is_ok());
    }
    if let Ok(relocated) = image.relocated(0x1234_5600) {
        assert_eq!(relocated.len(), image.len());
    }
});
