//! NCCL communicators joined to CUDA events: their creation windows
//! (NCCL's INIT log on the monotonic clock), the spans their allocations
//! fall in, and each communicator's account.

use super::window::Window;
use crate::analysis::account::*;
use crate::analysis::memory::OopAlloc;
use crate::analysis::phases::Boundaries;
use crate::analysis::phases::secs;
use crate::load::nccl::NcclComm;

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
