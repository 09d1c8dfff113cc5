//! # fc-config — fast-cache's configuration, without a runtime
//!
//! **Owns:** the TOML file (`fast-cache.toml`: [`FastCacheConfig`] and its sections), its
//! checks ([`FastCacheConfig::validate`] returns every problem at once, each with its field's
//! name), storing it and rewriting it in place (`CONFIG REWRITE`), and what it resolves to: the
//! server's settings as plain data ([`ServerConfig`], [`PersistenceConfig`], [`OutputLimit`]) or
//! an embedded store sized by its `[storage]` section (the memory tier: shards, budget, eviction
//! policy). Also the parsers of Redis's value syntaxes the server's `CONFIG SET` and command
//! line share with the file (sizes such as `64mb`, `save` rules, output-buffer limits).
//!
//! **Must not depend on:** a runtime, the server, or anything else above the storage and log
//! crates: an embedded user reads the same file as the server (`fast_cache::config` is in the
//! facade's default build).
//!
//! Every field is optional and has the default shown in `fast-cache.toml.example`; unknown
//! sections and fields are refused (a typo must not be silently ignored). Sizes are bytes or
//! Redis-style strings (`"64mb"`, `"1gb"`). The server binary applies precedence flag >
//! environment (`FAST_CACHE_*`) > file > default.
//!
//! ## Example
//! ```
//! use fc_config::{EvictionPolicy, FastCacheConfig};
//!
//! let config = FastCacheConfig::from_toml_str(
//!     r#"
//!     [storage]
//!     shards = 8
//!     max_memory = "64mb"
//!     eviction_policy = "allkeys-lru"
//!     "#,
//! )?;
//! config.validate()?;
//! let settings = config.server_config()?;
//! assert_eq!(settings.maxmemory_policy, EvictionPolicy::Lru);
//! let cache = config.embedded_store()?;
//! cache.set(b"k".to_vec(), b"v".to_vec(), None);
//! assert_eq!(cache.stats_snapshot().shards.len(), 8);
//! # Ok::<(), fc_config::ConfigError>(())
//! ```

mod file;
mod settings;

pub use fc_shard::EvictionPolicy;
pub use fc_wal::{FsyncPolicy, RecoveryMode};
pub use file::{
    AclSection, AdminSection, ConfigError, CudaConfig, CudaSection, Endpoint, FastCacheConfig,
    PersistenceSection, Problem, ReplicationSection, ServerSection, Setting, Size, StorageSection,
    TcpExportSection, TlsSection, Value, rewrite,
};
pub use settings::{
    DEFAULT_SLOWLOG_MAX_LEN, DEFAULT_SLOWLOG_SLOWER_THAN, MIN_PROTOCOL_LIMIT, MonoioWriter,
    OutputLimit, PersistenceConfig, ReplicationConfig, Runtime, ServerConfig, TcpExportConfig,
    TlsAuthClients, TlsConfig, TlsProtocol, parse_recovery, parse_save_rules, parse_size,
    parse_tls_protocols,
};
