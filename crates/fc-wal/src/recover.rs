//! Recovery: replaying each shard's segments into a store, with the damage policy of a
//! [`RecoveryMode`] (see `docs/DURABILITY.md`).

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fc_shard::EmbeddedStore;

use crate::error::WalError;
use crate::frame::{FRAME_MAGIC, FrameRead, SEGMENT_HEADER_LEN, SegmentHeader, decode_frame};
use crate::log::{WalConfig, sync_dir};
use crate::record::Record;

/// What recovery does about damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum RecoveryMode {
    /// A damaged tail of a log's newest segment (nothing valid after it) is truncated,
    /// fsynced and reported; damage anywhere else refuses to start.
    #[default]
    TolerateTail,
    /// Any damage refuses to start; nothing is changed on disk.
    Strict,
    /// Replay stops at the first damage of a log; what follows is reported, not deleted.
    PointInTime,
}

/// A tail cut away (or, in point-in-time mode, left unread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment.
    pub path: PathBuf,
    /// Where the damage starts.
    pub offset: u64,
    /// Bytes from there to the end of the segment.
    pub bytes: u64,
    /// What was wrong.
    pub reason: String,
}

/// What recovery found in one log (a shard's own, or a shared one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRecovery {
    /// Frames replayed (those holding at least one mutation not in a snapshot).
    pub frames: u64,
    /// Mutations replayed (a batch frame holds several).
    pub mutations: u64,
    /// Sequence number of the last frame replayed (0: none).
    pub last_seq: u64,
    /// Segments read.
    pub segments: usize,
    /// The tail truncated (tolerate-tail) or not read (point-in-time), if any.
    pub damage: Option<Damage>,
    /// Transaction groups of this log not applied because the transaction was torn (see
    /// [`RecoveryReport::torn_transactions`]).
    pub torn_groups: u64,
    /// The largest transaction id read in this log (0: none).
    pub last_txn_id: u64,
    /// Replica watermarks ([`fc_shard::Mutation::ReplMark`]) by shard: the last one read
    /// after the snapshot's coverage, `None` once a change of that shard other than an expiry
    /// or an eviction followed it (what follows a watermark is not part of it).
    pub repl_marks: std::collections::BTreeMap<usize, Option<(Vec<u8>, u64)>>,
}

/// What recovery did, per log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// One entry per log (per shard, unless shards share logs).
    pub logs: Vec<LogRecovery>,
    /// Bytes of segments read.
    pub bytes: u64,
    /// Time taken.
    pub elapsed: Duration,
    /// Transactions ([`fc_shard::Mutation::TxBegin`] .. `TxEnd` groups, an operation's group
    /// of id 0 included) left out because a crash tore them: some log's group of the
    /// transaction never ended. None of their mutations was applied, on any log.
    pub torn_transactions: u64,
    /// The largest transaction id read in any log (0: none); a writer's next ids must be
    /// larger.
    pub last_txn_id: u64,
}

impl RecoveryReport {
    /// The replica watermark each shard's data holds (see [`LogRecovery::repl_marks`]): the
    /// primary's id and sequence number, or `None` where its log has none, or changes after
    /// the last one.
    #[must_use]
    pub fn repl_marks(&self, shard_count: usize) -> Vec<Option<(Vec<u8>, u64)>> {
        let mut marks = vec![None; shard_count];
        for log in &self.logs {
            for (&shard, mark) in &log.repl_marks {
                if let Some(slot) = marks.get_mut(shard) {
                    slot.clone_from(mark);
                }
            }
        }
        marks
    }

    /// Frames replayed over all shards.
    #[must_use]
    pub fn frames(&self) -> u64 {
        self.logs.iter().map(|s| s.frames).sum()
    }

    /// Mutations replayed over all shards.
    #[must_use]
    pub fn mutations(&self) -> u64 {
        self.logs.iter().map(|s| s.mutations).sum()
    }

    /// The next sequence number of each log ([`crate::WalSink::set_next_seqs`]).
    #[must_use]
    pub fn next_seqs(&self) -> Vec<u64> {
        self.logs.iter().map(|s| s.last_seq + 1).collect()
    }
}

fn io_error(path: &Path, err: &std::io::Error) -> WalError {
    WalError::Io {
        path: path.to_path_buf(),
        message: err.to_string(),
    }
}

