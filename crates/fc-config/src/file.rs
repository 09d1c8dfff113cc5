//! `FastCacheConfig`: the TOML configuration file (`fast-cache.toml`), its checks, and what it
//! builds (a [`crate::ServerConfig`], or an embedded store with the same storage settings).
//!
//! ```
//! use fc_config::FastCacheConfig;
//!
//! let config = FastCacheConfig::from_toml_str(
//!     r#"
//!     [server]
//!     bind = "127.0.0.1:7000"
//!     [storage]
//!     max_memory = "256mb"
//!     eviction_policy = "allkeys-lru"
//!     "#,
//! )?;
//! config.validate()?;
//! let server = config.server_config()?;
//! assert_eq!(server.maxmemory, Some(256 << 20));
//! # Ok::<(), fc_config::ConfigError>(())
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use fc_shard::{EmbeddedStore, EvictionPolicy};
use fc_wal::{FsyncPolicy, RecoveryMode};
use serde::{Deserialize, Serialize};

use crate::{
    MonoioWriter, OutputLimit, PersistenceConfig, Runtime, ServerConfig, TlsAuthClients, TlsConfig,
    parse_recovery, parse_tls_protocols,
};

/// A size: bytes, or a string Redis's config would read (`"64mb"`, `"1gb"`, `"500k"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Size {
    /// Plain bytes.
    Bytes(u64),
    /// With a unit.
    Text(String),
}

impl Size {
    /// The size in bytes.
    ///
    /// # Errors
    /// The text is not a size.
    pub fn bytes(&self) -> Result<u64, String> {
        match self {
            Self::Bytes(n) => Ok(*n),
            Self::Text(t) => crate::parse_size(t.trim()),
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FastCacheConfig {
    /// Listener, workers, clients.
    pub server: ServerSection,
    /// Shards, memory limit, eviction.
    pub storage: StorageSection,
    /// Write-ahead log and snapshots.
    pub persistence: PersistenceSection,
    /// The admin HTTP port: metrics and probes.
    pub admin: AdminSection,
    /// The TLS port.
    pub tls: TlsSection,
    /// ACL users.
    pub acl: AclSection,
    /// The GPU path (fc-gpu; the facade's `cuda` feature).
    pub cuda: CudaSection,
    /// Native replication.
    pub replication: ReplicationSection,
}

/// `[replication]`: native replication, as the specification's example writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicationSection {
    /// Feed the backlog from the start (`false`: from the first replica's connection).
    pub enabled: bool,
    /// `primary` or `replica`.
    pub role: String,
    /// A port for replicas (`127.0.0.1:7631`; absent: replicas use the RESP port).
    pub bind_addr: Option<String>,
    /// A replica's primary (`host:port`, its RESP or replication port).
    pub primary_addr: Option<String>,
    /// The shared secret (absent: the primary's `requirepass`).
    pub auth_token: Option<String>,
    /// `none` (the default) or `zstd`.
    pub compression: String,
    /// zstd's level (3), 1 to 22.
    pub zstd_level: i32,
    /// `batch` (the default) or `immediate`.
    pub send_policy: String,
    /// Most records in a batch (64).
    pub batch_max_records: u32,
    /// Most bytes in a batch (256 KiB).
    pub batch_max_bytes: Size,
    /// Longest a mutation waits in a batch, microseconds (250).
    pub batch_max_delay_us: u64,
    /// A batch also leaves when the worker that wrote it runs out of work (true): batches
    /// grow only while the workers are busy. False: every batch waits for its records, its
    /// bytes or its delay (fewer, larger frames; lag up to `batch_max_delay_us`).
    pub flush_on_idle: bool,
    /// Recent frames kept for reconnecting replicas (64 MiB).
    pub backlog_bytes: Size,
    /// Bytes per snapshot chunk (1 MiB).
    pub snapshot_chunk_bytes: Size,
    /// A replica serves reads while its link is down (Redis's `replica-serve-stale-data`).
    pub serve_stale_data: bool,
}

impl Default for ReplicationSection {
    fn default() -> Self {
        Self {
            enabled: false,
            role: "primary".into(),
            bind_addr: None,
            primary_addr: None,
            auth_token: None,
            compression: "none".into(),
            zstd_level: 3,
            send_policy: "batch".into(),
            batch_max_records: 64,
            batch_max_bytes: Size::Bytes(256 << 10),
            batch_max_delay_us: 250,
            flush_on_idle: true,
            backlog_bytes: Size::Bytes(64 << 20),
            snapshot_chunk_bytes: Size::Bytes(1 << 20),
            serve_stale_data: true,
        }
    }
}

/// `[cuda]`: how KV-cache chunks move between the cache and a GPU (fc-gpu).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CudaSection {
    /// The GPU's ordinal (0).
    pub device: usize,
    /// Most bytes of (page-locked) staging buffers (`256mb`); at least `64kb`.
    pub staging_bytes: Size,
    /// CUDA streams (2: one batch gathers while the other copies); 1 to 16.
    pub streams: usize,
    /// Device offsets of chunks are multiples of this (256), a power of two.
    pub alignment: u64,
    /// Threads gathering a session out of the cache into staging memory (4; 0: the loading
    /// thread alone); 0 to 64.
    pub gather_threads: usize,
    /// The largest piece a session is gathered and copied in (`1mb`): each piece's copy
    /// starts as soon as it is gathered; at least `64kb`.
    pub piece_bytes: Size,
    /// Most bytes of replaced chunks' memory kept to store the next chunks of the same size
    /// into (`512mb`; `0`: none kept): a store into memory already mapped skips the kernel's
    /// page faults.
    pub recycle_bytes: Size,
}

impl Default for CudaSection {
    fn default() -> Self {
        Self {
            device: 0,
            staging_bytes: Size::Text("256mb".into()),
            streams: 2,
            alignment: 256,
            gather_threads: 4,
            piece_bytes: Size::Text("1mb".into()),
            recycle_bytes: Size::Text("512mb".into()),
        }
    }
}

/// `[cuda]` resolved ([`FastCacheConfig::cuda_config`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaConfig {
    /// The GPU's ordinal.
    pub device: usize,
    /// Most bytes of staging buffers.
    pub staging_bytes: u64,
    /// CUDA streams.
    pub streams: usize,
    /// Device offset alignment.
    pub alignment: u64,
    /// Gather threads.
    pub gather_threads: usize,
    /// The largest gather piece, in bytes.
    pub piece_bytes: u64,
    /// Most bytes of replaced chunks' memory kept for the next stores.
    pub recycle_bytes: u64,
}

