//! What each class of lazy initialisation cost in a phase, and what it
//! still costs after step 1.

use crate::analysis::account::*;
use crate::analysis::phases::Phase;
use crate::prewarm::catalog::EventClass;
use std::collections::BTreeMap;

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
        .filter(|w| placed_by_late_warmups(w.class))
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

/// The classes whose steps 2..N are placed by the late warmups' steps (the
/// others have their own per-event steps: autotunes, compiles, growths,
/// communicators).
fn placed_by_late_warmups(class: EventClass) -> bool {
    match class {
        EventClass::Cublas | EventClass::ModuleLoad => true,
        EventClass::TritonAutotune
        | EventClass::Compile
        | EventClass::LocalMemory
        | EventClass::NcclComm => false,
    }
}
