//! A user's kernel spec → validation → cache key → entry path, with arbitrary names, sources,
//! defines and workgroup sizes, through `Runtime` over a minimal device whose compiler input is
//! the GLSL source and whose blob is that text. Nothing may panic, every file the cache writes
//! stays inside its folder under a hex name, and a program always comes back from its own source.
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sparkle::cache::{Blob, CacheConfig, GpuId, LoadFailure};
use sparkle::hal::{
    self, Api, BufferUsage, Command, Compiled, DeviceClass, DeviceInfo, Limits, Prepared, ProgramInterface, ReadTarget, Timeline,
};
use sparkle::{Error, KernelSource, KernelSpec, Result, Runtime, SourceLanguage};

struct Text;

impl Api for Text {
    const NAME: &'static str = "text";
    type Device = TextDevice;
    type Buffer = ();
    type Program = String;
    type CompileInput = String;
}

struct TextDevice {
    info: DeviceInfo,
    timeline: Arc<Timeline>,
}

impl hal::Device<Text> for TextDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn token(&self) -> u64 {
        7
    }
    fn prepare(&self, kernel: &KernelSpec) -> Result<Prepared<String>> {
        let KernelSource::Glsl(source) = kernel.source(SourceLanguage::Glsl, Text::NAME)? else {
            return Err(Error::new(sparkle::ErrorKind::Unavailable, "asked for GLSL, got another language"));
        };
        let mut text = format!("name {}\n", kernel.name);
        for (name, value) in &kernel.defines {
            text.push_str(&format!("#define {name} {value}\n"));
        }
        text.push_str(source);
        Ok(Prepared { key_material: vec![text.clone().into_bytes()], input: text })
    }
    fn compile(&self, input: &String) -> Result<Compiled<String>> {
        Ok(Compiled {
            program: input.clone(),
            blob: Some(Blob { format: 1, bytes: input.clone().into_bytes() }),
        })
    }
    fn load(&self, input: &String, blob: &Blob) -> std::result::Result<String, LoadFailure<Error>> {
        assert_eq!(blob.bytes, input.as_bytes(), "another kernel's blob reached load");
        Ok(input.clone())
    }
    fn interface<'p>(&self, _: &'p String) -> &'p ProgramInterface {
        empty_interface()
    }
    fn create_buffer(&self, _: u64, _: BufferUsage) -> Result<()> {
        Ok(())
    }
    fn write_buffer(&self, _: &(), _: u64, _: &[u8]) -> Result<()> {
        Ok(())
    }
    fn read_buffer(&self, _: &(), _: u64, out: &mut ReadTarget<'_>) -> Result<()> {
        out.bytes_mut();
        Ok(())
    }
    fn submit(&self, _: &[Command<'_, Text>]) -> Result<u64> {
        Ok(self.timeline.issue())
    }
    fn completed(&self) -> u64 {
        self.timeline.completed()
    }
    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        self.timeline.wait(fence, timeout)
    }
}

/// Every program of this device has the same (empty) interface.
fn empty_interface() -> &'static ProgramInterface {
    static EMPTY: OnceLock<ProgramInterface> = OnceLock::new();
    EMPTY.get_or_init(ProgramInterface::default)
}

struct Fixture {
    runtime: Runtime,
    dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let limits = Limits {
            max_workgroup_size: [1024, 1024, 64],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_shared_memory_bytes: 32768,
            max_storage_buffer_bytes: 1 << 30,
            max_storage_buffer_bindings: 16,
            storage_buffer_offset_alignment: 16,
            max_texel_buffer_texels: 1 << 27,
            texel_buffer_offset_alignment: 16,
        };
        let device = TextDevice {
            info: DeviceInfo {
                backend: Text::NAME,
                name: "text".into(),
                details: Vec::new(),
                gpu_id: GpuId::new(Text::NAME, vec![("device".into(), "fuzz".into())]),
                limits,
                persists_programs: true,
                parallel_compile: false,
                languages: vec![SourceLanguage::Glsl],
                class: DeviceClass::Simulator,
            },
            timeline: Arc::new(Timeline::new()),
        };
        let mut config = CacheConfig::in_dir(dir.path());
        config.max_memory_entries = 0;
        Fixture { runtime: Runtime::from_device::<Text>(device, &config), dir }
    })
}

/// Every file under the cache folder is a description file, a temporary file or an entry at
/// `<gpu folder>/<2 hex>/<32 hex>`; nothing is a link, and nothing lies deeper.
fn check_tree(root: &Path) {
    for gpu in std::fs::read_dir(root).expect("the cache folder").flatten() {
        assert!(gpu.file_type().unwrap().is_dir(), "{:?} at the top of the cache folder", gpu.path());
        for shard in std::fs::read_dir(gpu.path()).unwrap().flatten() {
            let name = shard.file_name().to_string_lossy().into_owned();
            let kind = shard.file_type().unwrap();
            if kind.is_file() {
                assert!(
                    name.ends_with(".txt") || name.ends_with(".json") || name.starts_with(".tmp-"),
                    "{name}"
                );
                continue;
            }
            assert!(
                kind.is_dir() && name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()),
                "{name}"
            );
            for entry in std::fs::read_dir(shard.path()).unwrap().flatten() {
                let entry_name = entry.file_name().to_string_lossy().into_owned();
                assert!(entry.file_type().unwrap().is_file(), "{entry_name}");
                assert!(
                    entry_name.starts_with(".tmp-")
                        || (entry_name.len() == 32
                            && entry_name.starts_with(&name)
                            && entry_name.bytes().all(|b| b.is_ascii_hexdigit())),
                    "{entry_name}"
                );
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // name \0 source \0 define-name \0 define-value, then three workgroup bytes.
    let (sizes, text) = data.split_at(data.len().min(3));
    let text = String::from_utf8_lossy(text);
    let mut parts = text.splitn(4, '\0');
    let name = parts.next().unwrap_or_default();
    let source = parts.next().unwrap_or_default();
    let mut spec = KernelSpec::new(
        name,
        [
            u32::from(sizes.first().copied().unwrap_or(1)),
            u32::from(sizes.get(1).copied().unwrap_or(1)),
            u32::from(sizes.get(2).copied().unwrap_or(1)),
        ],
    )
    .glsl(source);
    if let (Some(define), Some(value)) = (parts.next(), parts.next()) {
        spec = spec.define(define, value);
    }
    let fixture = fixture();
    match fixture.runtime.program(&spec) {
        Ok(program) => std::hint::black_box(program),
        Err(err) => {
            std::hint::black_box(err.to_string());
            return;
        }
    };
    // Asked again, the program comes from the disk entry this request wrote.
    fixture.runtime.program(&spec).expect("the same spec again");
    check_tree(fixture.dir.path());
});
