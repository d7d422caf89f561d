//! Recipes: what is needed to build a cache entry again, kept beside it so that a driver update
//! need not be a cold start. A recipe is an opaque payload (the runtime writes a kernel's spec
//! as JSON; the cache never reads it) sealed like an entry: `<gpu folder>/recipes/<key>.recipe`,
//! a 64-byte header (magic, format version, backend tag, GPU hash, key, payload length and
//! xxh3, header xxh3) then the payload. A recipe is only ever read back for the GPU folder and
//! key it names, from a regular file (no link followed) owned by this user: a damaged or foreign
//! recipe is refused like a damaged entry and never built from.
//!
//! Also here: which GPU folders hold the same device under another driver (the identity fields
//! that are not a driver's), and the ledger of what was rebuilt into a folder, which
//! `sparkle cache stats` shows.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use super::disk::{parse_gpu_dir_name, GPU_DESCRIPTION_JSON};
use super::files::{self, current_uid};
use super::{backend_tag, working_set, CacheKey, GpuId};

/// The folder of recipes inside a GPU folder.
pub const RECIPES_DIR: &str = "recipes";
/// The file, in a GPU folder, that records what was rebuilt into it.
pub const REBUILD_LEDGER_FILE: &str = "rebuilt";
/// The names of identity fields that a driver or compiler update changes: two GPU folders of
/// one backend whose other fields are equal hold the same device under different drivers.
/// Backends name their driver fields with these words (`version`, `kernel driver`, …).
pub const DRIVER_FIELDS: &[&str] = &["version", "binary formats", "kernel driver", "compiler", "driver"];
/// The largest recipe accepted (a kernel's sources and prebuilt code objects).
pub const MAX_RECIPE_BYTES: u64 = 16 << 20;

/// `SPRKRCP` + NUL, read as a little-endian u64.
const MAGIC: u64 = u64::from_le_bytes(*b"SPRKRCP\0");
/// The recipe format's version; a recipe of another version is refused.
const RECIPE_VERSION: u32 = 1;
/// Bytes of the header: magic 8, version 4, backend 4, gpu hash 8, key 16, payload length 8,
/// payload xxh3 8, header xxh3 8.
const HEADER_LEN: usize = 64;

/// Why a recipe file is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipeProblem {
    /// Shorter than a header.
    Truncated(u64),
    /// Not a recipe file.
    BadMagic,
    /// Written in another recipe format.
    Version(u32),
    /// The header's own checksum does not match.
    BadHeaderChecksum,
    /// Written for another backend.
    Backend(u32),
    /// Written for another GPU folder.
    Gpu(u64),
    /// Holds the recipe of another key.
    Key(u128),
    /// The header's payload length is not the file's.
    Length {
        /// What the header says.
        header: u64,
        /// What the file holds.
        file: u64,
    },
    /// The payload's checksum does not match.
    BadPayloadChecksum,
    /// Larger than [`MAX_RECIPE_BYTES`].
    TooLarge(u64),
    /// Owned by another user: never built from.
    Foreign(u32),
    /// Not a regular file (a link, a folder, …).
    NotAFile,
}

impl std::fmt::Display for RecipeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecipeProblem::Truncated(len) => write!(f, "file of {len} bytes is shorter than a recipe header"),
            RecipeProblem::BadMagic => f.write_str("not a sparkle recipe"),
            RecipeProblem::Version(v) => write!(f, "recipe format {v}, expected {RECIPE_VERSION}"),
            RecipeProblem::BadHeaderChecksum => f.write_str("header checksum mismatch"),
            RecipeProblem::Backend(b) => write!(f, "written for backend tag {b:08x}"),
            RecipeProblem::Gpu(g) => write!(f, "written for GPU {g:016x}, not this folder's"),
            RecipeProblem::Key(k) => write!(f, "holds the recipe of key {k:032x}"),
            RecipeProblem::Length { header, file } => {
                write!(f, "header says {header} payload bytes, the file holds {file}")
            }
            RecipeProblem::BadPayloadChecksum => f.write_str("payload checksum mismatch"),
            RecipeProblem::TooLarge(len) => write!(f, "{len} bytes, over the {MAX_RECIPE_BYTES}-byte bound"),
            RecipeProblem::Foreign(uid) => write!(f, "owned by uid {uid}, not this user: never built from"),
            RecipeProblem::NotAFile => f.write_str("not a regular file"),
        }
    }
}

