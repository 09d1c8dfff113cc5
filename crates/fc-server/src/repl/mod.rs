//! Native replication's shared state (fc-repl's sans-IO core; the links are in
//! [`crate::repl_links`]): the primary's export ([`Source`]: a ring per worker fed by the
//! store's mutation sink on the shard's owner, batched by the pump), what the links report, and what the
//! commands see (`REPLICAOF`, `ROLE`, `INFO replication`, `WAIT`, `READONLY` refusals).
//!
//! Protocol and guarantees: `docs/REPLICATION.md`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use fc_repl::Compression;
use fc_shard::Mutation;
use tokio::sync::{Notify, mpsc, watch};

pub(crate) use fc_repl::Backlog;
pub(crate) use outlet::{Flushed, Outlet};
pub(crate) use pump::Pump;
pub(crate) use source::{Drain, IDLE_PARK, Source, WARM_NAP};

mod outlet;
mod pump;
mod source;

use crate::ReplicationConfig;
use crate::reply::Reply as _;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a replica link of this primary shows (`INFO replication`, `ROLE`, `WAIT`).
#[derive(Debug, Clone)]
pub(crate) struct LinkInfo {
    pub(crate) id: u64,
    pub(crate) ip: String,
    pub(crate) port: u16,
    /// `wait_bgsave` (handshake), `send_bulk` (snapshots), `online`.
    pub(crate) state: &'static str,
    /// Per shard, what the replica acknowledged.
    pub(crate) acked: Vec<u64>,
    pub(crate) last_ack: Instant,
}

/// A replica's view of its link.
#[derive(Debug, Clone, Default)]
pub(crate) struct Following {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `connect`, `connecting`, `sync`, `connected`.
    pub(crate) state: &'static str,
    pub(crate) watermarks: Vec<u64>,
    pub(crate) primary_id: String,
    pub(crate) last_io: Option<Instant>,
    /// Shards whose snapshot is still coming.
    pub(crate) syncing: usize,
    /// Full resynchronizations (every shard flushed) since start.
    pub(crate) full_syncs: u64,
    pub(crate) last_error: Option<String>,
}

/// What the replication thread is told.
pub(crate) enum Control {
    /// Follow this `host:port` (`None`: stop following, `REPLICAOF NO ONE`).
    Follow(Option<(String, u16)>),
    /// A replica that connected to a RESP port (its first bytes already read).
    Incoming(std::net::TcpStream, Vec<u8>),
}

/// How often a replica acknowledges while its watermarks move (and no `WAIT` asks sooner).
pub(crate) const ACK_EVERY: Duration = Duration::from_millis(100);
/// A replica acknowledges at least this often, moved or not (`lag` in `INFO replication`).
pub(crate) const ACK_IDLE: Duration = Duration::from_secs(1);
/// A `WAIT` still short of its replicas asks them again this often.
const ASK_AGAIN: Duration = Duration::from_millis(10);