/// A shard's segments in log order.
fn segments(dir: &Path) -> Result<Vec<PathBuf>, WalError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, &e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| io_error(dir, &e))?.path();
        if path.extension().is_some_and(|e| e == "fcw") {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Whether a valid frame starts anywhere in `bytes` (damage before one is not a tail).
fn valid_frame_follows(bytes: &[u8]) -> bool {
    let mut at = 0;
    while let Some(found) = bytes[at..]
        .windows(FRAME_MAGIC.len())
        .position(|w| w == FRAME_MAGIC)
    {
        if matches!(decode_frame(&bytes[at + found..]), FrameRead::Frame { .. }) {
            return true;
        }
        at += found + 1;
    }
    false
}

/// Whether none of `later` (segments after a damaged one) holds a valid frame: each is torn
/// at creation, header-only, or zeros or junk. Under `everysec` a rotation leaves the closed
/// segment's last `fdatasync` to the next sync, so a power loss can keep the next segment's
/// header but not the closed segment's last frames: its damage is then the log's tail.
fn frameless(later: &[PathBuf]) -> Result<bool, WalError> {
    for path in later {
        let bytes = fs::read(path).map_err(|e| io_error(path, &e))?;
        if valid_frame_follows(&bytes) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the segment at `path` has a valid header whose first sequence number is `seq`.
fn starts_at(path: &Path, seq: u64) -> Result<bool, WalError> {
    use std::io::Read;
    let mut header = Vec::with_capacity(SEGMENT_HEADER_LEN);
    fs::File::open(path)
        .and_then(|f| f.take(SEGMENT_HEADER_LEN as u64).read_to_end(&mut header))
        .map_err(|e| io_error(path, &e))?;
    Ok(SegmentHeader::decode(&header).is_some_and(|h| h.first_seq == seq))
}

/// Cuts `path` back to `len` bytes and makes that durable.
fn truncate(path: &Path, len: u64) -> Result<(), WalError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| io_error(path, &e))?;
    file.set_len(len)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(path, &e))
}

/// Replays the logs under `config.dir` (laid out as `config.logs` says) into `store` (which
/// must have the shard count that wrote them), log by log, applying `mode` to damage.
///
/// # Errors
/// [`WalError::Corrupt`] for damage `mode` refuses (with file and offset),
/// [`WalError::ShardCount`], [`WalError::Layout`], [`WalError::Apply`], [`WalError::Io`].
pub fn recover(
    config: &WalConfig,
    store: &EmbeddedStore,
    mode: RecoveryMode,
) -> Result<RecoveryReport, WalError> {
    recover_from(config, store, mode, &[])
}

