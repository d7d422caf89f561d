//! The driver's own shader cache travels too. On NVIDIA and Mesa a GL program binary is not
//! finished machine code: the driver's cache (kept in `<cache dir>/drivers/<name>/`) decides
//! whether a start is really warm. So each driver folder is shared per GPU id (which holds the
//! driver version) as one gzip'd tar archive, `<gpu folder>/driver-<name>.tar.gz`:
//!
//! - the first process on a machine for a GPU id (its working set is empty) fetches the archive
//!   when the cache opens, within [`FETCH_BUDGET`], before the driver compiles anything; files
//!   the driver already made (an index created at start-up) are kept;
//! - a process whose driver folder gained files noticeably publishes the folder when the cache
//!   closes (replacing the archive: any machine's archive is as good as another's).
//!
//! An archive passes the envelope and signature checks of every remote object; unpacking takes
//! regular files and folders only, at relative paths without `..`, never replaces a file, and is
//! bounded in size. The files are the driver's to check, as in the local folder.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::envelope::Kind;
use super::tier::RemoteTier;
use crate::cache::driver_dirs::{self, DriverFound};

/// How long opening the cache may wait for a driver archive (or the fixed lookup budget, when
/// the user set a longer one): about what a warm driver cache saves over a cold one for a few
/// programs on NVIDIA (260 ms against 15 ms for the suite on an H100).
pub(crate) const FETCH_BUDGET: Duration = Duration::from_millis(500);
/// The archive is fetched only from a remote whose connecting round trip came back this soon:
/// from a slower one, a cold driver cache costs less than waiting for it.
const PROBE_BUDGET: Duration = Duration::from_millis(25);
/// Unpacked archives larger than this are refused (a driver cache is tens of megabytes).
const MAX_UNPACKED_BYTES: u64 = 2 << 30;
const MAX_FILES: usize = 1 << 20;
/// A folder is published again only when its file count grew by this fraction (at least one
/// file): a program or two more in a large cache is not worth uploading it all again.
const GROWTH_PERCENT: u64 = 5;

/// The driver folders of one cache folder, as they were when the cache opened.
pub(crate) struct DriverFolders {
    root: PathBuf,
    files_at_open: HashMap<String, u64>,
}

fn archive_file(name: &str) -> String {
    format!("driver-{name}.tar.gz")
}

/// This user's usable driver folders under `root`: name, path, bytes.
fn folders(root: &Path) -> Vec<(String, PathBuf, u64, u64)> {
    match driver_dirs::scan(root) {
        Ok(found) => found
            .into_iter()
            .filter_map(|found| match found {
                DriverFound::Folder(folder) => Some((folder.name, folder.path, folder.files, folder.bytes)),
                _ => None,
            })
            .collect(),
        Err(err) => {
            tracing::debug!(error = %err, "cannot look at the driver cache folders");
            Vec::new()
        }
    }
}

impl DriverFolders {
    /// On a machine's first open for this GPU (`first`), fetches the archive of every driver
    /// folder under `root` (within the budget); remembers the folders' file counts.
    pub fn open(tier: &RemoteTier, root: &Path, first: bool) -> DriverFolders {
        for (name, path, _, _) in folders(root) {
            if first {
                match fetch_into(tier, &name, &path) {
                    Ok(Some(unpacked)) => {
                        tracing::info!(driver = %name, bytes = unpacked, "driver cache fetched from the remote cache");
                    }
                    Ok(None) => {}
                    Err(why) => tracing::warn!(
                        driver = %name, remote = %tier.url(),
                        "the driver cache from the remote cache is not used: {why}"
                    ),
                }
            }
        }
        // Counted after the fetch: what came from the remote is not this process's growth.
        let files_at_open = folders(root).into_iter().map(|(name, _, files, _)| (name, files)).collect();
        DriverFolders { root: root.to_path_buf(), files_at_open }
    }

    /// Publishes the folders that grew since the cache opened (background; the tier's drop
    /// waits for it, bounded).
    pub fn publish_grown(&self, tier: &RemoteTier) {
        if !tier.publishes() {
            return;
        }
        tracing::debug!(root = %self.root.display(), "looking for grown driver caches to publish");
        for (name, path, files, _) in folders(&self.root) {
            let before = self.files_at_open.get(&name).copied().unwrap_or(0);
            let threshold = (before * GROWTH_PERCENT / 100).max(1);
            if files < before.saturating_add(threshold) {
                tracing::debug!(driver = %name, files, before, "the driver cache did not grow enough to publish it");
                continue;
            }
            match pack(&path) {
                Ok(archive) => tier.replace_object(&archive_file(&name), Kind::DriverArchive, archive),
                Err(err) => {
                    tracing::debug!(driver = %name, error = %err, "could not archive the driver cache")
                }
            }
        }
    }
}

