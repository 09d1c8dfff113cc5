//! The server's settings as plain data ([`ServerConfig`], [`PersistenceConfig`],
//! [`OutputLimit`]) and the parsers of Redis's value syntaxes they share with `CONFIG SET` and
//! the command line (sizes, `save` rules, output limits, recovery modes).

use std::net::SocketAddr;
use std::path::PathBuf;

use fc_shard::EvictionPolicy;
use fc_wal::{FsyncPolicy, RecoveryMode};

/// The smallest `proto-max-bulk-len` and `client-query-buffer-limit` (Redis's: 1 MiB).
pub const MIN_PROTOCOL_LIMIT: u64 = 1 << 20;

/// Redis's default `slowlog-log-slower-than` (microseconds).
pub const DEFAULT_SLOWLOG_SLOWER_THAN: i64 = 10_000;

/// Redis's default `slowlog-max-len`.
pub const DEFAULT_SLOWLOG_MAX_LEN: u64 = 128;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (loopback by default).
    pub bind: SocketAddr,
    /// Shards (a power of two).
    pub shards: usize,
    /// Worker threads (each owns `shards / threads` shards).
    pub threads: usize,
    /// Password every client must `AUTH` with (`None`: no password).
    pub requirepass: Option<String>,
    /// Most simultaneous clients; more are refused with Redis's error.
    pub maxclients: usize,
    /// Databases `SELECT` can name (`0..databases`; Redis's default 16).
    pub databases: u32,
    /// Milliseconds a script may run before other clients are answered `BUSY` and
    /// `SCRIPT KILL` may stop it (Redis's `busy-reply-threshold`, 5000; 0: never).
    pub busy_reply_threshold_ms: u64,
    /// Scripts whose declared keys live on several workers run holding them all (`true`,
    /// the default) or are refused with Redis Cluster's `CROSSSLOT` (`false`).
    pub scripts_across_workers: bool,
    /// Turn transparent huge pages off for the whole process at start (`true`, the default, as
    /// Redis's `disable-thp yes`; inherited by child processes). `false` leaves the system's
    /// setting: shards past 8 MiB then advise huge pages for their entries. With the
    /// allocator's heap in huge pages, the first touch of each 2 MiB zeroed it in one fault
    /// (~1.5 ms of a worker or the replication pump on a small machine) and a store held ~11%
    /// more memory; a store still growing filled ~10% faster (fewer faults).
    pub disable_thp: bool,
    /// Memory budget in bytes (`None`: unlimited).
    pub maxmemory: Option<u64>,
    /// What a write past the budget does.
    pub maxmemory_policy: EvictionPolicy,
    /// Seconds a client may stay idle before it is closed (0: forever).
    pub timeout: u64,
    /// Active expiry cycles per second (Redis's `hz`, 1 to 500).
    pub hz: u64,
    /// Largest bulk string a request may carry (Redis's `proto-max-bulk-len`, 512 MiB).
    pub proto_max_bulk_len: u64,
    /// Most unparsed request bytes a client may hold (Redis's `client-query-buffer-limit`,
    /// 1 GiB).
    pub client_query_buffer_limit: u64,
    /// Limits on replies a client leaves unread.
    pub output_limit: OutputLimit,
    /// Limits on messages a subscriber leaves unread (the `pubsub` class; Redis's default
    /// `32mb 8mb 60`).
    pub pubsub_output_limit: OutputLimit,
    /// Write-ahead log and snapshots (off without a data directory).
    pub persistence: PersistenceConfig,
    /// Commands at least this many microseconds long go into the slow log (Redis's
    /// `slowlog-log-slower-than`: 10000; negative: none; 0: every one).
    pub slowlog_log_slower_than: i64,
    /// Entries the slow log keeps (Redis's `slowlog-max-len`: 128).
    pub slowlog_max_len: u64,
    /// Commands at least this many milliseconds long are latency events (Redis's
    /// `latency-monitor-threshold`: 0, off).
    pub latency_monitor_threshold: u64,
    /// The TOML file the server was started with (`CONFIG REWRITE` writes to it; `None`:
    /// Redis's error).
    pub config_file: Option<std::path::PathBuf>,
    /// The admin HTTP port (`/metrics`, `/health`, `/ready`; the server's `telemetry`
    /// feature): `None`, the default, serves none.
    pub admin_bind: Option<SocketAddr>,
    /// A TLS port beside (or, without [`ServerConfig::plaintext`], instead of) the plaintext
    /// one (the server's `tls` feature); `None` by default.
    pub tls: Option<TlsConfig>,
    /// The ACL file (`ACL SAVE`/`ACL LOAD`, read at start; Redis's `aclfile`).
    pub acl_file: Option<PathBuf>,
    /// Whether [`ServerConfig::bind`] is served (plaintext RESP). `false` needs a TLS port:
    /// Redis's `port 0` with a `tls-port`.
    pub plaintext: bool,
    /// A port serving FCNP alone (`None`: none; FCNP is served on [`ServerConfig::bind`] too,
    /// told from RESP by its first byte).
    pub fcnp_bind: Option<SocketAddr>,
    /// Direct shard ports: `Some(base)` binds one listener per shard on `base + shard`
    /// (`Some(None)`: from [`ServerConfig::bind`]'s port + 1), each handing its connections
    /// to the worker that owns the shard; `None` (the default): none.
    pub direct_shard_ports: Option<Option<u16>>,
    /// A port serving memcached's text and meta protocols on the same keyspace (database 0);
    /// `None` (the default): none.
    pub memcached_bind: Option<SocketAddr>,
    /// The largest value the memcached port stores (memcached's `-I`, 1 MiB).
    pub memcached_item_max: usize,
    /// The workers' async runtime (`[server] runtime`, `--use-monoio`).
    pub runtime: Runtime,
    /// Native replication (`[replication]`).
    pub replication: ReplicationConfig,
}

