//! Recipes travel through the fleet tier, so that a machine that meets a driver update with an
//! empty cache (a fresh machine, a new image) rebuilds what the fleet used under the earlier
//! driver instead of compiling it all at first use.
//!
//! Two kinds of object, both sealed in the envelope every remote object has (signed when a
//! signing key is set) and checked like every object before use:
//!
//! - `<gpu folder>/<32 hex>.recipe`, beside the entry: a recipe byte for byte as the disk tier
//!   keeps it (`crate::cache::recipe`), published when a process keeps one. A reader checks the
//!   envelope (a trusted signature over the name when keys are trusted; unsigned objects only
//!   with `SPARKLE_CACHE_REMOTE_UNSIGNED`, as for entries), then the recipe's own seal against
//!   the folder and key its name holds.
//! - `devices/<backend>-<16 hex>/<gpu folder>`: which GPU folders hold one device. The folder is
//!   a hash of the backend and the identity fields that are not a driver's (`recipe::DRIVER_FIELDS`),
//!   and the object holds the GPU folder's whole identity: a reader checks that it hashes to the
//!   folder it is filed as, and under the device folder it is listed in. Filed once per process
//!   and GPU folder.
//!
//! Both are published create-if-absent; one already there that does not pass the publisher's
//! own checks (unsigned, or signed by a key it does not trust) is replaced, compare-and-swap, as
//! entries are: a machine that trusts less never replaces what the fleet's trusted machines put.
//!
//! A machine looks for them only when it has nothing local to rebuild from: its GPU folder has
//! no working set and no folder of the same device under another driver has one. Then it lists
//! its device folder, takes the other driver filed most recently (the newest: a folder is filed
//! when its driver is first used), and orders that folder's recipes for the rebuild
//! (`crate::runtime::rebuild`) in the fleet's first-use order, so that what a process needs first
//! is ready first:
//!
//! - by the fleet's working set there, when one was pushed (`sparkle cache push`), verifies and
//!   names any of them; the recipes it does not name follow by key, and the rebuild fetches and
//!   checks them one at a time;
//! - otherwise by when each recipe was published: its envelope's creation time
//!   (`Provenance::created_unix_ns`). Only the process that compiled a program publishes its
//!   recipe, right after the compile, create-if-absent, so the kept object's time is the
//!   program's first use in the fleet (a trusting machine that replaced an object it refused
//!   gives it its own time; clocks of machines differ by their skew). The recipes are fetched
//!   and checked up front for it, [`ORDER_CONCURRENCY`] at a time, ties and recipes without a
//!   time by key; those that do not verify, are gone or could not be fetched go last. The specs
//!   fetched are handed to the rebuild, which fetches none of them again, up to
//!   [`MAX_PREFETCHED_BYTES`] in all; past that a recipe is fetched for its time and again when
//!   it is built. The time decides only the order: what is built is what passed the checks.
//!
//! Bounds: at most [`MAX_DRIVERS`] folders looked at, [`MAX_WORKING_SET_KEYS`] recipes, each at
//! most `MAX_RECIPE_BYTES`; every request has a timeout, and the up-front fetches stop at the
//! first round in which none was answered (the rest then go last, by key).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use super::check::{self, ObjectName};
use super::envelope::{self, Kind, Provenance};
use super::signing::TrustedKeys;
use super::store::Got;
use super::tier::{Background, RemoteTier, MAX_WORKING_SET_KEYS};
use crate::cache::recipe::{self, MAX_RECIPE_BYTES};
use crate::cache::{working_set, CacheKey, GpuId, ProgramCache, WORKING_SET_FILE};

