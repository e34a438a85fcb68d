//! Framework events joined to CUDA events on the one clock: Triton autotune
//! and compile windows (from the shim), NCCL communicator creation (from NCCL's
//! INIT log, wall-clock converted to CLOCK_MONOTONIC), the step-1 stall
//! breakdown and the list of warmups that still land after setup.

use super::account::*;
use super::memory::{OopAlloc, Replay};
use super::phases::{Boundaries, Phase};
use crate::load::nccl::NcclComm;
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;
use crate::prewarm::catalog::EventClass;
use prewarm_events::MemEffect;
use std::collections::BTreeMap;

/// A time window [t0, t1] on the monotonic clock.
pub type Window = (u64, u64);

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

/// Converts a wall-clock Unix time (seconds) to CLOCK_MONOTONIC ns using the
/// pair the doctor read together at start.
pub fn unix_to_mono(unix_s: f64, started_unix_ns: u64, t_start_ns: u64) -> u64 {
    let unix_ns = (unix_s * 1e9) as i128;
    (t_start_ns as i128 + unix_ns - started_unix_ns as i128).max(0) as u64
}

/// One NCCL communicator of a process on the monotonic clock.
#[derive(Debug, Clone)]
pub struct CommWindow {
    pub comm: NcclComm,
    /// Its init window: from its "Init START" line or, where earlier, from
    /// NCCL's reported total back from its completion (NCCL loads its
    /// kernels before printing that line), to its completion.
    pub window: Option<Window>,
    /// Its "Init START" line, where NCCL printed one with a timestamp.
    pub started: Option<u64>,
}

/// NCCL communicators of one process with their windows on the monotonic clock.
pub fn comm_windows(comms: &[NcclComm], pid: u32, clock: Option<(u64, u64)>) -> Vec<CommWindow> {
    comms
        .iter()
        .filter(|c| c.pid == Some(pid))
        .map(|c| {
            let mono = |unix: f64| clock.map(|(unix0, mono0)| unix_to_mono(unix, unix0, mono0));
            CommWindow {
                comm: c.clone(),
                window: init_window(c).and_then(|(a, b)| mono(a).zip(mono(b))),
                started: c.start_unix.and_then(mono),
            }
        })
        .collect()
}

/// A communicator's init window in Unix seconds (see [`CommWindow::window`]).
fn init_window(c: &NcclComm) -> Option<(f64, f64)> {
    let end = c
        .complete_unix
        .or(c.start_unix.zip(c.init_seconds).map(|(s, d)| s + d))?;
    // NCCL's total includes work before its "Init START" line (loading its kernels).
    let by_total = c.init_seconds.map(|d| end - d);
    let start = match (c.start_unix, by_total) {
        (Some(s), Some(t)) => s.min(t),
        (Some(s), None) => s,
        (None, Some(t)) => t,
        (None, None) => end,
    };
    Some((start, end))
}

/// How far a communicator's span reaches before its window (the device
/// timeline may show its first growth a little early) and after it (NVML lags).
const SPAN_BEFORE_NS: u64 = 5_000_000;
const SPAN_AFTER_NS: u64 = 20_000_000;

/// The stretch of the device timeline each communicator's inferred bytes are
/// measured over (index-aligned with `windows`): its window widened a little,
/// never into a neighbour's. Windows that overlap (NCCL's reported total can
/// start a new communicator's window before the previous one completed) are
/// first made disjoint, so no device growth is counted for two communicators.
pub fn comm_spans(windows: &[Option<Window>]) -> Vec<Option<Window>> {
    let mut order: Vec<usize> = (0..windows.len())
        .filter(|&i| windows[i].is_some())
        .collect();
    order.sort_by_key(|&i| windows[i]);
    let mut disjoint: Vec<Option<Window>> = windows.to_vec();
    let mut reached = 0u64;
    for &i in &order {
        if let Some((a, b)) = disjoint[i] {
            let a = a.max(reached);
            let b = b.max(a);
            disjoint[i] = Some((a, b));
            reached = b;
        }
    }
    let sorted: Vec<Window> = order.iter().filter_map(|&i| disjoint[i]).collect();
    disjoint
        .iter()
        .map(|w| {
            let (a, b) = (*w)?;
            let prev_end = sorted
                .iter()
                .filter(|o| o.1 <= a && **o != (a, b))
                .map(|o| o.1)
                .max();
            let next_start = sorted
                .iter()
                .filter(|o| o.0 >= b && **o != (a, b))
                .map(|o| o.0)
                .min();
            let before = prev_end.map_or(a.saturating_sub(SPAN_BEFORE_NS), |p| {
                a.saturating_sub(((a - p) / 2).min(SPAN_BEFORE_NS))
            });
            let after =
                next_start.map_or(b + SPAN_AFTER_NS, |n| b + ((n - b) / 2).min(SPAN_AFTER_NS));
            Some((before, after))
        })
        .collect()
}

