//! The placement's history on disk: one file per device set in `<cache dir>/placement/`, kept
//! like tuning results and verified like cache entries before anything trusts it.
//!
//! A file is one header line — `sparkle-placement <format version> <xxh3-64 of the body, hex>`
//! — then the body: the [`PlacementModel`] and the device set it was learned on, as JSON. A
//! file that is too large, has another magic or version, a checksum that does not match, a body
//! that does not parse or another device set is a miss: the placement starts afresh, counts it
//! and warns once. Files are written to a temporary file in the same folder and renamed, so a
//! reader sees a whole old file, a whole new one or none. The number of histories is bounded
//! ([`MAX_HISTORIES`]); `sparkle cache clear` removes the folder.
//!
//! With a fleet tier configured (`SPARKLE_CACHE_REMOTE`), a saved history is published as
//! `placement/<16 hex>.json` and a missing one fetched from there, signed and verified as every
//! remote object is (`crate::cache::remote` `fleet_files.rs`), then checked as a local file.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use super::placement_model::PlacementModel;

/// The folder of the cache dir that holds placement histories.
pub const HISTORY_DIR: &str = "placement";
/// The history file format's version; a file of another version is a miss.
pub const HISTORY_FORMAT_VERSION: u32 = 1;
/// At most this many (kernel, size class, device) histories are kept per device set.
pub const MAX_HISTORIES: usize = 4096;
const MAGIC: &str = "sparkle-placement";
/// A larger file is not read.
const MAX_FILE_BYTES: u64 = 8 << 20;

#[derive(Serialize, Deserialize)]
struct Body {
    devices: Vec<String>,
    model: PlacementModel,
}

/// Why a history file was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Miss {
    /// There is none (a first run): not a problem.
    Absent,
    /// It is damaged or belongs elsewhere: counted and reported.
    Damaged(String),
}

/// The path of the history of the device set `identities` under `cache_dir`.
pub(crate) fn path_for(cache_dir: &Path, identities: &[String]) -> PathBuf {
    let joined = identities.join("\n");
    cache_dir.join(HISTORY_DIR).join(format!("{:016x}.json", xxh3_64(joined.as_bytes())))
}

/// Reads and verifies the history at `path`, learned on `identities`. When there is none and a
/// fleet tier is configured, the fleet's history of the same device set is fetched, verified as
/// a remote object and then as a local file, and kept at `path`.
pub(crate) fn load(path: &Path, identities: &[String]) -> Result<PlacementModel, Miss> {
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return load_from_fleet(path, identities),
        Err(err) => return Err(Miss::Damaged(format!("cannot read it: {err}"))),
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(Miss::Damaged(format!("{} bytes, more than a history may hold", meta.len())));
    }
    let bytes = fs::read(path).map_err(|err| Miss::Damaged(format!("cannot read it: {err}")))?;
    parse(&bytes, identities)
}

/// The fleet's history of the device set `identities` (the file name of `path`), kept at `path`
/// once it passed every check; [`Miss::Absent`] without a fleet tier or a history there.
#[cfg(feature = "remote")]
fn load_from_fleet(path: &Path, identities: &[String]) -> Result<PlacementModel, Miss> {
    let Some(file) = path.file_name().and_then(|name| name.to_str()) else { return Err(Miss::Absent) };
    let bytes =
        match crate::cache::remote::fleet_files::fetch_placement_history(file, MAX_FILE_BYTES as usize) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(Miss::Absent),
            Err(why) => return Err(Miss::Damaged(format!("the fleet's history is refused: {why}"))),
        };
    let model = parse(&bytes, identities).map_err(|miss| match miss {
        Miss::Damaged(why) => Miss::Damaged(format!("the fleet's history is refused: {why}")),
        absent => absent,
    })?;
    if let Err(err) = write_file(path, &bytes) {
        tracing::debug!(path = %path.display(), error = %err, "could not keep the fleet's placement history");
    }
    tracing::debug!(path = %path.display(), "placement history fetched from the remote cache");
    Ok(model)
}

#[cfg(not(feature = "remote"))]
fn load_from_fleet(_path: &Path, _identities: &[String]) -> Result<PlacementModel, Miss> {
    Err(Miss::Absent)
}

/// Verifies a history file's bytes, learned on `identities`.
fn parse(bytes: &[u8], identities: &[String]) -> Result<PlacementModel, Miss> {
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Miss::Damaged(format!("{} bytes, more than a history may hold", bytes.len())));
    }
    let Some(newline) = bytes.iter().position(|&b| b == b'\n') else {
        return Err(Miss::Damaged("no header line".into()));
    };
    let header =
        std::str::from_utf8(&bytes[..newline]).map_err(|_| Miss::Damaged("header is not text".into()))?;
    let body = &bytes[newline + 1..];
    let mut fields = header.split(' ');
    if fields.next() != Some(MAGIC) {
        return Err(Miss::Damaged("not a placement history".into()));
    }
    let version = fields.next().and_then(|v| v.parse::<u32>().ok());
    if version != Some(HISTORY_FORMAT_VERSION) {
        return Err(Miss::Damaged(format!(
            "format version {version:?}, this build reads {HISTORY_FORMAT_VERSION}"
        )));
    }
    let checksum = fields.next().and_then(|c| u64::from_str_radix(c, 16).ok());
    if checksum != Some(xxh3_64(body)) || fields.next().is_some() {
        return Err(Miss::Damaged("checksum does not match its contents".into()));
    }
    let body: Body =
        serde_json::from_slice(body).map_err(|err| Miss::Damaged(format!("contents do not parse: {err}")))?;
    if body.devices != identities {
        return Err(Miss::Damaged("learned on another set of devices".into()));
    }
    let mut model = body.model;
    model.bound(MAX_HISTORIES);
    Ok(model)
}