/// Fetches and unpacks `driver-<name>.tar.gz` into `dest`; `Ok(None)` when the remote has none.
fn fetch_into(tier: &RemoteTier, name: &str, dest: &Path) -> Result<Option<u64>, String> {
    let fixed = tier.budgets.fixed();
    let probe = fixed.map_or(PROBE_BUDGET, |fixed| fixed.max(PROBE_BUDGET));
    if tier.round_trip(probe).is_none_or(|round_trip| round_trip > probe) {
        // A dead remote is warned about once by the tier; a slow one is simply not waited for.
        tracing::debug!(driver = %name, "the remote did not answer within {} ms; the driver cache starts cold", probe.as_millis());
        return Ok(None);
    }
    let budget = fixed.map_or(FETCH_BUDGET, |fixed| fixed.max(FETCH_BUDGET));
    let Some(payload) = tier.fetch_object(&archive_file(name), Kind::DriverArchive, budget)? else {
        return Ok(None);
    };
    unpack(&payload, dest).map(Some)
}

/// A gzip'd tar of `dir`'s regular files and folders (links are not followed or stored).
pub(crate) fn pack(dir: &Path) -> io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    builder.follow_symlinks(false);
    // Drivers preallocate sparse index files; store them plainly, as any tar reads them.
    builder.sparse(false);
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in fs::read_dir(dir.join(&relative))? {
            let entry = entry?;
            let file_type = entry.file_type()?;
            let path = relative.join(entry.file_name());
            if file_type.is_dir() {
                pending.push(path);
            } else if file_type.is_file() {
                // The driver may replace a file meanwhile: what vanished is skipped.
                match fs::File::open(entry.path()) {
                    Ok(mut file) => builder.append_file(&path, &mut file)?,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    builder.into_inner()?.finish()
}

/// Unpacks an archive into `dest`: regular files and folders only, at clean relative paths,
/// never replacing what is there; returns the bytes written.
pub(crate) fn unpack(archive: &[u8], dest: &Path) -> Result<u64, String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut written = 0u64;
    let entries = archive.entries().map_err(|err| format!("not an archive: {err}"))?;
    for (index, entry) in entries.enumerate() {
        if index >= MAX_FILES {
            return Err(format!("more than {MAX_FILES} files"));
        }
        let mut entry = entry.map_err(|err| format!("damaged archive: {err}"))?;
        let path = entry.path().map_err(|err| format!("damaged archive: {err}"))?.into_owned();
        if path.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(format!("the archive names {}, which is not a plain relative path", path.display()));
        }
        let target = dest.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                fs::DirBuilder::new()
                    .recursive(true)
                    .create(&target)
                    .map_err(|err| format!("cannot create {}: {err}", target.display()))?;
            }
            tar::EntryType::Regular | tar::EntryType::GNUSparse => {
                let size = entry.header().size().map_err(|err| format!("damaged archive: {err}"))?;
                written = written.saturating_add(size);
                if written > MAX_UNPACKED_BYTES {
                    return Err(format!("more than {MAX_UNPACKED_BYTES} bytes unpacked"));
                }
                if let Some(parent) = target.parent() {
                    crate::cache::files::create_private_dir(parent)
                        .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
                }
                let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).min(64 << 20));
                entry.read_to_end(&mut bytes).map_err(|err| format!("damaged archive: {err}"))?;
                match fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&target)
                {
                    Ok(mut file) => file
                        .write_all(&bytes)
                        .map_err(|err| format!("cannot write {}: {err}", target.display()))?,
                    // The driver already made it: its own file wins.
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(format!("cannot write {}: {err}", target.display())),
                }
            }
            other => {
                return Err(format!(
                    "the archive holds a {other:?} at {}; only files and folders are taken",
                    path.display()
                ))
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks_files_and_never_replaces() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("a/b")).unwrap();
        fs::write(src.path().join("a/b/one"), b"first").unwrap();
        fs::write(src.path().join("index"), vec![7u8; 10_000]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let archive = pack(src.path()).unwrap();

        let dest = tempfile::tempdir().unwrap();
        fs::write(dest.path().join("index"), b"the driver's own").unwrap();
        let written = unpack(&archive, dest.path()).unwrap();
        assert_eq!(written, 10_005);
        assert_eq!(fs::read(dest.path().join("a/b/one")).unwrap(), b"first");
        assert_eq!(fs::read(dest.path().join("index")).unwrap(), b"the driver's own");
        assert!(fs::symlink_metadata(dest.path().join("link")).is_err(), "links are not archived");
    }

    #[test]
    fn refuses_escaping_paths_links_and_garbage() {
        let dest = tempfile::tempdir().unwrap();
        assert!(unpack(b"not gzip at all", dest.path()).is_err());
        for (path, kind) in [("../escape", tar::EntryType::Regular), ("evil", tar::EntryType::Symlink)] {
            let mut builder =
                tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_size(0);
            // Written raw: the tar crate refuses to build such paths itself.
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            if kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").unwrap();
            }
            header.set_cksum();
            builder.append(&header, io::empty()).unwrap();
            let archive = builder.into_inner().unwrap().finish().unwrap();
            assert!(unpack(&archive, dest.path()).is_err(), "{path}");
        }
        assert!(!dest.path().parent().unwrap().join("escape").exists());
        assert!(fs::symlink_metadata(dest.path().join("evil")).is_err());
    }
}
