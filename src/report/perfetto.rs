//! `report RUN --format perfetto`: Chrome trace-event JSON, which
//! ui.perfetto.dev (and chrome://tracing) opens. One process per variant ×
//! attempt × rank, named; threads for phases, NCCL init, Triton autotune,
//! compiles, allocations, local-memory growth and OOMs; counter tracks for
//! device used, pool reserved and out-of-pool bytes by source.
//!
//! Written as a stream (one event at a time through serde_json into the
//! caller's writer); counters come from the down-sampled timelines and are
//! thinned further when there are many processes, so the file stays small.
//! Times are microseconds since each process started, so variants line up.

use super::model::{AttemptView, RankView, ReportModel};
use super::renderer::{Renderer, ReportError};
use crate::analysis::account::ProcessAccount;
use crate::analysis::timeline::{MAX_POINTS, MarkerKind, Point, Timeline, value_at};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

/// The Perfetto renderer.
pub struct Perfetto;

/// Counter points of the whole trace together (≈ 60 bytes each).
const COUNTER_BUDGET: usize = 1_500_000;
/// Fewest counter points a series is thinned to.
const MIN_COUNTER_POINTS: usize = 64;

/// One trace event. `dur` only on complete ("X") events, `s` only on instants.
#[derive(Serialize)]
struct Event<'a, A: Serialize> {
    name: &'a str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'static str>,
    args: A,
}

/// Writes events separated by commas inside `{"traceEvents":[...]}`.
struct Stream<'w> {
    out: &'w mut dyn Write,
    first: bool,
}

impl Stream<'_> {
    fn event<A: Serialize>(&mut self, e: &Event<A>) -> Result<(), ReportError> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        serde_json::to_writer(&mut *self.out, e)?;
        Ok(())
    }

    fn meta(
        &mut self,
        pid: u32,
        tid: u32,
        what: &'static str,
        name: &str,
    ) -> Result<(), ReportError> {
        #[derive(Serialize)]
        struct Name<'a> {
            name: &'a str,
        }
        self.event(&Event {
            name: what,
            ph: "M",
            ts: 0.0,
            dur: None,
            pid,
            tid,
            s: None,
            cat: None,
            args: Name { name },
        })
    }

    fn sort_index(&mut self, pid: u32, index: usize) -> Result<(), ReportError> {
        #[derive(Serialize)]
        struct Index {
            sort_index: usize,
        }
        self.event(&Event {
            name: "process_sort_index",
            ph: "M",
            ts: 0.0,
            dur: None,
            pid,
            tid: 0,
            s: None,
            cat: None,
            args: Index { sort_index: index },
        })
    }
}

fn us(s: f64) -> f64 {
    (s * 1e6 * 1000.0).round() / 1000.0
}

/// Thins a step series to at most `max` points, keeping each bucket's
/// lowest and highest value in time order.
fn thin(points: &[Point], max: usize) -> Vec<Point> {
    if points.len() <= max {
        return points.to_vec();
    }
    let buckets = (max / 2).max(1);
    let per = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(per) {
        let lo = chunk.iter().min_by_key(|p| p.1).copied();
        let hi = chunk.iter().max_by_key(|p| p.1).copied();
        match (lo, hi) {
            (Some(a), Some(b)) if a.0 <= b.0 => out.extend([a, b]),
            (Some(a), Some(b)) => out.extend([b, a]),
            _ => {}
        }
        if out.len() >= 2 && out[out.len() - 1] == out[out.len() - 2] {
            out.pop();
        }
    }
    out
}

