//! The remote stores the fleet tier talks to, through their maintained clients: `object_store`
//! for S3-compatible buckets and folders, `redis` for Redis. One small surface — get, create if
//! absent, list, ping — used only on the tier's own runtime. Object names are relative
//! (`<gpu folder>/<key hex>`); each store maps them under its prefix.
//!
//! The clients' own retries are kept short: the tier has its own budgets and circuit breaker,
//! and a lookup must never wait longer than a compile would take.

use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use tokio::sync::OnceCell;

use super::config::{check_endpoint, redact_url, RemoteConfig, RemoteLocation, S3_ENDPOINT_ENV};

/// Connecting to a store gives up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// One request gives up after this long (lookups are bounded much tighter by their budget).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What a read found.
pub(crate) enum Got {
    /// The object, and what identifies this version of it for a compare-and-swap.
    Object { bytes: Vec<u8>, version: Version },
    /// An object larger than the read allowed, left unread.
    TooLarge { size: u64 },
}

/// Identifies the version of an object that was read, for [`Store::replace_if`].
#[derive(Debug, Clone)]
pub(crate) enum Version {
    /// An object store's ETag (and version id).
    Tag(UpdateVersion),
    /// The store compares contents (Redis).
    Content,
}

/// What a create-if-absent publish found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Put {
    Created,
    /// Another writer was first; its object stays.
    AlreadyThere,
}

/// A store failure, in words (the clients' errors differ; the tier only reports them).
#[derive(Debug, Clone)]
pub(crate) struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) enum Store {
    /// An object store; `bucket` names an S3 bucket (for messages).
    Objects {
        store: Arc<dyn ObjectStore>,
        prefix: String,
        bucket: Option<String>,
    },
    Redis {
        client: Box<redis::Client>,
        connection: OnceCell<redis::aio::ConnectionManager>,
        prefix: String,
    },
}