/// The folder under which GPU folders are filed by device.
pub(crate) const DEVICES_FOLDER: &str = "devices";
/// How a recipe object's name ends.
const RECIPE_SUFFIX: &str = ".recipe";
/// A GPU folder's identity is a few hundred bytes.
const MAX_DEVICE_BYTES: usize = 64 << 10;
/// At most this many other drivers' folders of one device are looked at.
pub(crate) const MAX_DRIVERS: usize = 16;
/// A recipe's header (`crate::cache::recipe`) is this long.
const RECIPE_HEADER: usize = 64;
/// The fleet's working set object is at most this large.
const MAX_WORKING_SET_BYTES: usize = 2 << 20;
/// Without a working set, recipes are fetched this many at a time to order them (a round waits
/// for its slowest request; each has the caller's timeout). The first program waits for every
/// round: 20,000 recipes 50 ms away take 625 rounds, about 31 s (at 8 at a time, two minutes).
pub(crate) const ORDER_CONCURRENCY: usize = 32;
/// The kernel specs fetched to order recipes are kept for the rebuild up to this many bytes in
/// all (recipes are a few KiB; the bound holds memory, not the usual case).
pub(crate) const MAX_PREFETCHED_BYTES: usize = 64 << 20;

/// The identity of a GPU folder, as filed under its device.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceDriver {
    backend: String,
    fields: Vec<(String, String)>,
}

/// `<gpu folder>/<32 hex>.recipe`.
fn recipe_name(folder: &str, key: CacheKey) -> String {
    format!("{folder}/{}{RECIPE_SUFFIX}", key.hex())
}

/// `devices/<backend>-<16 hex>`: the folder of every GPU folder of this device, whatever its
/// driver.
pub(crate) fn device_folder(backend: &str, fields: &[(String, String)]) -> String {
    let device = recipe::device_only(fields);
    let text = serde_json::to_vec(&(backend, &device)).unwrap_or_default();
    format!("{DEVICES_FOLDER}/{backend}-{:016x}", xxh3_64(&text))
}

/// What `<folder>/<file>` is, when it is one of this file's objects.
pub(crate) fn classify(folder: &str, file: &str) -> Option<ObjectName> {
    if let Some(hex) = file.strip_suffix(RECIPE_SUFFIX) {
        let key = CacheKey::from_hex(hex)?;
        if folder.contains('/') || check::folder_identity(folder).is_none() {
            return None;
        }
        return Some(ObjectName::Recipe { folder: folder.to_owned(), key });
    }
    let device = folder.strip_prefix(DEVICES_FOLDER)?.strip_prefix('/')?;
    let filed = !device.contains('/') && check::folder_identity(device).is_some();
    (filed && check::folder_identity(file).is_some()).then_some(ObjectName::DeviceDriver)
}

/// Checks one of this file's objects as a machine would before using it (`cache remote verify`).
pub(crate) fn check(name: &str, bytes: &[u8], trusted: Option<&TrustedKeys>) -> Result<(), String> {
    let Some((folder, file)) = name.rsplit_once('/') else { return Err("not a recipe object".into()) };
    match classify(folder, file) {
        Some(ObjectName::Recipe { folder, key }) => open_recipe(name, &folder, key, bytes, trusted).map(drop),
        Some(ObjectName::DeviceDriver) => open_device(name, bytes, trusted).map(drop),
        _ => Err("not a recipe object".into()),
    }
}

/// The kernel spec a recipe object holds, once it passed every check, and when the object was
/// made (its envelope's creation time; `None` when its provenance does not say).
fn open_recipe(
    name: &str,
    folder: &str,
    key: CacheKey,
    bytes: &[u8],
    trusted: Option<&TrustedKeys>,
) -> Result<(Vec<u8>, Option<u64>), String> {
    let opened = check::open_checked(name, bytes, Kind::Recipe, trusted)?;
    let (backend, hash) = folder
        .rsplit_once('-')
        .and_then(|(backend, hash)| Some((backend, u64::from_str_radix(hash, 16).ok()?)))
        .ok_or_else(|| format!("{folder} is not a GPU folder"))?;
    let spec = recipe::open(opened.payload, backend, hash, key).map_err(|problem| problem.to_string())?;
    // Time 0 is what a producer that did not say writes (`Provenance::default`).
    let created = serde_json::from_slice::<Provenance>(opened.provenance)
        .ok()
        .map(|p| p.created_unix_ns)
        .filter(|&ns| ns > 0);
    Ok((spec.to_vec(), created))
}