/// `<gpu dir>/recipes/<32 hex>.recipe`.
pub fn recipe_path(gpu_dir: &Path, key: CacheKey) -> PathBuf {
    gpu_dir.join(RECIPES_DIR).join(format!("{}.recipe", key.hex()))
}

/// The sealed bytes of a recipe of `key` in the GPU folder of `backend` / `gpu_hash`.
pub fn seal(backend: &str, gpu_hash: u64, key: CacheKey, payload: &[u8]) -> Vec<u8> {
    let key = key.as_u128();
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&RECIPE_VERSION.to_le_bytes());
    out.extend_from_slice(&backend_tag(backend).to_le_bytes());
    out.extend_from_slice(&gpu_hash.to_le_bytes());
    out.extend_from_slice(&(key as u64).to_le_bytes());
    out.extend_from_slice(&((key >> 64) as u64).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxh3_64(payload).to_le_bytes());
    let header_sum = xxh3_64(&out);
    out.extend_from_slice(&header_sum.to_le_bytes());
    debug_assert_eq!(out.len(), HEADER_LEN);
    out.extend_from_slice(payload);
    out
}

/// Checks a recipe's bytes against the folder and key it is read for; the payload if it passes.
pub fn open<'a>(
    bytes: &'a [u8],
    backend: &str,
    gpu_hash: u64,
    key: CacheKey,
) -> Result<&'a [u8], RecipeProblem> {
    if bytes.len() < HEADER_LEN {
        return Err(RecipeProblem::Truncated(bytes.len() as u64));
    }
    let u64_at = |at: usize| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(word)
    };
    let u32_at = |at: usize| {
        let mut word = [0u8; 4];
        word.copy_from_slice(&bytes[at..at + 4]);
        u32::from_le_bytes(word)
    };
    if u64_at(0) != MAGIC {
        return Err(RecipeProblem::BadMagic);
    }
    if xxh3_64(&bytes[..HEADER_LEN - 8]) != u64_at(HEADER_LEN - 8) {
        return Err(RecipeProblem::BadHeaderChecksum);
    }
    if u32_at(8) != RECIPE_VERSION {
        return Err(RecipeProblem::Version(u32_at(8)));
    }
    if u32_at(12) != backend_tag(backend) {
        return Err(RecipeProblem::Backend(u32_at(12)));
    }
    if u64_at(16) != gpu_hash {
        return Err(RecipeProblem::Gpu(u64_at(16)));
    }
    let stored_key = u128::from(u64_at(24)) | (u128::from(u64_at(32)) << 64);
    if stored_key != key.as_u128() {
        return Err(RecipeProblem::Key(stored_key));
    }
    let payload = &bytes[HEADER_LEN..];
    if u64_at(40) != payload.len() as u64 {
        return Err(RecipeProblem::Length { header: u64_at(40), file: payload.len() as u64 });
    }
    if xxh3_64(payload) != u64_at(48) {
        return Err(RecipeProblem::BadPayloadChecksum);
    }
    Ok(payload)
}

/// Writes the recipe of `key` into `gpu_dir` for `gpu` unless one is there, from `payload()`
/// (asked only then). Best effort: a recipe that cannot be written costs a rebuild later, never
/// the program asked for now, so failures are logged at debug level. Returns the sealed recipe
/// when it was written now (the fleet tier publishes it beside the entry).
pub(crate) fn keep(
    gpu_dir: &Path,
    gpu: &GpuId,
    key: CacheKey,
    payload: impl FnOnce() -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let path = recipe_path(gpu_dir, key);
    if fs::symlink_metadata(&path).is_ok() {
        return None;
    }
    let payload = payload()?;
    if payload.len() as u64 > MAX_RECIPE_BYTES {
        tracing::debug!(%key, bytes = payload.len(), "a kernel's recipe is too large to keep");
        return None;
    }
    let sealed = seal(gpu.backend(), gpu.hash(), key, &payload);
    match write_sealed(gpu_dir, key, &sealed) {
        Ok(()) => Some(sealed),
        Err(err) => {
            tracing::debug!(path = %path.display(), error = %err, "could not keep a program's recipe");
            None
        }
    }
}

/// Writes a sealed recipe (0600, temp file then rename, in a 0700 `recipes` folder).
pub fn write(gpu_dir: &Path, backend: &str, gpu_hash: u64, key: CacheKey, payload: &[u8]) -> io::Result<()> {
    write_sealed(gpu_dir, key, &seal(backend, gpu_hash, key, payload))
}

