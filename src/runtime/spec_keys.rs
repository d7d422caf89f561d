//! The cache keys of the kernel specs a device was asked for lately. A key is derived from what
//! the backend's compiler sees (for GL, the assembled GLSL text), and deriving it again on every
//! [`Runtime::program`](super::Runtime::program) call cost a memory hit 0.21 ms for sgemm's and
//! conv2d's 21 KB sources. A spec asked for again — equal in every field — gets its key from
//! here, and its program from the cache's memory without its source being assembled or checked
//! again (it was checked against the same device's limits when it was first asked for).

use std::hash::Hasher;
use std::sync::{Mutex, PoisonError};

use xxhash_rust::xxh3::Xxh3;

use crate::cache::CacheKey;
use crate::kernel::{KernelSource, KernelSpec};

/// Specs remembered per device; the one asked for longest ago goes first.
const REMEMBERED: usize = 64;

/// A device's recently asked-for specs and their keys.
#[derive(Default)]
pub(crate) struct SpecKeys {
    /// (fingerprint, spec, key), the latest last.
    recent: Mutex<Vec<(u64, KernelSpec, CacheKey)>>,
}

impl SpecKeys {
    /// The key of `spec`, if a spec equal to it was remembered.
    pub fn key(&self, spec: &KernelSpec) -> Option<CacheKey> {
        let fingerprint = fingerprint(spec);
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.iter().rev().find(|(f, known, _)| *f == fingerprint && known == spec).map(|(_, _, key)| *key)
    }

    /// Remembers that `spec`'s key is `key`.
    pub fn remember(&self, spec: &KernelSpec, key: CacheKey) {
        let fingerprint = fingerprint(spec);
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = recent.iter().position(|(f, known, _)| *f == fingerprint && known == spec) {
            recent.remove(at);
        } else if recent.len() >= REMEMBERED {
            recent.remove(0);
        }
        recent.push((fingerprint, spec.clone(), key));
    }
}

/// A cheap digest of the spec's name, sizes, defines and source texts, to find a candidate before
/// comparing whole specs (which decides).
fn fingerprint(spec: &KernelSpec) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.write(spec.name.as_bytes());
    for size in spec.workgroup_size {
        hasher.write_u32(size);
    }
    for (name, value) in &spec.defines {
        hasher.write(name.as_bytes());
        hasher.write(value.as_bytes());
    }
    for source in &spec.sources {
        match source {
            KernelSource::Glsl(text) => hasher.write(text.as_bytes()),
            KernelSource::OpenCl { source, entry_point, .. } => {
                hasher.write(source.as_bytes());
                hasher.write(entry_point.as_bytes());
            }
            KernelSource::CodeObjects { entry_point, objects } => {
                hasher.write(entry_point.as_bytes());
                hasher.write_usize(objects.len());
            }
        }
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(source: &str) -> KernelSpec {
        KernelSpec::new("k", [64, 1, 1]).glsl(source)
    }

    #[test]
    fn a_spec_gets_the_key_of_an_equal_one_only() {
        let keys = SpecKeys::default();
        let key =
            CacheKey::derive(&crate::cache::GpuId::new("test", vec![("gpu".into(), "1".into())]), &[b"a"]);
        keys.remember(&spec("void main() {}"), key);
        assert_eq!(keys.key(&spec("void main() {}")), Some(key));
        assert_eq!(keys.key(&spec("void main() { }")), None);
        let mut other = spec("void main() {}");
        other.defines.push(("N".into(), "1".into()));
        assert_eq!(keys.key(&other), None);
        // Equal in what the fingerprint reads, different elsewhere: compared whole, not found.
        let mut pinned = spec("void main() {}");
        pinned.pinned.push(("n".into(), 4));
        assert_eq!(keys.key(&pinned), None);
    }

    #[test]
    fn the_spec_asked_for_longest_ago_goes_first() {
        let keys = SpecKeys::default();
        let key =
            CacheKey::derive(&crate::cache::GpuId::new("test", vec![("gpu".into(), "1".into())]), &[b"a"]);
        for i in 0..=REMEMBERED {
            keys.remember(&spec(&format!("// {i}\nvoid main() {{}}")), key);
        }
        assert_eq!(keys.key(&spec("// 0\nvoid main() {}")), None);
        assert_eq!(keys.key(&spec("// 1\nvoid main() {}")), Some(key));
        assert_eq!(keys.recent.lock().unwrap().len(), REMEMBERED);
    }
}