/// The fleet's first-use order of recipes: those with a creation time by it, ties by key; then
/// the others (no time said, refused, gone, not fetched) by key.
fn by_first_use(mut found: Vec<(CacheKey, Option<u64>)>) -> Vec<CacheKey> {
    found.sort_unstable_by_key(|&(key, created)| (created.is_none(), created, key));
    found.into_iter().map(|(key, _)| key).collect()
}

/// The GPU identity a device object files, and when it was filed, once it passed every check:
/// the envelope, then that the identity is the folder's its name gives, under the device folder
/// it is filed in.
fn open_device(name: &str, bytes: &[u8], trusted: Option<&TrustedKeys>) -> Result<(GpuId, u64), String> {
    let opened = check::open_checked(name, bytes, Kind::DeviceDriver, trusted)?;
    let filed: DeviceDriver = serde_json::from_slice(opened.payload)
        .map_err(|err| format!("the GPU identity does not parse: {err}"))?;
    let gpu = GpuId::new(filed.backend, filed.fields);
    let (device, file) = name.rsplit_once('/').unwrap_or(("", name));
    if gpu.dir_name() != file {
        return Err(format!("it describes the GPU folder {}, not {file}", gpu.dir_name()));
    }
    if device_folder(gpu.backend(), gpu.fields()) != device {
        return Err(format!("its GPU is not a device of {device}"));
    }
    let created = serde_json::from_slice::<Provenance>(opened.provenance).map_or(0, |p| p.created_unix_ns);
    Ok((gpu, created))
}

/// Publishes the recipe `sealed` of `key` beside its entry (in the background, replacing what is
/// there), and, once per process and GPU folder, files the folder under its device.
pub(crate) fn publish_recipe(tier: &RemoteTier, key: CacheKey, sealed: Vec<u8>) {
    if !tier.publishes() {
        return;
    }
    let background = tier.background();
    let (folder, identity) = background.gpu();
    tier.put_named(recipe_name(folder, key), Kind::Recipe, sealed);
    // Once per tier: named by where its state lives and when it opened (an address alone could
    // be a dropped tier's; a URL could be another tier's).
    static FILED: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let tier_id = format!("{:p} {:?}", identity, background.opened_at());
    let first = FILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(tier_id);
    if first {
        let device = DeviceDriver { backend: identity.backend.clone(), fields: identity.gpu.clone() };
        let payload = serde_json::to_vec(&device).unwrap_or_default();
        let name = format!("{}/{folder}", device_folder(&identity.backend, &identity.gpu));
        tier.put_named(name, Kind::DeviceDriver, payload);
    }
}

/// Publishes the recipe of `key` kept in the GPU folder `gpu_dir`, if there is one that passes
/// its checks (`sparkle cache push`: recipes kept before a remote was configured).
pub(crate) fn publish_kept_recipe(tier: &RemoteTier, gpu_dir: &std::path::Path, key: CacheKey) {
    match recipe::read(gpu_dir, key) {
        Ok(Some(payload)) => {
            let background = tier.background();
            let (folder, identity) = background.gpu();
            let hash = folder.rsplit_once('-').and_then(|(_, hash)| u64::from_str_radix(hash, 16).ok());
            if let Some(hash) = hash {
                publish_recipe(tier, key, recipe::seal(&identity.backend, hash, key, &payload));
            }
        }
        Ok(None) => {}
        Err(problem) => tracing::debug!(%key, "a kept recipe is not published: {problem}"),
    }
}

/// The recipes of the fleet, as a rebuild reads them: a handle on the remote tier that outlives
/// neither its store nor its runtime (once the tier is dropped, every request fails at once).
pub(crate) struct FleetRecipes {
    background: Background,
}

impl<P: Send + Sync + 'static> ProgramCache<P> {
    /// The fleet's recipes, when a remote tier is configured.
    pub(crate) fn fleet_recipes(&self) -> Option<FleetRecipes> {
        self.remote().map(|tier| FleetRecipes { background: tier.background() })
    }
}