/// The server's replication state.
pub(crate) struct Repl {
    pub(crate) source: Arc<Source>,
    pub(crate) config: ReplicationConfig,
    /// What replicas present, and this server presents to its primary.
    pub(crate) token: Vec<u8>,
    control: mpsc::UnboundedSender<Control>,
    pub(crate) control_rx: Mutex<Option<mpsc::UnboundedReceiver<Control>>>,
    pub(crate) links: Mutex<Vec<LinkInfo>>,
    pub(crate) next_link: AtomicU64,
    /// Woken by every replica acknowledgement (`WAIT`).
    pub(crate) acked: Notify,
    /// `Some` while this server is a replica.
    pub(crate) following: Mutex<Option<Following>>,
    read_only: AtomicBool,
    /// A replica with `serve_stale_data` off whose link is not up: data commands refused.
    stale: AtomicBool,
    link_up: AtomicBool,
    serve_stale: AtomicBool,
    /// Links refused (bad token, bad frames, watermarks from the future).
    pub(crate) refused: AtomicU64,
    /// The pump's generation (a link waits for a new one).
    pub(crate) fresh: watch::Sender<u64>,
    /// Bytes the backlog holds (`repl_backlog_histlen`).
    pub(crate) backlog_bytes: AtomicU64,
    /// The backlog: the pump pushes, the links read.
    pub(crate) backlog: Mutex<Backlog>,
    /// The pump's state while its thread runs: whoever sweeps holds it (the pump, or a
    /// worker going idle: see [`Repl::worker_idle`]).
    pub(crate) pump: Mutex<Option<Pump>>,
    /// Every replica link's output (the pump writes those its tasks handed over).
    pub(crate) outlets: Mutex<Vec<Arc<Outlet>>>,
    /// Bumped when `outlets` changes (the pump keeps a copy of it).
    pub(crate) outlets_changed: AtomicU64,
    /// Bumped when a `WAIT` wants the replicas to acknowledge now (each link sends an
    /// `AckRequest` after what it has sent when it sees a new value).
    pub(crate) ack_requests: AtomicU64,
    /// Bytes sent to replicas.
    pub(crate) sent_bytes: AtomicU64,
    /// Shard snapshots sent to replicas (catch-ups the backlog could not serve).
    pub(crate) snapshots_sent: AtomicU64,
    /// Bumped to cut every replica link (`CLIENT KILL TYPE replica`).
    pub(crate) cut_replicas: watch::Sender<u64>,
    /// Bumped to cut the link to the primary (`CLIENT KILL TYPE master`).
    pub(crate) cut_primary: watch::Sender<u64>,
    /// A replica's watermarks as its workers applied them (see [`Repl::mark_applied`]).
    marks: Mutex<Marks>,
    /// Watermarks recovered from the data directory at start, for the first link to
    /// resume from (see [`Repl::recover_marks`]).
    pub(crate) recovered: Mutex<Option<Recovered>>,
}

/// A replica's applied watermarks, per shard.
#[derive(Debug, Default)]
struct Marks {
    /// Bumped whenever they stop counting (another primary, `REPLICAOF NO ONE`): a batch
    /// queued on a worker under an older generation marks nothing.
    generation: u64,
    /// The primary they count in (its run id).
    primary: Vec<u8>,
    /// Per shard: the primary's sequence number applied (`None`: not marked).
    seqs: Vec<Option<u64>>,
}

/// Watermarks a restarted replica found in its data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// The primary they count in.
    pub(crate) primary: String,
    /// Per shard: its sequence number (`None`: the shard's data is not at a watermark of
    /// that primary, and must be synced again from nothing).
    pub(crate) seqs: Vec<Option<u64>>,
}

impl Repl {
    pub(crate) fn new(
        source: Arc<Source>,
        config: ReplicationConfig,
        requirepass: Option<&str>,
    ) -> Self {
        let shards = source.shards();
        let token = config
            .auth_token
            .as_deref()
            .or(requirepass)
            .unwrap_or("")
            .as_bytes()
            .to_vec();
        let (control, control_rx) = mpsc::unbounded_channel();
        Self {
            source,
            token,
            control,
            control_rx: Mutex::new(Some(control_rx)),
            links: Mutex::new(Vec::new()),
            next_link: AtomicU64::new(1),
            acked: Notify::new(),
            following: Mutex::new(None),
            read_only: AtomicBool::new(false),
            stale: AtomicBool::new(false),
            link_up: AtomicBool::new(false),
            serve_stale: AtomicBool::new(config.serve_stale_data),
            refused: AtomicU64::new(0),
            fresh: watch::channel(0).0,
            backlog_bytes: AtomicU64::new(0),
            backlog: Mutex::new(Backlog::new(shards, config.backlog_bytes)),
            pump: Mutex::new(None),
            outlets: Mutex::new(Vec::new()),
            outlets_changed: AtomicU64::new(0),
            ack_requests: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            snapshots_sent: AtomicU64::new(0),
            cut_replicas: watch::channel(0).0,
            cut_primary: watch::channel(0).0,
            marks: Mutex::new(Marks {
                seqs: vec![None; shards],
                ..Marks::default()
            }),
            recovered: Mutex::new(None),
            config,
        }
    }

    /// On worker `worker`'s thread when it runs out of work (its runtime's park hook): what
    /// it wrote for replication leaves now, not at the pump's next tick. It sweeps on this
    /// thread with the pump's state, as Redis's event loop writes its replicas what a turn
    /// wrote before it waits again (a wake-up of the pump's thread instead cost the primary
    /// two context switches per sweep: ~22 µs of its core at 60k `SET`/s); when the pump
    /// is sweeping, it is nudged to sweep again rather than nap. A saturated worker never
    /// parks: its writes wait for the pump's clock, and the batches grow with the load.
    pub(crate) fn worker_idle(&self, worker: usize) {
        if !self.source.waiting_on(worker) {
            return;
        }
        if !self.source.idle_sweep_due() {
            // Too soon after the last sweep (a frame each time would cost the replicas
            // more than the wait): the pump takes these shortly.
            self.source.defer_sweep();
            return;
        }
        self.sweep_here(&self.source.idle_flushes);
    }

