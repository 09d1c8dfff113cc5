//! fc-gpu's pure-data layer, without a GPU: plans (coalescing, every refusal, and a property
//! test that applying a plan's copies puts every chunk's bytes at its device offset), the
//! staging pool (reuse, best fit, the limit, statistics), gathering from both store kinds
//! (sequential, and the parallel pipelined `Gatherer`), and writing chunks back.

use fc_gpu::{
    GatherConfig, Gatherer, HostMemory, Pageable, PlanError, StagingError, StagingPool,
    TransferPlan, gather_session, gather_session_local, scatter_session,
};
use fc_shard::{EmbeddedRouteMode, EmbeddedStore, PackedSessionWrite};
use proptest::prelude::*;

fn spans(lens: &[usize]) -> Vec<Option<std::ops::Range<usize>>> {
    let mut at = 0;
    lens.iter()
        .map(|&l| {
            let s = at..at + l;
            at += l;
            Some(s)
        })
        .collect()
}

#[test]
fn adjacent_chunks_coalesce_and_scattered_ones_do_not() {
    let host = spans(&[100, 100, 100, 100]);
    // Back to back on the device too: one copy.
    let packed = TransferPlan::new(&host, 400, &[0, 100, 200, 300], 1000, 1).unwrap();
    assert_eq!(packed.copies().len(), 1);
    assert_eq!(packed.copies()[0].chunks, 4);
    assert_eq!(packed.bytes(), 400);
    // Two runs of two.
    let runs = TransferPlan::new(&host, 400, &[0, 100, 500, 600], 1000, 1).unwrap();
    assert_eq!(runs.copies().len(), 2);
    assert_eq!(runs.copies()[1].device, 500);
    // Reversed on the device: nothing is adjacent in both.
    let reversed = TransferPlan::new(&host, 400, &[300, 200, 100, 0], 1000, 1).unwrap();
    assert_eq!(reversed.copies().len(), 4);
    // Aligned packing leaves gaps, so chunks of 100 at alignment 256 do not coalesce.
    let offsets = TransferPlan::packed_offsets(&[100, 100], 10, 256);
    assert_eq!(offsets, [256, 512]);
    let aligned = TransferPlan::new(&host[..2], 200, &offsets, 1024, 256).unwrap();
    assert_eq!(aligned.copies().len(), 2);
    // Empty chunks move nothing and block nothing.
    let with_empty = TransferPlan::new(&spans(&[10, 0, 10]), 20, &[0, 10, 10], 20, 1).unwrap();
    assert_eq!(with_empty.copies().len(), 1);
    assert_eq!(with_empty.chunks().len(), 3);
}

#[test]
fn every_refusal_names_the_chunk() {
    let host = spans(&[64, 64]);
    assert_eq!(
        TransferPlan::new(&host, 128, &[0], 256, 1),
        Err(PlanError::CountMismatch {
            chunks: 2,
            offsets: 1
        })
    );
    assert_eq!(
        TransferPlan::new(&[Some(0..64), None], 64, &[0, 64], 256, 1),
        Err(PlanError::Missing { index: 1 })
    );
    assert_eq!(
        TransferPlan::new(&host, 100, &[0, 64], 256, 1),
        Err(PlanError::HostBounds {
            index: 1,
            end: 128,
            len: 100
        })
    );
    assert_eq!(
        TransferPlan::new(&host, 128, &[0, 200], 256, 1),
        Err(PlanError::DeviceBounds {
            index: 1,
            end: 264,
            len: 256
        })
    );
    assert_eq!(
        TransferPlan::new(&host, 128, &[0, 64], 256, 128),
        Err(PlanError::Misaligned {
            index: 1,
            offset: 64,
            align: 128
        })
    );
    assert_eq!(
        TransferPlan::new(&host, 128, &[0, 32], 256, 1),
        Err(PlanError::Overlap {
            first: 0,
            second: 1
        })
    );
    assert_eq!(
        TransferPlan::new(&host, 128, &[0, 64], 256, 3),
        Err(PlanError::BadAlignment(3))
    );
    // An offset near u64::MAX does not wrap around the bounds check.
    assert!(matches!(
        TransferPlan::new(&host, 128, &[0, u64::MAX - 10], 256, 1),
        Err(PlanError::DeviceBounds { .. })
    ));
    // The same host span loaded to two places is fine.
    let twice = TransferPlan::new(&[Some(0..64), Some(0..64)], 64, &[0, 64], 256, 1).unwrap();
    assert_eq!(twice.bytes(), 128);
}