/// The object `name` of `background`'s store, at most `max` bytes of payload; `None` when the
/// remote has none.
async fn get_object(background: &Background, name: &str, max: usize) -> Result<Option<Vec<u8>>, String> {
    let got = background.store().get(name, max.saturating_add(envelope::MAX_OVERHEAD)).await;
    match got.map_err(|err| err.0)? {
        None => Ok(None),
        Some(Got::Object { bytes, .. }) => Ok(Some(bytes)),
        Some(Got::TooLarge { size }) => {
            Err(format!("{name} is {size} bytes, more than such an object takes"))
        }
    }
}

/// The programs of a GPU folder that have a recipe on the fleet, as a rebuild takes them.
pub(crate) struct FleetPrograms {
    /// In the fleet's first-use order; at most [`MAX_WORKING_SET_KEYS`].
    pub keys: Vec<CacheKey>,
    /// What fetching a program's recipe found, for those fetched already to order them (never
    /// [`Fetched::Failed`]: the rebuild asks again for those).
    pub fetched: HashMap<CacheKey, Fetched>,
}

impl FleetRecipes {
    /// The object `name`, at most `max` bytes of payload; `None` when the remote has none.
    fn get(&self, name: &str, max: usize, timeout: Duration) -> Result<Option<Vec<u8>>, String> {
        let background = self.background.clone();
        let owned = name.to_owned();
        self.background
            .block_on(timeout, async move { Ok(get_object(&background, &owned, max).await) })
            .map_err(|err| err.0)?
    }

    fn list(&self, folder: String, timeout: Duration) -> Result<Vec<String>, String> {
        let background = self.background.clone();
        let listed = self
            .background
            .block_on(timeout, async move { background.store().list(Some(&folder)).await })
            .map_err(|err| err.0)?;
        Ok(listed.into_iter().map(|(name, _)| name).collect())
    }

    /// The GPU folders on the remote that hold this machine's device under another driver, the
    /// most recently filed (the newest driver) first. Objects that do not verify are skipped (and logged).
    pub fn earlier_drivers(&self, timeout: Duration) -> Result<Vec<String>, String> {
        let (own, identity) = self.background.gpu();
        let (own, backend, mine) =
            (own.to_owned(), identity.backend.clone(), recipe::device_only(&identity.gpu));
        let mut names = self.list(device_folder(&backend, &identity.gpu), timeout)?;
        names.sort();
        let mut found = Vec::new();
        for name in names {
            let Some((folder, file)) = name.rsplit_once('/') else { continue };
            if file == own || classify(folder, file) != Some(ObjectName::DeviceDriver) {
                continue;
            }
            if found.len() >= MAX_DRIVERS {
                break;
            }
            let Some(bytes) = self.get(&name, MAX_DEVICE_BYTES, timeout)? else { continue };
            match open_device(&name, &bytes, self.background.trusted()) {
                Ok((gpu, created))
                    if gpu.backend() == backend && recipe::device_only(gpu.fields()) == mine =>
                {
                    found.push((created, file.to_owned()))
                }
                Ok(_) => {}
                Err(why) => tracing::warn!(
                    object = %name, remote = %self.background.url(),
                    "a GPU folder filed on the remote cache is refused: {why}"
                ),
            }
        }
        found.sort_by_key(|(created, _)| std::cmp::Reverse(*created));
        Ok(found.into_iter().map(|(_, folder)| folder).collect())
    }

