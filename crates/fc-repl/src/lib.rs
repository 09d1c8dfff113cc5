//! # fc-repl — native replication for fast-cache (sans-IO core)
//!
//! **Owns:** the protocol a primary and its replicas speak, separate from the WAL and from
//! Redis's PSYNC: FCRP frames ([`Frame`]: magic, version, kind, flags, shard, first sequence,
//! record count, payload length checked before any allocation, CRC32C; payloads optionally
//! zstd-compressed), the handshake ([`Hello`], [`Welcome`]: a token compared in constant time,
//! the shard counts, each shard's catch-up plan from the replica's watermark), storage-level
//! mutation batches (each mutation encoded as the WAL encodes it, with its sequence number)
//! built by per-shard [`Batcher`]s under a [`SendPolicy`], the primary's [`Backlog`] (each
//! shard's recent frames, bounded in bytes), and the replica's [`Applier`]: per-shard
//! watermarks, so a replayed or duplicated batch changes nothing, a missing sequence is a
//! [`LinkError::Gap`], and a transaction's mutations apply together at its end.
//!
//! **Must not depend on:** a runtime or sockets (the server owns the links), or anything above
//! fc-snapshot.
//!
//! The server's links (`REPLICAOF`, `ROLE`, `INFO replication`, `WAIT`, snapshot catch-up,
//! reconnects) use this core; see `docs/REPLICATION.md`.
//!
//! ## Example
//! ```
//! use std::time::Instant;
//! use fc_repl::{Applier, Backlog, Batcher, Compression, FrameDecoder, Hello, Plan, SendPolicy};
//! use fc_shard::{EmbeddedStore, Mutation};
//!
//! // The primary batches shard 0's mutations and keeps them in its backlog.
//! let mut batcher = Batcher::new(0, SendPolicy::Immediate);
//! let mut backlog = Backlog::new(1, 1 << 20);
//! let sealed = batcher
//!     .push(1, &Mutation::Set { key: b"k", value: b"v", expire_at_ms: None }, Instant::now())
//!     .expect("immediate");
//! let mut wire = Vec::new();
//! sealed.frame.encode(Compression::None, &mut wire);
//! backlog.push(0, sealed.first_seq, sealed.last_seq, wire.clone());
//!
//! // A replica at watermark 0 says hello; the backlog still covers it.
//! let hello = Hello {
//!     token: b"secret".to_vec(),
//!     replica_id: "r1".into(),
//!     port: 6381,
//!     primary_id: String::new(), // its first sync
//!     watermarks: vec![0],
//! };
//! let welcome = hello.answer(b"secret", "p1", &[backlog.latest(0)], &[backlog.oldest(0)])?;
//! assert_eq!(welcome.shards[0], (Plan::Backlog, 1));
//!
//! // It applies the frame, and again: the second time changes nothing.
//! let replica = EmbeddedStore::new(1);
//! let mut applier = Applier::new(vec![0]);
//! let frame = FrameDecoder::default().decode(&mut wire.clone())?.expect("whole");
//! assert_eq!(applier.apply(&frame, &replica)?.applied, 1);
//! assert_eq!(applier.apply(&frame, &replica)?.skipped, 1);
//! assert_eq!(replica.get(b"k"), Some(b"v".to_vec()));
//! assert_eq!(applier.watermarks(), [1]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod backlog;
mod batch;
mod error;
mod frame;
mod handshake;

pub use backlog::{Backlog, NeedSnapshot};
pub use batch::{Applied, Applier, BatchBuilder, Batcher, Entry, Sealed, SendPolicy, decode_batch};
pub use error::{FrameError, LinkError};
pub use frame::{
    Compression, FLAG_ZSTD, Frame, FrameDecoder, FrameRef, HEADER_LEN, Kind, MAGIC, VERSION,
};
pub use handshake::{Hello, MAX_NAME, Plan, Welcome, decode_watermarks, watermarks_frame};