    /// On worker `worker`'s thread after it served a connection's read: when its ring holds
    /// entries and no sweep began for `BUSY_SWEEP_AFTER` (1 ms), it sweeps now. A
    /// worker kept busy (by reads, say) never parks, and its sparse writes woke no idle pump
    /// (only a ring holding 16 KiB does): they waited for the idle pump's 10 ms timeout.
    /// Under a steady write load the pump sweeps on its clock, well inside the 1 ms.
    pub(crate) fn worker_busy(&self, worker: usize) {
        if self.source.waiting_on(worker) && self.source.busy_sweep_due() {
            self.sweep_here(&self.source.busy_flushes);
        }
    }

    /// A sweep with the pump's state on this (worker's) thread, counted in `count`; when the
    /// pump is sweeping, it is nudged to sweep again instead.
    fn sweep_here(&self, count: &AtomicU64) {
        let swept = match self.pump.try_lock() {
            Ok(mut pump) => pump.as_mut().map(|pump| pump.sweep(self)),
            Err(_) => None,
        };
        match swept {
            Some(swept) => {
                count.fetch_add(1, Ordering::Relaxed);
                if swept.unfinished {
                    // A link's socket is full or a batch stayed open: the pump comes back.
                    self.source.nudge();
                }
            }
            None => self.source.nudge(),
        }
    }

    /// The generation of the watermarks (a replica's link reads it before queueing batches).
    pub(crate) fn marks_generation(&self) -> u64 {
        lock(&self.marks).generation
    }

    /// The watermarks stop counting (another primary, or none): nothing is marked until a
    /// link applies batches again.
    pub(crate) fn forget_marks(&self) {
        let mut marks = lock(&self.marks);
        marks.generation += 1;
        marks.primary.clear();
        marks.seqs.iter_mut().for_each(|s| *s = None);
    }

    /// On the worker owning `shard`, after it applied primary `primary`'s changes of the
    /// shard up to `seq` (under watermark generation `generation`): writes the watermark to
    /// the shard's log after them ([`Mutation::ReplMark`], with persistence) and keeps it
    /// for the shard's next image. A restarted replica resumes from the last one its log
    /// holds with nothing after it (`docs/REPLICATION.md`).
    pub(crate) fn mark_applied(
        &self,
        persist: Option<&crate::persist::Persist>,
        generation: u64,
        shard: usize,
        primary: &[u8],
        seq: u64,
    ) {
        let mut marks = lock(&self.marks);
        if marks.generation != generation {
            return;
        }
        if marks.primary != primary {
            marks.primary = primary.to_vec();
            marks.seqs.iter_mut().for_each(|s| *s = None);
        }
        if let Some(slot) = marks.seqs.get_mut(shard) {
            *slot = Some(seq);
        }
        if let Some(persist) = persist {
            use fc_shard::MutationSink as _;
            persist
                .wal
                .on_mutation(shard, 0, &Mutation::ReplMark { primary, seq });
        }
    }

    /// On the worker owning `shard`, after a change of the primary's could not be applied to
    /// it: the shard has no watermark until a snapshot of it is applied (its next image
    /// carries none, and a restart syncs it again).
    pub(crate) fn unmark(&self, shard: usize) {
        if let Some(slot) = lock(&self.marks).seqs.get_mut(shard) {
            *slot = None;
        }
    }

    /// On the worker owning `shard`, right after an image of it was cut: its watermark
    /// again, after the image's coverage, so that trimming the log up to the image keeps one.
    pub(crate) fn remark(&self, persist: &crate::persist::Persist, shard: usize) {
        let marks = lock(&self.marks);
        if let Some(Some(seq)) = marks.seqs.get(shard) {
            use fc_shard::MutationSink as _;
            persist.wal.on_mutation(
                shard,
                0,
                &Mutation::ReplMark {
                    primary: &marks.primary,
                    seq: *seq,
                },
            );
        }
    }

