//! CUDA copies (the `cuda` feature): a device and its streams, device buffers, and loading a
//! session's chunks from the store to device memory (and storing GPU-produced chunks back),
//! double-buffered so gathering the next batch overlaps the current copy.
//!
//! cudarc loads libcuda at run time: a machine without a driver gets [`GpuError::NoDriver`]
//! from [`Gpu::open`], never a panic. Staging memory is page-locked ([`Pinned`]) with the
//! `unsafe` feature (cudarc's pinned allocation is an `unsafe` call: the memory starts
//! uninitialised; see `SAFETY.md`), else pageable ([`crate::Pageable`]), which the driver
//! copies through a bounce buffer of its own.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DriverError};
use fc_shard::{BuiltEntry, EmbeddedStore, StoreError};

use crate::gather::{GatherConfig, GatherError, Gatherer, Piece, layout};
use crate::plan::{PlanError, TransferPlan};
use crate::staging::{HostMemory, Staged, StagingError, StagingPool};
use crate::timeline::{Timeline, TimelinePiece};

/// What can go wrong on the GPU path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// No CUDA driver library (libcuda) could be loaded.
    #[error("no CUDA driver (libcuda) on this machine")]
    NoDriver,
    /// The driver refused something.
    #[error("CUDA: {0}")]
    Driver(#[from] DriverError),
    /// The chunks cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// No staging buffer.
    #[error(transparent)]
    Staging(#[from] StagingError),
    /// The store refused the write-back.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A chunk's key is missing from the store (nothing was copied).
    #[error("{missing} of {chunks} chunks are missing from the store")]
    Missing {
        /// Chunks not found.
        missing: usize,
        /// Chunks asked for.
        chunks: usize,
    },
    /// A stream index past the device's streams.
    #[error("stream {0} does not exist")]
    NoStream(usize),
    /// The gather threads could not be started.
    #[error(transparent)]
    Gather(#[from] GatherError),
    /// A store was given a different number of keys than of chunks.
    #[error("{keys} keys for {chunks} chunks")]
    KeyCount {
        /// Keys given.
        keys: usize,
        /// Chunks given.
        chunks: usize,
    },
}

/// A GPU, its streams, and the threads that gather sessions for it.
#[derive(Debug)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    streams: Vec<Arc<CudaStream>>,
    gatherer: Gatherer,
}

/// How [`Gpu::open_with`] sets a GPU up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuOptions {
    /// CUDA streams (at least one; two let one session's copies overlap the next's gather).
    pub streams: usize,
    /// The gather threads and piece size ([`GatherConfig`]).
    pub gather: GatherConfig,
}

impl Default for GpuOptions {
    fn default() -> Self {
        Self {
            streams: 2,
            gather: GatherConfig::default(),
        }
    }
}

/// Device memory.
#[derive(Debug)]
pub struct DeviceBuffer {
    slice: CudaSlice<u8>,
}

impl DeviceBuffer {
    /// Its size in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slice.len()
    }

    /// Whether it has no bytes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slice.len() == 0
    }

    /// The cudarc slice (for kernels of your own).
    #[must_use]
    pub fn as_cuda(&self) -> &CudaSlice<u8> {
        &self.slice
    }

    /// The cudarc slice, writable.
    pub fn as_cuda_mut(&mut self) -> &mut CudaSlice<u8> {
        &mut self.slice
    }
}

/// What one load or store moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransferReport {
    /// Chunks moved.
    pub chunks: usize,
    /// Copies issued (after coalescing).
    pub copies: usize,
    /// Bytes moved.
    pub bytes: usize,
}

/// One session's load in a [`Gpu::load_sessions`] run.
#[derive(Debug, Clone)]
pub struct SessionLoad<'a, K> {
    /// The session's route prefix.
    pub prefix: &'a [u8],
    /// Its chunks' keys.
    pub keys: &'a [K],
    /// Where each chunk goes in the device buffer.
    pub device_offsets: &'a [u64],
}

