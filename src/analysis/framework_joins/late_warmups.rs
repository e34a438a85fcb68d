//! The warmups that still land after setup, from every class's
//! events, gathered one entry a subject.

use super::class_costs::class_of_source;
use super::window::Window;
use crate::analysis::account::*;
use crate::analysis::memory::OopAlloc;
use crate::analysis::phases::{Boundaries, Phase};
use crate::prewarm::catalog::EventClass;

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