    /// At start: the watermarks the data directory's log ended on, kept for the first link
    /// (a replica that restarts resumes where its data is instead of syncing it all again).
    /// Shards whose watermark is of another primary than the first one found count as
    /// unmarked.
    pub(crate) fn recover_marks(&self, persist: Option<&crate::persist::Persist>) {
        // Only a server that starts as a replica resumes; a primary's old watermarks would
        // be written again after images holding its own writes.
        let Some(persist) = persist.filter(|_| self.config.replica_of.is_some()) else {
            return;
        };
        let found = persist.loaded.wal.repl_marks(self.source.shards());
        let Some(primary) = found.iter().flatten().map(|(p, _)| p.clone()).next() else {
            return;
        };
        let seqs: Vec<Option<u64>> = found
            .iter()
            .map(|mark| {
                mark.as_ref()
                    .filter(|(p, _)| *p == primary)
                    .map(|&(_, s)| s)
            })
            .collect();
        {
            let mut marks = lock(&self.marks);
            marks.primary.clone_from(&primary);
            marks.seqs.clone_from(&seqs);
        }
        *lock(&self.recovered) = Some(Recovered {
            primary: String::from_utf8_lossy(&primary).into_owned(),
            seqs,
        });
    }

    pub(crate) fn compression(&self) -> Compression {
        self.config
            .zstd_level
            .map_or(Compression::None, Compression::Zstd)
    }

    /// Writes are refused (`-READONLY`): this server is a replica.
    pub(crate) fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// Data commands are refused (`-MASTERDOWN`).
    pub(crate) fn stale(&self) -> bool {
        self.stale.load(Ordering::Relaxed)
    }

    pub(crate) fn set_link_up(&self, up: bool) {
        self.link_up.store(up, Ordering::Relaxed);
        self.restale();
    }

    /// Recomputes whether data commands are refused.
    fn restale(&self) {
        let following = self.read_only.load(Ordering::Relaxed);
        let up = self.link_up.load(Ordering::Relaxed);
        let serve = self.serve_stale.load(Ordering::Relaxed);
        self.stale
            .store(following && !up && !serve, Ordering::Relaxed);
    }

    /// `replica-serve-stale-data` now.
    pub(crate) fn serve_stale(&self) -> bool {
        self.serve_stale.load(Ordering::Relaxed)
    }

    /// `CONFIG SET replica-serve-stale-data`.
    pub(crate) fn set_serve_stale(&self, yes: bool) {
        self.serve_stale.store(yes, Ordering::Relaxed);
        self.restale();
    }

    /// `REPLICAOF host port` / `REPLICAOF NO ONE`: what was marked no longer counts (the new
    /// link syncs from nothing, see `repl_links::replica`).
    pub(crate) fn follow(&self, target: Option<(String, u16)>) {
        self.forget_marks();
        lock(&self.recovered).take();
        self.start_following(target);
    }

    /// Follows `target` (`None`: stops following); at start, with the watermarks recovered
    /// from the data directory (see [`Repl::recover_marks`]).
    pub(crate) fn start_following(&self, target: Option<(String, u16)>) {
        match &target {
            Some((host, port)) => {
                *lock(&self.following) = Some(Following {
                    host: host.clone(),
                    port: *port,
                    state: "connect",
                    ..Following::default()
                });
                self.read_only.store(true, Ordering::Relaxed);
                self.set_link_up(false);
            }
            None => {
                *lock(&self.following) = None;
                self.read_only.store(false, Ordering::Relaxed);
                self.stale.store(false, Ordering::Relaxed);
            }
        }
        let _ = self.control.send(Control::Follow(target));
    }

    /// A replica link's output, for the pump to write once its task hands it over.
    pub(crate) fn add_outlet(&self, outlet: Arc<Outlet>) {
        lock(&self.outlets).push(outlet);
        self.outlets_changed.fetch_add(1, Ordering::Release);
    }

    /// A replica link ended: nobody writes its output any more.
    pub(crate) fn remove_outlet(&self, outlet: &Outlet) {
        outlet.close();
        lock(&self.outlets).retain(|o| o.id != outlet.id);
        self.outlets_changed.fetch_add(1, Ordering::Release);
    }

    /// Cuts the replicas' links (they reconnect and resume); how many there were.
    pub(crate) fn cut_replica_links(&self) -> i64 {
        let n = lock(&self.links).len();
        self.cut_replicas.send_modify(|g| *g = g.wrapping_add(1));
        n as i64
    }

