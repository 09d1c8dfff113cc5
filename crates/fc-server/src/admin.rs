//! The admin HTTP port (the `telemetry` feature; `--admin-bind`, `[admin] bind`): `/metrics`
//! in Prometheus's text format (0.0.4) through `prometheus-client`, `/health` (the process
//! answers) and `/ready` (the data is loaded: `503` while a snapshot and the log load).
//!
//! The port is bound before the data loads, on a thread of its own with a single-threaded
//! runtime and `hyper` (HTTP/1.1, headers within 5 s, at most [`MAX_CONNECTIONS`] at once: a
//! slow or malformed client costs a task and gets `hyper`'s `400`, never a worker's time).
//!
//! A scrape asks one worker (one not running a busy script) to gather what `INFO all` prints,
//! the command statistics and latency histograms summed over the workers, and each worker's
//! shards and counters, as `INFO` itself gathers them — so the metrics and `INFO` always
//! agree. `INFO`'s fields keep redis_exporter's names (`redis_connected_clients`,
//! `redis_commands_processed_total`, `redis_db_keys{db="db0"}`, `redis_commands_total{cmd}`,
//! ...), so its dashboards and alerts work unchanged; fast-cache's own are `fast_cache_*`
//! (per shard, per worker with its cross-worker hops, the write-ahead log with a histogram of
//! its sync rounds, command latency histograms in seconds). A scrape that a worker does not
//! answer within [`SCRAPE_TIMEOUT`] (a script running past `busy-reply-threshold` on every
//! worker) is answered `503`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use tokio::sync::{Semaphore, oneshot, watch};

use crate::command::{Ctx, Handler, store};
use crate::cross::exec_at;
use crate::reply::{Replies, Reply, Token};
use crate::shared::{Job, Shared};
use crate::worker::Worker;

/// Admin connections served at once; more are closed at accept.
pub(crate) const MAX_CONNECTIONS: usize = 64;

/// How long a scrape waits for the workers.
pub(crate) const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The `Content-Type` of Prometheus's text format.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds (seconds) of the command latency histogram's buckets.
const LATENCY_BOUNDS: [f64; 18] = [
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
    5e-2, 0.1, 0.5, 1.0,
];

/// What the admin port serves from: the server once its data is loaded.
#[derive(Default)]
pub(crate) struct Admin {
    shared: OnceLock<Arc<Shared>>,
}

impl Admin {
    /// The data is loaded and the workers run: `/ready` says so and `/metrics` scrapes them.
    pub(crate) fn ready(&self, shared: Arc<Shared>) {
        let _ = self.shared.set(shared);
    }
}

/// Binds `bind` and serves the admin port on a thread of its own until `stop` changes.
///
/// # Errors
/// The address cannot be bound.
pub(crate) fn start(
    bind: SocketAddr,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<(Arc<Admin>, SocketAddr, JoinHandle<()>)> {
    let listener =
        std::net::TcpListener::bind(bind).map_err(|e| anyhow::anyhow!("admin port {bind}: {e}"))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let admin = Arc::new(Admin::default());
    let served = Arc::clone(&admin);
    let thread = std::thread::Builder::new()
        .name("fc-admin".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the admin port's runtime");
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((stream, peer)) = accepted else { continue };
                            let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                                tracing::debug!("admin port: {peer} refused, {MAX_CONNECTIONS} connections open");
                                continue;
                            };
                            let admin = Arc::clone(&served);
                            tokio::spawn(async move {
                                let _permit = permit;
                                let service = service_fn(move |request| {
                                    let admin = Arc::clone(&admin);
                                    async move { Ok::<_, Infallible>(route(&admin, &request).await) }
                                });
                                let served = http1::Builder::new()
                                    .timer(TokioTimer::new())
                                    .header_read_timeout(Duration::from_secs(5))
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                                if let Err(err) = served {
                                    tracing::debug!("admin port: {peer}: {err}");
                                }
                            });
                        }
                        _ = stop.changed() => break,
                    }
                }
            });
        })?;
    Ok((admin, addr, thread))
}