/// As [`recover`], for a store already loaded from snapshots: shard `s` replays only frames
/// with sequence numbers from `starts[s]` on (a missing entry: 1, everything). A log must
/// reach back to the lowest start of the shards writing to it: a first segment beginning
/// after it means frames are missing, which refuses to start (point-in-time: replays nothing
/// of that log).
///
/// # Errors
/// As [`recover`].
pub fn recover_from(
    config: &WalConfig,
    store: &EmbeddedStore,
    mode: RecoveryMode,
    starts: &[u64],
) -> Result<RecoveryReport, WalError> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let shard_count = store.shard_count();
    let count = config.log_count(shard_count);
    let starts: Vec<u64> = (0..shard_count)
        .map(|s| starts.get(s).copied().unwrap_or(1).max(1))
        .collect();
    let mut tails = Vec::new();
    for log in 0..count {
        let layout = Layout {
            log,
            logs: count,
            shared: config.logs > 0,
            shard_count,
            starts: &starts,
        };
        let (found, bytes, tail) = recover_log(&config.log_dir(log), &layout, store, mode)?;
        report.bytes += bytes;
        report.last_txn_id = report.last_txn_id.max(found.last_txn_id);
        report.logs.push(found);
        tails.extend(tail.map(|t| (log, t)));
    }
    // A transaction is torn when one of its groups never ended; that can only be a log's last
    // group (a server holds every worker of a transaction until each group's end is written
    // to the OS, after every group's mutations were), so the logs' tails decide it.
    // (An operation's group, id 0, is one log's alone: whole when it ended.)
    let torn: std::collections::BTreeSet<u64> = tails
        .iter()
        .filter(|(_, t)| !t.ended && t.id != 0)
        .map(|(_, t)| t.id)
        .collect();
    let torn_operations = tails.iter().filter(|(_, t)| !t.ended && t.id == 0).count();
    report.torn_transactions = (torn.len() + torn_operations) as u64;
    for (log, tail) in tails {
        let found = &mut report.logs[log];
        if !tail.ended || torn.contains(&tail.id) {
            found.torn_groups += 1;
        } else {
            tail.apply(store, found)?;
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// A transaction's group of one log, held back until it is known whole: its id, whether its
/// end was read, and its mutations (with their shards) not covered by a snapshot.
struct Group {
    id: u64,
    ended: bool,
    records: Vec<(usize, Record)>,
    /// Where the group starts (for an error applying it).
    path: PathBuf,
    offset: u64,
}

impl Group {
    fn apply(self, store: &EmbeddedStore, found: &mut LogRecovery) -> Result<(), WalError> {
        let at = Position {
            path: &self.path,
            offset: self.offset,
        };
        for (shard, record) in &self.records {
            at.apply(record, store, *shard)?;
        }
        found.mutations += self.records.len() as u64;
        Ok(())
    }
}

/// Which log is being read, and what its frames' shards may be.
struct Layout<'a> {
    log: usize,
    logs: usize,
    shared: bool,
    shard_count: usize,
    /// Per shard: the first sequence number not in its snapshot image.
    starts: &'a [u64],
}

impl Layout<'_> {
    /// The shards writing to this log.
    fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        (self.log..self.shard_count).step_by(self.logs)
    }

    /// The header's `logs` field this layout writes.
    fn header_logs(&self) -> u32 {
        if self.shared { self.logs as u32 } else { 0 }
    }

    /// A frame's mutations with their shards, all decoded (and their shards checked) before
    /// any is applied; or why the frame cannot be one of this log's.
    fn entries(
        &self,
        shard: Option<u16>,
        batch: bool,
        payload: &[u8],
    ) -> Result<Vec<(usize, Record)>, String> {
        let undecodable = |e: crate::record::PayloadError| format!("undecodable payload: {e}");
        if !batch {
            let shard = self.shard_of(shard)?;
            return Ok(vec![(shard, Record::decode(payload).map_err(undecodable)?)]);
        }
        Record::decode_batch(payload, self.shared)
            .map_err(undecodable)?
            .into_iter()
            .map(|(tag, record)| Ok((self.shard_of(tag)?, record)))
            .collect()
    }

    /// The shard a frame of this log belongs to, or why it cannot be one of this log's.
    fn shard_of(&self, tag: Option<u16>) -> Result<usize, String> {
        match (self.shared, tag) {
            (false, None) => Ok(self.log),
            (true, Some(shard))
                if (shard as usize) < self.shard_count
                    && shard as usize % self.logs == self.log =>
            {
                Ok(shard as usize)
            }
            (true, Some(shard)) => Err(format!("frame of shard {shard} in log {}", self.log)),
            (true, None) => Err("frame without a shard in a shared log".into()),
            (false, Some(_)) => Err("frame with a shard in a shard's own log".into()),
        }
    }
}

