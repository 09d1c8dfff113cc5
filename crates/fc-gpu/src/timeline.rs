//! The timeline of a traced load (`cuda::Gpu::load_sessions_traced`): for every piece of every
//! session, when a gather thread copied it out of the store and when the GPU copied it to the
//! device, on one time axis, and how much of the two overlapped. Pure data: the arithmetic is
//! tested without a GPU.

use std::ops::Range;

/// One piece of a traced load. Times are microseconds from the start of the trace: the
/// gather's from the host's clock, the copy's from CUDA events.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelinePiece {
    /// The session's index in the load.
    pub session: usize,
    /// The stream (and staging buffer) it went through.
    pub lane: usize,
    /// Its bytes in the staging buffer.
    pub host: Range<usize>,
    /// When a gather thread began copying it out of the store.
    pub gather_start_us: f64,
    /// When that copy ended.
    pub gather_end_us: f64,
    /// When its GPU copy was issued.
    pub issued_us: f64,
    /// When the GPU began copying it (an event recorded before its copies).
    pub copy_start_us: f64,
    /// When the GPU finished (an event recorded after them).
    pub copy_end_us: f64,
}

/// A traced load.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timeline {
    /// Every piece, in the order its copy was issued.
    pub pieces: Vec<TimelinePiece>,
    /// The whole call, in microseconds.
    pub wall_us: f64,
}

/// The total length of the union of `intervals`.
fn union_len(intervals: Vec<(f64, f64)>) -> f64 {
    union(intervals).iter().map(|(a, b)| b - a).sum()
}

/// The union of `intervals` as sorted disjoint intervals.
fn union(mut intervals: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    intervals.retain(|(a, b)| b > a);
    intervals.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in intervals {
        match out.last_mut() {
            Some((_, end)) if a <= *end => *end = end.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl Timeline {
    fn gathers(&self) -> Vec<(f64, f64)> {
        self.pieces
            .iter()
            .map(|p| (p.gather_start_us, p.gather_end_us))
            .collect()
    }

    fn copies(&self) -> Vec<(f64, f64)> {
        self.pieces
            .iter()
            .map(|p| (p.copy_start_us, p.copy_end_us))
            .collect()
    }

    /// Microseconds during which at least one gather thread was copying.
    #[must_use]
    pub fn gather_busy_us(&self) -> f64 {
        union_len(self.gathers())
    }

    /// Microseconds during which the GPU was copying.
    #[must_use]
    pub fn copy_busy_us(&self) -> f64 {
        union_len(self.copies())
    }

    /// Microseconds during which both were: the gather hidden behind copies.
    #[must_use]
    pub fn overlap_us(&self) -> f64 {
        let copies = union(self.copies());
        union(self.gathers())
            .iter()
            .map(|&(a, b)| {
                copies
                    .iter()
                    .map(|&(c, d)| (b.min(d) - a.max(c)).max(0.0))
                    .sum::<f64>()
            })
            .sum()
    }

    /// The pieces as CSV (a header, then one row per piece), for a plot.
    #[must_use]
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "session,lane,host_start,bytes,gather_start_us,gather_end_us,issued_us,copy_start_us,copy_end_us\n",
        );
        for p in &self.pieces {
            out.push_str(&format!(
                "{},{},{},{},{:.1},{:.1},{:.1},{:.1},{:.1}\n",
                p.session,
                p.lane,
                p.host.start,
                p.host.len(),
                p.gather_start_us,
                p.gather_end_us,
                p.issued_us,
                p.copy_start_us,
                p.copy_end_us
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(gather: (f64, f64), copy: (f64, f64)) -> TimelinePiece {
        TimelinePiece {
            session: 0,
            lane: 0,
            host: 0..10,
            gather_start_us: gather.0,
            gather_end_us: gather.1,
            issued_us: gather.1,
            copy_start_us: copy.0,
            copy_end_us: copy.1,
        }
    }

    #[test]
    fn busy_times_are_unions_and_overlap_is_their_intersection() {
        // Two threads gather pieces 0-10 and 5-15, 15-25; the GPU copies 10-20, 20-30.
        let t = Timeline {
            pieces: vec![
                piece((0.0, 10.0), (10.0, 20.0)),
                piece((5.0, 15.0), (20.0, 30.0)),
                piece((15.0, 25.0), (30.0, 40.0)),
            ],
            wall_us: 40.0,
        };
        assert!((t.gather_busy_us() - 25.0).abs() < 1e-9);
        assert!((t.copy_busy_us() - 30.0).abs() < 1e-9);
        // Gathering ran 0-25, copying 10-40: both 10-25.
        assert!((t.overlap_us() - 15.0).abs() < 1e-9);
        let csv = t.to_csv();
        assert_eq!(csv.lines().count(), 4);
        assert!(
            csv.lines()
                .nth(1)
                .unwrap()
                .starts_with("0,0,0,10,0.0,10.0,10.0,10.0,20.0")
        );
    }

    #[test]
    fn nothing_overlaps_when_the_gather_ends_first() {
        let t = Timeline {
            pieces: vec![
                piece((0.0, 10.0), (12.0, 20.0)),
                piece((0.0, 0.0), (20.0, 20.0)),
            ],
            wall_us: 20.0,
        };
        assert_eq!(t.overlap_us(), 0.0);
        assert!((t.copy_busy_us() - 8.0).abs() < 1e-9);
    }
}
