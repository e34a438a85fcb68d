//! The terminal summary printed at the end of every run and by `report`.

use super::{bytes, seconds, signed_bytes};
use crate::analysis::AttemptAccount;
use crate::analysis::model::ProcessAccount;
use std::fmt::Write;

fn who(p: &ProcessAccount) -> String {
    match p.rank {
        Some(r) => format!("rank {r} (host {}, pid {})", p.host, p.pid),
        None => format!("process {} (host {})", p.pid, p.host),
    }
}

/// Renders one attempt's summary.
pub fn render_attempt(a: &AttemptAccount) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "== prewarm-doctor: variant '{}', attempt {}{}", a.variant, a.attempt, if a.warmup { " (cache warm-up, untimed)" } else { "" });
    if !a.command.is_empty() {
        let _ = writeln!(o, "   command: {}", a.command.join(" "));
    }
    if let Some(c) = a.exit_code {
        let _ = writeln!(o, "   exit code: {c}");
    }
    for n in &a.host_notices {
        let _ = writeln!(o, "   note: {n}");
    }
    if a.processes.is_empty() {
        let _ = writeln!(o, "   no GPU-side capture: no process initialised CUDA with the probe loaded.");
    }
    for p in &a.processes {
        render_process(&mut o, p);
    }
    if !a.problems.is_empty() {
        let _ = writeln!(o, "-- problems reading the run");
        for pr in &a.problems {
            let _ = writeln!(o, "   {}: {}", pr.file, pr.what);
        }
    }
    o
}

fn render_process(o: &mut String, p: &ProcessAccount) {
    let _ = writeln!(o, "-- {}{}", who(p), p.device.map(|d| format!(", cuda:{d}")).unwrap_or_default());
    if !p.capture.active {
        let _ = writeln!(o, "   capture: OFF — {}", p.capture.detail);
    }
    for n in &p.capture.notices {
        let _ = writeln!(o, "   probe: {n}");
    }
    let _ = writeln!(o, "   steps: {} seen; step 1 start: {}", p.steps, p.step_rule);
    if let (Some(s1), Some(ss)) = (p.step1_s, p.steady_step_s) {
        let _ = writeln!(o, "   step 1 took {} vs {} per steady step ({:.1}x)", seconds(s1), seconds(ss), s1 / ss.max(1e-9));
    }
    let _ = writeln!(o, "   device memory from: {}", p.memory_source);
    if let Some(c) = p.context_bytes {
        let _ = writeln!(o, "   CUDA context: {}", bytes(c));
    }
    let _ = writeln!(
        o,
        "   {:<11} {:>9} {:>11} {:>11} {:>13} {:>11} {:>9}",
        "phase", "time", "device peak", "pool peak", "out-of-pool +", "local mem +", "failed"
    );
    for ph in &p.phases {
        let _ = writeln!(
            o,
            "   {:<11} {:>9} {:>11} {:>11} {:>13} {:>11} {:>9}",
            ph.phase.label(),
            seconds(ph.duration_s),
            ph.device_used_peak.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(ph.pool_reserved_peak),
            bytes(ph.out_of_pool_allocated),
            bytes(ph.local_memory_growth),
            ph.failed_requests
        );
    }
    for ph in &p.phases {
        let oop: Vec<_> = ph.by_source.iter().filter(|s| s.source != crate::analysis::sources::TORCH_POOL && s.allocated > 0).collect();
        if !oop.is_empty() {
            let parts: Vec<String> = oop.iter().map(|s| format!("{} {} ({} calls)", s.source, bytes(s.allocated), s.calls)).collect();
            let _ = writeln!(o, "   out-of-pool in {}: {}", ph.phase.label(), parts.join(", "));
        }
        if ph.module_loads > 0 || ph.kernels_first_launched > 0 {
            let _ = writeln!(o, "   code in {}: {} module loads ({}), {} kernels first launched", ph.phase.label(), ph.module_loads, bytes(ph.module_bytes), ph.kernels_first_launched);
        }
    }
    for l in &p.local_memory {
        let _ = writeln!(
            o,
            "   local memory grew {} -> {} in {} at {:.3}s: {} ({} B/thread spilled, {} regs)",
            bytes(l.before),
            bytes(l.after),
            l.phase.label(),
            l.t_s,
            l.kernel,
            l.per_thread,
            l.registers
        );
    }
    for ph in &p.phases {
        if let Some(g) = &ph.gap_end {
            let parts: Vec<String> = g.parts.iter().map(|(n, b)| format!("{n} {}", bytes(*b))).collect();
            let _ = writeln!(
                o,
                "   at end of {}: device {} = pool {} + outside pool {} [{}; unexplained {}]",
                ph.phase.label(),
                bytes(g.device_used),
                bytes(g.pool_reserved),
                bytes(g.out_of_pool),
                parts.join(", "),
                signed_bytes(g.unexplained)
            );
        }
    }
    for f in &p.failures {
        let _ = writeln!(
            o,
            "   FAILED {} of {} by {} in {} at {:.3}s (CUresult {}), device free then: {}",
            f.api,
            bytes(f.bytes),
            f.source,
            f.phase.label(),
            f.t_s,
            f.result,
            f.free_before.map(bytes).unwrap_or_else(|| "?".into())
        );
    }
    let h = &p.health;
    if h.dropped_probe_events > 0 || h.dropped_cupti_records > 0 {
        let _ = writeln!(o, "   LOST: {} probe events and {} CUPTI records were dropped", h.dropped_probe_events, h.dropped_cupti_records);
    }
    let _ = writeln!(
        o,
        "   probe cost: {} callbacks ({}), {} kernel records ({})",
        h.callbacks,
        seconds(h.callback_seconds),
        h.activity_records,
        seconds(h.activity_seconds)
    );
    for pr in &p.problems {
        let _ = writeln!(o, "   problem: {}: {}", pr.file, pr.what);
    }
}