/// Loads libcuda and initialises it, turning a missing library into `NoDriver` (cudarc
/// panics when it cannot load the library; nothing else can be caught that way here).
fn context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
    std::panic::catch_unwind(|| CudaContext::new(ordinal))
        .map_err(|_| GpuError::NoDriver)?
        .map_err(GpuError::from)
}

impl Gpu {
    /// GPUs the driver sees.
    ///
    /// # Errors
    /// [`GpuError::NoDriver`], or the driver's error.
    pub fn device_count() -> Result<usize, GpuError> {
        let count = std::panic::catch_unwind(CudaContext::device_count)
            .map_err(|_| GpuError::NoDriver)??;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Opens GPU `ordinal` with `streams` streams (at least one; two let loads overlap).
    ///
    /// # Errors
    /// [`GpuError::NoDriver`] without libcuda; the driver's error without that GPU.
    pub fn open(ordinal: usize, streams: usize) -> Result<Self, GpuError> {
        Self::open_with(
            ordinal,
            GpuOptions {
                streams,
                ..GpuOptions::default()
            },
        )
    }

    /// Opens GPU `ordinal` as `options` say.
    ///
    /// # Errors
    /// As [`Gpu::open`]; [`GpuError::Gather`] when the gather threads cannot start.
    pub fn open_with(ordinal: usize, options: GpuOptions) -> Result<Self, GpuError> {
        let ctx = context(ordinal)?;
        let streams = (0..options.streams.max(1))
            .map(|_| ctx.new_stream())
            .collect::<Result<Vec<_>, _>>()?;
        let gatherer = Gatherer::new(options.gather)?;
        Ok(Self {
            ctx,
            streams,
            gatherer,
        })
    }

    /// The gather threads' configuration.
    #[must_use]
    pub fn gather_config(&self) -> GatherConfig {
        self.gatherer.config()
    }

    /// The cudarc context (for kernels of your own).
    #[must_use]
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    fn stream(&self, i: usize) -> Result<&Arc<CudaStream>, GpuError> {
        self.streams.get(i).ok_or(GpuError::NoStream(i))
    }

    /// `bytes` of device memory, zeroed.
    ///
    /// # Errors
    /// The driver's error (out of device memory).
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, GpuError> {
        let slice = self.streams[0].alloc_zeros::<u8>(bytes)?;
        self.streams[0].synchronize()?;
        Ok(DeviceBuffer { slice })
    }

    /// Issues `plan`'s copies from `host` to `device` on stream `stream` (asynchronous:
    /// `host` must stay untouched until the stream is synchronized).
    ///
    /// # Errors
    /// The driver's error; [`GpuError::Plan`] when the plan does not fit these buffers.
    pub fn upload(
        &self,
        plan: &TransferPlan,
        host: &[u8],
        device: &mut DeviceBuffer,
        stream: usize,
    ) -> Result<(), GpuError> {
        let s = self.stream(stream)?;
        fits(plan, host.len(), device.len())?;
        for copy in plan.copies() {
            let at = copy.device as usize;
            let mut dst = device.slice.slice_mut(at..at + copy.len());
            s.memcpy_htod(&host[copy.host.clone()], &mut dst)?;
        }
        Ok(())
    }

    /// Issues `plan`'s copies from `device` to `host` on stream `stream` (asynchronous).
    ///
    /// # Errors
    /// As [`Gpu::upload`].
    pub fn download(
        &self,
        plan: &TransferPlan,
        device: &DeviceBuffer,
        host: &mut [u8],
        stream: usize,
    ) -> Result<(), GpuError> {
        let s = self.stream(stream)?;
        fits(plan, host.len(), device.len())?;
        for copy in plan.copies() {
            let at = copy.device as usize;
            let src = device.slice.slice(at..at + copy.len());
            s.memcpy_dtoh(&src, &mut host[copy.host.clone()])?;
        }
        Ok(())
    }

    /// Waits for stream `stream`'s work.
    ///
    /// # Errors
    /// The driver's error.
    pub fn synchronize(&self, stream: usize) -> Result<(), GpuError> {
        Ok(self.stream(stream)?.synchronize()?)
    }

    /// Loads a session's chunks: gathers them from the store into one staging buffer (one
    /// copy, on the gather threads, piece by piece), copying each piece to `device_offsets`
    /// (aligned to `align`) as soon as it is gathered, in as few copies as adjacent spans
    /// allow, and waits for the copies.
    ///
    /// # Errors
    /// [`GpuError::Missing`] when a key is missing (nothing is copied), planning, staging and
    /// driver errors.
    #[expect(clippy::too_many_arguments, reason = "one load, spelled out")]
    pub fn load_session<M: HostMemory, K: AsRef<[u8]>>(
        &self,
        pool: &StagingPool<M>,
        store: &EmbeddedStore,
        prefix: &[u8],
        keys: &[K],
        device_offsets: &[u64],
        device: &mut DeviceBuffer,
        align: u64,
    ) -> Result<TransferReport, GpuError> {
        let loads = [SessionLoad {
            prefix,
            keys,
            device_offsets,
        }];
        let mut reports = self.load_sessions(pool, store, &loads, device, align)?;
        Ok(reports.pop().unwrap_or_default())
    }

    /// Loads several sessions, double-buffered: while one session's copies run on one stream,
    /// the next session is gathered into the other staging buffer (and copied on the other
    /// stream); a staging buffer is reused only after its stream finished. Within a session,
    /// pieces are copied as the gather threads finish them ([`crate::Gatherer`]). Each
    /// session's values are read under its shards' read locks, held for its gather (not its
    /// copies). Staging buffers are sized by the largest session.
    ///
    /// # Errors
    /// As [`Gpu::load_session`]; sessions before the failing one were loaded.
    pub fn load_sessions<M: HostMemory, K: AsRef<[u8]>>(
        &self,
        pool: &StagingPool<M>,
        store: &EmbeddedStore,
        loads: &[SessionLoad<'_, K>],
        device: &mut DeviceBuffer,
        align: u64,
    ) -> Result<Vec<TransferReport>, GpuError> {
        self.load(pool, store, loads, device, align, None)
    }

    /// [`Gpu::load_sessions`], timed: for every piece, when a gather thread copied it (host
    /// clock) and when the GPU copied it (CUDA events), on one time axis from the start of
    /// the call, so the overlap of gathering and copying can be seen and measured
    /// ([`Timeline`]). The events cost a few microseconds per piece.
    ///
    /// # Errors
    /// As [`Gpu::load_sessions`].
    pub fn load_sessions_traced<M: HostMemory, K: AsRef<[u8]>>(
        &self,
        pool: &StagingPool<M>,
        store: &EmbeddedStore,
        loads: &[SessionLoad<'_, K>],
        device: &mut DeviceBuffer,
        align: u64,
    ) -> Result<(Vec<TransferReport>, Timeline), GpuError> {
        let mut tracer = Tracer::start(self)?;
        let reports = self.load(pool, store, loads, device, align, Some(&mut tracer))?;
        Ok((reports, tracer.finish()?))
    }

    fn load<M: HostMemory, K: AsRef<[u8]>>(
        &self,
        pool: &StagingPool<M>,
        store: &EmbeddedStore,
        loads: &[SessionLoad<'_, K>],
        device: &mut DeviceBuffer,
        align: u64,
        tracer: Option<&mut Tracer>,
    ) -> Result<Vec<TransferReport>, GpuError> {
        let lanes = self.streams.len().min(2);
        let mut staged: Vec<Option<Staged<'_, M>>> = (0..lanes).map(|_| None).collect();
        let loaded = self.load_into(pool, store, loads, device, align, tracer, &mut staged);
        // The staging buffers go back to the pool only once nothing reads them, whatever
        // happened: a session that failed may have copies in flight.
        let synced = (0..lanes).try_for_each(|lane| self.synchronize(lane));
        let reports = loaded?;
        synced?;
        Ok(reports)
    }

    #[expect(clippy::too_many_arguments, reason = "load's state, passed down")]
    fn load_into<'p, M: HostMemory, K: AsRef<[u8]>>(
        &self,
        pool: &'p StagingPool<M>,
        store: &EmbeddedStore,
        loads: &[SessionLoad<'_, K>],
        device: &mut DeviceBuffer,
        align: u64,
        mut tracer: Option<&mut Tracer>,
        staged: &mut [Option<Staged<'p, M>>],
    ) -> Result<Vec<TransferReport>, GpuError> {
        let lanes = staged.len();
        let mut reports = Vec::with_capacity(loads.len());
        for (session, load) in loads.iter().enumerate() {
            let lane = session % lanes;
            // The lane's staging buffer is free once its previous copies finished.
            self.synchronize(lane)?;
            let slot = &mut staged[lane];
            let tracer = tracer.as_deref_mut();
            let report = store.with_session_views(load.prefix, load.keys, |values| {
                let mut gathered = layout(values, slot.as_ref().map_or(0, |b| b.len()));
                if gathered.hits < values.len() {
                    return Err(GpuError::Missing {
                        missing: values.len() - gathered.hits,
                        chunks: values.len(),
                    });
                }
                if slot.is_none() || !gathered.fits() {
                    // None yet, or too small: the old buffer goes back, one of the size
                    // needed comes.
                    *slot = None;
                    *slot = Some(pool.acquire(gathered.needed)?);
                    gathered = layout(values, gathered.needed);
                }
                let plan = TransferPlan::new(
                    &gathered.spans,
                    gathered.bytes,
                    load.device_offsets,
                    device.len() as u64,
                    align,
                )?;
                let buffer = slot.as_mut().expect("a staging buffer was acquired");
                let mut issue = Issue {
                    gpu: self,
                    stream: self.stream(lane)?,
                    plan: &plan,
                    device: &mut *device,
                    tracer,
                    session,
                    lane,
                    failed: None,
                };
                self.gatherer.fill(
                    values,
                    &gathered.spans,
                    &mut buffer[..gathered.bytes],
                    |piece| issue.piece(&piece),
                );
                if let Some(err) = issue.failed {
                    return Err(err);
                }
                Ok(TransferReport {
                    chunks: plan.chunks().len(),
                    copies: plan.copies().len(),
                    bytes: plan.bytes(),
                })
            })?;
            reports.push(report);
        }
        Ok(reports)
    }

    /// Stores GPU-produced chunks: chunk `i` (`lens[i]` bytes at `device_offsets[i]`) under
    /// `keys[i]` of the session `prefix`. The chunks are copied into a staging buffer piece by
    /// piece (runs of whole chunks, [`Gatherer::value_pieces`]), an event after each piece; as
    /// each piece lands, the gather threads copy its chunks out into entries of their own
    /// ([`Gatherer::build_entries`]) while the next pieces are still on the bus. The entries
    /// then move into the store under the session's shard lock, with no copy under it
    /// ([`EmbeddedStore::try_batch_set_session_built_no_ttl`]).
    ///
    /// # Errors
    /// Planning, staging, driver and store errors; on an error the store is unchanged unless
    /// the store itself refused (out of memory under `NoEviction`: entries before the refused
    /// one were written).
    #[expect(clippy::too_many_arguments, reason = "one store, spelled out")]
    pub fn store_session<M: HostMemory, K: AsRef<[u8]> + Sync>(
        &self,
        pool: &StagingPool<M>,
        device: &DeviceBuffer,
        device_offsets: &[u64],
        lens: &[usize],
        store: &EmbeddedStore,
        prefix: &[u8],
        keys: &[K],
    ) -> Result<TransferReport, GpuError> {
        let session = SessionStore {
            device_offsets,
            lens,
            prefix,
            keys,
        };
        self.store(pool, device, &session, store, None)
    }

    /// [`Gpu::store_session`], timed: for every piece, when the GPU copied it to the host
    /// (CUDA events) and when a gather thread built its entries (host clock: the timeline's
    /// `gather_*` fields), on one time axis from the start of the call ([`Timeline`]).
    ///
    /// # Errors
    /// As [`Gpu::store_session`].
    #[expect(clippy::too_many_arguments, reason = "one store, spelled out")]
    pub fn store_session_traced<M: HostMemory, K: AsRef<[u8]> + Sync>(
        &self,
        pool: &StagingPool<M>,
        device: &DeviceBuffer,
        device_offsets: &[u64],
        lens: &[usize],
        store: &EmbeddedStore,
        prefix: &[u8],
        keys: &[K],
    ) -> Result<(TransferReport, Timeline), GpuError> {
        let session = SessionStore {
            device_offsets,
            lens,
            prefix,
            keys,
        };
        let mut tracer = Tracer::start(self)?;
        let report = self.store(pool, device, &session, store, Some(&mut tracer))?;
        Ok((report, tracer.finish()?))
    }

    fn store<M: HostMemory, K: AsRef<[u8]> + Sync>(
        &self,
        pool: &StagingPool<M>,
        device: &DeviceBuffer,
        session: &SessionStore<'_, K>,
        store: &EmbeddedStore,
        tracer: Option<&mut Tracer>,
    ) -> Result<TransferReport, GpuError> {
        let (lens, keys) = (session.lens, session.keys);
        if keys.len() != lens.len() {
            return Err(GpuError::KeyCount {
                keys: keys.len(),
                chunks: lens.len(),
            });
        }
        let mut spans = Vec::with_capacity(lens.len());
        let mut at = 0;
        for &len in lens {
            spans.push(at..at + len);
            at += len;
        }
        let planned: Vec<_> = spans.iter().cloned().map(Some).collect();
        let plan = TransferPlan::new(&planned, at, session.device_offsets, device.len() as u64, 1)?;
        let mut staged = pool.acquire(at)?;
        let built = self.download_entries(&plan, device, &mut staged[..at], keys, &spans, tracer);
        // The staging buffer goes back to the pool only once no copy writes into it.
        let synced = self.synchronize(0);
        drop(staged);
        let entries = built?;
        synced?;
        self.gatherer.store_built(store, session.prefix, entries)?;
        Ok(TransferReport {
            chunks: plan.chunks().len(),
            copies: plan.copies().len(),
            bytes: plan.bytes(),
        })
    }

    /// Issues every piece's copies into `staged` on stream 0, an event after each, then
    /// builds the entries piece by piece as the events complete.
    fn download_entries<K: AsRef<[u8]> + Sync>(
        &self,
        plan: &TransferPlan,
        device: &DeviceBuffer,
        staged: &mut [u8],
        keys: &[K],
        spans: &[std::ops::Range<usize>],
        tracer: Option<&mut Tracer>,
    ) -> Result<Vec<BuiltEntry>, GpuError> {
        let stream = self.stream(0)?;
        let pieces = self.gatherer.value_pieces(spans);
        let mut landed = Vec::with_capacity(pieces.len());
        let mut traced = Vec::new();
        for piece in &pieces {
            let host = spans[piece.start].start..spans[piece.end - 1].end;
            let issued = Instant::now();
            let start = match tracer {
                Some(_) => Some(self.timing_event(stream)?),
                None => None,
            };
            for (host, at) in plan.copies_in(host.clone()) {
                let at = at as usize;
                let src = device.slice.slice(at..at + host.len());
                stream.memcpy_dtoh(&src, &mut staged[host])?;
            }
            match start {
                Some(start) => {
                    landed.push(self.timing_event(stream)?);
                    traced.push((host, issued, start));
                }
                None => landed.push(stream.record_event(None)?),
            }
        }
        // From here the buffer is only read, and each piece only after its event: the copies
        // still running write to later pieces, which nothing reads yet.
        let staged = &*staged;
        let built = self
            .gatherer
            .build_entries(keys, staged, spans, &pieces, |p| {
                Ok::<_, GpuError>(landed[p].synchronize()?)
            })?;
        if let Some(tracer) = tracer {
            for (((host, issued, start), end), times) in
                traced.into_iter().zip(landed).zip(&built.piece_times)
            {
                tracer.marks.push(Mark {
                    session: 0,
                    lane: 0,
                    host,
                    gather: *times,
                    issued,
                    copy: (start, end),
                });
            }
        }
        Ok(built.entries)
    }
}

/// A session to store from the device ([`Gpu::store_session`]'s arguments).
struct SessionStore<'a, K> {
    device_offsets: &'a [u64],
    lens: &'a [usize],
    prefix: &'a [u8],
    keys: &'a [K],
}

/// Issues a session's copies piece by piece as the gather threads hand them over (on the
/// calling thread); the first failure stops the rest.
struct Issue<'a> {
    gpu: &'a Gpu,
    stream: &'a Arc<CudaStream>,
    plan: &'a TransferPlan,
    device: &'a mut DeviceBuffer,
    tracer: Option<&'a mut Tracer>,
    session: usize,
    lane: usize,
    failed: Option<GpuError>,
}

impl Issue<'_> {
    fn piece(&mut self, piece: &Piece<'_>) {
        if self.failed.is_none()
            && let Err(err) = self.copy(piece)
        {
            self.failed = Some(err);
        }
    }

    fn copy(&mut self, piece: &Piece<'_>) -> Result<(), GpuError> {
        let issued = Instant::now();
        let start = match self.tracer {
            Some(_) => Some(self.gpu.timing_event(self.stream)?),
            None => None,
        };
        for (host, at) in self.plan.copies_in(piece.host.clone()) {
            let at = at as usize;
            let mut dst = self.device.slice.slice_mut(at..at + host.len());
            let src = &piece.bytes[host.start - piece.host.start..host.end - piece.host.start];
            self.stream.memcpy_htod(src, &mut dst)?;
        }
        if let (Some(tracer), Some(start)) = (self.tracer.as_deref_mut(), start) {
            let end = self.gpu.timing_event(self.stream)?;
            tracer.marks.push(Mark {
                session: self.session,
                lane: self.lane,
                host: piece.host.clone(),
                gather: (piece.started, piece.finished),
                issued,
                copy: (start, end),
            });
        }
        Ok(())
    }
}

/// A traced piece, its copy's events not yet read.
struct Mark {
    session: usize,
    lane: usize,
    host: std::ops::Range<usize>,
    gather: (Instant, Instant),
    issued: Instant,
    copy: (CudaEvent, CudaEvent),
}

/// The clocks of a traced load: a CUDA event and the host instant it was seen complete, the
/// zero of both time axes (they agree to within the few microseconds an event's completion
/// takes to be seen).
struct Tracer {
    base: CudaEvent,
    t0: Instant,
    marks: Vec<Mark>,
}

impl Tracer {
    fn start(gpu: &Gpu) -> Result<Self, GpuError> {
        for lane in 0..gpu.streams.len() {
            gpu.synchronize(lane)?;
        }
        let base = gpu.timing_event(&gpu.streams[0])?;
        base.synchronize()?;
        Ok(Self {
            base,
            t0: Instant::now(),
            marks: Vec::new(),
        })
    }

    fn finish(self) -> Result<Timeline, GpuError> {
        let wall_us = micros(self.t0, Instant::now());
        let mut pieces = Vec::with_capacity(self.marks.len());
        for mark in self.marks {
            pieces.push(TimelinePiece {
                session: mark.session,
                lane: mark.lane,
                host: mark.host,
                gather_start_us: micros(self.t0, mark.gather.0),
                gather_end_us: micros(self.t0, mark.gather.1),
                issued_us: micros(self.t0, mark.issued),
                copy_start_us: f64::from(self.base.elapsed_ms(&mark.copy.0)?) * 1e3,
                copy_end_us: f64::from(self.base.elapsed_ms(&mark.copy.1)?) * 1e3,
            });
        }
        Ok(Timeline { pieces, wall_us })
    }
}

/// Microseconds from `t0` to `t` (negative when `t` came first: a piece gathered before the
/// trace's zero, which cannot happen, would show as such rather than be hidden).
fn micros(t0: Instant, t: Instant) -> f64 {
    match t.checked_duration_since(t0) {
        Some(d) => d.as_secs_f64() * 1e6,
        None => -(t0.duration_since(t).as_secs_f64() * 1e6),
    }
}

impl Gpu {
    /// An event recorded on `stream` now, with timing on.
    fn timing_event(&self, stream: &Arc<CudaStream>) -> Result<CudaEvent, GpuError> {
        Ok(stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?)
    }
}

fn fits(plan: &TransferPlan, host: usize, device: usize) -> Result<(), PlanError> {
    for chunk in plan.chunks() {
        if chunk.host.end > host {
            return Err(PlanError::HostBounds {
                index: chunk.index,
                end: chunk.host.end,
                len: host,
            });
        }
        let end = chunk.device + chunk.len() as u64;
        if end > device as u64 {
            return Err(PlanError::DeviceBounds {
                index: chunk.index,
                end,
                len: device as u64,
            });
        }
    }
    Ok(())
}

/// Page-locked host memory from the CUDA driver (`cuMemHostAlloc`): copies from it run at the
/// bus's speed and asynchronously. With the `unsafe` feature.
#[cfg(feature = "unsafe")]
#[derive(Debug, Clone)]
pub struct Pinned {
    ctx: Arc<CudaContext>,
}

#[cfg(feature = "unsafe")]
impl Pinned {
    /// Pinned memory of `gpu`'s context.
    #[must_use]
    pub fn new(gpu: &Gpu) -> Self {
        Self {
            ctx: Arc::clone(&gpu.ctx),
        }
    }
}

/// A page-locked buffer.
#[cfg(feature = "unsafe")]
#[derive(Debug)]
pub struct PinnedBuffer(cudarc::driver::PinnedHostSlice<u8>);

#[cfg(feature = "unsafe")]
impl AsRef<[u8]> for PinnedBuffer {
    fn as_ref(&self) -> &[u8] {
        // Copies use sub-slices (plain `[u8]`, untracked), so the slice's own event is never
        // recorded and this does not wait; a driver failure reads as an empty buffer, which
        // a gather reports as not fitting.
        self.0.as_slice().unwrap_or(&[])
    }
}

#[cfg(feature = "unsafe")]
impl AsMut<[u8]> for PinnedBuffer {
    fn as_mut(&mut self) -> &mut [u8] {
        self.0.as_mut_slice().unwrap_or(&mut [])
    }
}

#[cfg(feature = "unsafe")]
impl HostMemory for Pinned {
    type Buffer = PinnedBuffer;

    fn allocate(&self, bytes: usize) -> Result<PinnedBuffer, StagingError> {
        #[expect(unsafe_code, reason = "cudarc's pinned allocation (SAFETY.md: fc-gpu)")]
        // SAFETY: `alloc_pinned_with_flags` is unsafe only because the memory starts
        // uninitialised; it is zeroed below before anything reads it, and `u8` has no invalid
        // bit patterns. Flags 0: cacheable (not write-combined), so the CPU can read back
        // what a device-to-host copy wrote at full speed.
        let slice = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes, 0) };
        let mut slice = slice.map_err(|e| StagingError::Allocation {
            bytes,
            reason: e.to_string(),
        })?;
        if let Ok(bytes) = slice.as_mut_slice() {
            bytes.fill(0);
        }
        Ok(PinnedBuffer(slice))
    }

    fn kind(&self) -> &'static str {
        "pinned"
    }
}