fn write_sealed(gpu_dir: &Path, key: CacheKey, sealed: &[u8]) -> io::Result<()> {
    let dir = gpu_dir.join(RECIPES_DIR);
    files::create_private_dir(&dir)?;
    let mut temp = tempfile::Builder::new().prefix(files::TEMP_PREFIX).tempfile_in(&dir)?;
    temp.as_file_mut().write_all(sealed)?;
    temp.persist(recipe_path(gpu_dir, key)).map_err(|err| err.error)?;
    Ok(())
}

/// Reads and checks the recipe of `key` in the GPU folder `gpu_dir`, whose name gives the
/// backend and GPU hash it must have been written for. `Ok(None)`: there is none.
pub fn read(gpu_dir: &Path, key: CacheKey) -> Result<Option<Vec<u8>>, RecipeProblem> {
    let name = gpu_dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (backend, gpu_hash) = parse_gpu_dir_name(name).ok_or(RecipeProblem::Gpu(0))?;
    let path = recipe_path(gpu_dir, key);
    let file = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(RecipeProblem::NotAFile),
    };
    let meta = file.metadata().map_err(|_| RecipeProblem::NotAFile)?;
    if !meta.is_file() {
        return Err(RecipeProblem::NotAFile);
    }
    if meta.uid() != current_uid() {
        return Err(RecipeProblem::Foreign(meta.uid()));
    }
    if meta.len() > MAX_RECIPE_BYTES + HEADER_LEN as u64 {
        return Err(RecipeProblem::TooLarge(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    read_bounded(file, &mut bytes).map_err(|_| RecipeProblem::NotAFile)?;
    open(&bytes, backend, gpu_hash, key).map(<[u8]>::to_vec).map(Some)
}

fn read_bounded(file: File, out: &mut Vec<u8>) -> io::Result<()> {
    file.take(MAX_RECIPE_BYTES + HEADER_LEN as u64 + 1).read_to_end(out).map(drop)
}

/// The programs of `gpu_dir`'s working set, in first-use order (empty when it has none).
pub fn working_set(gpu_dir: &Path) -> Vec<CacheKey> {
    working_set::read(gpu_dir).into_iter().map(|(key, _)| key).collect()
}

/// Removes `gpu_dir`'s recipes and rebuild ledger (`cache clear`); what cannot be removed stays.
pub(crate) fn remove_all(gpu_dir: &Path) {
    let _ = files::remove_without_following(&gpu_dir.join(RECIPES_DIR));
    let _ = fs::remove_file(gpu_dir.join(REBUILD_LEDGER_FILE));
}

/// The fields of a GPU folder's identity that are not a driver's, from its `gpu.json`.
fn device_fields(gpu_dir: &Path) -> Option<(String, Vec<(String, String)>)> {
    let text = fs::read_to_string(gpu_dir.join(GPU_DESCRIPTION_JSON)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let backend = value.get("backend")?.as_str()?.to_owned();
    let fields = value
        .get("fields")?
        .as_array()?
        .iter()
        .filter_map(|pair| {
            let pair = pair.as_array()?;
            Some((pair.first()?.as_str()?.to_owned(), pair.get(1)?.as_str()?.to_owned()))
        })
        .filter(|(name, _)| !DRIVER_FIELDS.contains(&name.as_str()))
        .collect();
    Some((backend, fields))
}

/// The fields of an identity that name the device, without the driver's ([`DRIVER_FIELDS`]).
pub(crate) fn device_only(fields: &[(String, String)]) -> Vec<(String, String)> {
    fields.iter().filter(|(name, _)| !DRIVER_FIELDS.contains(&name.as_str())).cloned().collect()
}

/// Whether `gpu` and the GPU folder `other` hold the same device (same backend, equal fields
/// but the driver's) under another driver.
fn same_device(gpu: &GpuId, other: &Path) -> bool {
    let mine = device_only(gpu.fields());
    device_fields(other).is_some_and(|(backend, fields)| backend == gpu.backend() && fields == mine)
}

/// The GPU folders under `root` that hold `gpu`'s device under another driver and have a
/// working set, the most recently used first. Links and other users' folders are skipped.
pub fn earlier_drivers(root: &Path, gpu: &GpuId) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let Some((backend, hash)) = name.to_str().and_then(parse_gpu_dir_name) else { return false };
            backend == gpu.backend() && hash != gpu.hash()
        })
        .filter(|entry| {
            fs::symlink_metadata(entry.path()).is_ok_and(|meta| meta.is_dir() && meta.uid() == current_uid())
        })
        .map(|entry| entry.path())
        .filter(|dir| same_device(gpu, dir))
        .filter_map(|dir| {
            let used =
                fs::metadata(dir.join(working_set::WORKING_SET_FILE)).and_then(|m| m.modified()).ok()?;
            Some((used, dir))
        })
        .collect();
    found.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
    found.into_iter().map(|(_, dir)| dir).collect()
}