proptest! {
    /// Applying a plan's copies to a simulated device puts every chunk's bytes at its offset,
    /// whatever the order of the chunks on the device and the gaps between them.
    #[test]
    fn applied_copies_place_every_chunk(
        lens in proptest::collection::vec(0usize..300, 1..24),
        seed in any::<u64>(),
        gaps in proptest::collection::vec(0u64..3, 24),
        align_log in 0u32..6,
    ) {
        let align = 1u64 << align_log;
        let host_spans = spans(&lens);
        let total: usize = lens.iter().sum();
        let host: Vec<u8> = (0..total).map(|i| (i * 7 + 3) as u8).collect();
        // A permutation of the chunks on the device, with gaps of 0..3 alignment units.
        let mut order: Vec<usize> = (0..lens.len()).collect();
        let mut state = seed | 1;
        for i in (1..order.len()).rev() {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let mut offsets = vec![0u64; lens.len()];
        let mut at = 0u64;
        for (n, &i) in order.iter().enumerate() {
            at = fc_gpu::align_up(at + gaps[n] * align, align);
            offsets[i] = at;
            at += lens[i] as u64;
        }
        let device_len = at + 64;
        let plan = TransferPlan::new(&host_spans, total, &offsets, device_len, align).unwrap();
        let mut device = vec![0u8; device_len as usize];
        for copy in plan.copies() {
            let d = copy.device as usize;
            device[d..d + copy.len()].copy_from_slice(&host[copy.host.clone()]);
        }
        for (i, span) in host_spans.iter().enumerate() {
            let span = span.clone().unwrap();
            let d = offsets[i] as usize;
            prop_assert_eq!(&device[d..d + span.len()], &host[span]);
        }
        prop_assert_eq!(plan.bytes(), total);
        prop_assert!(plan.copies().len() <= lens.iter().filter(|&&l| l > 0).count());
    }
}

#[test]
fn the_pool_reuses_best_fit_and_holds_its_limit() {
    let pool = StagingPool::new(Pageable, 256 << 10);
    {
        let a = pool.acquire(1000).unwrap();
        assert_eq!(a.len(), 1000);
        assert_eq!(a.capacity(), 64 << 10, "rounded up to the granule");
        let b = pool.acquire(100 << 10).unwrap();
        assert_eq!(b.capacity(), 128 << 10);
        let stats = pool.stats();
        assert_eq!(
            (stats.allocated_bytes, stats.in_use_bytes),
            (192 << 10, 192 << 10)
        );
        // Past the limit while both are out.
        assert!(matches!(
            pool.acquire(100 << 10),
            Err(StagingError::Exhausted { .. })
        ));
    }
    // Both back: the small request takes the small buffer (best fit), the large the large.
    let small = pool.acquire(10).unwrap();
    assert_eq!(small.capacity(), 64 << 10);
    let large = pool.acquire(70 << 10).unwrap();
    assert_eq!(large.capacity(), 128 << 10);
    let stats = pool.stats();
    assert_eq!(stats.allocations, 2);
    assert_eq!(stats.reuses, 2);
    assert_eq!(stats.exhausted, 1);
    assert_eq!(stats.buffers, 2);
    drop((small, large));
    // A request larger than any free buffer drops free ones to make room under the limit.
    let big = pool.acquire(200 << 10).unwrap();
    assert_eq!(big.capacity(), 256 << 10);
    assert_eq!(pool.stats().allocated_bytes, 256 << 10);
    assert_eq!(pool.memory().kind(), "pageable");
}

fn session_store() -> (EmbeddedStore, Vec<String>) {
    let store = EmbeddedStore::with_route_mode(8, EmbeddedRouteMode::session_prefix());
    let keys: Vec<String> = (0..5).map(|l| format!("session:9:layer:{l}")).collect();
    let mut write = PackedSessionWrite::with_capacity(b"session:9".to_vec(), 5, 5 * 1024);
    for (l, key) in keys.iter().enumerate() {
        write.push_record(key.as_bytes(), &vec![l as u8 + 1; 1024 + l]);
    }
    store.batch_set_session_packed_no_ttl(write);
    (store, keys)
}

#[test]
fn gathering_copies_each_value_once_and_reports_what_it_needs() {
    let (store, keys) = session_store();
    let needed: usize = (0..5).map(|l| 1024 + l).sum();
    let mut buffer = vec![0u8; needed];
    let gathered = gather_session(&store, b"session:9", &keys, &mut buffer);
    assert!(gathered.complete());
    assert_eq!(gathered.bytes, needed);
    for (l, span) in gathered.spans.iter().enumerate() {
        let span = span.clone().unwrap();
        assert_eq!(span.len(), 1024 + l);
        assert!(buffer[span].iter().all(|&b| b == l as u8 + 1));
    }
    // Too small: what fits is placed, and the size needed is reported.
    let mut small = vec![0u8; 3000];
    let partial = gather_session(&store, b"session:9", &keys, &mut small);
    assert!(!partial.fits());
    assert_eq!(partial.needed, needed);
    assert_eq!(partial.hits, 5);
    // A missing key.
    let mut with_missing = keys.clone();
    with_missing.push("session:9:layer:99".into());
    let mut buffer = vec![0u8; needed];
    let gathered = gather_session(&store, b"session:9", &with_missing, &mut buffer);
    assert!(gathered.fits() && !gathered.complete());
    assert_eq!(gathered.spans[5], None);
    // The owner-local store gathers the same way.
    let mut locals = store.into_local_stores(1);
    let mut buffer = vec![0u8; needed];
    let local = gather_session_local(&mut locals[0], b"session:9", &keys, &mut buffer);
    assert!(local.complete());
}

#[test]
fn chunks_written_back_read_back() {
    let store = EmbeddedStore::with_route_mode(8, EmbeddedRouteMode::session_prefix());
    let keys = ["s:1:a", "s:1:b", "s:1:c"];
    let src: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    let spans = [0..100, 100..250, 250..300];
    scatter_session(&store, b"s:1", &keys, &src, &spans).unwrap();
    for (key, span) in keys.iter().zip(&spans) {
        assert_eq!(store.get(key.as_bytes()).unwrap(), &src[span.clone()]);
    }
    // A bounded store refuses what does not fit, as an error.
    let tiny = EmbeddedStore::builder(1)
        .max_memory(1024)
        .route_mode(EmbeddedRouteMode::session_prefix())
        .build();
    let big = vec![0u8; 4096];
    let whole = 0..4096;
    assert!(
        scatter_session(
            &tiny,
            b"s:1",
            &["s:1:x"],
            &big,
            std::slice::from_ref(&whole)
        )
        .is_err()
    );
}

proptest! {
    /// A parallel store (entries built on the pool, moved into the store) leaves the store
    /// as the sequential one does, round after round of overwrites of other sizes (so
    /// kept allocations are reused, and entries cross the 16 KiB line both ways), and keeps
    /// no more recycled memory than it may.
    #[test]
    fn a_parallel_store_equals_the_sequential_one(
        rounds in proptest::collection::vec(
            proptest::collection::vec(0usize..100_000, 6), 1..4),
        threads in 0usize..4,
        recycle_kib in 0usize..400,
    ) {
        let gatherer = Gatherer::new(GatherConfig {
            threads,
            piece_bytes: 64 << 10,
            recycle_bytes: recycle_kib << 10,
        })
        .unwrap();
        let sequential = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::session_prefix());
        let parallel = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::session_prefix());
        let keys: Vec<String> = (0..6).map(|i| format!("s:1:{i}")).collect();
        for (round, lens) in rounds.iter().enumerate() {
            let mut spans = Vec::new();
            let mut at = 0;
            for &len in lens {
                spans.push(at..at + len);
                at += len;
            }
            let src: Vec<u8> = (0..at).map(|b| (b * 13 + round * 101) as u8).collect();
            scatter_session(&sequential, b"s:1", &keys, &src, &spans).unwrap();
            gatherer.scatter_session(&parallel, b"s:1", &keys, &src, &spans).unwrap();
            prop_assert_eq!(
                parallel.batch_get_session(b"s:1", &keys),
                sequential.batch_get_session(b"s:1", &keys)
            );
            let (p, s) = (parallel.stats_snapshot().total(), sequential.stats_snapshot().total());
            prop_assert_eq!((p.keys, p.stored_bytes, p.used_memory), (s.keys, s.stored_bytes, s.used_memory));
            prop_assert!(gatherer.recycled_bytes() <= recycle_kib << 10);
        }
    }
}