/// Replays one log; returns what it found, the bytes read, and its last transaction group
/// when nothing follows it (applied, or not, once every log's tail is known).
fn recover_log(
    dir: &Path,
    layout: &Layout<'_>,
    store: &EmbeddedStore,
    mode: RecoveryMode,
) -> Result<(LogRecovery, u64, Option<Group>), WalError> {
    let paths = segments(dir)?;
    let mut found = LogRecovery::default();
    // The transaction group being read, or the last one read, ended, with nothing after it yet.
    let mut group: Option<Group> = None;
    let mut read_bytes = 0;
    // With snapshots, the log must continue them: its first segment may not begin after the
    // first frame one of its shards' images lacks.
    let start = layout.shards().map(|s| layout.starts[s]).min().unwrap_or(1);
    let mut expected: Option<u64> = None;
    let mut first_due = Some(start);
    for (i, path) in paths.iter().enumerate() {
        let newest = i + 1 == paths.len();
        let bytes = fs::read(path).map_err(|e| io_error(path, &e))?;
        read_bytes += bytes.len() as u64;
        found.segments += 1;
        let corrupt = |offset: usize, reason: &str| WalError::Corrupt {
            path: path.clone(),
            offset: offset as u64,
            reason: reason.to_string(),
        };
        let Some(header) = SegmentHeader::decode(&bytes) else {
            // A newest segment torn while its header was written holds nothing: it is
            // shorter than a header, or (its size on disk, its bytes not) all zeros.
            let torn_at_creation =
                newest && (bytes.len() < SEGMENT_HEADER_LEN || bytes.iter().all(|&b| b == 0));
            match mode {
                RecoveryMode::TolerateTail if torn_at_creation => {
                    fs::remove_file(path).map_err(|e| io_error(path, &e))?;
                    sync_dir(dir)?;
                    found.damage = Some(Damage {
                        path: path.clone(),
                        offset: 0,
                        bytes: bytes.len() as u64,
                        reason: "segment header torn".into(),
                    });
                    break;
                }
                RecoveryMode::PointInTime => {
                    found.damage = Some(Damage {
                        path: path.clone(),
                        offset: 0,
                        bytes: bytes.len() as u64,
                        reason: "bad segment header".into(),
                    });
                    break;
                }
                _ => return Err(corrupt(0, "bad segment header")),
            }
        };
        if header.shard as usize != layout.log || header.shard_count as usize != store.shard_count()
        {
            return Err(WalError::ShardCount {
                path: path.clone(),
                shard: header.shard,
                shard_count: header.shard_count,
                expected: store.shard_count(),
            });
        }
        if header.logs != layout.header_logs() {
            return Err(WalError::Layout {
                path: path.clone(),
                logs: header.logs,
                expected: layout.header_logs() as usize,
            });
        }
        let gap = match (expected, first_due.take()) {
            (Some(next), _) => (header.first_seq != next).then_some(next),
            (None, Some(due)) => (header.first_seq > due).then_some(due),
            (None, None) => None,
        };
        if let Some(next) = gap {
            let reason = format!(
                "segment starts at {} where {next} was due",
                header.first_seq
            );
            if mode == RecoveryMode::PointInTime {
                found.damage = Some(Damage {
                    path: path.clone(),
                    offset: 0,
                    bytes: bytes.len() as u64,
                    reason,
                });
                break;
            }
            return Err(corrupt(0, &reason));
        }
        let mut next_seq = header.first_seq;
        let mut at = SEGMENT_HEADER_LEN;
        let mut stop = false;
        // The damaged tail is in this segment and the later ones hold no frame (removed).
        let mut drop_later = false;
        while at < bytes.len() {
            let problem = match decode_frame(&bytes[at..]) {
                FrameRead::Frame {
                    shard,
                    batch,
                    seq,
                    payload,
                    len,
                } => {
                    if seq != next_seq {
                        Some(format!("frame sequence {seq} where {next_seq} was due"))
                    } else {
                        match layout.entries(shard, batch, payload) {
                            Err(reason) => Some(reason),
                            Ok(entries) => {
                                let (mut replayed, count) = (0, entries.len() as u64);
                                for (i, (shard, record)) in entries.into_iter().enumerate() {
                                    // Mutations an image already loaded covers are skipped
                                    // (never a group's boundary: a snapshot may cover some
                                    // of a log's shards past a transaction and not others).
                                    let covered = seq + (i as u64) < layout.starts[shard];
                                    let at = Position {
                                        path,
                                        offset: at as u64,
                                    };
                                    replayed += u64::from(!covered);
                                    replay(
                                        store, &mut found, &mut group, shard, record, covered, &at,
                                    )?;
                                }
                                found.frames += u64::from(replayed > 0);
                                found.last_seq = seq + count - 1;
                                next_seq += count;
                                at += len;
                                None
                            }
                        }
                    }
                }
                FrameRead::Incomplete => Some("torn frame at the end".to_string()),
                FrameRead::Bad(reason) => Some(reason.to_string()),
            };
            let Some(reason) = problem else {
                continue;
            };
            let zeros = bytes[at..].iter().all(|&b| b == 0);
            if zeros && (newest || starts_at(&paths[i + 1], next_seq)?) {
                // Zeros from a frame's start to the end of the file: space the writer
                // preallocated (`PREALLOC_BYTES`) and had not filled (in a closed segment,
                // not yet trimmed on disk, the next segment continuing where it ends).
                break;
            }
            // Zeros in a closed segment whose successor starts later: frames were due there
            // (their writes lost, the preallocated zeros left). A tail when every later
            // segment is frame-less (a power loss just after a rotation), else a hole.
            let reason = if zeros {
                "zeros where frames were due".to_string()
            } else {
                reason
            };
            let is_tail =
                !valid_frame_follows(&bytes[at + 1..]) && (newest || frameless(&paths[i + 1..])?);
            let damage = Damage {
                path: path.clone(),
                offset: at as u64,
                bytes: (bytes.len() - at) as u64,
                reason,
            };
            match mode {
                RecoveryMode::TolerateTail if is_tail => {
                    truncate(path, at as u64)?;
                    found.damage = Some(damage);
                    drop_later = !newest;
                }
                RecoveryMode::PointInTime => {
                    found.damage = Some(damage);
                    stop = true;
                }
                _ => return Err(corrupt(at, &damage.reason)),
            }
            break;
        }
        if stop {
            break;
        }
        if next_seq == header.first_seq
            && (newest || drop_later)
            && mode != RecoveryMode::PointInTime
        {
            // A newest segment without frames holds nothing: remove it, so the writer can
            // start the segment of that name afresh.
            fs::remove_file(path).map_err(|e| io_error(path, &e))?;
            sync_dir(dir)?;
        }
        expected = Some(next_seq);
        if drop_later {
            for later in &paths[i + 1..] {
                fs::remove_file(later).map_err(|e| io_error(later, &e))?;
            }
            sync_dir(dir)?;
            break;
        }
    }
    // An empty log continues from the store's start, and never below a snapshot's: every
    // image of its shards covers less than the next frame.
    if found.last_seq == 0
        && let Some(next) = expected
    {
        found.last_seq = next.saturating_sub(1);
    }
    let newest_start = layout.shards().map(|s| layout.starts[s]).max().unwrap_or(1);
    found.last_seq = found.last_seq.max(newest_start - 1);
    Ok((found, read_bytes, group))
}

