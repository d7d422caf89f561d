//! What an object on the remote is, from its name, and whether this machine accepts it: the one
//! check every object passes before anything uses it (lookups, pulls, driver archives, the
//! working set), which `sparkle cache remote verify` applies to the whole store.
//!
//! Names are `<gpu folder>/<file>`, the GPU folder being `<backend>-<16 hex digits of the GPU
//! id's hash>` as on the local disk: `<32 hex>` is a program entry, `<32 hex>.lease` a compile
//! lease, `driver-<name>.tar.gz` a driver cache archive, `working-set` the fleet's working set.

use super::config::hex_key;
use super::envelope::{self, Kind, Opened, Provenance};
use super::signing::TrustedKeys;
use crate::cache::entry::{self, EntryHeader, Expect};
use crate::cache::{backend_tag, CacheKey, WORKING_SET_FILE};

/// What an object's name says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ObjectName {
    /// A program entry of `folder`.
    Entry { folder: String, key: CacheKey },
    /// A compile lease (not an envelope: it holds an expiry time or a process id).
    Lease,
    /// A driver cache archive of `folder`.
    DriverArchive,
    /// The fleet's working set of `folder`.
    WorkingSet,
    /// The recipe of a program of `folder` (`<gpu folder>/<32 hex>.recipe`, `recipes.rs`).
    Recipe { folder: String, key: CacheKey },
    /// A GPU folder filed under its device (`devices/<backend>-<16 hex>/<gpu folder>`).
    DeviceDriver,
    /// Not a name Sparkle writes (or the tier's own write check).
    Other,
}

/// What the name `<folder>/<file>` says the object is.
pub(crate) fn classify(name: &str) -> ObjectName {
    let Some((folder, file)) = name.rsplit_once('/') else { return ObjectName::Other };
    if let Some(named) = super::recipes::classify(folder, file) {
        return named;
    }
    if folder_identity(folder).is_none() {
        return ObjectName::Other;
    }
    if let Some(key) = CacheKey::from_hex(file) {
        return ObjectName::Entry { folder: folder.to_owned(), key };
    }
    if file.strip_suffix(".lease").and_then(CacheKey::from_hex).is_some() {
        return ObjectName::Lease;
    }
    if file == WORKING_SET_FILE {
        return ObjectName::WorkingSet;
    }
    if file.strip_prefix("driver-").and_then(|rest| rest.strip_suffix(".tar.gz")).is_some_and(|driver| {
        !driver.is_empty() && driver.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    }) {
        return ObjectName::DriverArchive;
    }
    ObjectName::Other
}

/// The backend tag and GPU hash a folder name `<backend>-<16 hex>` stands for.
pub(crate) fn folder_identity(folder: &str) -> Option<(u32, u64)> {
    let (backend, hash) = folder.rsplit_once('-')?;
    if backend.is_empty() || hash.len() != 16 {
        return None;
    }
    Some((backend_tag(backend), u64::from_str_radix(hash, 16).ok()?))
}

/// Opens the object `name` and checks it as this machine must before using it: the envelope,
/// then (with trusted keys) a trusted signature over the name, the kind and the contents, then
/// the kind its name calls for.
pub(crate) fn open_checked<'a>(
    name: &str,
    bytes: &'a [u8],
    kind: Kind,
    trusted: Option<&TrustedKeys>,
) -> Result<Opened<'a>, String> {
    let opened = envelope::open(bytes)?;
    if let Some(trusted) = trusted {
        trusted.check(name, &opened).map_err(|why| why + &made_by(&opened))?;
    }
    if opened.kind != kind {
        return Err(format!("it is a {:?} object where a {kind:?} belongs{}", opened.kind, made_by(&opened)));
    }
    Ok(opened)
}

/// Who an object says made it: shown with a refusal, never trusted.
fn made_by(opened: &Opened<'_>) -> String {
    match serde_json::from_slice::<Provenance>(opened.provenance) {
        Ok(p) => format!(" (it says it was made by Sparkle {} for {})", p.sparkle, p.backend),
        Err(_) => String::new(),
    }
}

/// Checks the entry object `name` against `expect` (the key its name holds, the GPU of its
/// folder): [`open_checked`], then every check a disk entry passes.
pub(crate) fn check_entry<'a>(
    name: &str,
    bytes: &'a [u8],
    expect: &Expect,
    trusted: Option<&TrustedKeys>,
) -> Result<(EntryHeader, &'a [u8]), String> {
    let opened = open_checked(name, bytes, Kind::Entry, trusted)?;
    entry::verify_bytes(opened.payload, expect).map_err(|problem| format!("{problem}{}", made_by(&opened)))
}

/// What [`check_any`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Accepted; how (signed by whom, or unsigned where that is allowed).
    Accepted(String),
    /// Refused, and why.
    Refused(String),
    /// A compile lease: no envelope, nothing to verify.
    Lease,
    /// Not an object Sparkle writes: left alone.
    Other,
}

/// Checks any object by what its name says it is, as a machine of its GPU would before using
/// it (for `sparkle cache remote verify`).
pub(crate) fn check_any(name: &str, bytes: &[u8], trusted: Option<&TrustedKeys>) -> Verdict {
    let kind = match classify(name) {
        ObjectName::Entry { folder, key } => {
            let Some((backend, gpu_hash)) = folder_identity(&folder) else { return Verdict::Other };
            let expect = Expect { backend, gpu_hash, key };
            return match check_entry(name, bytes, &expect, trusted) {
                Ok(_) => Verdict::Accepted(how(bytes)),
                Err(why) => Verdict::Refused(why),
            };
        }
        ObjectName::Lease => return Verdict::Lease,
        ObjectName::Other => return Verdict::Other,
        ObjectName::Recipe { .. } | ObjectName::DeviceDriver => {
            return match super::recipes::check(name, bytes, trusted) {
                Ok(()) => Verdict::Accepted(how(bytes)),
                Err(why) => Verdict::Refused(why),
            }
        }
        ObjectName::DriverArchive => Kind::DriverArchive,
        ObjectName::WorkingSet => Kind::WorkingSet,
    };
    match open_checked(name, bytes, kind, trusted) {
        Ok(_) => Verdict::Accepted(how(bytes)),
        Err(why) => Verdict::Refused(why),
    }
}

/// How an accepted object passed: `signed by <key>` or `unsigned`.
fn how(bytes: &[u8]) -> String {
    match envelope::open(bytes).ok().and_then(|opened| opened.signature) {
        Some((_, key)) => format!("signed by {}", hex_key(key)),
        None => "unsigned".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_classified() {
        let key = CacheKey::from_u128(7);
        let folder = "gl-00000000000000ab";
        assert_eq!(
            classify(&format!("{folder}/{}", key.hex())),
            ObjectName::Entry { folder: folder.into(), key }
        );
        assert_eq!(classify(&format!("{folder}/{}.lease", key.hex())), ObjectName::Lease);
        assert_eq!(classify(&format!("{folder}/driver-gl.tar.gz")), ObjectName::DriverArchive);
        assert_eq!(classify(&format!("{folder}/working-set")), ObjectName::WorkingSet);
        for other in
            [".sparkle-write-check", "gl/abc", "gl-xyz/working-set", &format!("{folder}/driver-.tar.gz")]
        {
            assert_eq!(classify(other), ObjectName::Other, "{other}");
        }
        assert_eq!(folder_identity(folder), Some((backend_tag("gl"), 0xab)));
        assert_eq!(folder_identity("amdgpu-sim-00000000000000ff"), Some((backend_tag("amdgpu-sim"), 0xff)));
    }
}
