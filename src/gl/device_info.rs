//! What the GL device is: identity strings, version, extensions, program binary formats and
//! compute limits, read once when the context is made; and the `GpuId` derived from them.

use glow::HasContext;

use crate::hal::Api;

use super::context::EglContext;
use super::GlError;
use crate::cache::GpuId;
use crate::hal::Limits;

/// Test hook: a suffix for the driver version in the GPU id, standing for a driver update
/// (`docs/guide/environment.md`, Tests). Never for users: it only moves the cache to a new folder.
pub(crate) const TEST_DRIVER_ENV: &str = "SPARKLE_TEST_GL_DRIVER";

/// Facts read from the driver when the context was created.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub vendor: String,
    pub renderer: String,
    pub version: String,
    pub glsl_version: String,
    pub context_version: (u32, u32),
    pub source: String,
    pub binary_formats: Vec<u32>,
    /// `GL_KHR_parallel_shader_compile` or `GL_ARB_parallel_shader_compile`.
    pub parallel_compile: bool,
    /// GL 4.4 or `GL_ARB_buffer_storage`: staging buffers can be mapped persistently.
    pub buffer_storage: bool,
    pub limits: Limits,
    /// What the GPU's clocks follow: the driver's policy, or a hold (`clock_hold.rs`).
    pub clocks: String,
}

impl Probe {
    /// Identity of blobs: a driver update changes `GL_VERSION`, a new GPU `GL_RENDERER`.
    pub fn gpu_id(&self) -> GpuId {
        let formats: Vec<String> = self.binary_formats.iter().map(|f| format!("0x{f:04x}")).collect();
        // Test hook: a driver update cannot be installed by a test, so the version may be given
        // a suffix that stands for one (the GPU id, and with it the cache folder, changes).
        let version = match std::env::var(TEST_DRIVER_ENV) {
            Ok(driver) if !driver.is_empty() => format!("{} [test driver {driver}]", self.version),
            _ => self.version.clone(),
        };
        GpuId::new(
            super::Gl::NAME,
            vec![
                ("vendor".into(), self.vendor.clone()),
                ("renderer".into(), self.renderer.clone()),
                ("version".into(), version),
                ("binary formats".into(), formats.join(",")),
            ],
        )
    }

    /// Mesa's software renderers run compute shaders on the CPU.
    pub fn is_cpu_renderer(&self) -> bool {
        let name = self.renderer.to_ascii_lowercase();
        ["llvmpipe", "softpipe", "lavapipe", "swrast"].iter().any(|s| name.contains(s))
    }

    pub fn persists_programs(&self) -> bool {
        !self.binary_formats.is_empty()
    }
}

pub(crate) fn probe(context: &EglContext) -> Result<Probe, GlError> {
    let gl = &context.gl;
    // SAFETY: the context is current on this thread; these are plain queries with valid enums
    // and indices below 3 for the indexed ones.
    unsafe {
        let version = gl.version();
        let renderer = gl.get_parameter_string(glow::RENDERER);
        let version_string = gl.get_parameter_string(glow::VERSION);
        if (version.major, version.minor) < (4, 3) {
            return Err(GlError::VersionTooOld { renderer, version: version_string });
        }
        let format_count = gl.get_parameter_i32(glow::NUM_PROGRAM_BINARY_FORMATS).max(0) as usize;
        let mut formats = vec![0i32; format_count];
        if format_count > 0 {
            gl.get_parameter_i32_slice(glow::PROGRAM_BINARY_FORMATS, &mut formats);
        }
        let extensions = gl.supported_extensions();
        let parallel_compile = extensions.contains("GL_KHR_parallel_shader_compile")
            || extensions.contains("GL_ARB_parallel_shader_compile");
        let buffer_storage =
            (version.major, version.minor) >= (4, 4) || extensions.contains("GL_ARB_buffer_storage");
        let indexed = |name| [0, 1, 2].map(|i| gl.get_parameter_indexed_i32(name, i).max(0) as u32);
        let limits = Limits {
            max_workgroup_size: indexed(glow::MAX_COMPUTE_WORK_GROUP_SIZE),
            max_workgroup_invocations: gl.get_parameter_i32(glow::MAX_COMPUTE_WORK_GROUP_INVOCATIONS).max(0)
                as u32,
            max_workgroup_count: indexed(glow::MAX_COMPUTE_WORK_GROUP_COUNT),
            max_shared_memory_bytes: gl.get_parameter_i32(glow::MAX_COMPUTE_SHARED_MEMORY_SIZE).max(0) as u32,
            // glow passes buffer sizes and offsets as i32.
            max_storage_buffer_bytes: (gl.get_parameter_i64(glow::MAX_SHADER_STORAGE_BLOCK_SIZE).max(0)
                as u64)
                .min(i32::MAX as u64),
            max_storage_buffer_bindings: gl.get_parameter_i32(glow::MAX_COMPUTE_SHADER_STORAGE_BLOCKS).max(0)
                as u32,
            storage_buffer_offset_alignment: gl
                .get_parameter_i32(glow::SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT)
                .max(1) as u64,
            max_texel_buffer_texels: gl.get_parameter_i64(glow::MAX_TEXTURE_BUFFER_SIZE).max(0) as u64,
            texel_buffer_offset_alignment: gl.get_parameter_i32(glow::TEXTURE_BUFFER_OFFSET_ALIGNMENT).max(1)
                as u64,
        };
        // Queries above may leave an error on drivers missing one enum; it must not be blamed
        // on the first real call.
        while gl.get_error() != glow::NO_ERROR {}
        if parallel_compile {
            // Let the driver use as many compiler threads as it likes.
            gl.max_shader_compiler_threads(u32::MAX);
        }
        Ok(Probe {
            vendor: gl.get_parameter_string(glow::VENDOR),
            renderer,
            version: version_string,
            glsl_version: gl.get_parameter_string(glow::SHADING_LANGUAGE_VERSION),
            context_version: (version.major, version.minor),
            source: context.source.clone(),
            binary_formats: formats.into_iter().map(|f| f as u32).collect(),
            parallel_compile,
            buffer_storage,
            limits,
            clocks: String::new(),
        })
    }
}