/// One request's response.
async fn route(admin: &Admin, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let head = request.method() == Method::HEAD;
    if request.method() != Method::GET && !head {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n".into());
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = match request.uri().path() {
        "/" => text(
            StatusCode::OK,
            "fast-cache admin port: /metrics /health /ready\n".into(),
        ),
        "/health" | "/healthz" | "/livez" => text(StatusCode::OK, "ok\n".into()),
        "/ready" | "/readyz" => match admin.shared.get() {
            Some(_) => text(StatusCode::OK, "ready\n".into()),
            None => text(StatusCode::SERVICE_UNAVAILABLE, "loading\n".into()),
        },
        "/metrics" => {
            let scraped = match admin.shared.get() {
                Some(shared) => scrape(shared).await,
                None => Ok(loading_exposition()),
            };
            match scraped {
                Ok(body) => {
                    let mut response = text(StatusCode::OK, body);
                    response
                        .headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static(METRICS_TYPE));
                    response
                }
                Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    };
    if head {
        *response.body_mut() = Full::new(Bytes::new());
    }
    response
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// While the data loads: up, and loading (redis_exporter's `redis_loading_dump_file`).
fn loading_exposition() -> String {
    let exposition = Exposition {
        info: HashMap::from([("loading".to_string(), "1".to_string())]),
        ..Exposition::default()
    };
    encode(exposition)
}

/// A scrape: gathered on a worker, encoded here.
async fn scrape(shared: &Arc<Shared>) -> Result<String, String> {
    let busy = shared.scripts.busy_worker();
    let at = (0..shared.workers).find(|&w| Some(w) != busy).unwrap_or(0);
    let (sender, gathered) = oneshot::channel();
    let work = Box::new(move || {
        let worker = crate::worker::current();
        crate::rt::spawn_local(async move {
            let gathered = crate::stats::uncounted(gather(&worker)).await;
            let _ = sender.send(gathered);
        });
        Replies::new()
    });
    let (reply, _) = oneshot::channel();
    shared
        .inboxes
        .get(at)
        .ok_or("no worker")?
        .send(Job::Run { work, reply })
        .map_err(|_| "the server is stopping".to_string())?;
    let mut exposition = match tokio::time::timeout(SCRAPE_TIMEOUT, gathered).await {
        Ok(Ok(exposition)) => exposition,
        Ok(Err(_)) => return Err("the server is stopping".into()),
        Err(_) => {
            return Err(format!(
                "the workers did not answer within {} s (a busy script?)",
                SCRAPE_TIMEOUT.as_secs()
            ));
        }
    };
    exposition.policy = shared.config.maxmemory_policy.redis_name();
    exposition.wal = shared.persist.as_ref().map(|p| p.wal.stats());
    Ok(encode(exposition))
}

/// Everything a scrape reports.
#[derive(Debug, Default)]
struct Exposition {
    /// `INFO all`'s `field:value` lines (but the keyspace, command and error ones).
    info: HashMap<String, String>,
    /// `INFO keyspace`: per database, keys, keys with a TTL, their average TTL (ms).
    keyspace: Vec<(String, [f64; 3])>,
    /// `INFO commandstats`: per command, calls, microseconds, rejected, failed.
    commands: Vec<(String, [f64; 4])>,
    /// `INFO errorstats`: per error code, replies.
    errors: Vec<(String, u64)>,
    /// Per command, its latency histogram: count, sum (s), counts per [`LATENCY_BOUNDS`]
    /// bucket (the last: slower).
    latency: Vec<(String, u64, f64, Vec<u64>)>,
    /// Per worker: commands run, cross-worker hops, and its shards.
    workers: Vec<WorkerPart>,
    /// The eviction policy (`maxmemory-policy`).
    policy: &'static str,
    /// The write-ahead log's counters (`None`: in memory only).
    wal: Option<fc_wal::WalStatsSnapshot>,
}

#[derive(Debug, Default)]
struct WorkerPart {
    commands: u64,
    hops: u64,
    /// Per shard: index, keys, keys with a TTL, stored bytes, used memory, hits, misses,
    /// expired, evicted.
    shards: Vec<[u64; 9]>,
}

/// One worker's part: commands, hops, shard count, then each shard's nine counters.
fn worker_part<R: Reply>(ctx: &mut Ctx<'_, R>) {
    let (commands, hops) = crate::stats::with_current(|stats| {
        stats.map_or((0, 0), |s| {
            let calls = s.slots().iter().map(crate::stats::Slot::calls).sum();
            (calls, s.hops.get())
        })
    });
    let shards = ctx.store.stats_snapshot().shards;
    ctx.out.array_len(3 + shards.len() * 9);
    ctx.out.integer(commands as i64);
    ctx.out.integer(hops as i64);
    ctx.out.integer(shards.len() as i64);
    for s in shards {
        for v in [
            s.shard as u64,
            s.keys,
            s.expires,
            s.stored_bytes,
            s.used_memory,
            s.hits,
            s.misses,
            s.expired,
            s.evicted,
        ] {
            ctx.out.integer(v as i64);
        }
    }
}

/// Gathers a scrape on a worker's thread, as `INFO` gathers: `INFO all`, the summed
/// histograms, and every worker's part.
async fn gather(worker: &Worker) -> Exposition {
    const PART: Handler = store!(worker_part);
    let mut exposition = Exposition::default();
    let mut out = Replies::new();
    let args = [Bytes::from_static(b"INFO"), Bytes::from_static(b"all")];
    crate::info::info(worker, &args, &mut out, None).await;
    let text = match out.tokens().first() {
        Some(Token::Bulk(r) | Token::Verbatim(_, r)) => {
            String::from_utf8_lossy(out.bytes(r)).into_owned()
        }
        _ => String::new(),
    };
    parse_info(&text, &mut exposition);
    let observed = crate::info::observed(worker, None).await;
    for (slot, h) in crate::info::histograms(worker, &[], None).await {
        if h.total == 0 {
            continue;
        }
        let ticks = observed.slots.get(&slot).map_or(0, |s| s[1]);
        let sum = worker.ticks.nanos(ticks) as f64 / 1e9;
        let mut buckets = vec![0u64; LATENCY_BOUNDS.len() + 1];
        for (index, &count) in h.counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let seconds = crate::stats::value_at_index(index) as f64 / 1e9;
            buckets[LATENCY_BOUNDS.partition_point(|&b| b < seconds)] += count;
        }
        exposition
            .latency
            .push((crate::command::slot_name(slot), h.total, sum, buckets));
    }
    for owner in 0..worker.shared.workers {
        let part = exec_at(worker, owner, PART, vec![Bytes::from_static(b"info")], None).await;
        let values: Vec<u64> = part.integers().map(|v| v.max(0) as u64).collect();
        let (Some(&commands), Some(&hops)) = (values.first(), values.get(1)) else {
            exposition.workers.push(WorkerPart::default());
            continue;
        };
        let shards = values
            .get(3..)
            .unwrap_or_default()
            .chunks_exact(9)
            .map(|c| std::array::from_fn(|i| c[i]))
            .collect();
        exposition.workers.push(WorkerPart {
            commands,
            hops,
            shards,
        });
    }
    exposition
}

/// Reads `INFO`'s text: scalar fields, and the keyspace, command and error lines.
fn parse_info(text: &str, exposition: &mut Exposition) {
    for line in text.lines() {
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        let pairs = || -> HashMap<&str, f64> {
            value
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
                .collect()
        };
        if let Some(cmd) = field.strip_prefix("cmdstat_") {
            let p = pairs();
            let get = |k| p.get(k).copied().unwrap_or(0.0);
            exposition.commands.push((
                cmd.to_string(),
                [
                    get("calls"),
                    get("usec"),
                    get("rejected_calls"),
                    get("failed_calls"),
                ],
            ));
        } else if let Some(code) = field.strip_prefix("errorstat_") {
            let count = pairs().get("count").copied().unwrap_or(0.0);
            exposition.errors.push((code.to_string(), count as u64));
        } else if field.starts_with("db") && field[2..].bytes().all(|b| b.is_ascii_digit()) {
            let p = pairs();
            let get = |k| p.get(k).copied().unwrap_or(0.0);
            exposition.keyspace.push((
                field.to_string(),
                [get("keys"), get("expires"), get("avg_ttl")],
            ));
        } else if !field.starts_with("latency_percentiles_usec_") {
            exposition.info.insert(field.to_string(), value.to_string());
        }
    }
}

/// `INFO` fields as redis_exporter names them: gauges.
const INFO_GAUGES: &[(&str, &str, &str)] = &[
    (
        "uptime_in_seconds",
        "redis_uptime_in_seconds",
        "Seconds since the server started.",
    ),
    ("process_id", "redis_process_id", "The server's process id."),
    (
        "connected_clients",
        "redis_connected_clients",
        "Clients connected.",
    ),
    (
        "blocked_clients",
        "redis_blocked_clients",
        "Clients blocked on keys (BLPOP...).",
    ),
    (
        "tracking_clients",
        "redis_tracking_clients",
        "Clients with client-side caching on.",
    ),
    ("maxclients", "redis_max_clients", "The maxclients setting."),
    (
        "client_recent_max_input_buffer",
        "redis_client_recent_max_input_buffer_bytes",
        "Largest client input buffer lately.",
    ),
    (
        "client_recent_max_output_buffer",
        "redis_client_recent_max_output_buffer_bytes",
        "Largest client output buffer lately.",
    ),
    (
        "used_memory",
        "redis_memory_used_bytes",
        "Bytes the data set takes (entries and their index).",
    ),
    (
        "used_memory_rss",
        "redis_memory_used_rss_bytes",
        "Resident set size of the process.",
    ),
    (
        "used_memory_peak",
        "redis_memory_used_peak_bytes",
        "Peak of used_memory.",
    ),
    (
        "used_memory_lua",
        "redis_memory_used_lua_bytes",
        "Bytes the Lua interpreters use.",
    ),
    (
        "used_memory_scripts",
        "redis_memory_used_scripts_bytes",
        "Bytes cached scripts and functions use.",
    ),
    (
        "used_memory_dataset",
        "redis_memory_used_dataset_bytes",
        "Bytes of the data set.",
    ),
    (
        "number_of_cached_scripts",
        "redis_number_of_cached_scripts",
        "Scripts cached by EVAL and SCRIPT LOAD.",
    ),
    (
        "maxmemory",
        "redis_memory_max_bytes",
        "The maxmemory setting (0: unlimited).",
    ),
    (
        "mem_fragmentation_ratio",
        "redis_mem_fragmentation_ratio",
        "used_memory_rss over used_memory.",
    ),
    (
        "loading",
        "redis_loading_dump_file",
        "1 while the data loads.",
    ),
    (
        "rdb_changes_since_last_save",
        "redis_rdb_changes_since_last_save",
        "Writes since the last snapshot.",
    ),
    (
        "rdb_bgsave_in_progress",
        "redis_rdb_bgsave_in_progress",
        "1 while a snapshot is taken.",
    ),
    (
        "rdb_last_save_time",
        "redis_rdb_last_save_timestamp_seconds",
        "Unix time of the last snapshot.",
    ),
    (
        "rdb_last_bgsave_status",
        "redis_rdb_last_bgsave_status",
        "1 when the last snapshot succeeded.",
    ),
    (
        "rdb_last_bgsave_time_sec",
        "redis_rdb_last_bgsave_duration_sec",
        "Seconds the last snapshot took (-1: none).",
    ),
    (
        "aof_enabled",
        "redis_aof_enabled",
        "1 when the write-ahead log is on.",
    ),
    (
        "aof_last_write_status",
        "redis_aof_last_write_status",
        "1 when the last log write succeeded.",
    ),
    (
        "instantaneous_ops_per_sec",
        "redis_instantaneous_ops",
        "Commands per second lately.",
    ),
    (
        "instantaneous_input_kbps",
        "redis_net_instantaneous_input_kbps",
        "Network input lately, KB/s.",
    ),
    (
        "instantaneous_output_kbps",
        "redis_net_instantaneous_output_kbps",
        "Network output lately, KB/s.",
    ),
    (
        "pubsub_channels",
        "redis_pubsub_channels",
        "Channels with subscribers.",
    ),
    (
        "pubsub_patterns",
        "redis_pubsub_patterns",
        "Patterns with subscribers.",
    ),
    (
        "connected_slaves",
        "redis_connected_slaves",
        "Replicas connected.",
    ),
    (
        "master_repl_offset",
        "redis_master_repl_offset",
        "The replication offset.",
    ),
];

/// `INFO` fields as redis_exporter names them: counters (`_total` is added).
const INFO_COUNTERS: &[(&str, &str, &str)] = &[
    (
        "total_connections_received",
        "redis_connections_received",
        "Connections accepted.",
    ),
    (
        "total_commands_processed",
        "redis_commands_processed",
        "Commands processed.",
    ),
    (
        "rejected_connections",
        "redis_rejected_connections",
        "Connections refused past maxclients.",
    ),
    (
        "total_net_input_bytes",
        "redis_net_input_bytes",
        "Bytes read from clients.",
    ),
    (
        "total_net_output_bytes",
        "redis_net_output_bytes",
        "Bytes written to clients.",
    ),
    (
        "expired_keys",
        "redis_expired_keys",
        "Keys removed because they expired.",
    ),
    (
        "evicted_keys",
        "redis_evicted_keys",
        "Keys evicted past maxmemory.",
    ),
    (
        "keyspace_hits",
        "redis_keyspace_hits",
        "Reads that found their key.",
    ),
    (
        "keyspace_misses",
        "redis_keyspace_misses",
        "Reads that did not find their key.",
    ),
    (
        "total_error_replies",
        "redis_total_error_replies",
        "Error replies sent.",
    ),
    (
        "rdb_saves",
        "redis_rdb_saves",
        "Snapshots taken since the start.",
    ),
    (
        "total_reads_processed",
        "redis_total_reads_processed",
        "Socket reads.",
    ),
    (
        "total_writes_processed",
        "redis_total_writes_processed",
        "Socket writes.",
    ),
    (
        "used_cpu_sys",
        "redis_cpu_sys_seconds",
        "System CPU seconds of the process.",
    ),
    (
        "used_cpu_user",
        "redis_cpu_user_seconds",
        "User CPU seconds of the process.",
    ),
];

/// `INFO` fields redis_exporter puts in `redis_instance_info`'s labels.
const INSTANCE_LABELS: &[&str] = &[
    "redis_version",
    "redis_mode",
    "os",
    "arch_bits",
    "tcp_port",
    "run_id",
    "process_id",
    "role",
    "maxmemory_policy",
    "mem_allocator",
];

/// A field's value as a number (`ok`/`err` statuses as 1/0).
fn number(value: &str) -> Option<f64> {
    match value {
        "ok" => Some(1.0),
        "err" | "fail" => Some(0.0),
        v => v.parse().ok(),
    }
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        gauge(e, "redis_up", "1: the server answers.", 1.0)?;
        let labels: Vec<(&str, String)> = INSTANCE_LABELS
            .iter()
            .filter_map(|&k| Some((k, self.info.get(k)?.clone())))
            .collect();
        if !labels.is_empty() {
            family(
                e,
                "redis_instance_info",
                "The server's version, role and settings, as labels.",
                MetricType::Gauge,
                [(labels, 1.0)],
            )?;
        }
        if let Some(uptime) = self.info.get("uptime_in_seconds").and_then(|v| number(v)) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            gauge(
                e,
                "redis_start_time_seconds",
                "Unix time the server started.",
                (now - uptime).floor(),
            )?;
        }
        for &(field, name, help) in INFO_GAUGES {
            if let Some(v) = self.info.get(field).and_then(|v| number(v)) {
                gauge(e, name, help, v)?;
            }
        }
        for &(field, name, help) in INFO_COUNTERS {
            if let Some(v) = self.info.get(field).and_then(|v| number(v)) {
                counter(e, name, help, v)?;
            }
        }
        let db = |i: usize| {
            self.keyspace
                .iter()
                .map(move |(db, v)| (vec![("db", db.clone())], v[i]))
        };
        family(
            e,
            "redis_db_keys",
            "Keys per database.",
            MetricType::Gauge,
            db(0),
        )?;
        family(
            e,
            "redis_db_keys_expiring",
            "Keys with a TTL per database.",
            MetricType::Gauge,
            db(1),
        )?;
        family(
            e,
            "redis_db_avg_ttl_seconds",
            "Average TTL of the keys with one, per database.",
            MetricType::Gauge,
            self.keyspace
                .iter()
                .map(|(db, v)| (vec![("db", db.clone())], v[2] / 1000.0)),
        )?;
        let cmd = |i: usize, scale: f64| {
            self.commands
                .iter()
                .map(move |(c, v)| (vec![("cmd", c.clone())], v[i] * scale))
        };
        family(
            e,
            "redis_commands",
            "Calls per command.",
            MetricType::Counter,
            cmd(0, 1.0),
        )?;
        family(
            e,
            "redis_commands_duration_seconds",
            "Seconds spent per command.",
            MetricType::Counter,
            cmd(1, 1e-6),
        )?;
        family(
            e,
            "redis_commands_rejected_calls",
            "Calls refused before running, per command.",
            MetricType::Counter,
            cmd(2, 1.0),
        )?;
        family(
            e,
            "redis_commands_failed_calls",
            "Calls that ran and failed, per command.",
            MetricType::Counter,
            cmd(3, 1.0),
        )?;
        family(
            e,
            "redis_errors",
            "Error replies per error code.",
            MetricType::Counter,
            self.errors
                .iter()
                .map(|(err, n)| (vec![("err", err.clone())], *n as f64)),
        )?;
        self.encode_own(e)
    }
}

