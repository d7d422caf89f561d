//! The committed ahead-of-time code objects (`shaders/aot/`) as tests read them, and where a
//! kernel's descriptor lies in one, for tests that damage it. Part of `amdgpu_support`; tests
//! that need only this include it with `#[path]`.

use sparkle_amdgpu_codeobj::codeobj::CodeObject;

/// The committed code object of suite kernel `kernel` built for `target` (e.g. `"gfx1100"`).
pub fn aot_blob(kernel: &str, target: &str) -> Vec<u8> {
    std::fs::read(format!("{}/shaders/aot/{target}/{kernel}.co", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// File offset of `<kernel>.kd` (the first PT_LOAD segment maps the file at address 0).
pub fn descriptor_offset(bytes: &[u8], kernel: &str) -> usize {
    let object = CodeObject::parse(bytes).unwrap();
    let found = object.kernels().iter().find(|k| k.name == kernel).unwrap();
    assert_eq!(
        &bytes[found.descriptor_offset as usize + 16..][..8],
        &found.descriptor.kernel_code_entry_byte_offset.to_le_bytes()
    );
    found.descriptor_offset as usize
}
