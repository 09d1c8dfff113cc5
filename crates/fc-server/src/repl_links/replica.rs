//! The replica's side: the link to its primary (connect with backoff, hello, snapshots,
//! batches applied by the workers that own their shards, acknowledgements), for as long as
//! `REPLICAOF` says. It runs on worker 0's thread with tokio workers, which applies its own
//! shards' records as they are read, and hands the other workers theirs; with monoio
//! workers, on the replication thread (see `repl_links::start_following`).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use fc_repl::{
    Applier, Entry, FrameDecoder, HEADER_LEN, Hello, Kind, LinkError, Plan, Welcome,
    watermarks_frame,
};
use fc_snapshot::Image;
use fc_wal::RecordView;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::repl::{ACK_EVERY, ACK_IDLE, Following, lock};
use crate::shared::{Job, Shared};
use crate::worker::Worker;

/// How a session's error begins when the primary refused the handshake.
const REFUSED: &str = "refused";

/// What survives a reconnect: the watermarks reached, under which primary.
struct Progress {
    applier: Applier,
    primary_id: String,
}

fn update(shared: &Shared, f: impl FnOnce(&mut Following)) {
    if let Some(following) = lock(&shared.repl.following).as_mut() {
        f(following);
    }
}

/// Follows `host:port` until aborted (`REPLICAOF` elsewhere or `NO ONE`).
pub(crate) async fn follow(shared: Arc<Shared>, host: String, port: u16) {
    let shards = shared.config.shards;
    let fresh = || Progress {
        applier: Applier::new(vec![0; shards]),
        primary_id: String::new(),
    };
    let mut progress = fresh();
    let mut first = true;
    // A restarted replica resumes from the watermarks its data directory ended on: the
    // shards without one are emptied and synced from nothing.
    let recovered = crate::repl::lock(&shared.repl.recovered).take();
    if let Some(recovered) = recovered {
        for (shard, seq) in recovered.seqs.iter().enumerate() {
            if seq.is_none()
                && on_owner(&shared, shard, move |store| store.clear_shard(shard))
                    .await
                    .is_err()
            {
                return;
            }
        }
        tracing::info!(
            "resuming from the watermarks of {} of {shards} shards in the data directory",
            recovered.seqs.iter().flatten().count()
        );
        progress = Progress {
            applier: Applier::new(recovered.seqs.iter().map(|s| s.unwrap_or(0)).collect()),
            primary_id: recovered.primary,
        };
        first = false;
    }
    let mut backoff = Duration::from_millis(100);
    loop {
        update(&shared, |f| f.state = "connecting");
        shared.repl.set_link_up(false);
        let started = Instant::now();
        match session(&shared, &host, port, &mut progress, &mut first).await {
            Ok(()) => {}
            Err(err) => {
                // Watermarks the primary refuses (say, ahead of it) are dropped: the next
                // attempt syncs from nothing.
                if err.starts_with(REFUSED) && !first {
                    shared.repl.forget_marks();
                    progress = fresh();
                    first = true;
                }
                tracing::warn!("primary {host}:{port}: {err}");
                update(&shared, |f| {
                    f.state = "connect";
                    f.last_error = Some(err);
                });
            }
        }
        shared.repl.set_link_up(false);
        // A link that stayed up a while reconnects at once; failures back off to 1 s (as
        // Redis retries its primary every second).
        if started.elapsed() > Duration::from_secs(5) {
            backoff = Duration::from_millis(100);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

/// The worker `worker` when this task runs on its thread (the link runs on worker 0's with
/// tokio workers, see `repl_links::start_following`).
fn here(shared: &Arc<Shared>, worker: usize) -> Option<Rc<Worker>> {
    crate::worker::try_current().filter(|w| w.index == worker && Arc::ptr_eq(&w.shared, shared))
}

/// Runs `work` on worker `worker`'s store: here, once no transaction holds it, when this
/// link runs on that worker; else through the worker's inbox (after what the link handed it
/// before). `Some` waits for a handed-over `work` to finish.
async fn run_on(
    shared: &Arc<Shared>,
    worker: usize,
    work: impl FnOnce(&mut fc_shard::LocalEmbeddedStore) + Send + 'static,
) -> Result<Option<oneshot::Receiver<()>>, String> {
    if let Some(host) = here(shared, worker) {
        host.wait_unlocked().await;
        work(&mut host.store.borrow_mut());
        // A client blocked on a key this filled (`XREAD BLOCK` on a replica) is served now.
        host.serve_ready();
        return Ok(None);
    }
    let (done, finished) = oneshot::channel();
    let job = Job::Local(Box::new(move |store| {
        work(store);
        let _ = done.send(());
    }));
    shared.inboxes[worker]
        .send(job)
        .map_err(|_| "server is shutting down".to_string())?;
    Ok(Some(finished))
}

/// Runs `work` on the worker owning `shard`, and waits for it.
async fn on_owner(
    shared: &Arc<Shared>,
    shard: usize,
    work: impl FnOnce(&mut fc_shard::LocalEmbeddedStore) + Send + 'static,
) -> Result<(), String> {
    match run_on(shared, shard % shared.workers, work).await? {
        Some(finished) => finished.await.map_err(|_| "a worker stopped".to_string()),
        None => Ok(()),
    }
}

/// Batches a worker may have queued and not yet applied before the link stops reading: a
/// replica whose workers fall behind slows its link (and so, through TCP, its primary's
/// sending) instead of queueing without bound.
const MAX_IN_FLIGHT: usize = 64;

/// Records whose keys a worker starts loading before it applies them.
const PREFETCH: usize = 32;

/// Room the link makes in its read buffer when less is left (a frame longer than this gets
/// room for all of it at once), and the least room it reads into.
const READ_BYTES: usize = 64 << 10;
const READ_MIN: usize = 16 << 10;
/// Read buffers kept for reuse once the workers are done with them, and the largest kept.
const SPARE_BUFFERS: usize = 4;
const SPARE_MAX_BYTES: usize = 1 << 20;

/// A record for a worker: its shard, and its bytes in one of a read's buffers ([`Apply`]'s
/// `sources`: the frames as read, or a compressed frame's payload) or, a transaction's
/// change held across frames, its own.
enum Item {
    In(usize, u32, std::ops::Range<usize>),
    Held(usize, Vec<u8>),
}

impl Item {
    fn shard(&self) -> usize {
        match self {
            Self::In(shard, ..) | Self::Held(shard, _) => *shard,
        }
    }
}

/// One read's records for one worker, with the read's buffers, shared by every worker it
/// has records for: the link copies no frame and no record, the worker reads each in place
/// from the bytes the socket read into. `sources[0]` is the read's whole frames as they came;
/// a compressed frame's payload, decompressed, follows.
struct Apply {
    sources: Vec<Bytes>,
    items: Vec<Item>,
}

/// What a link has read and not yet handed to its workers: `at` bytes of whole frames at the
/// front of `buf`, the payloads of the compressed ones among them (decompressed), and each
/// worker's records in them.
struct Reading {
    buf: BytesMut,
    at: usize,
    extras: Vec<Bytes>,
    items: Vec<Vec<Item>>,
    /// The size of `buf`'s memory, taken when it became the read buffer (its capacity
    /// shrinks as its front is handed over).
    buf_bytes: usize,
    /// Buffers read into before `buf`, for when the workers are done with them.
    spares: Vec<BytesMut>,
}

impl Reading {
    /// Hands what was read to `pending` (an [`Apply`] per worker with records) and drops it
    /// from the buffer, which keeps only a frame not yet whole.
    fn seal(&mut self, pending: &mut [Vec<Apply>]) {
        let at = std::mem::take(&mut self.at);
        if self.items.iter().all(Vec::is_empty) {
            self.buf.advance(at);
            self.extras.clear();
            return;
        }
        let mut sources = Vec::with_capacity(1 + self.extras.len());
        sources.push(self.buf.split_to(at).freeze());
        sources.append(&mut self.extras);
        for (worker, items) in self.items.iter_mut().enumerate() {
            if !items.is_empty() {
                let next = Vec::with_capacity(items.len());
                pending[worker].push(Apply {
                    sources: sources.clone(),
                    items: std::mem::replace(items, next),
                });
            }
        }
    }

    /// Makes room for the next read: for at least the rest of the frame begun (`missing`
    /// bytes), and [`READ_MIN`]. The buffer's own memory when the workers are done with what
    /// it held; else the frame begun moves to a spare buffer they are done with, or to a new
    /// one. (Memory freed and allocated again per buffer had the kernel zero fresh pages for
    /// the link: `clear_page_erms`, 3% of it.)
    fn make_room(&mut self, missing: usize) {
        let want = missing.max(READ_MIN);
        if self.buf.capacity() - self.buf.len() >= want || self.buf.try_reclaim(want) {
            return;
        }
        let need = self.buf.len() + want;
        let mut next = match self.spares.iter_mut().position(|b| b.try_reclaim(need)) {
            Some(at) => self.spares.swap_remove(at),
            None => BytesMut::with_capacity(need.max(READ_BYTES)),
        };
        let bytes = std::mem::replace(&mut self.buf_bytes, next.capacity());
        next.extend_from_slice(&self.buf);
        let mut old = std::mem::replace(&mut self.buf, next);
        old.clear();
        if self.spares.len() < SPARE_BUFFERS && bytes <= SPARE_MAX_BYTES {
            self.spares.push(old);
        }
    }
}

/// Applies `applies` on their worker's store, in order, each window of [`PREFETCH`] records'
/// keys prefetched first ([`fc_shard::LocalEmbeddedStore::prefetch_routes`]: a batch's cache
/// misses overlap instead of costing a memory latency per record in turn, as a pipeline's do
/// on the primary). Returns the shards a record could not be applied to.
fn apply_on_worker(store: &mut fc_shard::LocalEmbeddedStore, applies: &[Apply]) -> Vec<usize> {
    let mut failed: Vec<usize> = Vec::new();
    let mut routes = Vec::with_capacity(PREFETCH);
    let mut window: Vec<(usize, RecordView<'_>)> = Vec::with_capacity(PREFETCH);
    for apply in applies {
        for items in apply.items.chunks(PREFETCH) {
            window.clear();
            for item in items {
                let bytes = match item {
                    Item::In(_, source, range) => &apply.sources[*source as usize][range.clone()],
                    Item::Held(_, bytes) => &bytes[..],
                };
                // The link read every record of the frame before handing it over.
                match RecordView::decode(bytes) {
                    Ok(view) => window.push((item.shard(), view)),
                    Err(err) => {
                        tracing::error!(
                            "replica: shard {}: unreadable change: {err}",
                            item.shard()
                        );
                        failed.push(item.shard());
                    }
                }
            }
            routes.clear();
            routes.extend(
                window
                    .iter()
                    .filter_map(|(_, view)| view.key())
                    .map(|key| store.route_key(key)),
            );
            store.prefetch_routes(&routes);
            for (shard, view) in &window {
                if let Err(err) = view.apply_local(store, *shard) {
                    tracing::error!("replica: shard {shard}: cannot apply a change: {err}");
                    failed.push(*shard);
                }
            }
        }
    }
    failed
}

/// Hands each worker the records of its shards, in order (a worker's inbox keeps them in
/// order with what follows), waiting while a worker has [`MAX_IN_FLIGHT`] batches queued.
///
/// After its records, each worker marks its shards that changed with `progress`'s
/// watermarks, which are those of everything in `pending` (see `Repl::mark_applied`).
async fn dispatch(
    shared: &Arc<Shared>,
    pending: &mut [Vec<Apply>],
    in_flight: &mut [VecDeque<oneshot::Receiver<()>>],
    progress: &Progress,
) {
    let (primary, marks) = (&progress.primary_id, progress.applier.watermarks());
    let generation = shared.repl.marks_generation();
    let mut primary_bytes: Option<Arc<[u8]>> = None;
    for (worker, records) in pending.iter_mut().enumerate() {
        if records.is_empty() {
            continue;
        }
        let records = std::mem::take(records);
        // Watermarks are written only where they can be read back: with a data directory.
        let mut changed: Vec<(usize, u64)> = Vec::new();
        if shared.persist.is_some() {
            let mut shards: Vec<usize> = records
                .iter()
                .flat_map(|apply| apply.items.iter().map(Item::shard))
                .collect();
            shards.sort_unstable();
            shards.dedup();
            changed = shards.into_iter().map(|s| (s, marks[s])).collect();
        }
        let primary =
            Arc::clone(primary_bytes.get_or_insert_with(|| Arc::from(primary.as_bytes())));
        let owner = Arc::clone(shared);
        let work = move |store: &mut fc_shard::LocalEmbeddedStore| {
            // A shard a change could not be applied to gets no watermark: a restart syncs it
            // again rather than resume past what it lacks.
            let failed = apply_on_worker(store, &records);
            for &shard in &failed {
                owner.repl.unmark(shard);
            }
            for (shard, seq) in changed {
                if !failed.contains(&shard) {
                    let persist = owner.persist.as_deref();
                    owner
                        .repl
                        .mark_applied(persist, generation, shard, &primary, seq);
                }
            }
        };
        let Ok(Some(applied)) = run_on(shared, worker, work).await else {
            continue;
        };
        let queue = &mut in_flight[worker];
        queue.push_back(applied);
        while queue.len() > MAX_IN_FLIGHT {
            if let Some(oldest) = queue.pop_front() {
                let _ = oldest.await;
            }
        }
    }
}

/// One connection to the primary, from the handshake until it fails.
async fn session(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    progress: &mut Progress,
    first: &mut bool,
) -> Result<(), String> {
    let repl = &shared.repl;
    let shards = shared.config.shards;
    let mut stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect((host, port)))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let hello = Hello {
        token: repl.token.clone(),
        replica_id: shared.run_id.clone(),
        port: shared.port,
        primary_id: progress.primary_id.clone(),
        watermarks: progress.applier.watermarks().to_vec(),
    };
    let mut wire = Vec::new();
    hello.frame().encode(fc_repl::Compression::None, &mut wire);
    stream.write_all(&wire).await.map_err(|e| e.to_string())?;
    let decoder = FrameDecoder::default();
    let mut buf = BytesMut::with_capacity(READ_BYTES);
    let answer = loop {
        if let Some((frame, used)) = decoder.decode_slice(&buf).map_err(|e| e.to_string())? {
            buf.advance(used);
            break frame;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read_buf(&mut buf))
            .await
            .map_err(|_| "no answer within 10 s".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the primary closed the link".into());
        }
    };
    if answer.kind == Kind::Refused {
        return Err(format!(
            "{REFUSED}: {}",
            String::from_utf8_lossy(&answer.payload)
        ));
    }
    let welcome = Welcome::decode(&answer).map_err(|e| e.to_string())?;
    if welcome.shards.len() != shards {
        return Err(LinkError::ShardCount {
            replica: shards as u32,
            primary: welcome.shards.len() as u32,
        }
        .to_string());
    }
    // This link resends from the watermarks: transactions left half-gathered by the last
    // one come again from their begin.
    progress.applier.abandon_groups();
    // Another primary (or this one restarted): sequences start over, and so does the data.
    if *first || welcome.primary_id != progress.primary_id {
        shared.repl.forget_marks();
        for worker in 0..shared.workers {
            on_owner(shared, worker, |store| {
                let owned: Vec<usize> = store.owned_shards().collect();
                for shard in owned {
                    store.clear_shard(shard);
                }
            })
            .await?;
        }
        progress.applier = Applier::new(vec![0; shards]);
        progress.primary_id.clone_from(&welcome.primary_id);
        *first = false;
        update(shared, |f| f.full_syncs += 1);
    }
    let mut syncing = welcome
        .shards
        .iter()
        .filter(|(plan, _)| *plan == Plan::Snapshot)
        .count();
    update(shared, |f| {
        f.state = if syncing > 0 { "sync" } else { "connected" };
        f.syncing = syncing;
        f.primary_id.clone_from(&welcome.primary_id);
        f.last_io = Some(Instant::now());
        f.last_error = None;
    });
    if syncing == 0 {
        repl.set_link_up(true);
    }
    tracing::info!(
        "following {host}:{port} ({} shards from snapshots)",
        syncing
    );
    let mut images: Vec<Option<Vec<u8>>> = vec![None; shards];
    let mut pending: Vec<Vec<Apply>> = (0..shared.workers).map(|_| Vec::new()).collect();
    let mut read = Reading {
        buf_bytes: buf.capacity(),
        buf,
        at: 0,
        extras: Vec::new(),
        items: (0..shared.workers).map(|_| Vec::new()).collect(),
        spares: Vec::new(),
    };
    let mut in_flight: Vec<VecDeque<oneshot::Receiver<()>>> =
        (0..shared.workers).map(|_| VecDeque::new()).collect();
    let mut acked = progress.applier.watermarks().to_vec();
    // Acknowledgements go when the primary asks (`WAIT`), else at most every `ACK_EVERY`
    // while the watermarks move and every `ACK_IDLE` when they do not: one per read cost the
    // primary's replication thread a wake-up per batch it sent.
    let mut ack_now = false;
    let mut last_ack = Instant::now();
    let mut cut = repl.cut_primary.subscribe();
    loop {
        // Every whole frame read so far.
        let mut failure = None;
        while let Some((frame, used)) = decoder
            .decode_ref(&read.buf[read.at..])
            .map_err(|e| e.to_string())?
        {
            // An uncompressed payload is read where it is: in the frames read (source 0), at
            // its offset there; a decompressed one is a source of its own.
            let (source, base) = match &frame.payload {
                Cow::Borrowed(_) => (0, read.at + HEADER_LEN),
                Cow::Owned(_) => (1 + read.extras.len() as u32, 0),
            };
            read.at += used;
            let shard = frame.shard as usize;
            match frame.kind {
                Kind::Batch => {
                    let (workers, items) = (shared.workers, &mut read.items);
                    // What the applier took (its watermarks moved past it) is applied, even
                    // when the frame then failed (a gap after it).
                    let applied = progress.applier.apply_entries(&frame, |shard, entry| {
                        items[shard % workers].push(match entry {
                            Entry::InFrame(range) => {
                                Item::In(shard, source, base + range.start..base + range.end)
                            }
                            Entry::Held(bytes) => Item::Held(shard, bytes),
                        });
                        Ok(())
                    });
                    if let Cow::Owned(payload) = frame.payload {
                        read.extras.push(Bytes::from(payload));
                    }
                    if let Err(err) = applied {
                        failure = Some(err.to_string());
                        break;
                    }
                }
                Kind::SnapshotBegin if shard < shards => images[shard] = Some(Vec::new()),
                Kind::SnapshotChunk if shard < shards => match &mut images[shard] {
                    Some(image) => image.extend_from_slice(&frame.payload),
                    None => {
                        failure =
                            Some(format!("shard {shard}: a snapshot chunk without its start"));
                        break;
                    }
                },
                Kind::SnapshotEnd if shard < shards => {
                    let first_seq = frame.first_seq;
                    let Some(bytes) = images[shard].take() else {
                        failure = Some(format!("shard {shard}: a snapshot end without its start"));
                        break;
                    };
                    let label = format!("snapshot of shard {shard} from {host}:{port}");
                    let image = match Image::from_bytes(bytes, Path::new(&label)) {
                        Ok(image) if image.header.shard as usize == shard => image,
                        Ok(_) => {
                            failure = Some(format!("shard {shard}: an image of another shard"));
                            break;
                        }
                        Err(err) => {
                            failure = Some(err.to_string());
                            break;
                        }
                    };
                    // What came before it for this worker goes first.
                    read.seal(&mut pending);
                    dispatch(shared, &mut pending, &mut in_flight, progress).await;
                    progress.applier.reset_shard(shard, first_seq);
                    let seq = progress.applier.watermarks()[shard];
                    let (owner, generation) = (Arc::clone(shared), repl.marks_generation());
                    let primary = progress.primary_id.clone();
                    let install = move |store: &mut fc_shard::LocalEmbeddedStore| {
                        store.clear_shard(shard);
                        if let Err(err) = image.apply_local(store) {
                            tracing::error!("replica: {err}");
                            owner.repl.unmark(shard);
                            return;
                        }
                        let persist = owner.persist.as_deref();
                        owner.repl.mark_applied(
                            persist,
                            generation,
                            shard,
                            primary.as_bytes(),
                            seq,
                        );
                    };
                    run_on(shared, shard % shared.workers, install).await?;
                    syncing = syncing.saturating_sub(1);
                    update(shared, |f| {
                        f.syncing = syncing;
                        if syncing == 0 {
                            f.state = "connected";
                        }
                    });
                    if syncing == 0 {
                        repl.set_link_up(true);
                        tracing::info!("in sync with {host}:{port}");
                    }
                }
                Kind::Heartbeat => {}
                Kind::AckRequest => ack_now = true,
                Kind::Refused => {
                    failure = Some(format!(
                        "the primary ended the link: {}",
                        String::from_utf8_lossy(&frame.payload)
                    ));
                    break;
                }
                other => {
                    failure = Some(format!("unexpected {other:?} frame"));
                    break;
                }
            }
        }
        read.seal(&mut pending);
        dispatch(shared, &mut pending, &mut in_flight, progress).await;
        let marks = progress.applier.watermarks();
        update(shared, |f| {
            f.watermarks.clone_from(&marks.to_vec());
            f.last_io = Some(Instant::now());
        });
        let moved = marks != acked.as_slice();
        let since = last_ack.elapsed();
        if ack_now || moved && since >= ACK_EVERY || since >= ACK_IDLE {
            ack_now = false;
            last_ack = Instant::now();
            acked = marks.to_vec();
            let mut wire = Vec::new();
            watermarks_frame(Kind::Ack, &acked).encode(fc_repl::Compression::None, &mut wire);
            stream.write_all(&wire).await.map_err(|e| e.to_string())?;
        }
        // Watermarks that moved and were not acknowledged yet are, within `ACK_EVERY`.
        let ack_due = (marks != acked.as_slice()).then(|| last_ack + ACK_EVERY);
        if let Some(failure) = failure {
            return Err(failure);
        }
        read.make_room(decoder.missing(&read.buf));
        let reading = tokio::time::timeout(Duration::from_secs(30), stream.read_buf(&mut read.buf));
        let n = tokio::select! {
            got = reading => got
                .map_err(|_| "no word from the primary in 30 s".to_string())?
                .map_err(|e| e.to_string())?,
            _ = cut.changed() => return Err("cut (CLIENT KILL TYPE master)".into()),
            () = sleep_until(ack_due) => continue,
        };
        if n == 0 {
            return Err("the primary closed the link".into());
        }
    }
}

/// Sleeps until `at` (forever without one).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(workers: usize) -> Reading {
        let buf = BytesMut::with_capacity(READ_BYTES);
        Reading {
            buf_bytes: buf.capacity(),
            buf,
            at: 0,
            extras: Vec::new(),
            items: (0..workers).map(|_| Vec::new()).collect(),
            spares: Vec::new(),
        }
    }

    /// Reads `whole` more bytes, which end the frames in `read`'s buffer, then `partial`
    /// bytes of a next one, and hands the whole ones to worker 0 (one record over them all).
    fn fill(read: &mut Reading, whole: usize, partial: &[u8]) -> Vec<Vec<Apply>> {
        read.buf.extend_from_slice(&vec![7; whole]);
        read.at = read.buf.len();
        read.buf.extend_from_slice(partial);
        read.items[0].push(Item::In(3, 0, 0..read.at));
        let mut pending: Vec<Vec<Apply>> = read.items.iter().map(|_| Vec::new()).collect();
        read.seal(&mut pending);
        pending
    }

    #[test]
    fn a_read_hands_its_whole_frames_over_in_place_and_keeps_the_frame_begun() {
        let mut read = reading(2);
        read.extras.push(Bytes::from_static(b"unpacked"));
        read.items[1].push(Item::In(1, 1, 2..6));
        let start = read.buf.as_ptr();
        let pending = fill(&mut read, 100, b"FCRP");
        // Worker 1's record (in the decompressed payload) and worker 0's, each with every
        // source, the frames read where the socket put them.
        assert_eq!(pending[0].len(), 1);
        let apply = &pending[0][0];
        assert_eq!(apply.sources.len(), 2);
        assert_eq!(apply.sources[0].as_ptr(), start);
        assert_eq!(apply.sources[0].len(), 100);
        assert_eq!(&apply.sources[1][2..6], b"pack");
        assert_eq!(&read.buf[..], b"FCRP");
        assert_eq!(read.at, 0);
        assert!(read.extras.is_empty());
        // Nothing to hand over: the bytes are only dropped.
        let mut none = vec![Vec::new(), Vec::new()];
        read.buf.extend_from_slice(b"more");
        read.at = 8;
        read.seal(&mut none);
        assert!(none.iter().all(Vec::is_empty));
        assert!(read.buf.is_empty());
    }

    #[test]
    fn a_full_buffer_moves_the_frame_begun_and_reuses_buffers_the_workers_are_done_with() {
        let mut read = reading(1);
        let first = read.buf.as_ptr();
        // Nearly full, and its front still read by a worker: a new buffer, with the frame
        // begun moved to its front.
        let pending = fill(&mut read, READ_BYTES - 100, b"FCRP-begun");
        read.make_room(50);
        assert_eq!(&read.buf[..], b"FCRP-begun");
        assert!(read.buf.capacity() - read.buf.len() >= READ_MIN);
        let second = read.buf.as_ptr();
        assert_ne!(second, first);
        assert_eq!(read.spares.len(), 1);
        // The same again once the worker is done with the first buffer: that one is reused.
        drop(pending);
        let room = read.buf.capacity() - read.buf.len() - 20;
        let held = fill(&mut read, room, b"FCRP");
        read.make_room(0);
        assert_eq!(read.buf.as_ptr(), first);
        assert_eq!(&read.buf[..], b"FCRP");
        assert_eq!(read.spares.len(), 1);
        // A frame longer than a buffer gets room for all of it at once.
        drop(held);
        read.make_room(3 * READ_BYTES);
        assert!(read.buf.capacity() - read.buf.len() >= 3 * READ_BYTES);
        assert_eq!(&read.buf[..4], b"FCRP");
    }
}