/// Windows placed into lanes so that slices on one thread never overlap.
fn lanes(windows: &[(f64, f64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..windows.len()).collect();
    order.sort_by(|&a, &b| windows[a].0.total_cmp(&windows[b].0));
    let mut ends: Vec<f64> = Vec::new();
    let mut lane = vec![0; windows.len()];
    for i in order {
        let (a, b) = windows[i];
        match ends.iter().position(|&e| e <= a) {
            Some(l) => {
                ends[l] = b;
                lane[i] = l;
            }
            None => {
                ends.push(b);
                lane[i] = ends.len() - 1;
            }
        }
    }
    lane
}

/// Thread ids: each kind of track has a block of ten lanes.
mod tid {
    pub const PHASES: u32 = 1;
    pub const NCCL: u32 = 10;
    pub const AUTOTUNE: u32 = 20;
    pub const COMPILE: u32 = 30;
    pub const ALLOCATIONS: u32 = 40;
    pub const LOCAL: u32 = 41;
    pub const OOM: u32 = 42;
    pub const COUNTERS: u32 = 0;
    /// Most lanes per kind; more overlapping windows share the last lane's
    /// neighbour track in a separate block.
    pub const LANES: u32 = 9;
}

/// Complete events of one kind, in lanes named "<name>", "<name> #2", ...
fn slices<A: Serialize>(
    s: &mut Stream,
    pid: u32,
    base: u32,
    name: &str,
    items: &[(f64, f64, String, A)],
) -> Result<(), ReportError> {
    if items.is_empty() {
        return Ok(());
    }
    let windows: Vec<(f64, f64)> = items.iter().map(|i| (i.0, i.1.max(i.0))).collect();
    let lane = lanes(&windows);
    let used = lane.iter().copied().max().unwrap_or(0);
    for l in 0..=used {
        let t = base + (l as u32).min(tid::LANES);
        let label = if l == 0 {
            name.to_string()
        } else {
            format!("{name} #{}", l + 1)
        };
        if (l as u32) <= tid::LANES {
            s.meta(pid, t, "thread_name", &label)?;
        }
    }
    // Lanes beyond the block share its last track; they are still disjoint
    // from each other only when the lane count stays within the block, so
    // such windows are clipped to start after the previous one ends.
    let mut last_end: BTreeMap<u32, f64> = BTreeMap::new();
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[a].0.total_cmp(&items[b].0));
    for i in order {
        let (a, b, label, args) = &items[i];
        let t = base + (lane[i] as u32).min(tid::LANES);
        let start = last_end.get(&t).map_or(*a, |e| a.max(*e));
        let end = b.max(start);
        last_end.insert(t, end);
        s.event(&Event {
            name: label,
            ph: "X",
            ts: us(start),
            dur: Some(us(end) - us(start)),
            pid,
            tid: t,
            s: None,
            cat: None,
            args,
        })?;
    }
    Ok(())
}

fn instant<A: Serialize>(
    s: &mut Stream,
    pid: u32,
    tid: u32,
    name: &str,
    t: f64,
    args: A,
) -> Result<(), ReportError> {
    s.event(&Event {
        name,
        ph: "i",
        ts: us(t),
        dur: None,
        pid,
        tid,
        s: Some("t"),
        cat: None,
        args,
    })
}

fn counter(
    s: &mut Stream,
    pid: u32,
    name: &str,
    t: f64,
    args: &BTreeMap<&str, f64>,
) -> Result<(), ReportError> {
    s.event(&Event {
        name,
        ph: "C",
        ts: us(t),
        dur: None,
        pid,
        tid: tid::COUNTERS,
        s: None,
        cat: None,
        args,
    })
}

const MIB: f64 = (1u64 << 20) as f64;

/// One process of the trace: its name, then its phases, work, allocations,
/// local-memory growth, OOMs and counters.
fn process(
    s: &mut Stream,
    pid: u32,
    a: &AttemptView,
    r: &RankView,
    max_points: usize,
) -> Result<(), ReportError> {
    s.meta(pid, 0, "process_name", &format!("{} {}", a.id(), r.label))?;
    s.sort_index(pid, pid as usize)?;
    phases(s, pid, &r.account)?;
    work_slices(s, pid, &r.account)?;
    allocations(s, pid, &r.timeline)?;
    local_memory(s, pid, &r.account)?;
    ooms(s, pid, &r.account)?;
    counters(s, pid, &r.timeline, max_points)
}

