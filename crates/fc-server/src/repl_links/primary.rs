//! The primary's side, on the replication thread: the pump (lanes → encoded frames in the
//! backlog) and one task per replica link (handshake, snapshots of the shards it lacks, then
//! the backlog from its cursors on, heartbeats, its acknowledgements).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fc_repl::{Frame, FrameDecoder, Hello, Kind, Plan, decode_watermarks, watermarks_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::oneshot;

use crate::repl::{IDLE_PARK, LinkInfo, Outlet, Pump, WARM_NAP, lock};
use crate::shared::{Job, Shared};

/// The pump (thread `fc-repl-pump`): batches what the workers' rings hold into encoded
/// frames in the backlog, and tells the links (see [`crate::repl::Drain`]). A busy pump
/// sweeps every `batch_max_delay_us` on its own clock (writers wake nobody); an idle one
/// sleeps until a write wakes it. A worker that runs out of work with writes waiting sweeps
/// itself, on its own thread, with the pump's state (see `Repl::worker_idle`), and its
/// writes wake an idle pump only once they pile up. Stops when `stop` is set.
pub(crate) fn pump(shared: &Shared, stop: &AtomicBool) {
    let repl = &shared.repl;
    let source = &repl.source;
    let tick = repl
        .config
        .batch
        .map_or(Duration::from_micros(50), |(_, _, us)| {
            Duration::from_micros(us.max(20))
        });
    *lock(&source.pump) = Some(std::thread::current());
    *lock(&repl.pump) = Some(Pump::new(repl));
    let (mut busy, mut warm) = (false, false);
    while !stop.load(Ordering::Acquire) {
        if busy || warm {
            // A writer waiting for room in its ring, or a worker that went idle while the
            // pump was sweeping, wakes the pump early. Workers that defer their sweeps to
            // the pump keep it on a clock of at most `WARM_NAP`.
            source.nap(if warm { tick.min(WARM_NAP) } else { tick });
        } else {
            source.pump_idle.store(true, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // A last look, and another after a short spin: a writer that read `pump_idle`
            // clear before it was set wrote its entry first (see `crate::repl::Drain`).
            if !source.pending() && !spin_for_pending(source) {
                std::thread::park_timeout(IDLE_PARK);
            }
            source.pump_idle.store(false, Ordering::Release);
        }
        busy = lock(&repl.pump)
            .as_mut()
            .is_some_and(|p| p.sweep(repl).busy());
        warm = source.take_deferred();
    }
    *lock(&repl.pump) = None;
}

/// Looks for pending entries for a few microseconds (longer than a store takes to leave a
/// core's store buffer).
fn spin_for_pending(source: &crate::repl::Source) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_micros(5) {
        std::hint::spin_loop();
    }
    source.pending()
}

/// Reads one whole frame (the buffer keeps what follows it).
async fn read_frame(
    stream: &mut (impl AsyncReadExt + Unpin),
    buf: &mut Vec<u8>,
    decoder: &FrameDecoder,
) -> Result<Frame, String> {
    loop {
        if let Some((frame, used)) = decoder.decode_slice(buf).map_err(|e| e.to_string())? {
            buf.drain(..used);
            return Ok(frame);
        }
        let mut chunk = [0u8; 16 * 1024];
        match stream.read(&mut chunk).await {
            Ok(0) => return Err("connection closed".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(e.to_string()),
        }
    }
}

async fn send(writer: &mut OwnedWriteHalf, shared: &Shared, bytes: &[u8]) -> Result<(), String> {
    shared
        .repl
        .sent_bytes
        .fetch_add(bytes.len() as u64, Ordering::Relaxed);
    writer.write_all(bytes).await.map_err(|e| e.to_string())
}

fn encoded(frame: &Frame, shared: &Shared) -> Vec<u8> {
    let mut out = Vec::new();
    frame.encode(shared.repl.compression(), &mut out);
    out
}

/// Exports shard `shard` on its owning worker: the image and the sequence it stands at.
async fn export(shared: &Arc<Shared>, shard: usize) -> Result<(u64, Vec<u8>), String> {
    let (reply, answer) = oneshot::channel();
    let source = Arc::clone(&shared.repl.source);
    let count = shared.config.shards;
    let job = Job::Local(Box::new(move |store| {
        let mut seq = 0;
        let (_, bytes) = fc_snapshot::build_image(shard, count, |push| {
            match store.export_shard(shard, || source.latest_of(shard), push) {
                Ok((at, keys)) => {
                    seq = at;
                    (at, keys)
                }
                Err(_) => (0, 0),
            }
        });
        let _ = reply.send((seq, bytes));
    }));
    shared.inboxes[shard % shared.workers]
        .send(job)
        .map_err(|_| "server is shutting down".to_string())?;
    answer.await.map_err(|_| "a worker stopped".to_string())
}

/// Sends shard `shard`'s snapshot; returns the link's cursor after it (frames after the
/// snapshot's sequence), retrying while the backlog lost them during the transfer.
async fn send_snapshot(
    shared: &Arc<Shared>,
    writer: &mut OwnedWriteHalf,
    shard: usize,
) -> Result<u64, String> {
    for _ in 0..8 {
        let (seq, image) = export(shared, shard).await?;
        let mut begin = Frame::empty(Kind::SnapshotBegin);
        begin.shard = shard as u32;
        begin.first_seq = seq;
        send(writer, shared, &encoded(&begin, shared)).await?;
        for chunk in image.chunks(shared.repl.config.snapshot_chunk_bytes.max(1)) {
            let frame = Frame {
                kind: Kind::SnapshotChunk,
                shard: shard as u32,
                first_seq: seq,
                records: 0,
                payload: chunk.to_vec(),
            };
            send(writer, shared, &encoded(&frame, shared)).await?;
        }
        let mut end = Frame::empty(Kind::SnapshotEnd);
        end.shard = shard as u32;
        end.first_seq = seq;
        send(writer, shared, &encoded(&end, shared)).await?;
        shared.repl.snapshots_sent.fetch_add(1, Ordering::Relaxed);
        if let Ok(cursor) = lock(&shared.repl.backlog).since_index(shard, seq) {
            return Ok(cursor);
        }
    }
    Err(format!(
        "shard {shard} changes faster than its snapshot reaches the replica (raise backlog_bytes)"
    ))
}

fn set_state(shared: &Shared, id: u64, state: &'static str) {
    if let Some(link) = lock(&shared.repl.links).iter_mut().find(|l| l.id == id) {
        link.state = state;
    }
}

/// Serves one replica: the whole life of its link.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    stream: TcpStream,
    pending: Vec<u8>,
    peer: SocketAddr,
) {
    let _ = stream.set_nodelay(true);
    let id = shared.repl.next_link.fetch_add(1, Ordering::Relaxed);
    if let Err(err) = link(&shared, stream, pending, peer, id).await {
        tracing::warn!("replica {peer}: link closed: {err}");
    }
    lock(&shared.repl.links).retain(|l| l.id != id);
    shared.repl.acked.notify_waiters();
}

