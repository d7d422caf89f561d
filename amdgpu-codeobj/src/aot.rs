//! Ahead-of-time code objects for the built-in suite: which kernels are built for which targets
//! with which defines, and the manifest (`shaders/aot/manifest.json`) that records, per blob, the
//! source's hash, the flags, the compiler and the blob's hash, so that a stale blob is detected
//! without a compiler.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::compile::Builtins;
use crate::gfx_target::GfxTarget;
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// A suite kernel built ahead of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuiteKernel {
    /// Kernel (and entry point) name.
    pub name: &'static str,
    /// Source file under `shaders/`.
    pub file: &'static str,
    /// `-D` definitions (sgemm and conv2d share one GEMM core).
    pub defines: &'static [(&'static str, &'static str)],
}

/// The suite's OpenCL C kernels.
pub const SUITE: &[SuiteKernel] = &[
    SuiteKernel { name: "saxpy", file: "saxpy.cl", defines: &[] },
    SuiteKernel { name: "sgemm", file: "gemm.cl", defines: &[("CONV", "0")] },
    SuiteKernel { name: "conv2d", file: "gemm.cl", defines: &[("CONV", "1")] },
];

/// Targets blobs are built for.
pub const AOT_TARGETS: &[GfxTarget] =
    &[GfxTarget::new(10, 3, 0), GfxTarget::new(11, 0, 0), GfxTarget::new(11, 0, 1), GfxTarget::new(11, 0, 2)];

/// Folder of the blobs and the manifest, relative to the repository root.
pub const AOT_DIR: &str = "shaders/aot";
/// The manifest's file name inside [`AOT_DIR`].
pub const MANIFEST_FILE: &str = "manifest.json";
/// Version of the manifest format.
pub const MANIFEST_FORMAT: u32 = 1;

/// The manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of the format ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// One entry per blob, in build order.
    pub entries: Vec<ManifestEntry>,
}

/// One blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Suite kernel name (e.g. `saxpy`).
    pub kernel: String,
    /// Target the blob is built for (e.g. `gfx1100`).
    pub target: String,
    /// Source path relative to the repository root.
    pub source: String,
    /// xxh3-64 of the source file, 16 hex digits.
    pub source_xxh3: String,
    /// `-D` definitions the source was compiled with, in order.
    pub defines: Vec<(String, String)>,
    /// `libclc` or `none`.
    pub builtins: String,
    /// clang flags (file names left out).
    pub flags: Vec<String>,
    /// Compiler identity: `clang --version`'s first line, plus the libclc build.
    pub compiler: String,
    /// Blob path relative to the repository root.
    pub blob: String,
    /// xxh3-64 of the blob, 16 hex digits.
    pub blob_xxh3: String,
    /// The blob's size in bytes.
    pub blob_size: u64,
}

/// 16 hex digits of xxh3-64.
pub fn hash_hex(bytes: &[u8]) -> String {
    format!("{:016x}", xxh3_64(bytes))
}

/// Where a kernel's blob for a target lives, relative to the repository root.
pub fn blob_path(kernel: &str, target: GfxTarget) -> String {
    format!("{AOT_DIR}/{target}/{kernel}.co")
}

/// The manifest's name for `builtins` (`libclc` or `none`).
pub fn builtins_name(builtins: Builtins) -> &'static str {
    match builtins {
        Builtins::None => "none",
        Builtins::Libclc => "libclc",
    }
}

impl Manifest {
    /// Reads `<root>/shaders/aot/manifest.json`.
    pub fn load(root: &Path) -> Result<Self> {
        let path = manifest_path(root);
        let text = std::fs::read_to_string(&path).map_err(|e| AmdgpuError::file("reading", &path, e))?;
        let manifest: Self = serde_json::from_str(&text)
            .map_err(|e| AmdgpuError::io(format!("parsing {}", path.display()), std::io::Error::other(e)))?;
        if manifest.format != MANIFEST_FORMAT {
            return Err(AmdgpuError::io(
                format!("reading {}", path.display()),
                std::io::Error::other(format!(
                    "manifest format {} is not {MANIFEST_FORMAT}",
                    manifest.format
                )),
            ));
        }
        Ok(manifest)
    }

    /// The entry of `kernel` for `target`.
    pub fn entry(&self, kernel: &str, target: GfxTarget) -> Option<&ManifestEntry> {
        let name = target.name();
        self.entries.iter().find(|e| e.kernel == kernel && e.target == name)
    }
}

/// Where the manifest lies in the repository checked out at `root`.
pub fn manifest_path(root: &Path) -> PathBuf {
    root.join(AOT_DIR).join(MANIFEST_FILE)
}

impl ManifestEntry {
    /// Whether the source file under `root` still hashes to what the blob was built from; the
    /// error says how to rebuild.
    pub fn check_source(&self, root: &Path) -> Result<()> {
        let path = root.join(&self.source);
        let source = std::fs::read(&path).map_err(|e| AmdgpuError::file("reading", &path, e))?;
        let now = hash_hex(&source);
        if now != self.source_xxh3 {
            return Err(AmdgpuError::invalid_kernel(
                &self.kernel,
                format!(
                    "the {} blob was built from a different {} (hash {} then, {now} now): rebuild with `cargo run -p sparkle-tools --bin aot`",
                    self.target, self.source, self.source_xxh3
                ),
            ));
        }
        Ok(())
    }

    /// Reads the blob and checks its hash.
    pub fn read_blob(&self, root: &Path) -> Result<Vec<u8>> {
        let path = root.join(&self.blob);
        let blob = std::fs::read(&path).map_err(|e| AmdgpuError::file("reading", &path, e))?;
        if hash_hex(&blob) != self.blob_xxh3 || blob.len() as u64 != self.blob_size {
            return Err(AmdgpuError::invalid_kernel(
                &self.kernel,
                format!("{} does not match the manifest's hash and size: rebuild with `cargo run -p sparkle-tools --bin aot`", self.blob),
            ));
        }
        Ok(blob)
    }
}