/// What was rebuilt into one GPU folder, summed over the rebuilds that recorded it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RebuildLedger {
    /// Programs compiled from a recipe of another folder.
    pub rebuilt: u64,
    /// Programs whose recipe was fine but whose compile failed.
    pub failed: u64,
    /// Recipes refused (damaged, foreign, missing, not a valid kernel).
    pub refused: u64,
    /// The folder of the last rebuild's recipes.
    pub from: Option<String>,
}

/// Appends one rebuild's figures to `gpu_dir`'s ledger (one line, best effort); `complete`:
/// it went through the whole working set of `from` (a stopped one is taken up by a later
/// process).
pub fn record_rebuild(gpu_dir: &Path, from: &str, rebuilt: u64, failed: u64, refused: u64, complete: bool) {
    let state = if complete { "complete" } else { "stopped" };
    let line = format!("{from} {rebuilt} {failed} {refused} {state}\n");
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(gpu_dir.join(REBUILD_LEDGER_FILE))
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(err) = written {
        tracing::debug!(dir = %gpu_dir.display(), error = %err, "could not record a rebuild");
    }
}

/// Whether a rebuild of `from`'s working set into `gpu_dir` went through to its end.
pub fn rebuild_completed(gpu_dir: &Path, from: &str) -> bool {
    fs::read_to_string(gpu_dir.join(REBUILD_LEDGER_FILE)).is_ok_and(|text| {
        text.lines().any(|line| line.split(' ').next() == Some(from) && line.ends_with(" complete"))
    })
}

/// Whether any rebuild into `gpu_dir` went through to its end.
pub fn any_rebuild_completed(gpu_dir: &Path) -> bool {
    fs::read_to_string(gpu_dir.join(REBUILD_LEDGER_FILE))
        .is_ok_and(|text| text.lines().any(|line| line.ends_with(" complete")))
}

/// Reads `gpu_dir`'s rebuild ledger; `None` when nothing was ever rebuilt into it. Damaged lines
/// are skipped: it is a report, never trusted for anything else.
pub fn read_ledger(gpu_dir: &Path) -> Option<RebuildLedger> {
    let text = fs::read_to_string(gpu_dir.join(REBUILD_LEDGER_FILE)).ok()?;
    let mut ledger = RebuildLedger::default();
    let mut any = false;
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        let [from, rebuilt, failed, refused, _state] = parts[..] else { continue };
        let (Ok(rebuilt), Ok(failed), Ok(refused)) =
            (rebuilt.parse::<u64>(), failed.parse::<u64>(), refused.parse::<u64>())
        else {
            continue;
        };
        any = true;
        ledger.rebuilt += rebuilt;
        ledger.failed += failed;
        ledger.refused += refused;
        ledger.from = Some(from.to_owned());
    }
    any.then_some(ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flip_anywhere_is_refused() {
        let key = CacheKey::from_u128(7);
        let sealed = seal("gl", 42, key, b"{\"spec\":1}");
        assert_eq!(open(&sealed, "gl", 42, key), Ok(&b"{\"spec\":1}"[..]));
        for at in 0..sealed.len() {
            let mut bad = sealed.clone();
            bad[at] ^= 0x10;
            assert!(open(&bad, "gl", 42, key).is_err(), "a flip at byte {at} was accepted");
        }
        assert_eq!(open(&sealed, "gl", 43, key), Err(RecipeProblem::Gpu(42)));
        assert_eq!(open(&sealed, "gl", 42, CacheKey::from_u128(8)), Err(RecipeProblem::Key(7)));
        assert!(matches!(open(&sealed, "amdgpu", 42, key), Err(RecipeProblem::Backend(_))));
        assert_eq!(open(&sealed[..10], "gl", 42, key), Err(RecipeProblem::Truncated(10)));
    }
}
