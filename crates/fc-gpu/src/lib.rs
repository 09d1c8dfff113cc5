//! # fc-gpu — KV-cache chunks between the cache and GPU memory
//!
//! **Owns:** the path of an LLM server's attention KV blocks between fast-cache and the GPU:
//! transfer descriptors ([`TransferPlan`]: for each chunk its host span, device offset and
//! length, checked for bounds, alignment and overlaps, adjacent spans coalesced into one
//! copy), a bounded pool of reusable staging buffers ([`StagingPool`], page-locked with the
//! `cuda` and `unsafe` features), gathering a session's values straight from the store into a
//! staging buffer with one copy ([`gather_session`]; in parallel and piece by piece, each
//! piece handed over as soon as it is copied, with [`Gatherer`]) and writing chunks back in
//! one session write ([`scatter_session`]); with the `cuda` feature, the copies themselves
//! (`cuda::Gpu`: streams, loads whose copies start with the first gathered piece,
//! double-buffered across sessions, a traced load's [`Timeline`], stores back to the cache)
//! through cudarc, which loads the driver at run time, so this crate builds on machines
//! without CUDA.
//!
//! **Must not depend on:** anything but fc-shard (and cudarc with `cuda`; rayon for the
//! gather threads). Nothing above it uses it except the facade's `cuda` module.
//!
//! ## Example (no GPU needed)
//! ```
//! use fc_gpu::{Pageable, StagingPool, TransferPlan, gather_session};
//! use fc_shard::{EmbeddedRouteMode, EmbeddedStore, PackedSessionWrite};
//!
//! // A session's KV chunks, written together (one route: one shard).
//! let store = EmbeddedStore::with_route_mode(8, EmbeddedRouteMode::session_prefix());
//! let mut write = PackedSessionWrite::with_capacity(b"session:7".to_vec(), 3, 3 * 4096);
//! for layer in 0..3u8 {
//!     write.push_record(format!("session:7:layer:{layer}").as_bytes(), &[layer; 4096]);
//! }
//! store.batch_set_session_packed_no_ttl(write);
//!
//! // Gather them into a staging buffer (one copy out of the store)...
//! let pool = StagingPool::new(Pageable, 64 << 20);
//! let keys: Vec<String> = (0..3).map(|l| format!("session:7:layer:{l}")).collect();
//! let mut staging = pool.acquire(3 * 4096)?;
//! let gathered = gather_session(&store, b"session:7", &keys, &mut staging);
//! assert!(gathered.complete());
//!
//! // ...and plan their copies into a device region: back to back, so one copy moves all three.
//! let offsets = TransferPlan::packed_offsets(&[4096; 3], 0, 256);
//! let plan = TransferPlan::new(&gathered.spans, gathered.bytes, &offsets, 1 << 20, 256)?;
//! assert_eq!(plan.copies().len(), 1);
//! assert_eq!(plan.bytes(), 3 * 4096);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "cuda")]
pub mod cuda;
mod gather;
mod plan;
mod staging;
mod timeline;

pub use gather::{Built, GatherConfig, GatherError, Gatherer, MIN_PIECE, Piece, layout};
pub use plan::{Chunk, Copy, PlanError, TransferPlan, align_up};
pub use staging::{
    Gathered, HostMemory, Pageable, PoolStats, STAGING_GRANULE, Staged, StagingError, StagingPool,
    gather, gather_session, gather_session_local, scatter_session,
};
pub use timeline::{Timeline, TimelinePiece};
