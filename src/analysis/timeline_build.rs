//! Recording and down-sampling the timeline ([`Timeline`]) of one process.
//!
//! The series are recorded while the memory replay walks the records (no
//! second pass over the files) and down-sampled on the fly into buckets that
//! keep each bucket's first, lowest, highest and last value, so peaks survive
//! and a process with millions of events still yields at most
//! [`MAX_POINTS`] points per series. Buckets are spread over the phases
//! (step 1 gets the most), so zooming into step 1 of an hour-long run still
//! shows detail.

use super::account::{
    AutotuneAccount, CommAccount, CompileEvent, FailedRequest, Forensic, LocalMemoryEvent,
};
use super::device::{DeviceView, Series};
use super::phases::{Boundaries, Phase};
use super::sources::SourceName;
use super::timeline::{
    MAX_MARKERS_PER_KIND, MAX_POINTS, Marker, MarkerKind, PhaseBand, Point, SourceSeries, Timeline,
};
use crate::analysis::phases::secs;
use std::collections::BTreeMap;

/// Buckets per series: first, min, max and last of each survive.
const BUCKETS: usize = MAX_POINTS / 4;

/// Bucket edges over a process's life, spread over its phases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Grid {
    edges: Vec<u64>,
}

impl Grid {
    /// Buckets for the phases of `bounds`: step 1 gets the most, then setup,
    /// then the steady steps, then teardown.
    pub fn new(bounds: &Boundaries) -> Grid {
        let end = bounds.end.max(bounds.start + 1);
        let mut spans: Vec<(u64, u64, usize)> = Vec::new();
        match (bounds.step1_begin, bounds.step_ends.first()) {
            (Some(b), Some(&e1)) => {
                let last = *bounds.step_ends.last().unwrap_or(&e1);
                spans.push((bounds.start, b, 150));
                spans.push((b, e1, 200));
                spans.push((e1, last, 100));
                spans.push((last, end, 50));
            }
            (Some(b), None) => {
                spans.push((bounds.start, b, 200));
                spans.push((b, end, 300));
            }
            _ => spans.push((bounds.start, end, BUCKETS)),
        }
        let mut edges = Vec::with_capacity(BUCKETS + 1);
        for (a, b, n) in spans {
            if b <= a {
                continue;
            }
            let width = ((b - a) / n as u64).max(1);
            let mut t = a;
            while t < b {
                if edges.last().is_none_or(|&l| t > l) {
                    edges.push(t);
                }
                t = t.saturating_add(width);
            }
        }
        if edges.is_empty() {
            edges.push(bounds.start);
        }
        Grid { edges }
    }

    /// The bucket `t` falls in (times before the start go to the first).
    pub fn bucket(&self, t: u64) -> usize {
        self.edges.partition_point(|&e| e <= t).saturating_sub(1)
    }
}

#[derive(Debug, Clone, Copy)]
struct Acc {
    bucket: usize,
    first: (u64, u64),
    min: (u64, u64),
    max: (u64, u64),
    last: (u64, u64),
}

/// Keeps first, min, max and last of each bucket of a step series.
#[derive(Debug, Clone, Default)]
pub struct Downsampler {
    points: Vec<(u64, u64)>,
    cur: Option<Acc>,
}

impl Downsampler {
    /// Adds a value in force from `t` on; times must not decrease.
    pub fn push(&mut self, bucket: usize, t: u64, v: u64) {
        match &mut self.cur {
            Some(a) if a.bucket == bucket => {
                if v < a.min.1 {
                    a.min = (t, v);
                }
                if v > a.max.1 {
                    a.max = (t, v);
                }
                a.last = (t, v);
            }
            _ => {
                self.flush();
                self.cur = Some(Acc {
                    bucket,
                    first: (t, v),
                    min: (t, v),
                    max: (t, v),
                    last: (t, v),
                });
            }
        }
    }

    fn flush(&mut self) {
        if let Some(a) = self.cur.take() {
            let mut pts = [a.first, a.min, a.max, a.last];
            pts.sort_by_key(|p| p.0);
            for p in pts {
                if self.points.last() != Some(&p) {
                    self.points.push(p);
                }
            }
        }
    }

    /// The kept points, in seconds since `start`.
    pub fn finish(mut self, start: u64) -> Vec<Point> {
        self.flush();
        self.points
            .into_iter()
            .map(|(t, v)| (secs(t, start), v))
            .collect()
    }
}