async fn link(
    shared: &Arc<Shared>,
    stream: TcpStream,
    mut buf: Vec<u8>,
    peer: SocketAddr,
    id: u64,
) -> Result<(), String> {
    let repl = &shared.repl;
    let (mut reader, mut writer) = stream.into_split();
    let decoder = FrameDecoder::default();
    let first = tokio::time::timeout(
        Duration::from_secs(10),
        read_frame(&mut reader, &mut buf, &decoder),
    )
    .await
    .map_err(|_| "no hello within 10 s".to_string())
    .and_then(|r| r)
    .inspect_err(|_| {
        repl.refused.fetch_add(1, Ordering::Relaxed);
    })?;
    let hello = Hello::decode(&first).map_err(|e| {
        repl.refused.fetch_add(1, Ordering::Relaxed);
        e.to_string()
    })?;
    // From here on every mutation reaches the backlog (the plan below reads it after).
    repl.source.enable();
    let latest = repl.source.latest();
    let oldest: Vec<Option<u64>> = {
        let log = lock(&shared.repl.backlog);
        (0..latest.len()).map(|s| log.oldest(s)).collect()
    };
    let welcome = match hello.answer(&repl.token, &shared.replid, &latest, &oldest) {
        Ok(welcome) => welcome,
        Err(err) => {
            repl.refused.fetch_add(1, Ordering::Relaxed);
            let refusal = Frame {
                payload: err.to_string().into_bytes(),
                ..Frame::empty(Kind::Refused)
            };
            let _ = send(&mut writer, shared, &encoded(&refusal, shared)).await;
            return Err(err.to_string());
        }
    };
    send(&mut writer, shared, &encoded(&welcome.frame(), shared)).await?;
    let same = hello.primary_id == shared.replid;
    let start: Vec<u64> = (0..latest.len())
        .map(|s| if same { hello.watermarks[s] } else { 0 })
        .collect();
    lock(&repl.links).push(LinkInfo {
        id,
        ip: peer.ip().to_string(),
        port: hello.port,
        state: "wait_bgsave",
        acked: start.clone(),
        last_ack: Instant::now(),
    });
    tracing::info!(
        "replica {peer} (port {}) connected: {} of {} shards from snapshots",
        hello.port,
        welcome
            .shards
            .iter()
            .filter(|(p, _)| *p == Plan::Snapshot)
            .count(),
        latest.len()
    );
    // Acknowledgements, read beside the sending.
    let mut acks = {
        let shared = Arc::clone(shared);
        tokio::task::spawn_local(async move {
            let decoder = FrameDecoder::default();
            loop {
                let frame = read_frame(&mut reader, &mut buf, &decoder).await?;
                if frame.kind != Kind::Ack {
                    return Err(format!("unexpected {:?} frame from a replica", frame.kind));
                }
                let marks = decode_watermarks(&frame).map_err(|e| e.to_string())?;
                if let Some(link) = lock(&shared.repl.links).iter_mut().find(|l| l.id == id) {
                    if marks.len() == link.acked.len() {
                        link.acked = marks;
                    }
                    link.last_ack = Instant::now();
                }
                shared.repl.acked.notify_waiters();
            }
            #[expect(unreachable_code, reason = "the loop's type")]
            Ok::<(), String>(())
        })
    };
    // The pump writes the link once it is caught up (see `crate::repl::Outlet`); without a
    // second handle on the socket, the task writes it all along.
    let outlet = std::os::fd::AsFd::as_fd(writer.as_ref())
        .try_clone_to_owned()
        .ok()
        .map(|fd| Arc::new(Outlet::new(id, std::net::TcpStream::from(fd), latest.len())));
    if let Some(outlet) = &outlet {
        repl.add_outlet(Arc::clone(outlet));
    }
    let result = stream_to(
        shared,
        &mut writer,
        &welcome.shards,
        &start,
        id,
        outlet.as_deref(),
        &mut acks,
    )
    .await;
    if let Some(outlet) = &outlet {
        repl.remove_outlet(outlet);
    }
    acks.abort();
    result
}