/// Where each communicator's inferred bytes are read (index-aligned with
/// `spans`): its span, with an end that falls inside a local-memory growth's
/// measurement window (`growth`, see `memory::growth_windows`) moved out of
/// it, the start to the window's start and the end to its end (unless that
/// reaches into a neighbour's span). The replay counts a growth at CUPTI's
/// kernel start, the device may show it from the window's start (the driver
/// grows the reservation in the launch call): a span end between the two
/// reads the growth on the device and not in the parts, and the
/// communicator's inferred figure loses it (or gains it) although the
/// growth's own part counts it.
pub fn comm_measure_spans(spans: &[Option<Window>], growth: &[Window]) -> Vec<Option<Window>> {
    spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (a, b) = (*s)?;
            let others = || {
                spans
                    .iter()
                    .enumerate()
                    .filter(move |(j, _)| *j != i)
                    .filter_map(|(_, o)| *o)
            };
            let floor = others()
                .filter(|o| o.1 <= a)
                .map(|o| o.1)
                .max()
                .unwrap_or(0);
            let ceil = others()
                .filter(|o| o.0 >= b)
                .map(|o| o.0)
                .min()
                .unwrap_or(u64::MAX);
            let out = |mut t: u64, earlier: bool| {
                while let Some(w) = growth.iter().find(|w| w.0 < t && t < w.1) {
                    // A window that reaches into a neighbour's span: left as it is.
                    if (earlier && w.0 < floor) || (!earlier && w.1 > ceil) {
                        break;
                    }
                    t = if earlier { w.0 } else { w.1 };
                }
                t
            };
            Some((out(a, true), out(b, false)))
        })
        .collect()
}

/// Where each communicator's allocation calls are counted (index-aligned
/// with `comms` and `spans`): from its "Init START" line (its window's
/// start where NCCL printed none) to its span's end, inside its span.
/// Spans are disjoint, so no allocation counts for two communicators. Not
/// from the window's start: NCCL's total reaches back before that line only
/// for loading its kernels (no allocation calls) and is printed to 10 ms,
/// so a window started there took the previous communicator's last
/// allocations (h200-matrix nccl_comm/2: 8 MiB counted for both) and, as the
/// rounding fell, NCCL's own allocation before its first init (a 2 MiB
/// `cuMemCreate` released at once, on every H200 recording).
pub fn comm_alloc_windows(comms: &[CommWindow], spans: &[Option<Window>]) -> Vec<Option<Window>> {
    comms
        .iter()
        .zip(spans)
        .map(|(c, s)| {
            let (a, b) = (*s)?;
            let from = c.started.or(c.window.map(|w| w.0)).unwrap_or(a);
            Some((from.clamp(a, b), b))
        })
        .collect()
}

/// The communicator an NCCL allocation call was made for: the first whose
/// allocation window (`comm_alloc_windows`) holds it, so never two. None:
/// outside every communicator's init (NCCL's process-wide setup before its
/// first communicator, or an allocation of its own after an init).
pub fn nccl_owner(x: &OopAlloc, alloc_at: &[Option<Window>]) -> Option<usize> {
    alloc_at
        .iter()
        .position(|w| w.is_some_and(|(a, b)| x.t >= a && x.t <= b))
}

/// NCCL's allocation calls outside every communicator's init, as (time, bytes).
pub fn nccl_outside_comms(oop: &[OopAlloc], alloc_at: &[Option<Window>]) -> Vec<(u64, u64)> {
    oop.iter()
        .filter(|x| &*x.source == "nccl" && nccl_owner(x, alloc_at).is_none())
        .map(|x| (x.t, x.bytes))
        .collect()
}

/// Builds the communicator accounts. `alloc_at` are where each one's
/// allocation calls count (`comm_alloc_windows`), `inferred` the device
/// growth over each span not explained by allocation calls (NCCL loading its
/// kernels), both index-aligned with `comms`.
pub fn comm_accounts(
    comms: &[CommWindow],
    alloc_at: &[Option<Window>],
    oop: &[OopAlloc],
    bounds: &Boundaries,
    inferred: &[(u64, u64)],
) -> Vec<CommAccount> {
    let mut bytes = vec![0u64; comms.len()];
    for x in oop.iter().filter(|x| &*x.source == "nccl") {
        if let Some(i) = nccl_owner(x, alloc_at) {
            bytes[i] += x.bytes;
        }
    }
    comms
        .iter()
        .zip(bytes)
        .enumerate()
        .map(|(i, (c, bytes))| comm_account(c, bounds, bytes, inferred.get(i).map_or(0, |x| x.1)))
        .collect()
}

/// One communicator's account from its window and its bytes.
fn comm_account(
    cw: &CommWindow,
    bounds: &Boundaries,
    bytes: u64,
    inferred_bytes: u64,
) -> CommAccount {
    let (c, w) = (&cw.comm, cw.window);
    CommAccount {
        comm: c.comm.clone(),
        comm_id: c.comm_id.clone(),
        rank: c.rank,
        nranks: c.nranks,
        phase: w.map(|w| bounds.phase_of(w.0)),
        step: w.and_then(|w| bounds.step_of(w.0)),
        start_s: w.map(|w| secs(w.0, bounds.start)),
        init_seconds: c.init_seconds.or(w.map(|w| (w.1 - w.0) as f64 / 1e9)),
        bytes,
        inferred_bytes,
        timings: c.timings.clone(),
        group: None,
    }
}