/// Out-of-pool allocations of one source merged within one bucket.
#[derive(Debug, Clone)]
struct AllocAcc {
    source: SourceName,
    t: u64,
    bytes: u64,
    count: u32,
    what: String,
    libraries: Vec<String>,
}

/// Records the replay's state as it changes (called from the replay loop).
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    grid: Grid,
    pool: Downsampler,
    last_pool: u64,
    oop: BTreeMap<SourceName, (Downsampler, u64)>,
    local: Downsampler,
    last_local: u64,
    last_oop_total: u64,
    /// The bucket of the last event (events arrive in time order).
    cursor: usize,
    /// Allocation markers of finished buckets, and of the current one.
    allocations: Vec<AllocAcc>,
    open_allocations: Vec<AllocAcc>,
    open_bucket: usize,
}

impl Recorder {
    /// A recorder with buckets over the process's phases.
    pub fn new(bounds: &Boundaries) -> Recorder {
        Recorder {
            grid: Grid::new(bounds),
            ..Default::default()
        }
    }

    /// The bucket of `t`: found by stepping forward from the last one
    /// (events come in time order), by search otherwise.
    fn bucket(&mut self, t: u64) -> usize {
        let edges = &self.grid.edges;
        let c = self.cursor;
        if c < edges.len() && edges[c] <= t {
            let mut i = c;
            while i + 1 < edges.len() && edges[i + 1] <= t && i < c + 8 {
                i += 1;
            }
            if i + 1 >= edges.len() || edges[i + 1] > t {
                self.cursor = i;
                return i;
            }
        }
        self.cursor = self.grid.bucket(t);
        self.cursor
    }

    /// Notes the replay's running totals after an event at `t` (PyTorch's
    /// pool, local-memory growth, live out-of-pool bytes by source); only what
    /// changed is recorded.
    pub fn observe(
        &mut self,
        t: u64,
        pool: u64,
        local_growth: u64,
        oop: &BTreeMap<SourceName, u64>,
    ) {
        let bucket = self.bucket(t);
        if pool != self.last_pool {
            self.last_pool = pool;
            self.pool.push(bucket, t, pool);
        }
        if local_growth != self.last_local {
            self.last_local = local_growth;
            self.local.push(bucket, t, local_growth);
        }
        // One event changes at most one source: when the total and the
        // number of sources are unchanged, no source changed.
        let total: u64 = oop.values().sum();
        if total == self.last_oop_total && oop.len() == self.oop.len() {
            return;
        }
        self.last_oop_total = total;
        for (source, &bytes) in oop {
            match self.oop.get_mut(source) {
                Some((d, last)) if *last != bytes => {
                    *last = bytes;
                    d.push(bucket, t, bytes);
                }
                Some(_) => {}
                None => {
                    let mut d = Downsampler::default();
                    d.push(bucket, t, bytes);
                    self.oop.insert(source.clone(), (d, bytes));
                }
            }
        }
    }

    /// Notes an out-of-pool allocation (merged with the same source's others
    /// in its bucket).
    pub fn allocation(
        &mut self,
        t: u64,
        source: &SourceName,
        library: &str,
        api: &str,
        bytes: u64,
    ) {
        let bucket = self.bucket(t);
        if bucket != self.open_bucket {
            self.allocations.append(&mut self.open_allocations);
            self.open_bucket = bucket;
        }
        let i = match self
            .open_allocations
            .iter()
            .position(|a| std::sync::Arc::ptr_eq(&a.source, source) || a.source == *source)
        {
            Some(i) => i,
            None => {
                self.open_allocations.push(AllocAcc {
                    source: source.clone(),
                    t,
                    bytes: 0,
                    count: 0,
                    what: api.to_string(),
                    libraries: Vec::new(),
                });
                self.open_allocations.len() - 1
            }
        };
        let acc = &mut self.open_allocations[i];
        acc.bytes += bytes;
        acc.count += 1;
        if acc.what != api && !acc.what.is_empty() {
            acc.what.clear();
        }
        if !library.is_empty() && !acc.libraries.iter().any(|l| l == library) {
            acc.libraries.push(library.to_string());
        }
    }
}