    /// Cuts the link to the primary (it reconnects and resumes); 1 when there was one.
    pub(crate) fn cut_primary_link(&self) -> i64 {
        let up = lock(&self.following)
            .as_ref()
            .is_some_and(|f| f.state != "connect" && f.state != "connecting");
        self.cut_primary.send_modify(|g| *g = g.wrapping_add(1));
        i64::from(up)
    }

    /// Hands a replica that came to a RESP port to the replication thread.
    pub(crate) fn incoming(&self, stream: std::net::TcpStream, pending: Vec<u8>) {
        let _ = self.control.send(Control::Incoming(stream, pending));
    }

    /// The replica this server follows, if it is one.
    pub(crate) fn primary(&self) -> Option<(String, u16)> {
        lock(&self.following)
            .as_ref()
            .map(|f| (f.host.clone(), f.port))
    }

    /// Sum of the shards' sequences: one growing offset, as Redis's `master_repl_offset`
    /// (0 until replication starts, as Redis's is until its backlog exists).
    pub(crate) fn offset(&self) -> u64 {
        if self.source.enabled() {
            self.source.latest().iter().sum()
        } else {
            0
        }
    }

    /// Replicas whose acknowledgements reached `target` on every shard.
    pub(crate) fn caught_up(&self, target: &[u64]) -> usize {
        lock(&self.links)
            .iter()
            .filter(|l| {
                l.acked.len() == target.len() && l.acked.iter().zip(target).all(|(a, t)| a >= t)
            })
            .count()
    }

    /// `WAIT numreplicas timeout`: how many replicas acknowledged every write made before it,
    /// waiting up to `timeout` (zero: forever) for `wanted` of them. The replicas are asked to
    /// acknowledge at once (they otherwise do at their own pace, see [`ACK_EVERY`]), and
    /// asked again every [`ASK_AGAIN`] while it waits.
    pub(crate) async fn wait(&self, wanted: usize, timeout: Duration) -> usize {
        let target = self.source.latest();
        let deadline = (!timeout.is_zero()).then(|| tokio::time::Instant::now() + timeout);
        let mut asked: Option<tokio::time::Instant> = None;
        loop {
            let notified = self.acked.notified();
            let have = self.caught_up(&target);
            if have >= wanted || lock(&self.links).is_empty() && deadline.is_none() && wanted == 0 {
                return have;
            }
            let now = tokio::time::Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return have;
            }
            let last = match asked {
                Some(at) if now < at + ASK_AGAIN => at,
                _ => {
                    self.request_acks();
                    asked = Some(now);
                    now
                }
            };
            let wake = deadline.map_or(last + ASK_AGAIN, |d| d.min(last + ASK_AGAIN));
            let _ = tokio::time::timeout_at(wake, notified).await;
        }
    }

    /// Asks every replica to acknowledge what it was sent so far: links see the request
    /// after their next frames (the pump's at its next sweep, the tasks' when woken).
    pub(crate) fn request_acks(&self) {
        self.ack_requests.fetch_add(1, Ordering::AcqRel);
        self.source.wake_pump();
        self.fresh.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// `ROLE`'s reply parts: ("master", offset, replicas) or ("slave", host, port, state,
    /// offset).
    pub(crate) fn role(&self, out: &mut crate::reply::Resp) {
        if let Some(f) = lock(&self.following).clone() {
            out.array_len(5);
            out.bulk(b"slave");
            out.bulk(f.host.as_bytes());
            out.integer(i64::from(f.port));
            out.bulk(f.state.as_bytes());
            out.integer(f.watermarks.iter().sum::<u64>() as i64);
            return;
        }
        let links = lock(&self.links).clone();
        out.array_len(3);
        out.bulk(b"master");
        out.integer(self.offset() as i64);
        out.array_len(links.len());
        for l in links {
            out.array_len(3);
            out.bulk(l.ip.as_bytes());
            out.bulk(l.port.to_string().as_bytes());
            out.bulk(l.acked.iter().sum::<u64>().to_string().as_bytes());
        }
    }

    /// `INFO replication`.
    pub(crate) fn info(&self, replid: &str, out: &mut String) {
        let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let _ = write!(out, "# Replication\r\n");
        let following = lock(&self.following).clone();
        if let Some(f) = &following {
            let up = f.state == "connected";
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nmaster_sync_shards_left:{}\r\nrepl_full_syncs:{}\r\nrepl_shard_watermarks:{}\r\n",
                f.host,
                f.port,
                if up { "up" } else { "down" },
                f.last_io.map_or(-1, |t| t.elapsed().as_secs() as i64),
                u8::from(f.state == "sync"),
                f.watermarks.iter().sum::<u64>(),
                f.watermarks.iter().sum::<u64>(),
                f.syncing,
                f.full_syncs,
                join(&f.watermarks),
            );
            if let Some(err) = &f.last_error {
                let _ = write!(out, "master_link_last_error:{err}\r\n");
            }
        } else {
            let _ = write!(out, "role:master\r\n");
        }
        let links = lock(&self.links).clone();
        let latest = self.source.latest();
        let _ = write!(out, "connected_slaves:{}\r\n", links.len());
        for (i, l) in links.iter().enumerate() {
            let _ = write!(
                out,
                "slave{i}:ip={},port={},state={},offset={},lag={}\r\n",
                l.ip,
                l.port,
                l.state,
                l.acked.iter().sum::<u64>(),
                l.last_ack.elapsed().as_secs()
            );
        }
        let offset = self.offset();
        let _ = write!(
            out,
            "master_failover_state:no-failover\r\nmaster_replid:{replid}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:{}\r\nrepl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:{}\r\nrepl_shard_seqs:{}\r\nrepl_links_refused:{}\r\nrepl_sent_bytes:{}\r\nrepl_shard_snapshots_sent:{}\r\nrepl_lane_waits:{}\r\nrepl_export_spilled:{}\r\nrepl_idle_flushes:{}\r\nrepl_idle_deferred:{}\r\nrepl_busy_flushes:{}\r\n",
            u8::from(self.source.enabled()),
            self.config.backlog_bytes,
            self.backlog_bytes.load(Ordering::Relaxed),
            join(&latest),
            self.refused.load(Ordering::Relaxed),
            self.sent_bytes.load(Ordering::Relaxed),
            self.snapshots_sent.load(Ordering::Relaxed),
            self.source.lane_waits.load(Ordering::Relaxed),
            self.source.spilled.load(Ordering::Relaxed),
            self.source.idle_flushes.load(Ordering::Relaxed),
            self.source.idle_deferred.load(Ordering::Relaxed),
            self.source.busy_flushes.load(Ordering::Relaxed),
        );
    }
}