impl Exposition {
    /// fast-cache's own metrics.
    fn encode_own(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        if !self.latency.is_empty() {
            let mut metric = e.encode_descriptor(
                "fast_cache_command_duration_seconds",
                "Command latency, per command (the server's clock, to 1/128).",
                None,
                MetricType::Histogram,
            )?;
            for (cmd, count, sum, counts) in &self.latency {
                let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS
                    .iter()
                    .copied()
                    .chain([f64::INFINITY])
                    .zip(counts.iter().copied())
                    .collect();
                let labels = vec![("cmd", cmd.clone())];
                metric
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(*sum, *count, &buckets, None)?;
            }
        }
        gauge(
            e,
            "fast_cache_workers",
            "Worker threads.",
            self.workers.len() as f64,
        )?;
        let worker = |f: fn(&WorkerPart) -> u64| {
            self.workers
                .iter()
                .enumerate()
                .map(move |(i, w)| (vec![("worker", i.to_string())], f(w) as f64))
        };
        family(
            e,
            "fast_cache_worker_commands",
            "Commands run per worker.",
            MetricType::Counter,
            worker(|w| w.commands),
        )?;
        family(
            e,
            "fast_cache_worker_cross_worker_hops",
            "Messages a worker sent another to run work on its shards.",
            MetricType::Counter,
            worker(|w| w.hops),
        )?;
        family(
            e,
            "fast_cache_worker_shards",
            "Shards per worker.",
            MetricType::Gauge,
            worker(|w| w.shards.len() as u64),
        )?;
        let shard = |i: usize| {
            self.workers.iter().enumerate().flat_map(move |(w, part)| {
                part.shards.iter().map(move |s| {
                    (
                        vec![("shard", s[0].to_string()), ("worker", w.to_string())],
                        s[i] as f64,
                    )
                })
            })
        };
        for (i, name, help, kind) in [
            (
                1,
                "fast_cache_shard_keys",
                "Keys per shard.",
                MetricType::Gauge,
            ),
            (
                2,
                "fast_cache_shard_keys_expiring",
                "Keys with a TTL per shard.",
                MetricType::Gauge,
            ),
            (
                3,
                "fast_cache_shard_stored_bytes",
                "Key and value bytes per shard.",
                MetricType::Gauge,
            ),
            (
                4,
                "fast_cache_shard_used_memory_bytes",
                "Bytes charged against the memory budget per shard.",
                MetricType::Gauge,
            ),
            (
                5,
                "fast_cache_shard_hits",
                "Reads that found their key, per shard.",
                MetricType::Counter,
            ),
            (
                6,
                "fast_cache_shard_misses",
                "Reads that did not, per shard.",
                MetricType::Counter,
            ),
            (
                7,
                "fast_cache_shard_expired_keys",
                "Keys removed because they expired, per shard.",
                MetricType::Counter,
            ),
            (
                8,
                "fast_cache_shard_evicted_keys",
                "Keys evicted past the budget, per shard.",
                MetricType::Counter,
            ),
        ] {
            family(e, name, help, kind, shard(i))?;
        }
        let evicted: u64 = self
            .workers
            .iter()
            .flat_map(|w| &w.shards)
            .map(|s| s[8])
            .sum();
        family(
            e,
            "fast_cache_evicted_keys",
            "Keys evicted, by the eviction policy that evicted them (the one set now).",
            MetricType::Counter,
            [(vec![("policy", self.policy.to_string())], evicted as f64)],
        )?;
        if let Some(wal) = &self.wal {
            self.encode_wal(e, wal)?;
        }
        Ok(())
    }