/// `[acl]`: where users are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AclSection {
    /// The ACL file: `user ...` lines as `ACL LIST` prints them, read at start, written by
    /// `ACL SAVE`, read again by `ACL LOAD` (absent: users live until a restart).
    pub file: Option<PathBuf>,
}

/// A port number (on `server.bind`'s address) or a whole address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Endpoint {
    /// `6390`: on the plaintext port's address.
    Port(u16),
    /// `"127.0.0.1:6390"`.
    Address(String),
}

impl Endpoint {
    /// Reads a flag's text: a port number or an address.
    #[must_use]
    pub fn from_text(text: &str) -> Self {
        text.parse()
            .map_or_else(|_| Self::Address(text.into()), Self::Port)
    }

    /// The address, with a bare port on `base`'s address.
    ///
    /// # Errors
    /// The text is not an address.
    pub fn resolve(&self, base: SocketAddr) -> Result<SocketAddr, String> {
        match self {
            Self::Port(port) => Ok(SocketAddr::new(base.ip(), *port)),
            Self::Address(text) => text.parse().map_err(|_| {
                format!("'{text}' is not a port or an address such as 127.0.0.1:6390")
            }),
        }
    }
}

/// `[tls]`: a TLS port, as Redis's `tls-*` directives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// The TLS port: a number (on `server.bind`'s address) or an address (absent: no TLS).
    pub port: Option<Endpoint>,
    /// The server's certificate chain, PEM.
    pub cert_file: Option<PathBuf>,
    /// Its private key, PEM.
    pub key_file: Option<PathBuf>,
    /// CA certificates that client certificates are checked against, PEM.
    pub ca_cert_file: Option<PathBuf>,
    /// `yes` (a client certificate is required, Redis's default), `no` or `optional`.
    pub auth_clients: String,
    /// `"TLSv1.2 TLSv1.3"`: the versions accepted.
    pub protocols: String,
}

impl Default for TlsSection {
    fn default() -> Self {
        Self {
            port: None,
            cert_file: None,
            key_file: None,
            ca_cert_file: None,
            auth_clients: TlsAuthClients::Yes.name().into(),
            protocols: "TLSv1.2 TLSv1.3".into(),
        }
    }
}

/// `[admin]`: the HTTP port an operator's tools read (`/metrics` in Prometheus's text format,
/// `/health`, `/ready`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Address to serve it on, such as `127.0.0.1:9121` (absent: no admin port).
    pub bind: Option<String>,
}

/// `[server]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    /// Address to listen on (`127.0.0.1:6380`).
    pub bind: String,
    /// Worker threads (absent: one per core).
    pub threads: Option<usize>,
    /// Password every client must `AUTH` with (absent or empty: none).
    pub requirepass: Option<String>,
    /// Most simultaneous clients (10000).
    pub maxclients: usize,
    /// Databases `SELECT` can name, as Redis's `databases` (16).
    pub databases: u32,
    /// Milliseconds a script may run before others are answered `BUSY` (5000; 0: never), as
    /// Redis's `busy-reply-threshold` (`lua-time-limit`).
    pub busy_reply_threshold: u64,
    /// Scripts over keys of several workers hold them all (`true`) or are refused with
    /// `CROSSSLOT`, as in Redis Cluster (`false`).
    pub scripts_across_workers: bool,
    /// Transparent huge pages off for the process (`true`), as Redis's `disable-thp`.
    pub disable_thp: bool,
    /// Seconds a client may stay idle (0: forever).
    pub timeout: u64,
    /// `normal <hard> <soft> <seconds>` (`"normal 0 0 0"`, Redis's default).
    pub client_output_buffer_limit: String,
    /// Background task frequency, as Redis's `hz` (10): active expiry runs this many times a
    /// second. 1 to 500.
    pub hz: u64,
    /// Largest bulk string a request may carry (`512mb`), as Redis's `proto-max-bulk-len`;
    /// at least 1mb.
    pub proto_max_bulk_len: Size,
    /// Most unparsed request bytes a client may hold (`1gb`), as Redis's
    /// `client-query-buffer-limit`; at least 1mb.
    pub client_query_buffer_limit: Size,
    /// Commands at least this many microseconds long go into the slow log (10000), as
    /// Redis's `slowlog-log-slower-than`: -1 logs none, 0 every one.
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps (128), as Redis's `slowlog-max-len`.
    pub slowlog_max_len: u64,
    /// Commands at least this many milliseconds long are recorded as latency events (0: off),
    /// as Redis's `latency-monitor-threshold`.
    pub latency_monitor_threshold: u64,
    /// Whether `bind` is served (plaintext RESP); `false` needs `[tls] port` (Redis's
    /// `port 0` with a `tls-port`).
    pub plaintext: bool,
    /// A port for FCNP alone (`127.0.0.1:6390`; absent: none). FCNP is also served on `bind`,
    /// told from RESP by its first byte.
    pub fcnp_bind: Option<String>,
    /// One more listener per shard, each handing its connections to the shard's owning
    /// worker, so a client that routes keys itself reaches the owner with no cross-worker
    /// hop (RESP and FCNP on each).
    pub direct_shard_ports: bool,
    /// The first shard's port (absent: `bind`'s port + 1); shard `s` listens on base + s.
    pub direct_shard_base_port: Option<u16>,
    /// A port for memcached's text and meta protocols (`127.0.0.1:11211`; absent: none).
    pub memcached_bind: Option<String>,
    /// The largest value the memcached port stores (`1mb`, memcached's `-I`); 1kb to 1gb.
    pub memcached_item_size_max: Size,
    /// The workers' runtime: `"tokio"` (the default, portable) or `"monoio"` (Linux
    /// io_uring; the server must be built with the `monoio` feature).
    pub runtime: String,
    /// How a monoio worker writes replies: `"inline"` (the connection's task writes them),
    /// `"split"` (a writer task per connection, one send per flush) or `"writev"` (a writer
    /// task that gathers every flush waiting into one vectored send).
    pub monoio_writer: String,
}