proptest! {
    /// A parallel gather writes what the sequential one writes, whatever the threads, piece
    /// size and value sizes (a piece may end inside a value); its pieces partition the
    /// buffer, each handed over once with its own bytes; and the plan's copies cut to those
    /// pieces (`copies_in`) put every chunk at its device offset, as the whole copies do.
    #[test]
    fn a_parallel_gather_equals_the_sequential_one(
        lens in proptest::collection::vec(0usize..200_000, 1..12),
        missing in proptest::collection::vec(any::<bool>(), 12),
        threads in 0usize..4,
        piece_kib in 64usize..300,
    ) {
        let store = EmbeddedStore::with_route_mode(4, EmbeddedRouteMode::session_prefix());
        let keys: Vec<String> = (0..lens.len()).map(|i| format!("s:1:{i}")).collect();
        for (i, (key, &len)) in keys.iter().zip(&lens).enumerate() {
            if !missing[i] || i == 0 {
                let value: Vec<u8> = (0..len).map(|b| (b * 31 + i * 7) as u8).collect();
                store.set(key.as_bytes(), value, None);
            }
        }
        let total: usize = lens.iter().sum();
        let mut expected = vec![0u8; total];
        let sequential = gather_session(&store, b"s:1", &keys, &mut expected);
        let gatherer = Gatherer::new(GatherConfig { threads, piece_bytes: piece_kib << 10, ..GatherConfig::default() }).unwrap();
        let mut dst = vec![0u8; total];
        let mut pieces = Vec::new();
        let gathered = gatherer.gather_session(&store, b"s:1", &keys, &mut dst, |piece| {
            assert_eq!(piece.bytes.len(), piece.host.len());
            assert!(piece.finished >= piece.started);
            pieces.push((piece.host.clone(), piece.bytes.to_vec()));
        });
        prop_assert_eq!(&gathered.spans, &sequential.spans);
        prop_assert_eq!((gathered.bytes, gathered.hits), (sequential.bytes, sequential.hits));
        prop_assert_eq!(&dst[..gathered.bytes], &expected[..sequential.bytes]);
        pieces.sort_by_key(|(host, _)| host.start);
        let mut at = 0;
        for (host, bytes) in &pieces {
            prop_assert_eq!(host.start, at);
            prop_assert!(host.len() <= (piece_kib << 10).max(fc_gpu::MIN_PIECE));
            prop_assert_eq!(&bytes[..], &dst[host.clone()]);
            at = host.end;
        }
        prop_assert_eq!(at, gathered.bytes);
        // The found chunks, packed on the device at 256: pieces' copies place each of them.
        let found: Vec<_> = gathered.spans.iter().flatten().cloned().map(Some).collect();
        let lens: Vec<usize> = found.iter().flatten().map(std::ops::Range::len).collect();
        let offsets = TransferPlan::packed_offsets(&lens, 0, 256);
        let device_len = offsets.last().map_or(0, |&o| o + 256 + lens.last().map_or(0, |&l| l as u64));
        let plan = TransferPlan::new(&found, gathered.bytes, &offsets, device_len, 256).unwrap();
        let mut device = vec![0u8; device_len as usize];
        let mut moved = 0;
        for (host, _) in &pieces {
            for (span, at) in plan.copies_in(host.clone()) {
                prop_assert!(span.start >= host.start && span.end <= host.end);
                let at = at as usize;
                device[at..at + span.len()].copy_from_slice(&dst[span.clone()]);
                moved += span.len();
            }
        }
        prop_assert_eq!(moved, plan.bytes());
        for (span, &offset) in found.iter().flatten().zip(&offsets) {
            let o = offset as usize;
            prop_assert_eq!(&device[o..o + span.len()], &dst[span.clone()]);
        }
    }
}

#[test]
fn a_parallel_gather_copies_nothing_when_the_buffer_is_small() {
    let (store, keys) = session_store();
    let gatherer = Gatherer::new(GatherConfig {
        threads: 2,
        piece_bytes: 64 << 10,
        ..GatherConfig::default()
    })
    .unwrap();
    let needed: usize = (0..5).map(|l| 1024 + l).sum();
    let mut small = vec![7u8; needed - 1];
    let mut calls = 0;
    let gathered = gatherer.gather_session(&store, b"session:9", &keys, &mut small, |_| calls += 1);
    assert!(!gathered.fits());
    assert_eq!(gathered.needed, needed);
    assert_eq!(calls, 0);
    assert!(small.iter().all(|&b| b == 7), "nothing was written");
    let mut fits = vec![0u8; needed];
    let mut missing_keys = keys.clone();
    missing_keys.push("session:9:layer:99".into());
    let gathered = gatherer.gather_session(&store, b"session:9", &missing_keys, &mut fits, |_| {});
    assert!(gathered.fits() && !gathered.complete());
    assert_eq!(gathered.hits, 5);
    assert_eq!(gathered.spans[5], None);
    assert_eq!(&fits[..1024], &[1u8; 1024][..]);
}