/// Snapshots where planned, then the backlog from each shard's cursor, for as long as the
/// link lives: written here until the link has everything the backlog holds, then by the pump
/// (through `outlet`) until it gives the link back.
async fn stream_to(
    shared: &Arc<Shared>,
    writer: &mut OwnedWriteHalf,
    plans: &[(Plan, u64)],
    start: &[u64],
    id: u64,
    outlet: Option<&Outlet>,
    acks: &mut tokio::task::JoinHandle<Result<(), String>>,
) -> Result<(), String> {
    let mut fresh = shared.repl.fresh.subscribe();
    let mut cut = shared.repl.cut_replicas.subscribe();
    let mut cursors = Vec::with_capacity(plans.len());
    let mut snapshots = Vec::new();
    for (shard, (plan, _)) in plans.iter().enumerate() {
        let cursor = match plan {
            Plan::Backlog => lock(&shared.repl.backlog)
                .since_index(shard, start[shard])
                .ok(),
            Plan::Snapshot => None,
        };
        if cursor.is_none() {
            snapshots.push(shard);
        }
        cursors.push(cursor.unwrap_or(0));
    }
    if !snapshots.is_empty() {
        set_state(shared, id, "send_bulk");
    }
    for shard in snapshots {
        cursors[shard] = send_snapshot(shared, writer, shard).await?;
    }
    set_state(shared, id, "online");
    let mut heartbeat = tokio::time::interval(Duration::from_secs(1));
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut out = Vec::new();
    let mut acks_asked = shared.repl.ack_requests.load(Ordering::Acquire);
    loop {
        fresh.borrow_and_update();
        let asked = shared.repl.ack_requests.load(Ordering::Acquire);
        let mut behind = Vec::new();
        let mut handed = false;
        {
            let log = lock(&shared.repl.backlog);
            for (shard, cursor) in cursors.iter_mut().enumerate() {
                match log.copy_from(shard, *cursor, &mut out) {
                    Ok(copied) => *cursor += copied,
                    Err(_) => behind.push(shard),
                }
            }
            // A `WAIT` asked: the replica acknowledges once it applied what precedes this.
            if asked != acks_asked {
                acks_asked = asked;
                Frame::empty(Kind::AckRequest).encode(fc_repl::Compression::None, &mut out);
            }
            // Everything the backlog holds is written: the pump goes on from here (under
            // the backlog's lock, so its next copy starts where this one ended).
            if out.is_empty()
                && behind.is_empty()
                && let Some(outlet) = outlet
            {
                outlet.hand_over(&log, &cursors);
                handed = true;
            }
        }
        if let (true, Some(outlet)) = (handed, outlet) {
            // Until the pump gives the link back: a shard fell out of the backlog, or the
            // socket failed.
            loop {
                tokio::select! {
                    () = outlet.given_back.notified() => {}
                    _ = cut.changed() => return Err("cut (CLIENT KILL TYPE replica)".into()),
                    done = &mut *acks => return acks_ended(done),
                }
                let mut state = outlet.state();
                if let Some(error) = state.error.take() {
                    return Err(error);
                }
                if !state.on_pump {
                    cursors.clone_from(&state.cursors);
                    break;
                }
            }
            continue;
        }
        if !out.is_empty() {
            send(writer, shared, &out).await?;
            out.clear();
        }
        // A link the backlog left behind catches up from a snapshot of those shards.
        for shard in behind {
            tracing::warn!(
                "replica link {id}: shard {shard} fell out of the backlog; resending it"
            );
            cursors[shard] = send_snapshot(shared, writer, shard).await?;
        }
        tokio::select! {
            changed = fresh.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
            }
            _ = cut.changed() => return Err("cut (CLIENT KILL TYPE replica)".into()),
            _ = heartbeat.tick() => {
                let beat = watermarks_frame(Kind::Heartbeat, &shared.repl.source.latest());
                send(writer, shared, &encoded(&beat, shared)).await?;
            }
            done = &mut *acks => return acks_ended(done),
        }
    }
}

/// How a link ends when its acknowledgement reader stopped.
fn acks_ended(done: Result<Result<(), String>, tokio::task::JoinError>) -> Result<(), String> {
    match done {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(err),
        Err(_) => Err("acknowledgement reader stopped".into()),
    }
}