impl Default for ServerSection {
    fn default() -> Self {
        let defaults = ServerConfig::default();
        Self {
            bind: defaults.bind.to_string(),
            threads: None,
            requirepass: None,
            maxclients: defaults.maxclients,
            databases: defaults.databases,
            busy_reply_threshold: defaults.busy_reply_threshold_ms,
            scripts_across_workers: defaults.scripts_across_workers,
            disable_thp: defaults.disable_thp,
            timeout: 0,
            client_output_buffer_limit: OutputLimit::default().normal_text(),
            hz: defaults.hz,
            proto_max_bulk_len: Size::Bytes(defaults.proto_max_bulk_len),
            client_query_buffer_limit: Size::Bytes(defaults.client_query_buffer_limit),
            slowlog_log_slower_than: defaults.slowlog_log_slower_than,
            slowlog_max_len: defaults.slowlog_max_len,
            latency_monitor_threshold: defaults.latency_monitor_threshold,
            plaintext: true,
            fcnp_bind: None,
            direct_shard_ports: false,
            direct_shard_base_port: None,
            memcached_bind: None,
            memcached_item_size_max: Size::Text("1mb".into()),
            runtime: "tokio".into(),
            monoio_writer: "inline".into(),
        }
    }
}

/// `[storage]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// Shards, a power of two (absent: the next power of two ≥ cores, at least 16).
    pub shards: Option<usize>,
    /// Memory budget (0: unlimited).
    pub max_memory: Size,
    /// `noeviction`, `allkeys-lru` or `allkeys-s3fifo`.
    pub eviction_policy: String,
}

impl Default for StorageSection {
    fn default() -> Self {
        Self {
            shards: None,
            max_memory: Size::Bytes(0),
            eviction_policy: EvictionPolicy::NoEviction.redis_name().to_string(),
        }
    }
}

/// `[persistence]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PersistenceSection {
    /// Data directory (absent: in memory only).
    pub data_dir: Option<PathBuf>,
    /// `always`, `everysec` or `no`.
    pub appendfsync: String,
    /// Log segment size (`"64mb"`).
    pub segment_bytes: Size,
    /// Snapshot rules as Redis's `save` (`"3600 1 300 100 60 10000"`; `""` for none).
    pub save: String,
    /// `tolerate-tail`, `strict` or `point-in-time`.
    pub recovery: String,
    /// The WAL TCP export (`[persistence.tcp_export]`).
    pub tcp_export: TcpExportSection,
}

impl Default for PersistenceSection {
    fn default() -> Self {
        Self {
            data_dir: None,
            appendfsync: FsyncPolicy::EverySec.name().to_string(),
            segment_bytes: Size::Text("64mb".into()),
            save: "3600 1 300 100 60 10000".into(),
            recovery: "tolerate-tail".into(),
            tcp_export: TcpExportSection::default(),
        }
    }
}

/// `[persistence.tcp_export]`: live WAL frames over TCP, as the specification's example
/// writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcpExportSection {
    /// Export at all (false).
    pub enabled: bool,
    /// `listen` (subscribers connect) or `connect` (to one collector).
    pub mode: String,
    /// The address to listen on or connect to (`127.0.0.1:7630`).
    pub addr: Option<String>,
    /// The token a subscriber presents (`listen`) or this server presents (`connect`).
    pub auth_token: Option<String>,
    /// Runs of frames queued for the export, and for each subscriber (16384).
    pub channel_capacity: usize,
    /// Most subscribers at once (64).
    pub max_subscribers: usize,
    /// `true`: a full queue slows the writers; `false` (the default): the export drops what a
    /// full queue cannot take, counted, and the disk WAL goes on.
    pub backpressure_on_full: bool,
}

impl Default for TcpExportSection {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: "listen".into(),
            addr: None,
            auth_token: None,
            channel_capacity: 16_384,
            max_subscribers: 64,
            backpressure_on_full: false,
        }
    }
}

/// One thing wrong with a configuration, with the field's name (`section.field`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `server.bind`, `storage.shards`, ...
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not TOML, or a field of the wrong type or unknown (the message names it).
    #[error("{0}")]
    Parse(String),
    /// Every problem [`FastCacheConfig::validate`] found.
    #[error("invalid configuration: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
}

/// A value `CONFIG REWRITE` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
}

/// One setting `CONFIG REWRITE` writes: its section and key in the file, its value now, and
/// whether that is the default.
#[derive(Debug, Clone)]
pub struct Setting {
    /// The file's section (`server`).
    pub section: &'static str,
    /// The key in it (`maxclients`).
    pub key: &'static str,
    /// The value now.
    pub value: Value,
    /// Whether that is the default (a key the file lacks is then not added).
    pub default: bool,
}

/// `CONFIG REWRITE`: writes `settings` into the TOML file at `path`, as Redis rewrites its
/// file: a key the file has gets the current value (in place: its comments and every other
/// line survive), a key it lacks is added only when its value is not the default. The new
/// text is checked (it must still load), written beside the file, synced, and renamed over
/// it.
///
/// # Errors
/// [`ConfigError::Io`], or [`ConfigError::Parse`] when the file is no longer valid TOML.
pub fn rewrite(path: &Path, settings: &[Setting]) -> Result<(), ConfigError> {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(io)?;
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        ConfigError::Parse(format!("{}: {e}", path.display()))
    })?;
    for s in settings {
        let present = doc
            .get(s.section)
            .and_then(|t| t.as_table_like())
            .is_some_and(|t| t.contains_key(s.key));
        if !present && s.default {
            continue;
        }
        let value = match &s.value {
            Value::Int(n) => toml_edit::value(*n),
            Value::Text(t) => toml_edit::value(t.as_str()),
        };
        if !doc.contains_key(s.section) {
            doc.insert(s.section, toml_edit::table());
        }
        let table = doc[s.section]
            .as_table_like_mut()
            .ok_or_else(|| ConfigError::Parse(format!("[{}] is not a table", s.section)))?;
        match table.get_mut(s.key).and_then(|item| item.as_value_mut()) {
            // The value's own decoration (a trailing comment) is kept.
            Some(old) => {
                let decor = old.decor().clone();
                let mut new = value.into_value().expect("a value");
                *new.decor_mut() = decor;
                *old = new;
            }
            None => {
                table.insert(s.key, value);
            }
        }
    }
    let new_text = doc.to_string();
    FastCacheConfig::from_toml_str(&new_text)?;
    let temp = path.with_extension("toml.rewrite");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&temp).map_err(io)?;
        file.write_all(new_text.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)?;
    }
    std::fs::rename(&temp, path).map_err(io)
}