/// The phases of a process, one slice each.
fn phases(s: &mut Stream, pid: u32, acc: &ProcessAccount) -> Result<(), ReportError> {
    s.meta(pid, tid::PHASES, "thread_name", "phases")?;
    #[derive(Serialize)]
    struct PhaseArgs {
        steps: u32,
        device_used_peak_bytes: Option<u64>,
        out_of_pool_allocated_bytes: u64,
        local_memory_growth_bytes: u64,
    }
    for p in &acc.phases {
        s.event(&Event {
            name: &super::account_tables::phase_label(acc, p.phase),
            ph: "X",
            ts: us(p.start_s),
            dur: Some(us(p.end_s.max(p.start_s)) - us(p.start_s)),
            pid,
            tid: tid::PHASES,
            s: None,
            cat: Some("phase"),
            args: PhaseArgs {
                steps: p.steps,
                device_used_peak_bytes: p.device_used_peak,
                out_of_pool_allocated_bytes: p.out_of_pool_allocated,
                local_memory_growth_bytes: p.local_memory_growth,
            },
        })?;
    }
    Ok(())
}

/// NCCL inits, Triton autotunes and compiles: one thread of slices each.
fn work_slices(s: &mut Stream, pid: u32, acc: &ProcessAccount) -> Result<(), ReportError> {
    let nccl: Vec<(f64, f64, String, serde_json::Value)> = acc
        .nccl
        .iter()
        .filter_map(|c| {
            let start = c.start_s?;
            Some((
                start,
                start + c.init_seconds.unwrap_or(0.0),
                format!(
                    "NCCL init {}",
                    c.comm_id.clone().unwrap_or_else(|| c.comm.clone())
                ),
                serde_json::json!({
                    "comm": c.comm, "nranks": c.nranks, "rank": c.rank,
                    "allocated_bytes": c.bytes, "inferred_bytes": c.inferred_bytes,
                }),
            ))
        })
        .collect();
    slices(s, pid, tid::NCCL, "NCCL init", &nccl)?;

    let autotune: Vec<(f64, f64, String, serde_json::Value)> = acc
        .autotune
        .iter()
        .map(|x| {
            (
                x.start_s,
                x.start_s + x.seconds,
                format!("autotune {}", x.kernel),
                serde_json::json!({
                    "key": x.key, "configs": x.configs, "benchmarked": x.benchmarked,
                    "chosen": x.chosen, "local_memory_growth_bytes": x.local_memory_growth,
                    "out_of_pool_bytes": x.out_of_pool_bytes, "spilling_configs": x.spilling_configs,
                }),
            )
        })
        .collect();
    slices(s, pid, tid::AUTOTUNE, "Triton autotune", &autotune)?;

    let compiles: Vec<(f64, f64, String, serde_json::Value)> = acc
        .compiles
        .iter()
        .map(|c| {
            (
                c.start_s,
                c.start_s + c.seconds,
                format!("compile {}", c.kernel),
                serde_json::json!({ "cache_hit": c.cache_hit }),
            )
        })
        .collect();
    slices(s, pid, tid::COMPILE, "compile", &compiles)
}

/// Out-of-pool allocations, as instants on their own thread.
fn allocations(s: &mut Stream, pid: u32, t: &Timeline) -> Result<(), ReportError> {
    #[derive(Serialize)]
    struct AllocArgs<'a> {
        source: &'a str,
        bytes: u64,
        calls: u32,
        libraries: &'a [String],
    }
    let mut named = false;
    for m in t
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::Allocation)
    {
        if !named {
            s.meta(
                pid,
                tid::ALLOCATIONS,
                "thread_name",
                "allocations (out of pool)",
            )?;
            named = true;
        }
        instant(
            s,
            pid,
            tid::ALLOCATIONS,
            &format!("{} {}", m.source, super::bytes(m.bytes)),
            m.t_s,
            AllocArgs {
                source: &m.source,
                bytes: m.bytes,
                calls: m.count,
                libraries: &m.libraries,
            },
        )?;
    }
    Ok(())
}

/// Local-memory growth, as instants on their own thread.
fn local_memory(s: &mut Stream, pid: u32, acc: &ProcessAccount) -> Result<(), ReportError> {
    if !acc.local_memory.is_empty() {
        s.meta(pid, tid::LOCAL, "thread_name", "local-memory growth")?;
    }
    for l in &acc.local_memory {
        instant(
            s,
            pid,
            tid::LOCAL,
            &format!(
                "local memory +{} {}",
                super::bytes(l.device_growth),
                l.kernel
            ),
            l.t_s,
            serde_json::json!({
                "kernel": l.kernel, "device_growth_bytes": l.device_growth,
                "reservation_before": l.before, "reservation_after": l.after,
                "registers": l.registers, "failed": l.failed,
                "autotune_config": l.autotune_config,
            }),
        )?;
    }
    Ok(())
}

