//! Identity: `GpuId` names the exact device + driver (+ compiler) a blob is valid for, and
//! `CacheKey` names one program on one GpuId. Both fold in [`CACHE_FORMAT_VERSION`], so bumping it
//! retires every entry at once.

use std::fmt;

use serde::Serialize;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

/// Bump whenever the entry format or what goes into a key changes.
pub const CACHE_FORMAT_VERSION: u32 = 2;

/// Everything that must change when a compiled blob may stop being valid on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuId {
    /// The backend's name (`gl`, `amdgpu-sim`, …): the cache stores and shows it, and knows no
    /// list of backends.
    backend: String,
    /// Named identity fields in a fixed order (vendor, renderer, driver version, …).
    fields: Vec<(String, String)>,
    hash: u64,
}

impl GpuId {
    /// The identity of one GPU under `backend`, from named fields in a fixed order; two ids are
    /// equal exactly when backend and fields are (the cache's format version is part of the
    /// hash).
    pub fn new(backend: impl Into<String>, fields: Vec<(String, String)>) -> Self {
        let backend = backend.into();
        let mut bytes = Vec::new();
        push_part(&mut bytes, &CACHE_FORMAT_VERSION.to_le_bytes());
        push_part(&mut bytes, backend.as_bytes());
        for (name, value) in &fields {
            push_part(&mut bytes, name.as_bytes());
            push_part(&mut bytes, value.as_bytes());
        }
        let hash = xxh3_64(&bytes);
        Self { backend, fields, hash }
    }

    /// The backend's name.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// The number entry headers carry for this backend: derived from its name, so that the cache
    /// needs no table of backends.
    pub fn backend_tag(&self) -> u32 {
        backend_tag(&self.backend)
    }

    /// The identity fields, in order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// A 64-bit digest of the identity; stored in every entry header.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The name of this GPU's folder inside the cache dir.
    pub fn dir_name(&self) -> String {
        format!("{}-{:016x}", self.backend, self.hash)
    }

    /// A human-readable description, one `name: value` per line.
    pub fn describe(&self) -> String {
        let mut out = format!("backend: {}\n", self.backend);
        for (name, value) in &self.fields {
            out.push_str(&format!("{name}: {value}\n"));
        }
        out.push_str(&format!("cache format: {CACHE_FORMAT_VERSION}\n"));
        out
    }
}

impl fmt::Display for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.hash)
    }
}

/// The key of one program on one GPU: a 128-bit digest of every input of its compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(u128);

impl CacheKey {
    /// Derives a key from the GPU identity and the program's inputs, each length-prefixed so
    /// that no two different part lists can collide by concatenation.
    pub fn derive(gpu: &GpuId, parts: &[&[u8]]) -> Self {
        let mut bytes = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum::<usize>() + 32);
        push_part(&mut bytes, &CACHE_FORMAT_VERSION.to_le_bytes());
        push_part(&mut bytes, gpu.backend.as_bytes());
        push_part(&mut bytes, &gpu.hash.to_le_bytes());
        for part in parts {
            push_part(&mut bytes, part);
        }
        Self(xxh3_128(&bytes))
    }

    /// The key whose 128-bit value is `value`.
    pub fn from_u128(value: u128) -> Self {
        Self(value)
    }

    /// The key's 128-bit value.
    pub fn as_u128(self) -> u128 {
        self.0
    }

    /// 32 lowercase hex digits: the entry's file name.
    pub fn hex(self) -> String {
        format!("{:032x}", self.0)
    }

    /// Parses [`hex`](Self::hex) back; `None` for anything else.
    pub fn from_hex(text: &str) -> Option<Self> {
        if text.len() != 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(text, 16).ok().map(Self)
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// The header tag of the backend called `name` (the low 32 bits of its name's xxh3).
pub fn backend_tag(name: &str) -> u32 {
    xxh3_64(name.as_bytes()) as u32
}

fn push_part(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&(part.len() as u64).to_le_bytes());
    out.extend_from_slice(part);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(renderer: &str) -> GpuId {
        GpuId::new("gl", vec![("renderer".into(), renderer.into())])
    }

    #[test]
    fn keys_differ_by_gpu_and_by_part_boundaries() {
        let a = CacheKey::derive(&gpu("a"), &[b"ab", b"c"]);
        assert_ne!(a, CacheKey::derive(&gpu("a"), &[b"a", b"bc"]));
        assert_ne!(a, CacheKey::derive(&gpu("b"), &[b"ab", b"c"]));
        assert_eq!(a, CacheKey::derive(&gpu("a"), &[b"ab", b"c"]));
    }

    #[test]
    fn hex_round_trips() {
        let key = CacheKey::derive(&gpu("a"), &[b"x"]);
        assert_eq!(CacheKey::from_hex(&key.hex()), Some(key));
        assert_eq!(CacheKey::from_hex("zz"), None);
    }
}