/// Parses `host:port` (the configuration's `primary_addr`).
pub(crate) fn split_addr(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use fc_shard::Mutation;

    use super::source::BUSY_SWEEP_AFTER;
    use super::*;

    #[test]
    fn a_worker_that_does_not_run_out_of_work_sweeps_once_the_last_sweep_is_a_millisecond_old() {
        let config = ReplicationConfig::default();
        let source = Arc::new(Source::new(4, 1, &config));
        source.enable();
        let repl = Repl::new(Arc::clone(&source), config, None);
        *lock(&repl.pump) = Some(Pump::new(&repl));
        // This thread is worker 0's (a tokio worker's: it sweeps).
        source.attach(0, true);
        let set = |key: &[u8], seq| {
            source.on_mutation(
                0,
                seq,
                &Mutation::Set {
                    key,
                    value: b"v",
                    expire_at_ms: None,
                },
            );
        };
        let busy = || source.busy_flushes.load(Ordering::Relaxed);
        std::thread::sleep(BUSY_SWEEP_AFTER);
        set(b"a", 1);
        assert!(source.waiting_on(0));
        repl.worker_busy(0);
        assert!(!source.waiting_on(0), "the write left");
        assert_eq!(busy(), 1);
        assert!(lock(&repl.backlog).bytes() > 0, "as a frame in the backlog");
        // Right after a sweep, a write waits (for the worker's park, or the pump's clock).
        set(b"b", 2);
        repl.worker_busy(0);
        assert!(source.waiting_on(0));
        assert_eq!(busy(), 1);
        // A millisecond later it leaves.
        std::thread::sleep(BUSY_SWEEP_AFTER);
        repl.worker_busy(0);
        assert!(!source.waiting_on(0));
        assert_eq!(busy(), 2);
        // With nothing waiting, nothing is swept.
        std::thread::sleep(BUSY_SWEEP_AFTER);
        repl.worker_busy(0);
        assert_eq!(busy(), 2);
    }
}