/// What the rest of the process analysis found, for the timeline's markers.
pub struct Found<'a> {
    pub context: Option<(u64, u64)>,
    pub local: &'a [LocalMemoryEvent],
    pub nccl: &'a [CommAccount],
    pub autotune: &'a [AutotuneAccount],
    pub compiles: &'a [CompileEvent],
    pub forensics: &'a [Forensic],
}

/// Finishes the timeline: series from the recorder and the device view,
/// phase bands, and markers (bounded per kind).
pub fn build(
    mut rec: Recorder,
    device: &DeviceView,
    bounds: &Boundaries,
    found: Found,
) -> Timeline {
    let start = bounds.start;
    rec.allocations.append(&mut rec.open_allocations);
    let device_used = downsample(&device.used, &rec.grid, start, bounds.end);
    let out_of_pool = out_of_pool_series(std::mem::take(&mut rec.oop), start);
    let mut markers: Vec<Marker> = std::mem::take(&mut rec.allocations)
        .into_iter()
        .map(|a| allocation_marker(a, bounds))
        .collect();
    markers.extend(found.local.iter().map(local_memory_marker));
    markers.extend(found.nccl.iter().filter_map(communicator_marker));
    markers.extend(found.autotune.iter().map(autotune_marker));
    markers.extend(found.compiles.iter().map(compile_marker));
    markers.extend(found.forensics.iter().map(oom_marker));
    let (markers, merged_markers) = bound_markers(markers, &rec.grid, start);

    Timeline {
        start_s: 0.0,
        end_s: secs(bounds.end, start),
        device_used,
        pool_reserved: rec.pool.finish(start),
        out_of_pool,
        local_memory: rec.local.finish(start),
        context: found.context.map(|(t, b)| (secs(t, start), b)),
        phases: phase_bands(bounds),
        markers,
        merged_markers,
    }
}

/// Each source's out-of-pool series that ever held bytes, largest first.
fn out_of_pool_series(
    oop: BTreeMap<SourceName, (Downsampler, u64)>,
    start: u64,
) -> Vec<SourceSeries> {
    let mut series: Vec<SourceSeries> = oop
        .into_iter()
        .map(|(s, (d, _))| SourceSeries {
            source: s.to_string(),
            points: d.finish(start),
        })
        .filter(|s| s.points.iter().any(|p| p.1 > 0))
        .collect();
    series.sort_by_key(|s| std::cmp::Reverse(s.points.iter().map(|p| p.1).max()));
    series
}

fn phase_bands(bounds: &Boundaries) -> Vec<PhaseBand> {
    Phase::ALL
        .iter()
        .filter_map(|p| {
            bounds.window(*p).map(|(a, b)| PhaseBand {
                phase: *p,
                start_s: secs(a, bounds.start),
                end_s: secs(b, bounds.start),
            })
        })
        .collect()
}

fn allocation_marker(a: AllocAcc, bounds: &Boundaries) -> Marker {
    Marker {
        t_s: secs(a.t, bounds.start),
        kind: MarkerKind::Allocation,
        phase: Some(bounds.phase_of(a.t)),
        step: bounds.step_of(a.t),
        bytes: a.bytes,
        count: a.count,
        source: a.source.to_string(),
        what: a.what,
        libraries: a.libraries,
        ..Default::default()
    }
}

fn local_memory_marker(l: &LocalMemoryEvent) -> Marker {
    Marker {
        t_s: l.t_s,
        kind: MarkerKind::LocalMemory,
        phase: Some(l.phase),
        step: l.step,
        bytes: l.device_growth,
        count: 1,
        source: "local memory".into(),
        what: l.kernel.clone(),
        config: l.autotune_config.clone(),
        failed: l.failed,
        ..Default::default()
    }
}

fn communicator_marker(c: &CommAccount) -> Option<Marker> {
    let t = c.start_s?;
    Some(Marker {
        t_s: t,
        end_s: c.init_seconds.map(|d| t + d),
        kind: MarkerKind::NcclComm,
        phase: c.phase,
        step: c.step,
        bytes: c.bytes + c.inferred_bytes,
        count: 1,
        source: "nccl".into(),
        what: c.comm.clone(),
        key: c.comm_id.clone(),
        ..Default::default()
    })
}