/// Writes `model` (bounded) as the history at `path`, atomically; with a fleet tier configured,
/// publishes it there too (for machines with the same device set; best effort, bounded).
pub(crate) fn save(path: &Path, identities: &[String], model: &PlacementModel) -> std::io::Result<()> {
    let mut model = model.clone();
    model.bound(MAX_HISTORIES);
    let body = serde_json::to_vec(&Body { devices: identities.to_vec(), model })
        .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))?;
    let mut bytes = format!("{MAGIC} {HISTORY_FORMAT_VERSION} {:016x}\n", xxh3_64(&body)).into_bytes();
    bytes.extend_from_slice(&body);
    write_file(path, &bytes)?;
    #[cfg(feature = "remote")]
    if let Some(file) = path.file_name().and_then(|name| name.to_str()) {
        crate::cache::remote::fleet_files::publish_placement_history(file, &bytes);
    }
    Ok(())
}

/// Writes a history file's bytes at `path`, atomically (temporary file, then rename).
fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|err| err.error)?;
    Ok(())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Removes every placement history under `cache_dir`; returns how many files went.
pub fn clear_histories(cache_dir: &Path) -> std::io::Result<u64> {
    let dir = cache_dir.join(HISTORY_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    let _ = fs::remove_dir(&dir);
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::placement_inputs::{DeviceCosts, ModelDevice, Workload};
    use crate::runtime::placement_model::PlacementRules;

    /// A model that learned a stream of three workloads on two devices: samples on both,
    /// current devices, explorations and backed-off gaps.
    fn learned() -> PlacementModel {
        let costs = DeviceCosts { launch_s: 1e-4, flops_per_s: 1e10, bytes_per_s: 1e10 };
        let devices: Vec<ModelDevice> =
            ["a", "b"].iter().map(|l| ModelDevice { label: (*l).to_owned(), costs }).collect();
        let rules = PlacementRules::default();
        let workloads = [
            Workload::new("saxpy", 2e3, 12e3),
            Workload::new("saxpy", 2e6, 12e6),
            Workload::new("sgemm", 2e6, 1e4),
        ];
        let mut model = PlacementModel::new();
        for pass in 0..200 {
            for (w, workload) in workloads.iter().enumerate() {
                let decision = model.choose(workload, &devices, &rules);
                let label = &devices[decision.device].label;
                // `a` wins the first two workloads, `b` the third.
                let seconds = if (label == "a") == (w < 2) { 1e-3 } else { 2e-3 } + pass as f64 * 1e-9;
                model.record(workload, label, &costs, seconds, &rules);
            }
        }
        model
    }

    #[test]
    fn a_history_reads_back_as_the_model_it_was_written_from_in_the_first_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.json");
        let identities = vec!["a".to_owned(), "b".to_owned()];
        let mut model = learned();
        // The devices' workload counts, kept as decisions change them, are what a recount finds.
        let mut recounted = model.clone();
        recounted.count_homes();
        assert_eq!(recounted.devices, model.devices);
        let homes: Vec<usize> = model.devices.iter().map(|d| d.homes).collect();
        assert!(
            homes.len() == 2 && homes.iter().sum::<usize>() == 3 && homes.iter().all(|&n| n > 0),
            "{homes:?}"
        );
        model.bound(MAX_HISTORIES);
        assert!(model.workloads.values().flatten().any(|s| s.explored_at > 0 && s.backoff > 0), "{model:?}");
        save(&path, &identities, &model).unwrap();
        // Kept across processes: everything but the pins and the last device (none here).
        let mut loaded = load(&path, &identities).unwrap();
        loaded.last_device = model.last_device.clone();
        assert_eq!(loaded, model);
        // The body keeps the first format's keys: `kernel|size class|device`.
        let text = fs::read_to_string(&path).unwrap();
        let class = Workload::new("saxpy", 2e3, 12e3).size_class();
        assert!(text.contains(&format!("\"saxpy|{class}|a\"")) && text.contains("\"current\""), "{text}");
    }

    #[test]
    fn a_history_whose_keys_name_no_size_class_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.json");
        let identities = vec!["a".to_owned()];
        save(&path, &identities, &learned()).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        let body = text.split_once('\n').unwrap().1;
        let class = Workload::new("saxpy", 2e3, 12e3).size_class().to_string();
        for broken in ["x9.y9", ""] {
            let body = body.replace(&class, broken);
            let bytes = format!("{MAGIC} {HISTORY_FORMAT_VERSION} {:016x}\n{body}", xxh3_64(body.as_bytes()));
            fs::write(&path, bytes).unwrap();
            match load(&path, &identities) {
                Err(Miss::Damaged(why)) => assert!(why.contains("size class"), "{why}"),
                other => panic!("{broken:?}: {other:?}"),
            }
        }
    }
}