/// The runtime the workers' connections run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Runtime {
    /// tokio's current-thread runtime (epoll): portable, the default.
    #[default]
    Tokio,
    /// monoio's io_uring runtime (Linux; fc-server's `monoio` feature), with this reply writer.
    Monoio(MonoioWriter),
}

/// How a monoio worker writes a connection's replies (`FAST_CACHE_MONOIO_SAFE_WRITER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MonoioWriter {
    /// The connection's own task sends each flush and waits for it before reading on.
    #[default]
    Inline,
    /// A writer task per connection sends each flush while the connection reads and runs
    /// the next requests (at most one flush waits behind the one being sent).
    Split,
    /// As `Split`, but every flush waiting is gathered into one vectored send.
    Writev,
}

impl MonoioWriter {
    /// Its name in the configuration.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Inline => "inline",
            Self::Split => "split",
            Self::Writev => "writev",
        }
    }
}

/// Native replication's settings (`[replication]`; `docs/REPLICATION.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// Feed the replication backlog from the start (`enabled = true`); otherwise it starts
    /// when the first replica connects (that replica then begins from snapshots).
    pub enabled: bool,
    /// A port for replicas alone (replicas may also connect to the RESP port).
    pub bind: Option<SocketAddr>,
    /// Start as a replica of this primary (`host:port`, its RESP or replication port);
    /// `REPLICAOF` changes it at run time.
    pub replica_of: Option<String>,
    /// The token replicas present, and this server presents to its primary (absent: the
    /// primary's `requirepass`, as Redis's `masterauth`; none without one).
    pub auth_token: Option<String>,
    /// zstd level for frames (`None`: no compression, the default).
    pub zstd_level: Option<i32>,
    /// Batches: (most records, most bytes, longest wait in microseconds); `None`: every
    /// mutation leaves at once (`send_policy = "immediate"`).
    pub batch: Option<(u32, usize, u64)>,
    /// A batch also leaves when the worker that wrote it runs out of work (`flush_on_idle`;
    /// with `batch` only).
    pub flush_on_idle: bool,
    /// Bytes of recent frames kept for replicas that reconnect (all shards together: the
    /// oldest frame goes first, whatever its shard).
    pub backlog_bytes: usize,
    /// Bytes per snapshot chunk sent to a replica catching up.
    pub snapshot_chunk_bytes: usize,
    /// A replica serves reads while its link is down or syncing (Redis's
    /// `replica-serve-stale-data`).
    pub serve_stale_data: bool,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bind: None,
            replica_of: None,
            auth_token: None,
            zstd_level: None,
            batch: Some((64, 256 << 10, 250)),
            flush_on_idle: true,
            backlog_bytes: 64 << 20,
            snapshot_chunk_bytes: 1 << 20,
            serve_stale_data: true,
        }
    }
}