/// Triton autotunes with the device events inside their candidate windows.
pub fn autotune_accounts(
    r: &ProcessRecords,
    replay: &mut Replay,
    bounds: &Boundaries,
) -> Vec<AutotuneAccount> {
    let configs: Vec<(&str, &str, u64, u64)> = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::AutotuneConfig {
                kernel,
                config,
                t0,
                t1,
                ..
            } => Some((kernel.as_str(), config.as_str(), *t0, *t1)),
            _ => None,
        })
        .collect();
    // Name the candidate being benchmarked for every local-memory event.
    for ev in replay.local_events.iter_mut() {
        let t = bounds.start + (ev.t_s * 1e9) as u64;
        ev.autotune_config = configs
            .iter()
            .filter(|c| {
                ev.kernel.contains(c.0)
                    && c.2 <= t + 1_000
                    && (t <= c.3 + 1_000 || ev.failed && t <= c.3 + 2_000_000_000)
            })
            .map(|c| c.1.to_string())
            .next_back();
    }
    let mut out = Vec::new();
    for e in &r.shim {
        let ShimEvent::Autotune {
            kernel,
            key,
            t0,
            t1,
            configs: n,
            benchmarked,
            chosen,
            source,
        } = e
        else {
            continue;
        };
        let inside = |t: u64| t >= *t0 && t <= *t1;
        let mut spilling = Vec::new();
        let mut local = 0;
        for ev in &replay.local_events {
            let t = bounds.start + (ev.t_s * 1e9) as u64;
            if inside(t) && ev.kernel.contains(kernel.as_str()) {
                if !ev.failed {
                    local += ev.device_growth;
                }
                if let Some(c) = &ev.autotune_config
                    && !spilling.contains(c)
                {
                    spilling.push(c.clone());
                }
            }
        }
        out.push(AutotuneAccount {
            kernel: kernel.clone(),
            key: key.clone(),
            phase: bounds.phase_of(*t0),
            step: bounds.step_of(*t0),
            start_s: secs(*t0, bounds.start),
            seconds: t1.saturating_sub(*t0) as f64 / 1e9,
            configs: *n,
            benchmarked: *benchmarked,
            chosen: chosen.clone(),
            source: source.clone(),
            local_memory_growth: local,
            out_of_pool_bytes: replay
                .oop_allocs
                .iter()
                .filter(|a| inside(a.t))
                .map(|a| a.bytes)
                .sum(),
            spilling_configs: spilling,
        });
    }
    // An autotune interrupted by a failure has no "autotune" line: report its candidates.
    for ev in replay.local_events.iter().filter(|e| e.failed) {
        if let Some(c) = &ev.autotune_config
            && !out.iter().any(|a| a.spilling_configs.contains(c))
        {
            let t = bounds.start + (ev.t_s * 1e9) as u64;
            out.push(AutotuneAccount {
                kernel: ev.kernel.clone(),
                key: "(interrupted by the failure)".into(),
                phase: ev.phase,
                step: ev.step,
                start_s: secs(t, bounds.start),
                seconds: 0.0,
                configs: 0,
                benchmarked: 0,
                chosen: String::new(),
                source: "benchmark (failed)".into(),
                local_memory_growth: 0,
                out_of_pool_bytes: 0,
                spilling_configs: vec![c.clone()],
            });
        }
    }
    out
}

/// Every JIT compile the shim saw.
pub fn compile_events(r: &ProcessRecords, bounds: &Boundaries) -> Vec<CompileEvent> {
    r.shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Compile {
                kernel,
                t0,
                t1,
                cache_hit,
            } => Some(CompileEvent {
                kernel: kernel.clone(),
                phase: bounds.phase_of(*t0),
                step: bounds.step_of(*t0),
                start_s: secs(*t0, bounds.start),
                seconds: t1.saturating_sub(*t0) as f64 / 1e9,
                cache_hit: *cache_hit,
            }),
            _ => None,
        })
        .collect()
}

/// Windows of each stall kind, for the breakdown.
#[derive(Debug, Default, Clone)]
pub struct StallWindows {
    pub compile: Vec<Window>,
    pub autotune: Vec<Window>,
    pub nccl: Vec<Window>,
    pub cublas: Vec<Window>,
    pub module: Vec<Window>,
}

/// Driver calls from cuBLAS closer together than this belong to one burst of
/// cuBLAS initialisation (the host work between them is cuBLAS creating its
/// handle: measured gaps on the H200 recordings are 10-20 ms).
const CUBLAS_BURST_GAP_NS: u64 = 25_000_000;