fn autotune_marker(a: &AutotuneAccount) -> Marker {
    Marker {
        t_s: a.start_s,
        end_s: Some(a.start_s + a.seconds),
        kind: MarkerKind::Autotune,
        phase: Some(a.phase),
        step: a.step,
        bytes: a.local_memory_growth + a.out_of_pool_bytes,
        count: 1,
        source: "triton".into(),
        what: a.kernel.clone(),
        key: Some(a.key.clone()),
        config: Some(a.chosen.clone()).filter(|c| !c.is_empty()),
        ..Default::default()
    }
}

fn compile_marker(c: &CompileEvent) -> Marker {
    Marker {
        t_s: c.start_s,
        end_s: Some(c.start_s + c.seconds),
        kind: MarkerKind::Compile,
        phase: Some(c.phase),
        step: c.step,
        count: 1,
        source: "compile".into(),
        what: c.kernel.clone(),
        ..Default::default()
    }
}

fn oom_marker(f: &Forensic) -> Marker {
    Marker {
        t_s: f.t_s,
        kind: MarkerKind::Oom,
        phase: Some(f.phase),
        step: f.step,
        bytes: f.bytes,
        count: 1,
        source: f.source.clone(),
        what: match &f.request {
            FailedRequest::Allocation { api } => api.clone(),
            FailedRequest::LocalMemoryGrowth { kernel } => kernel.clone(),
            FailedRequest::NotSeen => String::new(),
        },
        libraries: vec![f.library.clone()]
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect(),
        failed: true,
        ..Default::default()
    }
}

/// Down-samples a full-resolution series onto the grid, clipped to the
/// process's life [start, end] (the value in force at the start comes first).
fn downsample(s: &Series, grid: &Grid, start: u64, end: u64) -> Vec<Point> {
    let mut d = Downsampler::default();
    let first = s.points.partition_point(|p| p.0 < start);
    let upto = s.points.partition_point(|p| p.0 <= end);
    let mut last = None;
    if first > 0 {
        let v = s.points[first - 1].1;
        d.push(0, start, v);
        last = Some(v);
    }
    for &(t, v) in &s.points[first..upto.max(first)] {
        if last != Some(v) {
            d.push(grid.bucket(t), t, v);
            last = Some(v);
        }
    }
    d.finish(start)
}