/// Whether TLS clients must present a certificate (Redis's `tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsAuthClients {
    /// A client certificate signed by the CA is required (Redis's default).
    #[default]
    Yes,
    /// None is asked for.
    No,
    /// One is checked when given; a client without one is accepted.
    Optional,
}

impl TlsAuthClients {
    /// By its name in flags and files: `yes`, `no`, `optional`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "yes" => Some(Self::Yes),
            "no" => Some(Self::No),
            "optional" => Some(Self::Optional),
            _ => None,
        }
    }

    /// Its name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Yes => "yes",
            Self::No => "no",
            Self::Optional => "optional",
        }
    }
}

/// A TLS protocol version the TLS port accepts (Redis's `tls-protocols`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsProtocol {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// Parses Redis's `tls-protocols`: `"TLSv1.2 TLSv1.3"` (any case, either or both; older
/// versions are refused: rustls does not speak them).
///
/// # Errors
/// A message naming the version it does not know.
pub fn parse_tls_protocols(text: &str) -> Result<Vec<TlsProtocol>, String> {
    let mut protocols = Vec::new();
    for word in text.split_whitespace() {
        let protocol = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => TlsProtocol::Tls12,
            "tlsv1.3" => TlsProtocol::Tls13,
            _ => {
                return Err(format!(
                    "'{word}': expected TLSv1.2 and/or TLSv1.3 (older versions are not supported)"
                ));
            }
        };
        if !protocols.contains(&protocol) {
            protocols.push(protocol);
        }
    }
    if protocols.is_empty() {
        return Err("no protocol given (TLSv1.2 and/or TLSv1.3)".into());
    }
    protocols.sort_unstable();
    Ok(protocols)
}

/// The TLS port's settings (`[tls]`, `--tls-port`...): as Redis's `tls-*` directives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// Address of the TLS port.
    pub bind: SocketAddr,
    /// The server's certificate chain, PEM (`tls-cert-file`).
    pub cert_file: PathBuf,
    /// Its private key, PEM: PKCS#8, PKCS#1 or SEC1 (`tls-key-file`).
    pub key_file: PathBuf,
    /// The CA certificates client certificates are checked against, PEM
    /// (`tls-ca-cert-file`); needed unless `auth_clients` is `No`.
    pub ca_cert_file: Option<PathBuf>,
    /// Whether clients must present a certificate.
    pub auth_clients: TlsAuthClients,
    /// The protocol versions accepted (both by default).
    pub protocols: Vec<TlsProtocol>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 6380)),
            shards: cores.next_power_of_two().max(16),
            threads: cores,
            requirepass: None,
            maxclients: 10_000,
            databases: 16,
            busy_reply_threshold_ms: 5000,
            scripts_across_workers: true,
            disable_thp: true,
            maxmemory: None,
            maxmemory_policy: EvictionPolicy::NoEviction,
            timeout: 0,
            hz: 10,
            proto_max_bulk_len: fc_resp::Limits::DEFAULT_MAX_BULK_LEN,
            client_query_buffer_limit: fc_resp::Limits::DEFAULT_MAX_QUERY_BUFFER as u64,
            output_limit: OutputLimit::default(),
            pubsub_output_limit: OutputLimit::PUBSUB_DEFAULT,
            persistence: PersistenceConfig::default(),
            slowlog_log_slower_than: DEFAULT_SLOWLOG_SLOWER_THAN,
            slowlog_max_len: DEFAULT_SLOWLOG_MAX_LEN,
            latency_monitor_threshold: 0,
            config_file: None,
            admin_bind: None,
            tls: None,
            acl_file: None,
            plaintext: true,
            fcnp_bind: None,
            direct_shard_ports: None,
            memcached_bind: None,
            memcached_item_max: 1 << 20,
            runtime: Runtime::Tokio,
            replication: ReplicationConfig::default(),
        }
    }
}