/// cuBLAS initialisation windows: bursts of driver calls made from cuBLAS or
/// cuBLASLt (context retain, allocation, free, module load), each from its
/// first call's start to its last call's end. `cublas` says which calls came
/// from cuBLAS (the calling library's source).
pub fn cublas_windows(calls: &[(u64, u64)]) -> Vec<Window> {
    let mut sorted = calls.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<Window> = Vec::new();
    for (a, b) in sorted {
        match out.last_mut() {
            Some(w) if a <= w.1 + CUBLAS_BURST_GAP_NS => w.1 = w.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl StallWindows {
    /// Collects the windows from shim events, NCCL windows, cuBLAS's driver
    /// calls (`is_cublas` tells a call's library id apart) and module-load calls.
    pub fn collect(
        r: &ProcessRecords,
        comms: &[CommWindow],
        is_cublas: impl Fn(u32) -> bool,
    ) -> StallWindows {
        let mut w = StallWindows::default();
        for e in &r.shim {
            match e {
                ShimEvent::Compile { t0, t1, .. } => w.compile.push((*t0, *t1)),
                ShimEvent::Autotune { t0, t1, .. } | ShimEvent::AutotuneConfig { t0, t1, .. } => {
                    w.autotune.push((*t0, *t1))
                }
                _ => {}
            }
        }
        w.nccl = comms.iter().filter_map(|c| c.window).collect();
        w.module = r
            .mem
            .iter()
            .filter(|m| m.api.effect() == MemEffect::Module)
            .map(|m| (m.t_start, m.t_end))
            .collect();
        let cublas_calls: Vec<Window> = r
            .mem
            .iter()
            .filter(|m| {
                is_cublas(m.library)
                    && matches!(
                        m.api.effect(),
                        MemEffect::Module
                            | MemEffect::DeviceAlloc
                            | MemEffect::DeviceFree
                            | MemEffect::Context
                    )
            })
            .map(|m| (m.t_start, m.t_end))
            .collect();
        w.cublas = cublas_windows(&cublas_calls);
        w
    }

    /// Every kind's windows, highest priority first (the breakdown's order).
    fn lists(&self) -> [&Vec<Window>; 5] {
        [
            &self.compile,
            &self.autotune,
            &self.nccl,
            &self.cublas,
            &self.module,
        ]
    }

    /// Whether any lazy-initialisation window overlaps [a, b] for some
    /// time (one that only touches an end does not): the step it overlaps
    /// is no steady step (steady.rs).
    pub fn overlaps(&self, a: u64, b: u64) -> bool {
        self.lists()
            .iter()
            .any(|l| l.iter().any(|(s, e)| (*s).max(a) < (*e).min(b)))
    }

    /// Splits [a, b] into compile > autotune > NCCL init > cuBLAS init >
    /// module loading > other (each instant counted once, for the
    /// highest-priority kind active then).
    pub fn breakdown(&self, a: u64, b: u64) -> StallBreakdown {
        let lists = self.lists();
        let mut cuts: Vec<u64> = vec![a, b];
        for l in lists {
            for (x, y) in l.iter() {
                for t in [*x, *y] {
                    if t > a && t < b {
                        cuts.push(t);
                    }
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut secs_by = [0u64; 6];
        for pair in cuts.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            let mid = x + (y - x) / 2;
            let kind = lists
                .iter()
                .position(|l| l.iter().any(|(s, e)| *s <= mid && mid < *e))
                .unwrap_or(5);
            secs_by[kind] += y - x;
        }
        let f = |n: u64| n as f64 / 1e9;
        StallBreakdown {
            wall_s: f(b.saturating_sub(a)),
            compile_s: f(secs_by[0]),
            autotune_s: f(secs_by[1]),
            nccl_init_s: f(secs_by[2]),
            cublas_init_s: f(secs_by[3]),
            module_load_s: f(secs_by[4]),
            other_s: f(secs_by[5]),
        }
    }
}

/// What each lazy-initialisation class cost in one phase of one process
/// (classes with nothing are left out). Bytes: allocations made from the
/// class's libraries, local-memory growth, NCCL's inferred init bytes and
/// module code (all inferred parts included); seconds: the phase's stall
/// breakdown, so no instant counts for two classes (cuBLAS init includes
/// cuBLAS's own module loads; module loading is everyone else's); events:
/// allocation calls, growths, communicators, autotunes, compiles, first
/// kernel launches.
pub fn class_costs(p: &ProcessAccount, phase: Phase) -> BTreeMap<EventClass, ClassCost> {
    let mut m: BTreeMap<EventClass, ClassCost> = BTreeMap::new();
    let Some(ph) = p.phases.iter().find(|x| x.phase == phase) else {
        return m;
    };
    for sb in &ph.by_source {
        if let Some(c) = class_of_source(&sb.source) {
            let e = m.entry(c).or_default();
            e.bytes += sb.allocated;
            e.events += sb.calls as u32;
        }
    }
    m.entry(EventClass::Cublas).or_default().seconds += ph.stall.cublas_init_s;
    let local = m.entry(EventClass::LocalMemory).or_default();
    local.bytes += ph.local_memory_growth;
    local.events += p
        .local_memory
        .iter()
        .filter(|l| l.phase == phase && !l.failed)
        .count() as u32;
    let nccl = m.entry(EventClass::NcclComm).or_default();
    for c in p.nccl.iter().filter(|c| c.phase == Some(phase)) {
        nccl.bytes += c.inferred_bytes;
        nccl.events += 1;
    }
    nccl.seconds += ph.stall.nccl_init_s;
    let at = m.entry(EventClass::TritonAutotune).or_default();
    at.seconds += ph.stall.autotune_s;
    at.events += p.autotune.iter().filter(|a| a.phase == phase).count() as u32;
    let comp = m.entry(EventClass::Compile).or_default();
    comp.seconds += ph.stall.compile_s;
    comp.events += p.compiles.iter().filter(|c| c.phase == phase).count() as u32;
    let module = m.entry(EventClass::ModuleLoad).or_default();
    module.bytes += ph.module_code_bytes;
    module.seconds += ph.stall.module_load_s;
    module.events += ph.kernels_first_launched;
    m.retain(|_, c| c.bytes > 0 || c.seconds > 0.0 || c.events > 0);
    m
}

/// What each lazy-initialisation class cost in steps 2..N of one process
/// (the same figures as [`class_costs`] for that phase), with the steps its
/// events landed in: autotunes, compiles, local-memory growths and
/// communicators by their own step; cuBLAS and lazy module loading by the
/// late warmups' steps (docs/verdicts.md R8: work a prewarm left after step 1).
pub fn later_costs(p: &ProcessAccount) -> BTreeMap<EventClass, LaterCost> {
    let steady = |ph: Phase| ph == Phase::Steady;
    let mut steps: BTreeMap<EventClass, Vec<u32>> = BTreeMap::new();
    let mut add = |c: EventClass, s: Option<u32>| {
        if let Some(s) = s.filter(|s| *s >= 2) {
            steps.entry(c).or_default().push(s);
        }
    };
    for a in p.autotune.iter().filter(|a| steady(a.phase)) {
        add(EventClass::TritonAutotune, a.step);
    }
    for c in p.compiles.iter().filter(|c| steady(c.phase)) {
        add(EventClass::Compile, c.step);
    }
    for l in p
        .local_memory
        .iter()
        .filter(|l| steady(l.phase) && !l.failed)
    {
        add(EventClass::LocalMemory, l.step);
    }
    for c in p.nccl.iter().filter(|c| c.phase == Some(Phase::Steady)) {
        add(EventClass::NcclComm, c.step);
    }
    for w in p
        .late_warmups
        .iter()
        .filter(|w| matches!(w.class, EventClass::Cublas | EventClass::ModuleLoad))
    {
        for s in &w.steps {
            add(w.class, Some(*s));
        }
    }
    class_costs(p, Phase::Steady)
        .into_iter()
        .map(|(class, c)| {
            let mut s = steps.remove(&class).unwrap_or_default();
            s.sort_unstable();
            s.dedup();
            let later = LaterCost {
                bytes: c.bytes,
                seconds: c.seconds,
                events: c.events,
                steps: s,
            };
            (class, later)
        })
        .collect()
}

/// The event class of an out-of-pool source, for warmup lists and forensics.
pub fn class_of_source(source: &str) -> Option<EventClass> {
    match source {
        "nccl" => Some(EventClass::NcclComm),
        "cublas" | "cudnn" => Some(EventClass::Cublas),
        "triton" => Some(EventClass::TritonAutotune),
        "local memory" => Some(EventClass::LocalMemory),
        _ => None,
    }
}

/// A late warmup below both of these is minor: reports fold it into a count
/// (a 1.3 ms cached compile is not something to act on).
pub const MINOR_SECONDS: f64 = 0.05;
pub const MINOR_BYTES: u64 = 1 << 20;

/// Everything late warmups are built from, for one process.
pub struct LateInputs<'a> {
    pub bounds: &'a Boundaries,
    pub autotune: &'a [AutotuneAccount],
    pub compiles: &'a [CompileEvent],
    pub comms: &'a [CommAccount],
    pub local: &'a [LocalMemoryEvent],
    pub phases: &'a [PhaseAccount],
    /// Start of every kernel's first launch (kernel records cover the first steps).
    pub first_launches: &'a [u64],
    /// cuBLAS initialisation windows (see `cublas_windows`).
    pub cublas: &'a [Window],
    pub oop_allocs: &'a [OopAlloc],
}

/// One late warmup being gathered: its events' times and costs.
struct Gather {
    class: EventClass,
    subject: String,
    keys: Vec<String>,
    times: Vec<u64>,
    compiles: u32,
    seconds: f64,
    bytes: u64,
}

impl Gather {
    fn new(class: EventClass, subject: &str) -> Gather {
        Gather {
            class,
            subject: subject.to_string(),
            keys: Vec::new(),
            times: Vec::new(),
            compiles: 0,
            seconds: 0.0,
            bytes: 0,
        }
    }

    fn finish(self, bounds: &Boundaries) -> Option<LateWarmup> {
        let first = self.times.iter().copied().min()?;
        let step_of = |t: u64| bounds.step_in_progress(t);
        let mut steps: Vec<u32> = self.times.iter().filter_map(|&t| step_of(t)).collect();
        steps.sort_unstable();
        steps.dedup();
        Some(LateWarmup {
            minor: self.seconds < MINOR_SECONDS && self.bytes < MINOR_BYTES,
            class: self.class,
            subject: self.subject,
            keys: self.keys,
            events: self.times.len() as u32,
            compiles: self.compiles,
            seconds: self.seconds,
            bytes: self.bytes,
            phase: bounds.phase_of(first),
            step: step_of(first),
            steps,
        })
    }
}

/// The item for (class, subject), created on first use.
fn gather<'a>(items: &'a mut Vec<Gather>, class: EventClass, subject: &str) -> &'a mut Gather {
    match items
        .iter()
        .position(|g| g.class == class && g.subject == subject)
    {
        Some(i) => &mut items[i],
        None => {
            items.push(Gather::new(class, subject));
            items.last_mut().expect("just pushed")
        }
    }
}

/// How much a late warmup costs, for ranking: the larger of its seconds and
/// its GiB (1 GiB of out-of-pool memory in step 1 ranks like a 1 s stall).
pub fn warmup_rank(w: &LateWarmup) -> f64 {
    w.seconds.max(w.bytes as f64 / (1u64 << 30) as f64)
}

/// What was first used after setup, in any step: the warmups a user still
/// needs, grouped by what to warm, costliest first (docs/step-rule.md).
pub fn late_warmups(inp: &LateInputs) -> Vec<LateWarmup> {
    let b = inp.bounds;
    let at = |s: f64| b.start + (s * 1e9) as u64;
    let late = |t: u64| b.phase_of(t) != Phase::Setup;
    let mut items: Vec<Gather> = Vec::new();
    // Triton kernels: autotunes (their seconds include their candidates'
    // compiles) and the compiles outside them.
    for a in inp.autotune.iter().filter(|a| late(at(a.start_s))) {
        let g = gather(&mut items, EventClass::TritonAutotune, &a.kernel);
        if a.configs > 0 {
            g.keys.push(a.key.clone()); // else interrupted by a failure: no key
        }
        g.times.push(at(a.start_s));
        g.seconds += a.seconds;
        g.bytes += a.local_memory_growth + a.out_of_pool_bytes;
    }
    for c in inp.compiles.iter().filter(|c| late(at(c.start_s))) {
        let inside_autotune = inp.autotune.iter().any(|a| {
            a.kernel == c.kernel && c.start_s >= a.start_s && c.start_s <= a.start_s + a.seconds
        });
        let tuned = items
            .iter()
            .any(|g| g.class == EventClass::TritonAutotune && g.subject == c.kernel);
        let class = if tuned {
            EventClass::TritonAutotune
        } else {
            EventClass::Compile
        };
        let g = gather(&mut items, class, &c.kernel);
        g.times.push(at(c.start_s));
        g.compiles += 1;
        if !inside_autotune {
            g.seconds += c.seconds;
        }
    }
    for c in inp
        .comms
        .iter()
        .filter(|c| c.phase.is_some_and(|p| p != Phase::Setup))
    {
        let id = c.comm_id.clone().unwrap_or_else(|| c.comm.clone());
        // torch's group description names it (mesh_ep, clip_expert) when known.
        let subject = match c.group.as_ref().and_then(|g| g.desc.as_ref()) {
            Some(desc) => format!("{desc} {id}"),
            None => id,
        };
        let g = gather(&mut items, EventClass::NcclComm, &subject);
        g.times.push(at(c.start_s.unwrap_or(0.0)));
        g.seconds += c.init_seconds.unwrap_or(0.0);
        g.bytes += c.bytes + c.inferred_bytes;
    }
    // cuBLAS (and cuDNN) after setup: their allocations and cuBLAS's init time.
    for a in inp.oop_allocs.iter().filter(|a| late(a.t)) {
        if class_of_source(&a.source) == Some(EventClass::Cublas) {
            let g = gather(&mut items, EventClass::Cublas, &a.source);
            g.times.push(a.t);
            g.bytes += a.bytes;
        }
    }
    // A burst that began in setup counts from setup's end.
    let setup_end = b.window(Phase::Setup).map_or(b.end, |w| w.1);
    for &(s, e) in inp.cublas.iter().filter(|w| late(w.1)) {
        let s = s.max(setup_end);
        let g = gather(&mut items, EventClass::Cublas, "cublas");
        g.times.push(s);
        g.seconds += e.saturating_sub(s) as f64 / 1e9;
    }
    for ev in inp
        .local
        .iter()
        .filter(|e| e.phase != Phase::Setup && !e.failed)
    {
        let tuned = inp
            .autotune
            .iter()
            .any(|a| a.phase != Phase::Setup && ev.kernel.contains(&a.kernel));
        if tuned {
            continue; // counted with its autotune
        }
        let g = gather(&mut items, EventClass::LocalMemory, &ev.kernel);
        g.times.push(at(ev.t_s));
        g.bytes += ev.device_growth;
    }
    let mut lazy = Gather::new(EventClass::ModuleLoad, "");
    lazy.times = inp
        .first_launches
        .iter()
        .copied()
        .filter(|&t| late(t))
        .collect();
    for ph in inp.phases.iter().filter(|p| p.phase != Phase::Setup) {
        lazy.seconds += ph.stall.module_load_s;
        lazy.bytes += ph.module_code_bytes;
    }
    items.push(lazy);
    let mut out: Vec<LateWarmup> = items.into_iter().filter_map(|g| g.finish(b)).collect();
    out.sort_by(|x, y| warmup_rank(y).total_cmp(&warmup_rank(x)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakdown_counts_each_instant_once_by_priority() {
        let w = StallWindows {
            compile: vec![(10, 20)],
            autotune: vec![(5, 30)],
            nccl: vec![(40, 50)],
            cublas: vec![(58, 70)],
            module: vec![(45, 60), (65, 68)],
        };
        let b = w.breakdown(0, 100);
        assert_eq!(b.compile_s, 10e-9);
        assert_eq!(b.autotune_s, 15e-9);
        assert_eq!(b.nccl_init_s, 10e-9);
        // cuBLAS's own module loads (65-68) are cuBLAS init.
        assert_eq!(b.cublas_init_s, 12e-9);
        assert_eq!(b.module_load_s, 8e-9);
        assert_eq!(b.other_s, 45e-9);
        assert!((b.wall_s - 100e-9).abs() < 1e-15);
    }

    #[test]
    fn communicator_spans_never_overlap() {
        const MS: u64 = 1_000_000;
        // The second window starts (by NCCL's total) before the first completed.
        let w = [Some((100 * MS, 400 * MS)), Some((395 * MS, 430 * MS)), None];
        let s = comm_spans(&w);
        assert_eq!(s[0], Some((95 * MS, 400 * MS)));
        assert_eq!(s[1], Some((400 * MS, 450 * MS)));
        assert_eq!(s[2], None);
        // Far apart: each widened by the full margins.
        let far = [Some((100 * MS, 200 * MS)), (Some((900 * MS, 950 * MS)))];
        let s = comm_spans(&far);
        assert_eq!(s[0], Some((95 * MS, 220 * MS)));
        assert_eq!(s[1], Some((895 * MS, 970 * MS)));
    }

    /// The shape of h200-matrix nccl_comm/2 (synthetic numbers): the second
    /// communicator's window, by NCCL's total printed to 10 ms, starts 1 ms
    /// before the first one completed, among its last allocations; NCCL's
    /// own allocation comes before the first one's Init START line (before
    /// its window here, inside it where the rounding falls the other way).
    #[test]
    fn each_allocation_counts_for_one_communicator_from_its_init_start() {
        const MS: u64 = 1_000_000;
        let comm = |w: Window, started: u64| CommWindow {
            comm: NcclComm::seen("", Some(1), "0x1"),
            window: Some(w),
            started: Some(started),
        };
        let comms = [
            comm((100 * MS, 400 * MS), 377 * MS),
            comm((399 * MS, 440 * MS), 404 * MS),
        ];
        let spans = comm_spans(&[comms[0].window, comms[1].window]);
        let at = comm_alloc_windows(&comms, &spans);
        assert_eq!(at, [Some((377 * MS, 400 * MS)), Some((404 * MS, 460 * MS))]);
        let alloc = |t: u64| OopAlloc {
            t,
            source: "nccl".into(),
            bytes: 2 << 20,
            freed: None,
        };
        let oop = [
            alloc(98 * MS),
            alloc(390 * MS),
            alloc(399 * MS + 500_000),
            alloc(420 * MS),
        ];
        let owners: Vec<Option<usize>> = oop.iter().map(|x| nccl_owner(x, &at)).collect();
        assert_eq!(owners, [None, Some(0), Some(0), Some(1)]);
        let bounds = Boundaries {
            start: 0,
            step1_begin: None,
            step_ends: Vec::new(),
            end: 500 * MS,
            rule: String::new(),
            died: None,
        };
        let accounts = comm_accounts(&comms, &at, &oop, &bounds, &[]);
        let bytes: Vec<u64> = accounts.iter().map(|c| c.bytes).collect();
        assert_eq!(bytes, [4 << 20, 2 << 20]);
        assert_eq!(nccl_outside_comms(&oop, &at), [(98 * MS, 2 << 20)]);
        // Without an Init START line: from the window's start, inside the span.
        let unprinted = [CommWindow {
            started: None,
            ..comms[1].clone()
        }];
        assert_eq!(
            comm_alloc_windows(&unprinted, &spans[1..]),
            [Some((400 * MS, 460 * MS))]
        );
    }

    /// The shape of prescribe-all-matrix prescribed/1 (synthetic numbers): the
    /// context's first launch (kernel start 244 ms, window 231..264 ms: the
    /// context came up at 231 ms) inside which a communicator's span starts
    /// (243.9 ms); the device showed the 92 MiB at 243 ms, before the span.
    #[test]
    fn a_communicator_is_read_outside_every_local_memory_window() {
        const MS: u64 = 1_000_000;
        let growth = [(231 * MS, 264 * MS), (600 * MS, 641 * MS)];
        let spans = [Some((243 * MS + 900_000, 639 * MS)), None];
        let read = comm_measure_spans(&spans, &growth);
        // The start moves back to the window's start, the end on to the next window's end.
        assert_eq!(read, vec![Some((231 * MS, 641 * MS)), None]);
        // Windows that chain are all left behind; none touching the span: unchanged.
        let chained = [(200 * MS, 235 * MS), (231 * MS, 264 * MS)];
        assert_eq!(
            comm_measure_spans(&spans[..1], &chained),
            vec![Some((200 * MS, 639 * MS))]
        );
        assert_eq!(comm_measure_spans(&spans[..1], &[]), spans[..1].to_vec());
        // Never into a neighbour's span: a window across two is left as it is.
        let two = [Some((100 * MS, 240 * MS)), Some((243 * MS, 300 * MS))];
        assert_eq!(comm_measure_spans(&two, &growth), two.to_vec());
    }

    #[test]
    fn cublas_calls_close_together_are_one_initialisation() {
        const MS: u64 = 1_000_000;
        let calls = [
            (0, MS),
            (15 * MS, 16 * MS),
            (30 * MS, 34 * MS),
            (200 * MS, 201 * MS),
        ];
        assert_eq!(
            cublas_windows(&calls),
            vec![(0, 34 * MS), (200 * MS, 201 * MS)]
        );
    }

    const S: u64 = 1_000_000_000;

    /// Synthetic boundaries: step 1 begins at 10 s, steps end at 20, 21, 22, 23 s.
    fn four_steps() -> Boundaries {
        Boundaries {
            start: 0,
            step1_begin: Some(10 * S),
            step_ends: vec![20 * S, 21 * S, 22 * S, 23 * S],
            end: 30 * S,
            rule: "first-forward-after-zero-grad".into(),
            died: None,
        }
    }

    fn autotune(
        kernel: &str,
        key: &str,
        start_s: f64,
        seconds: f64,
        growth: u64,
    ) -> AutotuneAccount {
        let b = four_steps();
        let t = (start_s * 1e9) as u64;
        AutotuneAccount {
            kernel: kernel.into(),
            key: key.into(),
            phase: b.phase_of(t),
            step: b.step_of(t),
            start_s,
            seconds,
            configs: 4,
            benchmarked: 4,
            chosen: "BLOCK: 64".into(),
            source: "benchmark".into(),
            local_memory_growth: growth,
            out_of_pool_bytes: 0,
            spilling_configs: Vec::new(),
        }
    }

    fn compile(kernel: &str, start_s: f64, seconds: f64) -> CompileEvent {
        let b = four_steps();
        let t = (start_s * 1e9) as u64;
        CompileEvent {
            kernel: kernel.into(),
            phase: b.phase_of(t),
            step: b.step_of(t),
            start_s,
            seconds,
            cache_hit: Some(false),
        }
    }

    #[test]
    fn late_warmups_are_grouped_by_kernel_ranked_by_cost_and_say_every_step() {
        // Synthetic events, not a recording.
        let b = four_steps();
        let autotunes = [
            autotune("chunk_bwd", "(64, 'bf16')", 12.0, 30.0, 0),
            // A new shape in step 3 is the same problem.
            autotune("chunk_bwd", "(128, 'bf16')", 21.5, 8.0, 6 << 30),
            autotune("setup_kernel", "(1,)", 2.0, 5.0, 0),
        ];
        let compiles = [
            compile("chunk_bwd", 12.5, 3.0), // inside its autotune: counted there
            compile("rms_norm", 11.0, 2.0),
            compile("tiny", 21.2, 0.0013), // a cached compile: minor
            compile("eval_kernel", 25.0, 1.0), // after the last step: no step
        ];
        let first_launches = [11 * S, 21 * S + 1];
        let w = late_warmups(&LateInputs {
            bounds: &b,
            autotune: &autotunes,
            compiles: &compiles,
            comms: &[],
            local: &[],
            phases: &[],
            first_launches: &first_launches,
            cublas: &[],
            oop_allocs: &[],
        });
        let chunk = &w[0];
        assert_eq!(chunk.class, EventClass::TritonAutotune);
        assert_eq!(chunk.subject, "chunk_bwd");
        assert_eq!(chunk.keys, vec!["(64, 'bf16')", "(128, 'bf16')"]);
        assert_eq!((chunk.events, chunk.compiles), (3, 1));
        assert_eq!(chunk.seconds, 38.0);
        assert_eq!(chunk.bytes, 6 << 30);
        assert_eq!((chunk.step, chunk.steps.clone()), (Some(1), vec![1, 3]));
        assert!(!chunk.minor);
        // Setup's autotune is not a late warmup.
        assert!(w.iter().all(|x| x.subject != "setup_kernel"));
        let norm = w.iter().find(|x| x.subject == "rms_norm").unwrap();
        assert_eq!(
            (norm.class, norm.seconds, norm.minor),
            (EventClass::Compile, 2.0, false)
        );
        let tiny = w.iter().find(|x| x.subject == "tiny").unwrap();
        assert!(tiny.minor);
        assert_eq!(tiny.steps, vec![3]);
        let eval = w.iter().find(|x| x.subject == "eval_kernel").unwrap();
        assert_eq!((eval.phase, eval.step), (Phase::Teardown, None));
        assert!(eval.steps.is_empty());
        let lazy = w
            .iter()
            .find(|x| x.class == EventClass::ModuleLoad)
            .unwrap();
        assert_eq!((lazy.events, lazy.steps.clone()), (2, vec![1, 3]));
        // Costliest first (1 GiB ranks like 1 s).
        let ranks: Vec<f64> = w.iter().map(warmup_rank).collect();
        assert!(ranks.windows(2).all(|p| p[0] >= p[1]), "{ranks:?}");
    }

    #[test]
    fn wall_clock_maps_onto_the_monotonic_clock() {
        // started at unix 1000 s == mono 50 s
        assert_eq!(
            unix_to_mono(1001.5, 1_000_000_000_000, 50_000_000_000),
            51_500_000_000
        );
    }
}
