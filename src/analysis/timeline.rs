//! A down-sampled memory timeline per process, for pictures (HTML, PNG,
//! Perfetto, the dashboard): device used, pool reserved, out-of-pool bytes by
//! source, local-memory growth, phase bands and event markers. Data only:
//! `timeline_build.rs` records and down-samples it, at most [`MAX_POINTS`]
//! points per series and [`MAX_MARKERS_PER_KIND`] markers per kind.

use super::phases::Phase;
use serde::Serialize;

/// Most points one series keeps (four per bucket).
pub const MAX_POINTS: usize = 2000;
/// Most markers of one kind before neighbours in a bucket are merged.
pub const MAX_MARKERS_PER_KIND: usize = 400;

/// One (seconds since process start, bytes) point of a step series: the value
/// holds until the next point.
pub type Point = (f64, u64);

/// What a marker on the timeline stands for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerKind {
    /// Out-of-pool allocations of one source (merged within a bucket).
    #[default]
    Allocation,
    /// A launch that grew the local-memory reservation.
    LocalMemory,
    /// An NCCL communicator coming up.
    NcclComm,
    /// A Triton autotune (kernel, key).
    Autotune,
    /// A JIT compile.
    Compile,
    /// A failed device request (out of memory).
    Oom,
}

impl MarkerKind {
    /// Every kind, in drawing order.
    pub const ALL: [MarkerKind; 6] = [
        MarkerKind::Allocation,
        MarkerKind::LocalMemory,
        MarkerKind::NcclComm,
        MarkerKind::Autotune,
        MarkerKind::Compile,
        MarkerKind::Oom,
    ];
}

/// One event on the timeline, with the data a renderer shows as its detail.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Marker {
    pub t_s: f64,
    /// End of the event's window (communicator init, autotune, compile).
    pub end_s: Option<f64>,
    pub kind: MarkerKind,
    pub phase: Option<Phase>,
    pub step: Option<u32>,
    /// Bytes it took (all merged events together).
    pub bytes: u64,
    /// Events merged into this marker (1 for a single event).
    pub count: u32,
    /// The source name ("nccl", "cublas", "local memory", ...).
    pub source: String,
    /// The kernel, communicator, API call or request.
    pub what: String,
    /// Autotune key or communicator id.
    pub key: Option<String>,
    /// Autotune candidate (local-memory growth) or chosen config (autotune).
    pub config: Option<String>,
    /// Calling libraries (allocations).
    pub libraries: Vec<String>,
    /// The request failed.
    pub failed: bool,
}

/// A phase's extent on the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseBand {
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
}

/// Live out-of-pool bytes of one source over time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceSeries {
    pub source: String,
    pub points: Vec<Point>,
}

/// The down-sampled timeline of one process.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timeline {
    pub start_s: f64,
    pub end_s: f64,
    /// Device memory this process holds (the account's memory source).
    pub device_used: Vec<Point>,
    pub pool_reserved: Vec<Point>,
    /// Out-of-pool bytes by source, largest peak first.
    pub out_of_pool: Vec<SourceSeries>,
    /// Cumulative local-memory growth (never given back).
    pub local_memory: Vec<Point>,
    /// When the CUDA context came up and what it held then.
    pub context: Option<Point>,
    pub phases: Vec<PhaseBand>,
    /// Markers in time order.
    pub markers: Vec<Marker>,
    /// Events merged into other markers to keep the count bounded.
    pub merged_markers: u64,
}

impl Timeline {
    /// Whether there is anything to draw.
    pub fn is_empty(&self) -> bool {
        self.device_used.is_empty() && self.pool_reserved.is_empty() && self.markers.is_empty()
    }

    /// The band of one phase.
    pub fn phase(&self, p: Phase) -> Option<&PhaseBand> {
        self.phases.iter().find(|b| b.phase == p)
    }

    /// Highest value of every drawn series (for axis ranges).
    pub fn max_bytes(&self) -> u64 {
        let peak = |s: &[Point]| s.iter().map(|p| p.1).max().unwrap_or(0);
        let stacked: u64 = peak(&self.pool_reserved)
            + self
                .out_of_pool
                .iter()
                .map(|s| peak(&s.points))
                .sum::<u64>()
            + peak(&self.local_memory)
            + self.context.map_or(0, |c| c.1);
        stacked.max(peak(&self.device_used))
    }
}

/// The value of a step series at `t` (0 before its first point).
pub fn value_at(points: &[Point], t: f64) -> u64 {
    let i = points.partition_point(|p| p.0 <= t);
    if i == 0 { 0 } else { points[i - 1].1 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_series_values_hold_until_the_next_point() {
        let pts = vec![(1.0, 10), (2.0, 30), (3.0, 5)];
        assert_eq!(value_at(&pts, 0.5), 0);
        assert_eq!(value_at(&pts, 2.5), 30);
        assert_eq!(value_at(&pts, 9.0), 5);
    }
}