/// The `[persistence]` settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PersistenceConfig {
    /// Data directory (`None`: in memory only).
    pub data_dir: Option<PathBuf>,
    /// When log frames reach the disk (`appendfsync`).
    pub appendfsync: FsyncPolicy,
    /// Log segment size in bytes.
    pub segment_bytes: u64,
    /// Snapshot rules, as Redis's `save`: snapshot when at least `changes` writes happened in
    /// the last `seconds` (empty: only `SAVE`/`BGSAVE`).
    pub save: Vec<(u64, u64)>,
    /// What recovery does about damage.
    pub recovery: RecoveryMode,
    /// Fault injection into the log's file operations (tests; none by default).
    pub faults: fc_wal::Faults,
    /// The WAL TCP export (`None`: off).
    pub tcp_export: Option<TcpExportConfig>,
}

/// The WAL TCP export's settings (`[persistence.tcp_export]`; `docs/DURABILITY.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpExportConfig {
    /// Subscribers connect to `addr` (`true`), or the server connects to one collector there.
    pub listen: bool,
    /// The address.
    pub addr: SocketAddr,
    /// The token subscribers present, or this server presents to its collector.
    pub auth_token: Option<String>,
    /// Runs of frames queued for the export, and for each subscriber.
    pub channel_capacity: usize,
    /// Most subscribers at once (`listen`).
    pub max_subscribers: usize,
    /// A full queue slows the writers (`true`) or loses those frames from the export only
    /// (`false`, counted).
    pub backpressure_on_full: bool,
}

impl Default for PersistenceConfig {
    fn default() -> Self {
        Self {
            data_dir: None,
            appendfsync: FsyncPolicy::EverySec,
            segment_bytes: 64 << 20,
            save: vec![(3600, 1), (300, 100), (60, 10_000)],
            recovery: RecoveryMode::TolerateTail,
            faults: fc_wal::Faults::none(),
            tcp_export: None,
        }
    }
}

/// Parses Redis's `save` syntax: `"3600 1 300 100"` (pairs of seconds and changes) or `""`.
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_save_rules(text: &str) -> Result<Vec<(u64, u64)>, String> {
    let numbers: Vec<&str> = text.split_whitespace().collect();
    if !numbers.len().is_multiple_of(2) {
        return Err(format!(
            "save '{text}': expected pairs of <seconds> <changes>"
        ));
    }
    numbers
        .chunks(2)
        .map(|pair| {
            let seconds = pair[0]
                .parse::<u64>()
                .map_err(|_| format!("save: bad seconds '{}'", pair[0]))?;
            let changes = pair[1]
                .parse::<u64>()
                .map_err(|_| format!("save: bad changes '{}'", pair[1]))?;
            Ok((seconds, changes))
        })
        .collect()
}

/// Client-output limits (Redis's `client-output-buffer-limit normal <hard> <soft> <seconds>`).
///
/// fc-server stops reading a client whose replies are not being read, so its output never
/// grows past one pipeline batch (64 KiB) plus one reply: `hard` bounds that one reply set,
/// also while a reply is being built (a `KEYS *` or `LRANGE 0 -1` past it closes the client
/// before its reply is complete), and `soft` + `seconds` end a client that has left at least
/// `soft` bytes unread for `seconds` straight (a client that never reads). 0 turns `hard` or
/// `seconds` off; the default is Redis's for normal clients, `0 0 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputLimit {
    /// A batch of replies larger than this closes the client instead of being sent.
    pub hard: u64,
    /// Pending bytes that count as stalled output.
    pub soft: u64,
    /// Seconds a write of at least `soft` bytes may wait for the client to read.
    pub seconds: u64,
}