    /// The programs of `folder` that have a recipe on the remote, in the fleet's first-use order
    /// (the module's comment says how): by the fleet's working set there when one verifies,
    /// otherwise by when each recipe was published, which fetches and checks them here.
    pub fn programs(&self, folder: &str, timeout: Duration) -> Result<FleetPrograms, String> {
        let mut held: Vec<CacheKey> = self
            .list(folder.to_owned(), timeout)?
            .iter()
            .filter_map(|name| {
                let (parent, file) = name.rsplit_once('/')?;
                match classify(parent, file)? {
                    ObjectName::Recipe { folder: of, key } if of == folder => Some(key),
                    _ => None,
                }
            })
            .collect();
        held.sort_unstable();
        held.dedup();
        let name = format!("{folder}/{WORKING_SET_FILE}");
        let order = match self.get(&name, MAX_WORKING_SET_BYTES, timeout)? {
            None => Vec::new(),
            Some(bytes) => {
                match check::open_checked(&name, &bytes, Kind::WorkingSet, self.background.trusted()) {
                    Ok(opened) => {
                        std::str::from_utf8(opened.payload).map(working_set::parse).unwrap_or_default()
                    }
                    Err(why) => {
                        tracing::warn!(object = %name, "the fleet's working set is not used for the rebuild's order: {why}");
                        Vec::new()
                    }
                }
            }
        };
        let recipes: HashSet<CacheKey> = held.iter().copied().collect();
        let mut seen = HashSet::new();
        let mut keys: Vec<CacheKey> = order
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| recipes.contains(key) && seen.insert(*key))
            .collect();
        if !keys.is_empty() {
            keys.extend(held.into_iter().filter(|key| seen.insert(*key)));
            keys.truncate(MAX_WORKING_SET_KEYS);
            return Ok(FleetPrograms { keys, fetched: HashMap::new() });
        }
        // No working set that names a recipe here: the order of first use, from the recipes.
        held.truncate(MAX_WORKING_SET_KEYS);
        Ok(self.by_publication(folder, held, timeout))
    }

    /// The recipes `keys` of `folder`, fetched and checked [`ORDER_CONCURRENCY`] at a time, in the
    /// order they were published (`by_first_use`), and what each fetch found.
    fn by_publication(&self, folder: &str, keys: Vec<CacheKey>, timeout: Duration) -> FleetPrograms {
        self.by_publication_keeping(folder, keys, timeout, MAX_PREFETCHED_BYTES)
    }

    /// [`by_publication`](Self::by_publication), keeping at most `max_kept` bytes of fetched
    /// specs and refusals for the rebuild.
    fn by_publication_keeping(
        &self,
        folder: &str,
        keys: Vec<CacheKey>,
        timeout: Duration,
        max_kept: usize,
    ) -> FleetPrograms {
        let max = MAX_RECIPE_BYTES as usize + RECIPE_HEADER;
        let trusted = self.background.trusted();
        let mut times = Vec::with_capacity(keys.len());
        let mut fetched = HashMap::new();
        let (mut kept_bytes, mut fetched_round) = (0usize, true);
        for round in keys.chunks(ORDER_CONCURRENCY) {
            if !fetched_round {
                // The remote answered nothing last round: the rebuild asks again, one at a time.
                times.extend(round.iter().map(|&key| (key, None)));
                continue;
            }
            let names: Vec<String> = round.iter().map(|&key| recipe_name(folder, key)).collect();
            let background = self.background.clone();
            let asked = names.clone();
            // Each request has `timeout`; the round as a whole a little more.
            let answers = self
                .background
                .block_on(timeout + Duration::from_secs(1), async move {
                    let requests = asked.iter().map(|name| {
                        let background = background.clone();
                        async move {
                            tokio::time::timeout(timeout, get_object(&background, name, max))
                                .await
                                .unwrap_or_else(|_| {
                                    Err(format!("no answer within {} ms", timeout.as_millis()))
                                })
                        }
                    });
                    Ok(futures_util::future::join_all(requests).await)
                })
                .unwrap_or_else(|err| vec![Err(err.0); round.len()]);
            fetched_round = false;
            for ((&key, name), answer) in round.iter().zip(&names).zip(answers) {
                let (found, created) = match answer {
                    Err(why) => {
                        tracing::debug!(object = %name, "a recipe could not be fetched to order the rebuild: {why}");
                        times.push((key, None));
                        continue;
                    }
                    Ok(None) => (Fetched::Missing, None),
                    Ok(Some(bytes)) => match open_recipe(name, folder, key, &bytes, trusted) {
                        Ok((spec, created)) => (Fetched::Spec(spec), created),
                        Err(why) => (Fetched::Refused(why), None),
                    },
                };
                fetched_round = true;
                times.push((key, created));
                let bytes = match &found {
                    Fetched::Spec(spec) => spec.len(),
                    Fetched::Refused(why) => why.len(),
                    _ => 0,
                };
                // Past the bound, only the time is kept: the rebuild fetches the spec again.
                if kept_bytes.saturating_add(bytes) <= max_kept {
                    kept_bytes += bytes;
                    fetched.insert(key, found);
                }
            }
        }
        tracing::debug!(
            folder,
            recipes = times.len(),
            timed = times.iter().filter(|(_, created)| created.is_some()).count(),
            kept = fetched.len(),
            "the fleet's recipes ordered by when they were published"
        );
        FleetPrograms { keys: by_first_use(times), fetched }
    }

    /// The recipe of `key` in `folder`: its kernel spec once it passed every check.
    pub fn fetch(&self, folder: &str, key: CacheKey, timeout: Duration) -> Fetched {
        let name = recipe_name(folder, key);
        let max = MAX_RECIPE_BYTES as usize + RECIPE_HEADER;
        match self.get(&name, max, timeout) {
            Ok(None) => Fetched::Missing,
            Ok(Some(bytes)) => match open_recipe(&name, folder, key, &bytes, self.background.trusted()) {
                Ok((spec, _)) => Fetched::Spec(spec),
                Err(why) => Fetched::Refused(why),
            },
            Err(why) => Fetched::Failed(why),
        }
    }
}