/// Failed requests (OOMs), as instants on their own thread.
fn ooms(s: &mut Stream, pid: u32, acc: &ProcessAccount) -> Result<(), ReportError> {
    if !acc.forensics.is_empty() {
        s.meta(pid, tid::OOM, "thread_name", "out of memory")?;
    }
    for f in &acc.forensics {
        instant(
            s,
            pid,
            tid::OOM,
            &format!("OOM: {}", super::verdict_text::request_text(f)),
            f.t_s,
            serde_json::json!({
                "library": f.library, "source": f.source, "bytes": f.bytes,
                "result": f.result, "device_free_before": f.device_free_before,
                "message": f.message, "prewarms": f.prewarms,
            }),
        )?;
    }
    Ok(())
}

/// The counter tracks, in MiB: device used, pool reserved, local-memory
/// growth, and out-of-pool bytes by source (one track, a value per source).
fn counters(s: &mut Stream, pid: u32, t: &Timeline, max_points: usize) -> Result<(), ReportError> {
    let mut one = BTreeMap::new();
    for (name, series) in [
        ("device used (MiB)", &t.device_used),
        ("pool reserved (MiB)", &t.pool_reserved),
        ("local-memory growth (MiB)", &t.local_memory),
    ] {
        for p in thin(series, max_points) {
            one.insert("MiB", p.1 as f64 / MIB);
            counter(s, pid, name, p.0, &one)?;
        }
    }
    if !t.out_of_pool.is_empty() {
        let thinned: Vec<(&str, Vec<Point>)> = t
            .out_of_pool
            .iter()
            .map(|x| {
                (
                    x.source.as_str(),
                    thin(&x.points, max_points / t.out_of_pool.len().max(1)),
                )
            })
            .collect();
        let mut times: Vec<f64> = thinned
            .iter()
            .flat_map(|x| x.1.iter().map(|p| p.0))
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        let mut args: BTreeMap<&str, f64> = BTreeMap::new();
        for at in times {
            for (src, pts) in &thinned {
                args.insert(src, value_at(pts, at) as f64 / MIB);
            }
            counter(s, pid, "out of pool (MiB)", at, &args)?;
        }
    }
    Ok(())
}

impl Renderer for Perfetto {
    fn render(&self, model: &ReportModel, out: &mut dyn Write) -> Result<(), ReportError> {
        let processes: Vec<(&AttemptView, &RankView)> = model
            .attempts
            .iter()
            .flat_map(|a| a.ranks.iter().map(move |r| (a, r)))
            .collect();
        let max_points =
            (COUNTER_BUDGET / (processes.len() * 4).max(1)).clamp(MIN_COUNTER_POINTS, MAX_POINTS);
        out.write_all(b"{\"traceEvents\":[\n")?;
        let mut s = Stream { out, first: true };
        for (i, (a, r)) in processes.iter().enumerate() {
            process(&mut s, i as u32 + 1, a, r, max_points)?;
        }
        #[derive(Serialize)]
        struct Meta<'a> {
            tool: String,
            run: &'a str,
            time: &'static str,
        }
        let tail = serde_json::to_string(&Meta {
            tool: format!("prewarm-doctor {}", env!("CARGO_PKG_VERSION")),
            run: &model.run.path,
            time: "microseconds since each process started",
        })?;
        write!(
            s.out,
            "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{tail}}}\n"
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_windows_get_separate_lanes() {
        let l = lanes(&[(0.0, 10.0), (1.0, 2.0), (3.0, 4.0), (10.0, 11.0)]);
        assert_eq!(l, vec![0, 1, 1, 0]);
    }

    #[test]
    fn thinning_keeps_extremes_in_order() {
        let pts: Vec<Point> = (0..10_000).map(|i| (i as f64, (i % 97) as u64)).collect();
        let t = thin(&pts, 100);
        assert!(t.len() <= 100);
        assert!(t.iter().any(|p| p.1 == 96) && t.iter().any(|p| p.1 == 0));
        assert!(t.windows(2).all(|w| w[0].0 <= w[1].0));
    }
}