impl OutputLimit {
    /// Redis's default limit of the `pubsub` class: `32mb 8mb 60`.
    pub const PUBSUB_DEFAULT: Self = Self {
        hard: 32 << 20,
        soft: 8 << 20,
        seconds: 60,
    };

    /// Parses `normal <hard> <soft> <seconds>` (sizes as Redis writes them: `64mb`, `1gb`, ...);
    /// other classes (`replica`, `pubsub`) are accepted and ignored.
    ///
    /// # Errors
    /// A message naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_classes(text)?
            .0
            .ok_or_else(|| "no 'normal' class given".into())
    }

    /// Parses `<class> <hard> <soft> <seconds>` groups: the `normal` and the `pubsub` limits
    /// when given (`replica` is accepted and ignored).
    ///
    /// # Errors
    /// A message naming what is wrong.
    pub fn parse_classes(text: &str) -> Result<(Option<Self>, Option<Self>), String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err("expected <class> <hard> <soft> <seconds> groups".into());
        }
        let (mut limit, mut pubsub) = (None, None);
        for group in words.chunks(4) {
            let class = group[0].to_ascii_lowercase();
            if !matches!(class.as_str(), "normal" | "replica" | "slave" | "pubsub") {
                return Err(format!("unknown client class '{}'", group[0]));
            }
            let hard = parse_size(group[1])?;
            let soft = parse_size(group[2])?;
            let seconds = group[3]
                .parse()
                .map_err(|_| format!("bad seconds '{}'", group[3]))?;
            let parsed = Some(Self {
                hard,
                soft,
                seconds,
            });
            match class.as_str() {
                "normal" => limit = parsed,
                "pubsub" => pubsub = parsed,
                _ => {}
            }
        }
        Ok((limit, pubsub))
    }

    /// `normal <hard> <soft> <seconds>`, as a config file or flag writes it.
    #[must_use]
    pub fn normal_text(&self) -> String {
        format!("normal {} {} {}", self.hard, self.soft, self.seconds)
    }

    /// As `CONFIG GET client-output-buffer-limit` shows it, with the `pubsub` class's limit
    /// (replicas show Redis's default).
    #[must_use]
    pub fn redis_text(&self, pubsub: &Self) -> String {
        format!(
            "{} slave 268435456 67108864 60 pubsub {} {} {}",
            self.normal_text(),
            pubsub.hard,
            pubsub.soft,
            pubsub.seconds
        )
    }
}

/// A size as Redis's config reads it: bytes, or with `k`/`kb`/`m`/`mb`/`g`/`gb` (`k` = 1000,
/// `kb` = 1024, and so on).
///
/// # Errors
/// A message naming the bad size.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.to_ascii_lowercase();
    let split = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(split);
    let scale: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(format!("bad size '{text}'")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("bad size '{text}'"))
}

/// A recovery mode by its name in flags and files.
#[must_use]
pub fn parse_recovery(name: &str) -> Option<RecoveryMode> {
    match name {
        "tolerate-tail" => Some(RecoveryMode::TolerateTail),
        "strict" => Some(RecoveryMode::Strict),
        "point-in-time" => Some(RecoveryMode::PointInTime),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_limits_parse_as_redis_writes_them() {
        assert_eq!(parse_size("64mb"), Ok(64 << 20));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_size("5k"), Ok(5000));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("12xb").is_err());
        assert!(parse_size("").is_err());
        let limit = OutputLimit::parse("normal 0 1mb 5 pubsub 32mb 8mb 60").unwrap();
        assert_eq!(
            limit,
            OutputLimit {
                hard: 0,
                soft: 1 << 20,
                seconds: 5
            }
        );
        assert!(OutputLimit::parse("normal 0 0").is_err());
        assert!(OutputLimit::parse("pubsub 0 0 0").is_err());
        assert!(OutputLimit::parse("bogus 0 0 0").is_err());
    }
}
