//! The gl backend: OpenGL 4.3+ compute shaders on a headless EGL context. (Being built.)

/// Errors of the gl backend.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GlError {
    #[error("the gl backend is not built yet")]
    NotBuilt,
}

/// The gl backend.
pub struct GlBackend;

impl GlBackend {
    pub fn open() -> Result<Self, GlError> {
        Err(GlError::NotBuilt)
    }
}

impl crate::Backend for GlBackend {
    fn info(&self) -> &crate::DeviceInfo {
        unreachable!("GlBackend::open never succeeds yet")
    }
    fn create_buffer(&self, _: u64, _: crate::BufferUsage) -> crate::Result<crate::Buffer> {
        Err(GlError::NotBuilt.into())
    }
    fn write_buffer(&self, _: &crate::Buffer, _: u64, _: &[u8]) -> crate::Result<()> {
        Err(GlError::NotBuilt.into())
    }
    fn read_buffer(&self, _: &crate::Buffer, _: u64, _: &mut [u8]) -> crate::Result<()> {
        Err(GlError::NotBuilt.into())
    }
    fn program(&self, _: &crate::KernelSpec) -> crate::Result<crate::Program> {
        Err(GlError::NotBuilt.into())
    }
    fn dispatch(&self, _: &crate::Program, _: &[crate::Arg<'_>], _: [u32; 3]) -> crate::Result<crate::Submission> {
        Err(GlError::NotBuilt.into())
    }
    fn cache_stats(&self) -> crate::cache::CacheStats {
        unreachable!()
    }
    fn cache_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
}
