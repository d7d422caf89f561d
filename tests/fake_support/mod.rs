//! What the fake backends of the runtime and executor tests share: a device description and the
//! fake's "source" language, one declaration per line — `buffer NAME ro|rw` (bindings in order),
//! `scalar NAME u32|i32|f32`, or `error` (the fake compiler fails).

#![allow(dead_code)]

use sparkle::cache::GpuId;
use sparkle::hal::{DeviceClass, DeviceInfo, Limits, ProgramInterface, ScalarSlot, StorageSlot};
use sparkle::{Error, ErrorKind, Result, ScalarType, SourceLanguage};

/// A fake device called `backend`, told apart from others by `identity`.
pub fn device_info(backend: &'static str, identity: &str) -> DeviceInfo {
    DeviceInfo {
        backend,
        name: "fake device".into(),
        details: Vec::new(),
        gpu_id: GpuId::new(backend, vec![("identity".into(), identity.to_owned())]),
        limits: Limits {
            max_workgroup_size: [1024; 3],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_shared_memory_bytes: 32768,
            max_storage_buffer_bytes: 1 << 20,
            max_storage_buffer_bindings: 8,
            storage_buffer_offset_alignment: 16,
            max_texel_buffer_texels: 1 << 27,
            texel_buffer_offset_alignment: 16,
        },
        persists_programs: false,
        parallel_compile: false,
        languages: vec![SourceLanguage::Glsl],
        class: DeviceClass::Simulator,
    }
}

/// The interface a fake "source" declares.
pub fn parse_interface(source: &str) -> Result<ProgramInterface> {
    let mut interface = ProgramInterface::default();
    for line in source.lines() {
        match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["buffer", name, access] => interface.storage.push(StorageSlot {
                binding: interface.storage.len() as u32,
                names: vec![name.to_owned()],
                min_bytes: 4,
                read_only: Some(access == "ro"),
                texels: None,
            }),
            ["scalar", name, ty] => interface.scalars.push(ScalarSlot {
                name: name.to_owned(),
                ty: Some(match ty {
                    "u32" => ScalarType::U32,
                    "i32" => ScalarType::I32,
                    _ => ScalarType::F32,
                }),
                type_name: ty.to_owned(),
            }),
            ["error"] => return Err(Error::new(ErrorKind::Compile, "fake compiler: syntax error")),
            _ => {}
        }
    }
    Ok(interface)
}