impl FastCacheConfig {
    /// Reads a TOML file.
    ///
    /// # Errors
    /// [`ConfigError::Io`], or [`ConfigError::Parse`] naming the line and field.
    pub fn load_from_path(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text).map_err(|e| match e {
            ConfigError::Parse(msg) => ConfigError::Parse(format!("{}: {msg}", path.display())),
            other => other,
        })
    }

    /// Parses TOML text.
    ///
    /// # Errors
    /// [`ConfigError::Parse`].
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// The configuration as TOML (every field, defaults included).
    ///
    /// # Errors
    /// [`ConfigError::Parse`] if it cannot be represented (it always can).
    pub fn to_toml_string(&self) -> Result<String, ConfigError> {
        toml::to_string_pretty(self).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// Writes the configuration to `path` as TOML (a temporary file renamed over it).
    ///
    /// # Errors
    /// [`ConfigError::Io`].
    pub fn store(&self, path: &Path) -> Result<(), ConfigError> {
        let text = self.to_toml_string()?;
        let io = |source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        };
        let temp = path.with_extension("toml.tmp");
        std::fs::write(&temp, text).map_err(io)?;
        std::fs::rename(&temp, path).map_err(io)
    }

    /// Checks every field and returns every problem at once.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with each problem and its field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let server = self.server_config();
        let cuda = self.cuda_config();
        match (server, cuda) {
            (Ok(_), Ok(_)) => Ok(()),
            (Err(ConfigError::Invalid(mut a)), Err(ConfigError::Invalid(b))) => {
                a.extend(b);
                Err(ConfigError::Invalid(a))
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }

    /// The `[cuda]` section resolved (sizes in bytes), checked.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming each bad field.
    pub fn cuda_config(&self) -> Result<CudaConfig, ConfigError> {
        let c = &self.cuda;
        let mut problems = Vec::new();
        // A size of at least 64 KiB, else a problem (and 0).
        let mut at_least_64kb = |field: &'static str, size: &Size| match size.bytes() {
            Ok(n) if n >= 64 << 10 => n,
            Ok(n) => {
                problems.push(Problem {
                    field,
                    message: format!("{n} is below 64kb"),
                });
                0
            }
            Err(message) => {
                problems.push(Problem { field, message });
                0
            }
        };
        let staging_bytes = at_least_64kb("cuda.staging_bytes", &c.staging_bytes);
        let piece_bytes = at_least_64kb("cuda.piece_bytes", &c.piece_bytes);
        if !(1..=16).contains(&c.streams) {
            problems.push(Problem {
                field: "cuda.streams",
                message: format!("{} is not between 1 and 16", c.streams),
            });
        }
        if !c.alignment.is_power_of_two() {
            problems.push(Problem {
                field: "cuda.alignment",
                message: format!("{} is not a power of two", c.alignment),
            });
        }
        if c.gather_threads > 64 {
            problems.push(Problem {
                field: "cuda.gather_threads",
                message: format!("{} is more than 64", c.gather_threads),
            });
        }
        let recycle_bytes = c.recycle_bytes.bytes().unwrap_or_else(|message| {
            problems.push(Problem {
                field: "cuda.recycle_bytes",
                message,
            });
            0
        });
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems));
        }
        Ok(CudaConfig {
            device: c.device,
            staging_bytes,
            streams: c.streams,
            alignment: c.alignment,
            gather_threads: c.gather_threads,
            piece_bytes,
            recycle_bytes,
        })
    }

    /// `[persistence.tcp_export]` resolved (`None`: off), its problems reported to `problem`.
    fn tcp_export_config(
        &self,
        problem: &mut impl FnMut(&'static str, String),
    ) -> Option<crate::TcpExportConfig> {
        let t = &self.persistence.tcp_export;
        if !t.enabled {
            return None;
        }
        let listen = match t.mode.as_str() {
            "listen" => true,
            "connect" => false,
            other => {
                problem(
                    "persistence.tcp_export.mode",
                    format!("'{other}': expected listen or connect"),
                );
                true
            }
        };
        let addr = match &t.addr {
            None => {
                problem(
                    "persistence.tcp_export.addr",
                    "an enabled export needs an address such as 127.0.0.1:7630".into(),
                );
                None
            }
            Some(text) => text
                .parse::<SocketAddr>()
                .map_err(|_| {
                    problem(
                        "persistence.tcp_export.addr",
                        format!("'{text}' is not an address such as 127.0.0.1:7630"),
                    );
                })
                .ok(),
        };
        if self.persistence.data_dir.is_none() {
            problem(
                "persistence.tcp_export.enabled",
                "the export streams the write-ahead log: give persistence.data_dir too".into(),
            );
        }
        if t.channel_capacity == 0 {
            problem(
                "persistence.tcp_export.channel_capacity",
                "must be at least 1".into(),
            );
        }
        if t.max_subscribers == 0 {
            problem(
                "persistence.tcp_export.max_subscribers",
                "must be at least 1".into(),
            );
        }
        Some(crate::TcpExportConfig {
            listen,
            addr: addr?,
            auth_token: t.auth_token.clone().filter(|s| !s.is_empty()),
            channel_capacity: t.channel_capacity.max(1),
            max_subscribers: t.max_subscribers.max(1),
            backpressure_on_full: t.backpressure_on_full,
        })
    }

    /// `[replication]` resolved, its problems reported to `problem`.
    fn replication_config(
        &self,
        problem: &mut impl FnMut(&'static str, String),
    ) -> crate::ReplicationConfig {
        let r = &self.replication;
        let defaults = crate::ReplicationConfig::default();
        let mut size =
            |field: &'static str, size: &Size, min: u64, default: usize| match size.bytes() {
                Ok(n) if n >= min && usize::try_from(n).is_ok() => n as usize,
                Ok(n) => {
                    problem(field, format!("{n} is below {min}"));
                    default
                }
                Err(e) => {
                    problem(field, e);
                    default
                }
            };
        let batch_bytes = size(
            "replication.batch_max_bytes",
            &r.batch_max_bytes,
            1,
            256 << 10,
        );
        let backlog_bytes = size(
            "replication.backlog_bytes",
            &r.backlog_bytes,
            16 << 10,
            defaults.backlog_bytes,
        );
        let snapshot_chunk_bytes = size(
            "replication.snapshot_chunk_bytes",
            &r.snapshot_chunk_bytes,
            4 << 10,
            defaults.snapshot_chunk_bytes,
        )
        .min(64 << 20);
        let batch = match r.send_policy.as_str() {
            "batch" => {
                if r.batch_max_records == 0 {
                    problem("replication.batch_max_records", "must be at least 1".into());
                }
                Some((
                    r.batch_max_records.max(1),
                    batch_bytes,
                    r.batch_max_delay_us,
                ))
            }
            "immediate" => None,
            other => {
                problem(
                    "replication.send_policy",
                    format!("'{other}': expected batch or immediate"),
                );
                defaults.batch
            }
        };
        let zstd_level = match r.compression.as_str() {
            "none" => None,
            "zstd" if (1..=22).contains(&r.zstd_level) => Some(r.zstd_level),
            "zstd" => {
                problem(
                    "replication.zstd_level",
                    format!("{} is outside 1..=22", r.zstd_level),
                );
                None
            }
            other => {
                problem(
                    "replication.compression",
                    format!("'{other}': expected none or zstd"),
                );
                None
            }
        };
        let bind = r.bind_addr.as_ref().and_then(|text| {
            text.parse::<SocketAddr>()
                .map_err(|_| {
                    problem(
                        "replication.bind_addr",
                        format!("'{text}' is not an address such as 127.0.0.1:7631"),
                    );
                })
                .ok()
        });
        let replica_of = match r.role.as_str() {
            "primary" => None,
            "replica" => {
                if r.primary_addr.is_none() {
                    problem(
                        "replication.primary_addr",
                        "role = \"replica\" needs the primary's host:port".into(),
                    );
                }
                r.primary_addr.clone()
            }
            other => {
                problem(
                    "replication.role",
                    format!("'{other}': expected primary or replica"),
                );
                None
            }
        };
        crate::ReplicationConfig {
            enabled: r.enabled,
            bind,
            replica_of,
            auth_token: r.auth_token.clone().filter(|t| !t.is_empty()),
            zstd_level,
            batch,
            flush_on_idle: r.flush_on_idle,
            backlog_bytes,
            snapshot_chunk_bytes,
            serve_stale_data: r.serve_stale_data,
        }
    }

    /// The server settings this file describes (defaults where it is silent).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with every problem.
    pub fn server_config(&self) -> Result<ServerConfig, ConfigError> {
        let mut problems = Vec::new();
        let mut problem = |field, message: String| problems.push(Problem { field, message });
        let defaults = ServerConfig::default();
        let (s, st, p) = (&self.server, &self.storage, &self.persistence);

        let bind = s.bind.parse::<SocketAddr>().unwrap_or_else(|_| {
            problem(
                "server.bind",
                format!("'{}' is not an address such as 127.0.0.1:6380", s.bind),
            );
            defaults.bind
        });
        let shards = st.shards.unwrap_or(defaults.shards);
        if !shards.is_power_of_two() || shards > 65_536 {
            problem(
                "storage.shards",
                format!("{shards} is not a power of two between 1 and 65536"),
            );
        }
        let threads = s.threads.unwrap_or(defaults.threads);
        if threads == 0 || threads > shards.max(1) {
            problem(
                "server.threads",
                format!("{threads} must be between 1 and the shard count ({shards})"),
            );
        }
        if s.maxclients == 0 {
            problem("server.maxclients", "must be at least 1".into());
        }
        if s.databases == 0 || s.databases > 1 << 20 {
            problem(
                "server.databases",
                format!("{} must be between 1 and 1048576", s.databases),
            );
        }
        let (output_limit, pubsub_output_limit) =
            match OutputLimit::parse_classes(&s.client_output_buffer_limit) {
                Ok((Some(normal), pubsub)) => {
                    (normal, pubsub.unwrap_or(OutputLimit::PUBSUB_DEFAULT))
                }
                Ok((None, _)) => {
                    problem(
                        "server.client_output_buffer_limit",
                        "no 'normal' class given".into(),
                    );
                    (OutputLimit::default(), OutputLimit::PUBSUB_DEFAULT)
                }
                Err(e) => {
                    problem("server.client_output_buffer_limit", e);
                    (OutputLimit::default(), OutputLimit::PUBSUB_DEFAULT)
                }
            };
        let maxmemory = st.max_memory.bytes().unwrap_or_else(|e| {
            problem("storage.max_memory", e);
            0
        });
        let policy = EvictionPolicy::from_redis_name(&st.eviction_policy).unwrap_or_else(|| {
            problem(
                "storage.eviction_policy",
                format!(
                    "'{}': expected noeviction, allkeys-lru or allkeys-s3fifo",
                    st.eviction_policy
                ),
            );
            EvictionPolicy::NoEviction
        });
        let appendfsync = FsyncPolicy::from_name(&p.appendfsync).unwrap_or_else(|| {
            problem(
                "persistence.appendfsync",
                format!("'{}': expected always, everysec or no", p.appendfsync),
            );
            FsyncPolicy::EverySec
        });
        let segment_bytes = match p.segment_bytes.bytes() {
            Ok(n) if n >= 4096 => n,
            Ok(n) => {
                problem(
                    "persistence.segment_bytes",
                    format!("{n} is below the 4096-byte minimum"),
                );
                64 << 20
            }
            Err(e) => {
                problem("persistence.segment_bytes", e);
                64 << 20
            }
        };
        let save = crate::parse_save_rules(&p.save).unwrap_or_else(|e| {
            problem("persistence.save", e);
            Vec::new()
        });
        let recovery = parse_recovery(&p.recovery).unwrap_or_else(|| {
            problem(
                "persistence.recovery",
                format!(
                    "'{}': expected tolerate-tail, strict or point-in-time",
                    p.recovery
                ),
            );
            RecoveryMode::TolerateTail
        });
        if let Some(dir) = &p.data_dir
            && dir.as_os_str().is_empty()
        {
            problem(
                "persistence.data_dir",
                "is empty (leave it out for none)".into(),
            );
        }
        let mut protocol_limit = |field: &'static str, size: &Size, default: u64| match size.bytes()
        {
            Ok(n) if n >= crate::MIN_PROTOCOL_LIMIT && n <= i64::MAX as u64 => n,
            Ok(n) => {
                problem(field, format!("{n} is below 1mb"));
                default
            }
            Err(e) => {
                problem(field, e);
                default
            }
        };
        let proto_max_bulk_len = protocol_limit(
            "server.proto_max_bulk_len",
            &s.proto_max_bulk_len,
            defaults.proto_max_bulk_len,
        );
        let client_query_buffer_limit = protocol_limit(
            "server.client_query_buffer_limit",
            &s.client_query_buffer_limit,
            defaults.client_query_buffer_limit,
        );
        if !(1..=500).contains(&s.hz) {
            problem("server.hz", format!("{} is outside 1..=500", s.hz));
        }
        if s.slowlog_log_slower_than < -1 {
            problem(
                "server.slowlog_log_slower_than",
                format!("{} is below -1", s.slowlog_log_slower_than),
            );
        }
        for (field, value) in [
            ("server.slowlog_max_len", s.slowlog_max_len),
            (
                "server.latency_monitor_threshold",
                s.latency_monitor_threshold,
            ),
        ] {
            if i64::try_from(value).is_err() {
                problem(field, format!("{value} is above 9223372036854775807"));
            }
        }
        // An optional address: a problem named after its field when it does not parse.
        let mut address = |field: &'static str, text: &Option<String>, example: &str| {
            let text = text.as_ref()?;
            text.parse::<SocketAddr>()
                .map_err(|_| {
                    problem(
                        field,
                        format!("'{text}' is not an address such as {example}"),
                    );
                })
                .ok()
        };
        let admin_bind = address("admin.bind", &self.admin.bind, "127.0.0.1:9121");
        let fcnp_bind = address("server.fcnp_bind", &s.fcnp_bind, "127.0.0.1:6390");
        let memcached_bind = address(
            "server.memcached_bind",
            &s.memcached_bind,
            "127.0.0.1:11211",
        );
        let writer = match s.monoio_writer.as_str() {
            "inline" => MonoioWriter::Inline,
            "split" => MonoioWriter::Split,
            "writev" => MonoioWriter::Writev,
            other => {
                problem(
                    "server.monoio_writer",
                    format!("'{other}' is not one of inline, split, writev"),
                );
                MonoioWriter::Inline
            }
        };
        let runtime = match s.runtime.as_str() {
            "tokio" => Runtime::Tokio,
            "monoio" => Runtime::Monoio(writer),
            other => {
                problem(
                    "server.runtime",
                    format!("'{other}' is not one of tokio, monoio"),
                );
                Runtime::Tokio
            }
        };
        let memcached_item_max = match s.memcached_item_size_max.bytes() {
            Ok(n) if (1024..=1 << 30).contains(&n) => n as usize,
            Ok(n) => {
                problem(
                    "server.memcached_item_size_max",
                    format!("{n} is not between 1kb and 1gb"),
                );
                1 << 20
            }
            Err(e) => {
                problem("server.memcached_item_size_max", e);
                1 << 20
            }
        };
        let replication = self.replication_config(&mut problem);
        let tcp_export = self.tcp_export_config(&mut problem);
        let tls = self.tls_config(bind, &mut problem);
        if !s.plaintext && tls.is_none() {
            problem(
                "server.plaintext",
                "false leaves no port: give [tls] port (and its files) too".into(),
            );
        }
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems));
        }
        Ok(ServerConfig {
            bind,
            shards,
            threads,
            requirepass: s.requirepass.clone().filter(|p| !p.is_empty()),
            maxclients: s.maxclients,
            databases: s.databases,
            busy_reply_threshold_ms: s.busy_reply_threshold,
            scripts_across_workers: s.scripts_across_workers,
            disable_thp: s.disable_thp,
            maxmemory: (maxmemory > 0).then_some(maxmemory),
            maxmemory_policy: policy,
            timeout: s.timeout,
            hz: s.hz,
            proto_max_bulk_len,
            client_query_buffer_limit,
            output_limit,
            pubsub_output_limit,
            slowlog_log_slower_than: s.slowlog_log_slower_than,
            slowlog_max_len: s.slowlog_max_len,
            latency_monitor_threshold: s.latency_monitor_threshold,
            config_file: None,
            admin_bind,
            acl_file: self.acl.file.clone(),
            tls,
            plaintext: s.plaintext,
            fcnp_bind,
            direct_shard_ports: s.direct_shard_ports.then_some(s.direct_shard_base_port),
            memcached_bind,
            memcached_item_max,
            runtime,
            replication,
            persistence: PersistenceConfig {
                data_dir: p.data_dir.clone(),
                appendfsync,
                segment_bytes,
                save,
                recovery,
                faults: fc_wal::Faults::none(),
                tcp_export,
            },
        })
    }

    /// `[tls]`'s settings (`None` without a port), each problem reported.
    fn tls_config(
        &self,
        bind: SocketAddr,
        problem: &mut impl FnMut(&'static str, String),
    ) -> Option<TlsConfig> {
        let t = &self.tls;
        let port = t.port.as_ref()?;
        let address = port.resolve(bind).map_err(|e| problem("tls.port", e)).ok();
        let mut file = |field: &'static str, path: &Option<PathBuf>| {
            if path.is_none() {
                problem(field, "is needed for a TLS port".into());
            }
            path.clone()
        };
        let cert_file = file("tls.cert_file", &t.cert_file);
        let key_file = file("tls.key_file", &t.key_file);
        let auth_clients = TlsAuthClients::from_name(&t.auth_clients).unwrap_or_else(|| {
            problem(
                "tls.auth_clients",
                format!("'{}': expected yes, no or optional", t.auth_clients),
            );
            TlsAuthClients::Yes
        });
        if auth_clients != TlsAuthClients::No && t.ca_cert_file.is_none() {
            problem(
                "tls.ca_cert_file",
                format!(
                    "is needed to check client certificates (auth_clients = \"{}\"); or set auth_clients = \"no\"",
                    auth_clients.name()
                ),
            );
        }
        let protocols = parse_tls_protocols(&t.protocols)
            .map_err(|e| problem("tls.protocols", e))
            .ok();
        Some(TlsConfig {
            bind: address?,
            cert_file: cert_file?,
            key_file: key_file?,
            ca_cert_file: t.ca_cert_file.clone(),
            auth_clients,
            protocols: protocols?,
        })
    }

    /// An embedded store with this file's `[storage]` settings (shards, memory limit,
    /// eviction policy).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with every problem of the file.
    pub fn embedded_store(&self) -> Result<EmbeddedStore, ConfigError> {
        let server = self.server_config()?;
        let mut builder =
            EmbeddedStore::builder(server.shards).eviction_policy(server.maxmemory_policy);
        if let Some(bytes) = server.maxmemory {
            builder = builder.max_memory(bytes);
        }
        builder.try_build().map_err(|e| {
            ConfigError::Invalid(vec![Problem {
                field: "storage",
                message: e.to_string(),
            }])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_file_is_the_defaults() {
        let config = FastCacheConfig::from_toml_str("").unwrap();
        assert_eq!(config, FastCacheConfig::default());
        let server = config.server_config().unwrap();
        let defaults = ServerConfig::default();
        assert_eq!(server.bind, defaults.bind);
        assert_eq!(server.shards, defaults.shards);
        assert_eq!(server.maxclients, 10_000);
        assert_eq!(server.output_limit, OutputLimit::default());
        assert!(server.persistence.data_dir.is_none());
        assert_eq!(server.persistence.segment_bytes, 64 << 20);
    }

    #[test]
    fn validate_names_every_bad_field_at_once() {
        let config = FastCacheConfig::from_toml_str(
            r#"
            [server]
            bind = "nowhere"
            threads = 0
            [storage]
            shards = 12
            max_memory = "12 parsecs"
            eviction_policy = "random"
            [persistence]
            appendfsync = "sometimes"
            recovery = "hope"
            save = "60"
            "#,
        )
        .unwrap();
        let Err(ConfigError::Invalid(problems)) = config.validate() else {
            panic!("expected problems");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "server.bind",
                "storage.shards",
                "server.threads",
                "storage.max_memory",
                "storage.eviction_policy",
                "persistence.appendfsync",
                "persistence.save",
                "persistence.recovery"
            ]
        );
    }

    #[test]
    fn the_cuda_section_resolves_and_names_bad_fields() {
        let defaults = FastCacheConfig::from_toml_str("")
            .unwrap()
            .cuda_config()
            .unwrap();
        assert_eq!(
            defaults,
            CudaConfig {
                device: 0,
                staging_bytes: 256 << 20,
                streams: 2,
                alignment: 256,
                gather_threads: 4,
                piece_bytes: 1 << 20,
                recycle_bytes: 512 << 20,
            }
        );
        let set = FastCacheConfig::from_toml_str(
            "[cuda]\ndevice = 1\nstaging_bytes = \"1gb\"\nstreams = 4\nalignment = 4096\ngather_threads = 8\npiece_bytes = \"4mb\"\nrecycle_bytes = 0\n",
        )
        .unwrap()
        .cuda_config()
        .unwrap();
        assert_eq!(
            (
                set.device,
                set.staging_bytes,
                set.streams,
                set.gather_threads,
                set.piece_bytes,
                set.recycle_bytes
            ),
            (1, 1 << 30, 4, 8, 4 << 20, 0)
        );
        let bad = FastCacheConfig::from_toml_str(
            "[cuda]\nstaging_bytes = \"1kb\"\nstreams = 0\nalignment = 100\ngather_threads = 65\npiece_bytes = \"4kb\"\nrecycle_bytes = \"lots\"\n",
        )
        .unwrap();
        let Err(ConfigError::Invalid(problems)) = bad.validate() else {
            panic!("expected problems");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "cuda.staging_bytes",
                "cuda.piece_bytes",
                "cuda.streams",
                "cuda.alignment",
                "cuda.gather_threads",
                "cuda.recycle_bytes"
            ]
        );
    }

    #[test]
    fn the_runtime_is_tokio_unless_monoio_is_asked_for() {
        let none = FastCacheConfig::from_toml_str("")
            .unwrap()
            .server_config()
            .unwrap();
        assert_eq!(none.runtime, Runtime::Tokio);
        let on = |toml: &str| {
            FastCacheConfig::from_toml_str(toml)
                .unwrap()
                .server_config()
                .unwrap()
                .runtime
        };
        assert_eq!(
            on("[server]\nruntime = \"monoio\"\n"),
            Runtime::Monoio(MonoioWriter::Inline)
        );
        assert_eq!(
            on("[server]\nruntime = \"monoio\"\nmonoio_writer = \"writev\"\n"),
            Runtime::Monoio(MonoioWriter::Writev)
        );
        // The writer alone does not switch the runtime.
        assert_eq!(on("[server]\nmonoio_writer = \"split\"\n"), Runtime::Tokio);
        let bad = FastCacheConfig::from_toml_str(
            "[server]\nruntime = \"uring\"\nmonoio_writer = \"vectored\"\n",
        )
        .unwrap();
        let Err(ConfigError::Invalid(problems)) = bad.validate() else {
            panic!("expected problems");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
        assert_eq!(fields, ["server.monoio_writer", "server.runtime"]);
        assert!(
            problems[1]
                .message
                .contains("'uring' is not one of tokio, monoio")
        );
    }

    #[test]
    fn fcnp_and_direct_shard_ports_are_off_unless_asked() {
        let none = FastCacheConfig::from_toml_str("")
            .unwrap()
            .server_config()
            .unwrap();
        assert_eq!((none.fcnp_bind, none.direct_shard_ports), (None, None));
        let on = FastCacheConfig::from_toml_str(
            "[server]\nfcnp_bind = \"127.0.0.1:6390\"\ndirect_shard_ports = true\n",
        )
        .unwrap()
        .server_config()
        .unwrap();
        assert_eq!(on.fcnp_bind, Some("127.0.0.1:6390".parse().unwrap()));
        assert_eq!(on.direct_shard_ports, Some(None));
        let based = FastCacheConfig::from_toml_str(
            "[server]\ndirect_shard_ports = true\ndirect_shard_base_port = 7000\n",
        )
        .unwrap()
        .server_config()
        .unwrap();
        assert_eq!(based.direct_shard_ports, Some(Some(7000)));
        let bad = FastCacheConfig::from_toml_str("[server]\nfcnp_bind = \"6390\"\n").unwrap();
        let Err(ConfigError::Invalid(problems)) = bad.validate() else {
            panic!("expected a problem");
        };
        assert_eq!(problems[0].field, "server.fcnp_bind");
    }

    #[test]
    fn the_admin_port_is_off_unless_bound() {
        let none = FastCacheConfig::from_toml_str("").unwrap();
        assert_eq!(none.server_config().unwrap().admin_bind, None);
        let on = FastCacheConfig::from_toml_str("[admin]\nbind = \"127.0.0.1:9121\"\n").unwrap();
        assert_eq!(
            on.server_config().unwrap().admin_bind,
            Some("127.0.0.1:9121".parse().unwrap())
        );
        let bad = FastCacheConfig::from_toml_str("[admin]\nbind = \"localhost\"\n").unwrap();
        let Err(ConfigError::Invalid(problems)) = bad.validate() else {
            panic!("expected a problem");
        };
        assert_eq!(problems[0].field, "admin.bind");
        let err = FastCacheConfig::from_toml_str("[admin]\nport = 1\n").unwrap_err();
        assert!(err.to_string().contains("port"), "{err}");
    }

    #[test]
    fn tls_settings_resolve_and_each_problem_is_named() {
        let config = FastCacheConfig::from_toml_str(
            "[server]\nbind = \"127.0.0.1:7000\"\nplaintext = false\n[tls]\nport = 7001\ncert_file = \"s.pem\"\nkey_file = \"s.key\"\nca_cert_file = \"ca.pem\"\nauth_clients = \"optional\"\nprotocols = \"tlsv1.3\"\n",
        )
        .unwrap();
        let server = config.server_config().unwrap();
        let tls = server.tls.unwrap();
        assert_eq!(tls.bind, "127.0.0.1:7001".parse().unwrap());
        assert_eq!(tls.auth_clients, TlsAuthClients::Optional);
        assert_eq!(tls.protocols, [crate::TlsProtocol::Tls13]);
        assert!(!server.plaintext);
        let at = FastCacheConfig::from_toml_str(
            "[tls]\nport = \"0.0.0.0:6390\"\ncert_file = \"s.pem\"\nkey_file = \"s.key\"\nauth_clients = \"no\"\n",
        )
        .unwrap();
        assert_eq!(
            at.server_config().unwrap().tls.unwrap().bind,
            "0.0.0.0:6390".parse().unwrap()
        );
        let bad = FastCacheConfig::from_toml_str(
            "[server]\nplaintext = false\n[tls]\nport = \"nowhere\"\nauth_clients = \"maybe\"\nprotocols = \"SSLv3\"\n",
        )
        .unwrap();
        let Err(ConfigError::Invalid(problems)) = bad.validate() else {
            panic!("expected problems");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "tls.port",
                "tls.cert_file",
                "tls.key_file",
                "tls.auth_clients",
                "tls.ca_cert_file",
                "tls.protocols",
                "server.plaintext"
            ]
        );
        // Without a TLS port, plaintext cannot be turned off.
        let none = FastCacheConfig::from_toml_str("[server]\nplaintext = false\n").unwrap();
        assert!(none.validate().is_err());
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_refused_by_name() {
        let err = FastCacheConfig::from_toml_str("[server]\nbnid = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("bnid"), "{err}");
        let err = FastCacheConfig::from_toml_str("[server]\nmaxclients = \"many\"\n").unwrap_err();
        assert!(err.to_string().contains("maxclients"), "{err}");
    }

    #[test]
    fn store_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fast-cache.toml");
        let mut config = FastCacheConfig::default();
        config.storage.max_memory = Size::Text("1gb".into());
        config.persistence.data_dir = Some(dir.path().join("data"));
        config.server.requirepass = Some("secret".into());
        config.store(&path).unwrap();
        let loaded = FastCacheConfig::load_from_path(&path).unwrap();
        assert_eq!(loaded, config);
        assert_eq!(loaded.server_config().unwrap().maxmemory, Some(1 << 30));
        assert!(matches!(
            FastCacheConfig::load_from_path(&dir.path().join("missing.toml")),
            Err(ConfigError::Io { .. })
        ));
    }

    #[test]
    fn disable_thp_is_on_unless_the_file_turns_it_off() {
        let default = FastCacheConfig::from_toml_str("").unwrap();
        assert!(default.server_config().unwrap().disable_thp);
        let off = FastCacheConfig::from_toml_str("[server]\ndisable_thp = false\n").unwrap();
        assert!(!off.server_config().unwrap().disable_thp);
        assert!(FastCacheConfig::from_toml_str("[server]\ndisable_thp = \"no\"\n").is_err());
    }

    #[test]
    fn the_example_file_is_valid_and_documents_every_field() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fast-cache.toml.example");
        let text = std::fs::read_to_string(&path).unwrap();
        let example = FastCacheConfig::from_toml_str(&text).unwrap();
        example.validate().unwrap();
        // The example shows the defaults, and names every field (commented out or not).
        let defaults = FastCacheConfig::default().to_toml_string().unwrap();
        let mut section = String::new();
        for line in defaults.lines() {
            if line.starts_with('[') {
                section = line.to_string();
                assert!(text.contains(&section), "example lacks {section}");
            } else if let Some((field, _)) = line.split_once(" = ") {
                assert!(
                    text.contains(&format!("{field} = ")),
                    "example lacks {section} {field}"
                );
            }
        }
        for optional in ["threads", "requirepass", "shards", "data_dir"] {
            assert!(
                text.contains(&format!("{optional} = ")),
                "example lacks {optional}"
            );
        }
    }
}