/// What [`FleetRecipes::fetch`] found.
pub(crate) enum Fetched {
    /// The kernel spec of a recipe that passed every check.
    Spec(Vec<u8>),
    /// The remote has no recipe of that program.
    Missing,
    /// The object does not verify here (never built from): why.
    Refused(String),
    /// It could not be read (the remote failed or did not answer in time): why.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(version: &str) -> GpuId {
        GpuId::new("gl", vec![("renderer".into(), "r".into()), ("version".into(), version.into())])
    }

    #[test]
    fn names_and_device_folders() {
        let (a, b) = (gpu("1"), gpu("2"));
        assert_eq!(device_folder("gl", a.fields()), device_folder("gl", b.fields()));
        assert_ne!(device_folder("gl", a.fields()), device_folder("amdgpu", a.fields()));
        let other = GpuId::new("gl", vec![("renderer".into(), "s".into()), ("version".into(), "1".into())]);
        assert_ne!(device_folder("gl", a.fields()), device_folder("gl", other.fields()));
        let key = CacheKey::from_u128(9);
        let name = recipe_name(&a.dir_name(), key);
        assert_eq!(check::classify(&name), ObjectName::Recipe { folder: a.dir_name(), key });
        let filed = format!("{}/{}", device_folder("gl", a.fields()), a.dir_name());
        assert_eq!(check::classify(&filed), ObjectName::DeviceDriver);
        for other in [format!("devices/{}", a.dir_name()), format!("devices/x/y/{}", a.dir_name())] {
            assert_eq!(check::classify(&other), ObjectName::Other, "{other}");
        }
    }

    #[test]
    fn a_device_object_must_describe_the_folder_it_is_filed_as() {
        let (a, b) = (gpu("1"), gpu("2"));
        let payload =
            serde_json::to_vec(&DeviceDriver { backend: "gl".into(), fields: a.fields().to_vec() }).unwrap();
        let seal =
            |name: &str| envelope::seal(name, Kind::DeviceDriver, &Provenance::default(), &payload, None);
        let right = format!("{}/{}", device_folder("gl", a.fields()), a.dir_name());
        assert_eq!(open_device(&right, &seal(&right), None).unwrap().0, a);
        let wrong = format!("{}/{}", device_folder("gl", b.fields()), b.dir_name());
        assert!(open_device(&wrong, &seal(&wrong), None).unwrap_err().contains("describes"));
        // A recipe sealed for one folder is refused under another, and a flip anywhere.
        let key = CacheKey::from_u128(3);
        let sealed = recipe::seal("gl", a.hash(), key, b"{}");
        let name = recipe_name(&a.dir_name(), key);
        let object = envelope::seal(&name, Kind::Recipe, &Provenance::default(), &sealed, None);
        assert_eq!(open_recipe(&name, &a.dir_name(), key, &object, None).unwrap(), (b"{}".to_vec(), None));
        assert!(open_recipe(&name, &b.dir_name(), key, &object, None).is_err());
        let mut flipped = object.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(open_recipe(&name, &a.dir_name(), key, &flipped, None).is_err());
    }

    #[test]
    fn recipes_go_in_the_order_they_were_published_then_by_key() {
        let k = CacheKey::from_u128;
        // Published 5 first, then 1, then 9 and 3 at once; 7 and 2 without a time (not said,
        // refused, gone or not fetched).
        let found = vec![
            (k(1), Some(20)),
            (k(7), None),
            (k(9), Some(30)),
            (k(5), Some(10)),
            (k(2), None),
            (k(3), Some(30)),
        ];
        assert_eq!(by_first_use(found), vec![k(5), k(1), k(3), k(9), k(2), k(7)]);
        assert_eq!(by_first_use(Vec::new()), Vec::<CacheKey>::new());
    }

    #[test]
    fn a_recipes_time_is_its_envelopes() {
        let a = gpu("1");
        let key = CacheKey::from_u128(4);
        let name = recipe_name(&a.dir_name(), key);
        let sealed = recipe::seal("gl", a.hash(), key, b"{}");
        let made = Provenance { created_unix_ns: 1_700_000_000_000_000_000, ..Provenance::default() };
        let object = envelope::seal(&name, Kind::Recipe, &made, &sealed, None);
        let (spec, created) = open_recipe(&name, &a.dir_name(), key, &object, None).unwrap();
        assert_eq!((spec.as_slice(), created), (&b"{}"[..], Some(made.created_unix_ns)));
    }

    #[test]
    fn without_a_working_set_recipes_are_fetched_once_in_the_order_they_were_published() {
        let shared = tempfile::tempdir().unwrap();
        let old = gpu("1");
        let folder = old.dir_name();
        let put = |name: &str, kind: Kind, created: u64, payload: &[u8]| {
            let provenance = Provenance { created_unix_ns: created, ..Provenance::default() };
            let object = envelope::seal(name, kind, &provenance, payload, None);
            std::fs::write(shared.path().join(name), object).unwrap();
        };
        let k = CacheKey::from_u128;
        // Forty recipes (two rounds of ORDER_CONCURRENCY), published in the reverse of their keys'
        // order, and one of key 100 sealed for another key: refused.
        let tier = file_fleet(shared.path(), &old, 40);
        let forged = recipe::seal("gl", old.hash(), k(101), b"spec 101");
        put(&recipe_name(&folder, k(100)), Kind::Recipe, 1, &forged);
        let fleet = FleetRecipes { background: tier.background() };
        let timeout = Duration::from_secs(20);
        let FleetPrograms { keys, mut fetched } = fleet.programs(&folder, timeout).unwrap();
        let expected: Vec<CacheKey> = (1..=40).rev().map(k).chain([k(100)]).collect();
        assert_eq!(keys, expected);
        assert_eq!(fetched.len(), 41);
        for i in 1..=40u128 {
            match fetched.remove(&k(i)) {
                Some(Fetched::Spec(spec)) => assert_eq!(spec, format!("spec {i}").into_bytes()),
                _ => panic!("recipe {i} was not kept for the rebuild"),
            }
        }
        assert!(matches!(fetched.remove(&k(100)), Some(Fetched::Refused(_))));

        // A working set that verifies decides first; the others follow by key, fetched when
        // their turn comes.
        let listed = format!("{} 1\n{} 1\n", k(5).hex(), k(3).hex());
        put(&format!("{folder}/{WORKING_SET_FILE}"), Kind::WorkingSet, 1, listed.as_bytes());
        let FleetPrograms { keys, fetched } = fleet.programs(&folder, timeout).unwrap();
        let rest = (1..=40).filter(|i| ![3, 5].contains(i)).map(k).chain([k(100)]);
        assert_eq!(keys, [k(5), k(3)].into_iter().chain(rest).collect::<Vec<_>>());
        assert!(fetched.is_empty());
    }

    /// A `file://` fleet in `shared` holding the recipes of keys `1..=count` for `old`'s
    /// folder, published in the reverse of their keys' order, each spec `spec i`; and the tier
    /// of a machine on another driver reading it.
    fn file_fleet(shared: &std::path::Path, old: &GpuId, count: u128) -> RemoteTier {
        let folder = old.dir_name();
        std::fs::create_dir_all(shared.join(&folder)).unwrap();
        for i in 1..=count {
            let key = CacheKey::from_u128(i);
            let sealed = recipe::seal("gl", old.hash(), key, format!("spec {i}").as_bytes());
            let name = recipe_name(&folder, key);
            let provenance = Provenance { created_unix_ns: 1_000 - i as u64, ..Provenance::default() };
            std::fs::write(
                shared.join(&name),
                envelope::seal(&name, Kind::Recipe, &provenance, &sealed, None),
            )
            .unwrap();
        }
        let mut config = super::super::RemoteConfig::new(&format!("file://{}", shared.display())).unwrap();
        config.allow_unsigned = true;
        RemoteTier::open(&gpu("2"), &config).unwrap()
    }

    #[test]
    fn past_the_kept_bytes_recipes_are_still_ordered_but_not_kept() {
        let shared = tempfile::tempdir().unwrap();
        let old = gpu("1");
        let tier = file_fleet(shared.path(), &old, 20);
        let fleet = FleetRecipes { background: tier.background() };
        let k = CacheKey::from_u128;
        let keys: Vec<CacheKey> = (1..=20).map(k).collect();
        // "spec 1" to "spec 5" are 30 bytes: the first five fetched fit, the sixth does not,
        // and nothing after it is kept either.
        let FleetPrograms { keys: ordered, fetched } =
            fleet.by_publication_keeping(&old.dir_name(), keys, Duration::from_secs(20), 30);
        assert_eq!(
            ordered,
            (1..=20).rev().map(k).collect::<Vec<_>>(),
            "every recipe still ordered by its time"
        );
        let mut kept: Vec<u128> =
            fetched.keys().map(|key| (1..=20).find(|&i| k(i) == *key).unwrap()).collect();
        kept.sort_unstable();
        assert_eq!(kept, vec![1, 2, 3, 4, 5]);
        assert!(fetched.values().all(|found| matches!(found, Fetched::Spec(_))));
    }

    #[test]
    fn the_up_front_fetches_stop_after_a_round_with_no_answer() {
        use std::io::Read;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Arc;
        // An S3 endpoint that accepts connections and never answers: each request of a round
        // opens a connection of its own (none comes back to the pool).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let (accepted, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let server = {
            let (accepted, stop) = (Arc::clone(&accepted), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut held = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            stream.set_nonblocking(true).unwrap();
                            let _ = stream.read(&mut [0; 4096]);
                            held.push(stream);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        let mut config = super::super::RemoteConfig::new("s3://sparkle-fleet/prefix").unwrap();
        config.allow_unsigned = true;
        config.s3_options = vec![
            ("aws_access_key_id".into(), "test".into()),
            ("aws_secret_access_key".into(), "test".into()),
            ("aws_region".into(), "us-east-1".into()),
            ("aws_endpoint_url".into(), format!("http://127.0.0.1:{port}")),
            ("aws_allow_http".into(), "true".into()),
        ];
        let tier = RemoteTier::open(&gpu("2"), &config).unwrap();
        let fleet = FleetRecipes { background: tier.background() };
        let k = CacheKey::from_u128;
        // Three rounds' worth.
        let keys: Vec<CacheKey> = (1..=(3 * ORDER_CONCURRENCY as u128)).map(k).collect();
        let before = accepted.load(Ordering::Relaxed);
        let FleetPrograms { keys: ordered, fetched } =
            fleet.by_publication(&gpu("1").dir_name(), keys.clone(), Duration::from_millis(300));
        let asked = accepted.load(Ordering::Relaxed) - before;
        stop.store(true, Ordering::Relaxed);
        server.join().unwrap();
        assert_eq!(ordered, keys, "nothing timed: by key");
        assert!(fetched.is_empty());
        // The first round's requests reached the endpoint (and the tier's own first request, a
        // list, as it connects); no later round's did.
        assert!(asked >= 1, "no request reached the endpoint");
        assert!(asked <= ORDER_CONCURRENCY + 1, "{asked} connections for {} keys", keys.len());
    }
}