    fn encode_wal(
        &self,
        e: &mut DescriptorEncoder<'_>,
        wal: &fc_wal::WalStatsSnapshot,
    ) -> Result<(), std::fmt::Error> {
        for (name, help, v) in [
            (
                "fast_cache_wal_frames",
                "Frames appended to the write-ahead log.",
                wal.frames,
            ),
            (
                "fast_cache_wal_mutations",
                "Mutations appended to the write-ahead log.",
                wal.mutations,
            ),
            (
                "fast_cache_wal_bytes",
                "Bytes appended to the write-ahead log.",
                wal.bytes,
            ),
            (
                "fast_cache_wal_fsyncs",
                "fdatasync calls on the write-ahead log.",
                wal.fsyncs,
            ),
            (
                "fast_cache_wal_segments",
                "Write-ahead log segments opened.",
                wal.segments,
            ),
            (
                "fast_cache_wal_truncations",
                "Failed log writes truncated back to the last good frame.",
                wal.truncations,
            ),
        ] {
            counter(e, name, help, v as f64)?;
        }
        let buckets: Vec<(f64, u64)> = fc_wal::SYNC_BUCKETS_MICROS
            .iter()
            .map(|&us| us as f64 / 1e6)
            .chain([f64::INFINITY])
            .zip(wal.sync_histogram.iter().copied())
            .collect();
        let rounds = wal.sync_histogram.iter().sum();
        let metric = e.encode_descriptor(
            "fast_cache_wal_sync_duration_seconds",
            "Sync rounds of the write-ahead log (a commit's or an everysec tick's fdatasync calls) by duration.",
            None,
            MetricType::Histogram,
        )?;
        let mut metric = metric;
        metric.encode_histogram::<NoLabelSet>(wal.fsync_micros as f64 / 1e6, rounds, &buckets, None)
    }
}

fn gauge(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(value).encode(metric)
}

fn counter(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let metric = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(value).encode(metric)
}

/// A metric with one series per label set (none: the metric is left out).
fn family<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.into_iter().peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = e.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        let member = metric.encode_family(&labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(value).encode(member)?,
            _ => ConstGauge::new(value).encode(member)?,
        }
    }
    Ok(())
}

/// The exposition in Prometheus's text format.
fn encode(exposition: Exposition) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exposition));
    let mut text = String::new();
    if let Err(err) = prometheus_client::encoding::prometheus_text::encode(&mut text, &registry) {
        tracing::warn!("admin port: encoding the metrics failed: {err}");
    }
    text
}