/// Where a frame starts (for errors).
struct Position<'a> {
    path: &'a Path,
    offset: u64,
}

impl Position<'_> {
    /// Applies `record` (of shard `shard`), naming this position when the store refuses it.
    fn apply(&self, record: &Record, store: &EmbeddedStore, shard: usize) -> Result<(), WalError> {
        record.apply(store, shard).map_err(|e| WalError::Apply {
            path: self.path.to_path_buf(),
            offset: self.offset,
            message: e.to_string(),
        })
    }
}

/// Replays one entry of a log: applies a mutation outside any transaction at once, holds a
/// transaction's back in its [`Group`] until the group is known whole. A group that ended is
/// applied when anything follows it in the log (whatever follows was written after every
/// group of its transaction had ended); one that another group's start interrupts is torn.
fn replay(
    store: &EmbeddedStore,
    found: &mut LogRecovery,
    group: &mut Option<Group>,
    shard: usize,
    record: Record,
    covered: bool,
    at: &Position<'_>,
) -> Result<(), WalError> {
    if let Some(ended) = group.take_if(|g| g.ended) {
        ended.apply(store, found)?;
    }
    match record {
        Record::ReplMark { primary, seq } => {
            if !covered {
                found.repl_marks.insert(shard, Some((primary, seq)));
            }
        }
        // An operation's group inside a transaction's adds nothing.
        Record::TxBegin { id: 0 } if group.is_some() => {}
        Record::TxBegin { id } => {
            found.last_txn_id = found.last_txn_id.max(id);
            if group.take().is_some() {
                // Never written by a server (groups do not nest); refuse to half-apply.
                found.torn_groups += 1;
            }
            *group = Some(Group {
                id,
                ended: false,
                records: Vec::new(),
                path: at.path.to_path_buf(),
                offset: at.offset,
            });
        }
        Record::TxEnd { id } => match group {
            Some(g) if g.id == id && !g.ended => g.ended = true,
            // An end whose start a snapshot's trim removed: its mutations are covered.
            _ => {}
        },
        _ if covered => {}
        record => {
            // A change after a replica's watermark is not part of it (expiries and evictions
            // are: the primary sends its own for those keys).
            if !matches!(record, Record::Expired { .. } | Record::Evicted { .. })
                && let Some(mark) = found.repl_marks.get_mut(&shard)
            {
                *mark = None;
            }
            replay_change(store, found, group, shard, record, at)?;
        }
    }
    Ok(())
}

/// A change (not a boundary) of `shard`: applied now, or held in the open group.
fn replay_change(
    store: &EmbeddedStore,
    found: &mut LogRecovery,
    group: &mut Option<Group>,
    shard: usize,
    record: Record,
    at: &Position<'_>,
) -> Result<(), WalError> {
    match group {
        Some(g) => g.records.push((shard, record)),
        None => {
            at.apply(&record, store, shard)?;
            found.mutations += 1;
        }
    }
    Ok(())
}
