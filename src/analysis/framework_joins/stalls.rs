//! The step-1 stall breakdown: each instant counted once, by the
//! window of the highest priority that holds it (cuBLAS bursts included).

use super::nccl::CommWindow;
use super::window::Window;
use crate::analysis::account::*;
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;
use prewarm_events::MemEffect;

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
    /// Collects the windows from shim events (a compile the process ended
    /// inside runs to `end`), NCCL windows, cuBLAS's driver calls
    /// (`is_cublas` tells a call's library id apart) and module-load calls.
    pub fn collect(
        r: &ProcessRecords,
        comms: &[CommWindow],
        is_cublas: impl Fn(u32) -> bool,
        end: u64,
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
        for (_, t0) in super::triton::unfinished_compiles(&r.shim) {
            w.compile.push((t0, end.max(t0)));
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