impl Store {
    /// Builds the client for `config`; nothing is contacted yet.
    pub fn open(config: &RemoteConfig) -> Result<Store, StoreError> {
        super::tls::install_default_provider();
        match &config.location {
            RemoteLocation::S3 { bucket, prefix } => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                use object_store::ClientConfigKey;
                // The usual AWS variables first (AWS_ENDPOINT_URL, AWS_REGION, credentials, …),
                // then the options given in code, then Sparkle's own endpoint variable.
                let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(
                    object_store::RetryConfig {
                        max_retries: 1,
                        retry_timeout: Duration::from_secs(5),
                        ..Default::default()
                    },
                );
                for (key, value) in &config.s3_options {
                    let key = key
                        .parse::<AmazonS3ConfigKey>()
                        .map_err(|err| StoreError(format!("S3 option `{key}`: {err}")))?;
                    builder = builder.with_config(key, value);
                }
                if let Some(endpoint) = &config.s3_endpoint {
                    // Ours wins over AWS_ENDPOINT_URL_S3 too, which the client prefers otherwise.
                    builder = builder
                        .with_config(AmazonS3ConfigKey::Endpoint, endpoint)
                        .with_config(AmazonS3ConfigKey::S3Endpoint, endpoint)
                        .with_virtual_hosted_style_request(false);
                }
                let endpoint = builder
                    .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
                    .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint));
                if let Some(endpoint) = &endpoint {
                    let endpoint = check_endpoint(endpoint).map_err(|problem| {
                        StoreError(format!(
                            "the S3 endpoint `{}` (AWS_ENDPOINT_URL, or {S3_ENDPOINT_ENV}) is not usable: {problem}; \
                             e.g. http://127.0.0.1:9000 or https://s3.example.com",
                            redact_url(endpoint)
                        ))
                    })?;
                    // An http:// endpoint says plainly that plain HTTP is meant (MinIO's and
                    // moto's instructions give one); without this the client refuses it.
                    if endpoint.to_ascii_lowercase().starts_with("http://") {
                        builder = builder
                            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp), "true");
                    }
                }
                // Timeouts set one by one: the client options from the environment stay.
                builder = builder
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                        format!("{}ms", CONNECT_TIMEOUT.as_millis()),
                    )
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                        format!("{}ms", REQUEST_TIMEOUT.as_millis()),
                    );
                let store = builder.build().map_err(|err| StoreError(format!("S3 client: {err}")))?;
                Ok(Store::Objects {
                    store: Arc::new(store),
                    prefix: prefix.clone(),
                    bucket: Some(bucket.clone()),
                })
            }
            RemoteLocation::Folder { path } => {
                std::fs::create_dir_all(path)
                    .map_err(|err| StoreError(format!("cannot create {}: {err}", path.display())))?;
                let store = object_store::local::LocalFileSystem::new_with_prefix(path)
                    .map_err(|err| StoreError(format!("folder {}: {err}", path.display())))?;
                Ok(Store::Objects { store: Arc::new(store), prefix: String::new(), bucket: None })
            }
            RemoteLocation::Redis { url } => {
                let client = redis::Client::open(url.as_str())
                    .map_err(|err| StoreError(format!("Redis URL: {err}")))?;
                Ok(Store::Redis {
                    client: Box::new(client),
                    connection: OnceCell::new(),
                    prefix: "sparkle".into(),
                })
            }
        }
    }

    fn object_path(prefix: &str, name: &str) -> ObjectPath {
        if prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{prefix}/{name}"))
        }
    }

    /// The Redis key of the object `name` (leases use it from their own module).
    pub(super) fn redis_name(&self, name: &str) -> String {
        match self {
            Store::Redis { prefix, .. } => Self::redis_key(prefix, name),
            Store::Objects { .. } => name.to_owned(),
        }
    }

    pub(super) async fn redis(&self) -> Result<redis::aio::ConnectionManager, StoreError> {
        let Store::Redis { client, connection, .. } = self else {
            return Err(StoreError("not a Redis store".into()));
        };
        connection
            .get_or_try_init(|| async {
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(CONNECT_TIMEOUT))
                    .set_response_timeout(Some(REQUEST_TIMEOUT))
                    .set_number_of_retries(0);
                client.get_connection_manager_with_config(config).await
            })
            .await
            .cloned()
            .map_err(|err| StoreError(format!("Redis: {err}")))
    }

    fn redis_key(prefix: &str, name: &str) -> String {
        format!("{prefix}:{name}")
    }

    /// The object at `name`, or `None` if there is none; an object larger than `max_bytes` is
    /// not read past that (its size is said instead), so that a huge object costs neither the
    /// time nor the memory of reading it.
    pub async fn get(&self, name: &str, max_bytes: usize) -> Result<Option<Got>, StoreError> {
        let max = u64::try_from(max_bytes).unwrap_or(u64::MAX);
        match self {
            Store::Objects { store, prefix, .. } => {
                use futures_util::StreamExt;
                let result =
                    match store.get_opts(&Self::object_path(prefix, name), GetOptions::default()).await {
                        Ok(result) => result,
                        Err(object_store::Error::NotFound { .. }) => return Ok(None),
                        Err(err) => return Err(StoreError(err.to_string())),
                    };
                if result.meta.size > max {
                    return Ok(Some(Got::TooLarge { size: result.meta.size }));
                }
                let version = Version::Tag(UpdateVersion {
                    e_tag: result.meta.e_tag.clone(),
                    version: result.meta.version.clone(),
                });
                let mut bytes = Vec::with_capacity(usize::try_from(result.meta.size).unwrap_or(0));
                let mut stream = result.into_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|err| StoreError(format!("reading {name}: {err}")))?;
                    if bytes.len().saturating_add(chunk.len()) > max_bytes {
                        // Grew past what its header said: it is not read further.
                        return Ok(Some(Got::TooLarge { size: max.saturating_add(1) }));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(Some(Got::Object { bytes, version }))
            }
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                // At most one byte more than allowed: enough to tell that it is too large.
                let bytes: Vec<u8> = redis::cmd("GETRANGE")
                    .arg(Self::redis_key(prefix, name))
                    .arg(0)
                    .arg(max)
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis GETRANGE: {err}")))?;
                if bytes.is_empty() {
                    // Missing (an empty value is no object of ours either).
                    return Ok(None);
                }
                if bytes.len() > max_bytes {
                    let size: u64 = redis::cmd("STRLEN")
                        .arg(Self::redis_key(prefix, name))
                        .query_async(&mut connection)
                        .await
                        .unwrap_or(max.saturating_add(1));
                    return Ok(Some(Got::TooLarge { size }));
                }
                Ok(Some(Got::Object { bytes, version: Version::Content }))
            }
        }
    }

    /// Replaces the object at `name` with `bytes` only if it is still the one read as `seen`
    /// (with `version`): compare-and-swap, so that a replacement never overwrites what another
    /// machine put there meanwhile. S3: `If-Match` on the ETag; Redis: a script comparing the
    /// value; a folder: the bytes compared, then an atomic rename. `Ok(false)`: it changed.
    pub async fn replace_if(
        &self,
        name: &str,
        version: &Version,
        seen: &[u8],
        bytes: Vec<u8>,
    ) -> Result<bool, StoreError> {
        match (self, version) {
            (Store::Objects { store, prefix, .. }, Version::Tag(tag)) if tag.e_tag.is_some() => {
                let options = PutOptions { mode: PutMode::Update(tag.clone()), ..Default::default() };
                let path = Self::object_path(prefix, name);
                match store.put_opts(&path, PutPayload::from(bytes.clone()), options).await {
                    Ok(_) => Ok(true),
                    Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                        Ok(false)
                    }
                    // A store without conditional updates (a local folder): compare, then rename.
                    Err(object_store::Error::NotImplemented { .. }) => {
                        self.replace_if_same(name, seen, bytes).await
                    }
                    Err(err) => Err(StoreError(err.to_string())),
                }
            }
            (Store::Objects { .. }, _) => self.replace_if_same(name, seen, bytes).await,
            (Store::Redis { prefix, .. }, _) => {
                let mut connection = self.redis().await?;
                // EVAL rather than the client's script helper (a feature of its own): this runs
                // only when an object that does not verify is replaced.
                let replaced: i64 = redis::cmd("EVAL")
                    .arg(
                        "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) \
                         return 1 end return 0",
                    )
                    .arg(1)
                    .arg(Self::redis_key(prefix, name))
                    .arg(seen)
                    .arg(bytes)
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis compare-and-set script: {err}")))?;
                Ok(replaced == 1)
            }
        }
    }

    /// The compare-and-swap of a store without conditional writes: reads the object again and
    /// replaces it (an atomic rename on a folder) only if it is still `seen`.
    async fn replace_if_same(&self, name: &str, seen: &[u8], bytes: Vec<u8>) -> Result<bool, StoreError> {
        match self.get(name, seen.len()).await? {
            Some(Got::Object { bytes: now, .. }) if now == seen => self.put(name, bytes).await.map(|()| true),
            _ => Ok(false),
        }
    }

    /// Stores `bytes` at `name` unless something is there already (S3 `If-None-Match: *`,
    /// Redis `SET NX`): the first writer wins and nobody overwrites.
    pub async fn put_if_absent(&self, name: &str, bytes: Vec<u8>) -> Result<Put, StoreError> {
        match self {
            Store::Objects { store, prefix, .. } => {
                let options = PutOptions { mode: PutMode::Create, ..Default::default() };
                match store.put_opts(&Self::object_path(prefix, name), PutPayload::from(bytes), options).await
                {
                    Ok(_) => Ok(Put::Created),
                    Err(object_store::Error::AlreadyExists { .. }) => Ok(Put::AlreadyThere),
                    Err(err) => Err(StoreError(err.to_string())),
                }
            }
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                let set: Option<String> = redis::cmd("SET")
                    .arg(Self::redis_key(prefix, name))
                    .arg(bytes)
                    .arg("NX")
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis SET NX: {err}")))?;
                Ok(if set.is_some() { Put::Created } else { Put::AlreadyThere })
            }
        }
    }

    /// Stores `bytes` at `name`, replacing what is there (for objects that are merged or
    /// superseded, such as a working set list; never for entries).
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
        match self {
            Store::Objects { store, prefix, .. } => store
                .put_opts(&Self::object_path(prefix, name), PutPayload::from(bytes), PutOptions::default())
                .await
                .map(drop)
                .map_err(|err| StoreError(err.to_string())),
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                redis::cmd("SET")
                    .arg(Self::redis_key(prefix, name))
                    .arg(bytes)
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis SET: {err}")))
            }
        }
    }

    /// Removes the object `name`: a lease, or (`cache remote verify --fix`, a replacement too
    /// large to compare) an object that does not verify.
    pub async fn delete(&self, name: &str) -> Result<(), StoreError> {
        match self {
            Store::Objects { store, prefix, .. } => {
                use futures_util::StreamExt;
                let location = Self::object_path(prefix, name);
                let mut deleted = store.delete_stream(futures_util::stream::iter([Ok(location)]).boxed());
                match deleted.next().await {
                    None | Some(Ok(_)) | Some(Err(object_store::Error::NotFound { .. })) => Ok(()),
                    Some(Err(err)) => Err(StoreError(err.to_string())),
                }
            }
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                redis::cmd("DEL")
                    .arg(Self::redis_key(prefix, name))
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis DEL: {err}")))
            }
        }
    }

    /// Names (relative, as given to `get`) and sizes of the objects under `folder`, or of every
    /// object under the store's prefix (`None`).
    pub async fn list(&self, folder: Option<&str>) -> Result<Vec<(String, u64)>, StoreError> {
        use futures_util::TryStreamExt;
        match self {
            Store::Objects { store, prefix, .. } => {
                let under = match folder {
                    Some(folder) => Some(Self::object_path(prefix, folder)),
                    None if prefix.is_empty() => None,
                    None => Some(ObjectPath::from(prefix.as_str())),
                };
                let objects: Vec<_> = store
                    .list(under.as_ref())
                    .try_collect()
                    .await
                    .map_err(|err| StoreError(err.to_string()))?;
                let strip = if prefix.is_empty() { String::new() } else { format!("{prefix}/") };
                Ok(objects
                    .into_iter()
                    .map(|meta| {
                        let path = meta.location.to_string();
                        (path.strip_prefix(&strip).unwrap_or(&path).to_owned(), meta.size)
                    })
                    .collect())
            }
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                let pattern = match folder {
                    Some(folder) => format!("{}/*", Self::redis_key(prefix, folder)),
                    None => format!("{prefix}:*"),
                };
                let mut names = Vec::new();
                let mut cursor: u64 = 0;
                loop {
                    let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(&mut connection)
                        .await
                        .map_err(|err| StoreError(format!("Redis SCAN: {err}")))?;
                    names.extend(keys);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                let mut out = Vec::with_capacity(names.len());
                let strip = format!("{prefix}:");
                for key in names {
                    let size: u64 = redis::cmd("STRLEN")
                        .arg(&key)
                        .query_async(&mut connection)
                        .await
                        .map_err(|err| StoreError(format!("Redis STRLEN: {err}")))?;
                    out.push((key.strip_prefix(&strip).unwrap_or(&key).to_owned(), size));
                }
                Ok(out)
            }
        }
    }

    /// Connects: Redis opens its connection (with the client's first request); an object store
    /// makes its first request (HTTP connects on the first one), a [`ping`](Self::ping).
    pub async fn connect(&self) -> Result<(), StoreError> {
        match self {
            Store::Objects { .. } => self.ping().await,
            Store::Redis { .. } => self.redis().await.map(drop),
        }
    }

    /// Whether [`connect`](Self::connect) is itself a request of the store's own (an object
    /// store's list), timed like any other: then it is the tier's first round trip.
    pub fn connects_with_a_request(&self) -> bool {
        matches!(self, Store::Objects { .. })
    }

    /// One round trip that touches the store without changing it. On an object store it lists
    /// a name nothing is stored under, which fails on a bucket that does not exist (a lookup of a
    /// missing object in a missing bucket would look like a miss).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Objects { store, prefix, bucket } => {
                let under = Self::object_path(prefix, ".sparkle-ping");
                match store.list_with_delimiter(Some(&under)).await {
                    Ok(_) => Ok(()),
                    Err(object_store::Error::NotFound { .. }) => Err(StoreError(match bucket {
                        Some(bucket) => {
                            format!("the bucket `{bucket}` does not exist (or may not be listed)")
                        }
                        None => "the folder does not exist".to_owned(),
                    })),
                    Err(err) => Err(StoreError(err.to_string())),
                }
            }
            Store::Redis { .. } => {
                let mut connection = self.redis().await?;
                redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
                    .map(drop)
                    .map_err(|err| StoreError(format!("Redis PING: {err}")))
            }
        }
    }

    /// Writes (and replaces) a small object, to learn at open whether this machine may write
    /// the store at all: a bucket that does not exist, a folder without write permission, a
    /// Redis replica or user that may only read.
    pub async fn check_writable(&self) -> Result<(), StoreError> {
        let name = ".sparkle-write-check";
        match self {
            Store::Objects { .. } => self.put(name, b"sparkle\n".to_vec()).await,
            Store::Redis { prefix, .. } => {
                let mut connection = self.redis().await?;
                redis::cmd("SET")
                    .arg(Self::redis_key(prefix, name))
                    .arg("sparkle")
                    .arg("PX")
                    .arg(60_000)
                    .query_async::<()>(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis SET: {err}")))
            }
        }
    }
}