/// Sorts markers by time and, for a kind with more than
/// [`MAX_MARKERS_PER_KIND`], merges its markers that share a bucket (OOMs are
/// never merged). Returns the markers and how many events were merged away.
fn bound_markers(mut markers: Vec<Marker>, grid: &Grid, start: u64) -> (Vec<Marker>, u64) {
    markers.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let mut merged = 0u64;
    for kind in MarkerKind::ALL {
        let n = markers.iter().filter(|m| m.kind == kind).count();
        if n <= MAX_MARKERS_PER_KIND || kind == MarkerKind::Oom {
            continue;
        }
        let bucket_of = |m: &Marker| grid.bucket(start + (m.t_s * 1e9) as u64);
        let mut kept: Vec<Marker> = Vec::with_capacity(markers.len());
        let mut open: BTreeMap<(usize, String), usize> = BTreeMap::new();
        for m in markers {
            if m.kind != kind {
                kept.push(m);
                continue;
            }
            let key = (bucket_of(&m), m.source.clone());
            match open.get(&key) {
                Some(&i) => {
                    let into = &mut kept[i];
                    merged += m.count as u64;
                    into.count += m.count;
                    into.bytes += m.bytes;
                    into.end_s = match (into.end_s, m.end_s) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                    if into.what != m.what {
                        into.what.clear();
                    }
                    into.failed |= m.failed;
                }
                None => {
                    open.insert(key, kept.len());
                    kept.push(m);
                }
            }
        }
        markers = kept;
    }
    (markers, merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(start: u64, step1: u64, ends: &[u64], end: u64) -> Boundaries {
        Boundaries {
            start,
            step1_begin: Some(step1),
            step_ends: ends.to_vec(),
            end,
            rule: "test".into(),
            died: None,
        }
    }

    #[test]
    fn the_grid_spends_most_buckets_on_step_one() {
        let b = bounds(0, 1_000_000, &[1_100_000, 9_000_000], 10_000_000);
        let g = Grid::new(&b);
        assert!(g.edges.len() <= BUCKETS + 4);
        let in_step1 = g
            .edges
            .iter()
            .filter(|&&e| (1_000_000..1_100_000).contains(&e))
            .count();
        assert!(in_step1 >= 190, "{in_step1}");
        assert_eq!(g.bucket(0), 0);
        assert_eq!(g.bucket(20_000_000), g.edges.len() - 1);
    }

    #[test]
    fn a_million_changes_keep_their_peak_in_a_bounded_number_of_points() {
        let b = bounds(0, 400_000_000, &[600_000_000, 900_000_000], 1_000_000_000);
        let g = Grid::new(&b);
        let mut d = Downsampler::default();
        let mut peak = (0, 0);
        for i in 0..1_000_000u64 {
            let t = i * 1000;
            // A saw-tooth with one tall spike in the middle of step 1.
            let v = if i == 500_123 {
                1 << 40
            } else {
                (i % 977) << 20
            };
            if v > peak.1 {
                peak = (t, v);
            }
            d.push(g.bucket(t), t, v);
        }
        let pts = d.finish(0);
        assert!(pts.len() <= MAX_POINTS, "{}", pts.len());
        assert_eq!(pts.iter().map(|p| p.1).max(), Some(1 << 40));
        assert!(
            pts.iter()
                .any(|p| p.1 == 1 << 40 && (p.0 - peak.0 as f64 / 1e9).abs() < 1e-9)
        );
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0));
        // The lows survive too.
        assert_eq!(pts.iter().map(|p| p.1).min(), Some(0));
    }

    #[test]
    fn the_stepping_bucket_lookup_agrees_with_the_search() {
        let b = bounds(0, 1_000_000, &[1_100_000, 9_000_000], 10_000_000);
        let mut r = Recorder::new(&b);
        // In order (the replay's case), then jumps back and far ahead.
        let mut times: Vec<u64> = (0..20_000u64).map(|i| i * 523).collect();
        times.extend([5, 9_999_999, 1_050_000, 0, 20_000_000, 1_000_000, 999_999]);
        for t in times {
            assert_eq!(r.bucket(t), r.grid.bucket(t), "t = {t}");
        }
    }

    #[test]
    fn many_allocations_become_one_marker_per_bucket_and_source() {
        let b = bounds(0, 1_000, &[2_000], 3_000);
        let mut r = Recorder::new(&b);
        let nccl: SourceName = "nccl".into();
        for i in 0..10_000u64 {
            r.allocation(
                1_000 + i / 10,
                &nccl,
                "libnccl.so.2",
                "cuMemCreate",
                2 << 20,
            );
        }
        let t = build(
            r,
            &DeviceView::default(),
            &b,
            Found {
                context: None,
                local: &[],
                nccl: &[],
                autotune: &[],
                compiles: &[],
                forensics: &[],
            },
        );
        assert!(t.markers.len() <= 200, "{}", t.markers.len());
        assert_eq!(
            t.markers.iter().map(|m| m.count as u64).sum::<u64>(),
            10_000
        );
        assert_eq!(
            t.markers.iter().map(|m| m.bytes).sum::<u64>(),
            10_000 * (2 << 20)
        );
        assert!(t.markers.iter().all(|m| m.libraries == ["libnccl.so.2"]));
    }

    #[test]
    fn thousands_of_compiles_are_merged_but_counted() {
        let b = bounds(0, 1_000_000_000, &[2_000_000_000], 3_000_000_000);
        let compiles: Vec<CompileEvent> = (0..5_000)
            .map(|i| CompileEvent {
                kernel: format!("k{i}"),
                phase: Phase::Step1,
                step: Some(1),
                start_s: 1.0 + i as f64 * 1e-4,
                seconds: 1e-4,
                cache_hit: None,
                unfinished: false,
            })
            .collect();
        let t = build(
            Recorder::new(&b),
            &DeviceView::default(),
            &b,
            Found {
                context: None,
                local: &[],
                nccl: &[],
                autotune: &[],
                compiles: &compiles,
                forensics: &[],
            },
        );
        let kept = t.markers.iter().filter(|m| m.kind == MarkerKind::Compile);
        assert!(kept.clone().count() <= 200);
        assert_eq!(kept.map(|m| m.count as u64).sum::<u64>(), 5_000);
        assert_eq!(t.merged_markers + t.markers.len() as u64, 5_000);
    }
}
