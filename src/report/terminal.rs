//! The terminal summary printed at the end of every run and by `report`:
//! the step-1 story of each rank, headline first.

use super::escape::{command_line, terminal};
use super::{bytes, seconds, signed_bytes};
use crate::analysis::AttemptAccount;
use crate::analysis::model::{GapAccount, PhaseAccount, ProcessAccount};
use crate::analysis::phases::Phase;
use crate::analysis::ranks::{RankSpread, step1_comm_count, step1_out_of_pool, step1_peak};
use crate::analysis::sources::TORCH_POOL;
use std::fmt::Write;

fn who(p: &ProcessAccount) -> String {
    let dev = p.device.map(|d| format!(", cuda:{d}")).unwrap_or_default();
    match p.rank {
        Some(r) => format!("rank {r} (host {}, pid {}{dev})", terminal(&p.host), p.pid),
        None => format!("process {} (host {}{dev})", p.pid, terminal(&p.host)),
    }
}

/// "setup", "step 3", ... — or, for a process that never reached an
/// optimizer step, "before the first optimizer step" (it may have died in step 1).
fn step_label_in(p: &ProcessAccount, phase: Phase, step: Option<u32>) -> String {
    match (phase, step) {
        (Phase::Setup, _) if p.steps.step1_s.is_none() => {
            "the run before any optimizer step".into()
        }
        (Phase::Setup, _) => "setup".into(),
        (_, Some(n)) => format!("step {n}"),
        (ph, None) => ph.label().into(),
    }
}

/// Renders one attempt's summary.
pub fn render_attempt(a: &AttemptAccount) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "== prewarm-doctor: variant '{}', attempt {}{}{}",
        terminal(&a.variant),
        terminal(&a.attempt),
        if a.warmup {
            " (cache warm-up, untimed)"
        } else {
            ""
        },
        a.exit_code
            .map(|c| format!(" — exit code {c}"))
            .unwrap_or_default()
    );
    if !a.command.is_empty() {
        let _ = writeln!(o, "   command: {}", command_line(&a.command));
    }
    for n in &a.host_notices {
        let _ = writeln!(o, "   note: {}", terminal(n));
    }
    if a.processes.is_empty() {
        let _ = writeln!(
            o,
            "   no GPU-side capture: no process created a CUDA context with the probe loaded."
        );
    }
    if a.processes.len() > 1 {
        rank_table(&mut o, &a.processes, a.ranks.as_ref());
    }
    if let Some(line) = a.ranks.as_ref().and_then(super::missing_ranks_line) {
        let _ = writeln!(o, "   {line}");
    }
    for p in &a.processes {
        render_process(&mut o, p);
    }
    if !a.problems.is_empty() {
        let _ = writeln!(o, "-- problems reading the run");
        for pr in &a.problems {
            let _ = writeln!(o, "   {}", terminal(&pr.to_string()));
        }
    }
    o
}

/// Every rank side by side, with the worst rank and the skew between ranks.
fn rank_table(o: &mut String, ps: &[ProcessAccount], spread: Option<&RankSpread>) {
    let _ = writeln!(
        o,
        "   {:<8} {:<14} {:>12} {:>18} {:>11} {:>11} {:>4}",
        "rank", "host", "step-1 peak", "step-1 out-of-pool", "step-1 time", "step-1 NCCL", "OOM"
    );
    for p in ps {
        let comms = step1_comm_count(p);
        let _ = writeln!(
            o,
            "   {:<8} {:<14} {:>12} {:>18} {:>11} {:>11} {:>4}",
            p.rank.map_or(format!("pid {}", p.pid), |r| r.to_string()),
            p.host,
            step1_peak(p).map(bytes).unwrap_or_else(|| "?".into()),
            bytes(step1_out_of_pool(p)),
            p.steps.step1_s.map(seconds).unwrap_or_else(|| "?".into()),
            comms,
            if p.forensics.is_empty() { "" } else { "yes" }
        );
    }
    let Some(s) = spread else { return };
    for l in super::spread_lines(s) {
        let _ = writeln!(
            o,
            "   {}: {} ({}); skew across ranks {}",
            l.label, l.owner, l.value, l.skew
        );
    }
}

fn gap_line(phase: Phase, g: &GapAccount) -> String {
    let label = if phase == Phase::Teardown {
        "the run".to_string()
    } else {
        phase.label().to_string()
    };
    let parts: Vec<String> = g
        .parts
        .iter()
        .map(|p| {
            format!(
                "{}{} {}",
                p.name,
                if p.inferred { " (inferred)" } else { "" },
                signed_bytes(p.bytes)
            )
        })
        .collect();
    format!(
        "   at end of {label}: device {} = pool {} + outside pool {} = {}; unexplained {}",
        bytes(g.device_used),
        bytes(g.pool_reserved),
        bytes(g.out_of_pool),
        parts.join(" + "),
        signed_bytes(g.unexplained)
    )
}

fn phase_table(o: &mut String, phases: &[PhaseAccount]) {
    let _ = writeln!(
        o,
        "   {:<15} {:>9} {:>11} {:>11} {:>13} {:>11} {:>6}",
        "phase", "time", "device peak", "pool peak", "out-of-pool +", "local mem +", "failed"
    );
    for ph in phases {
        let _ = writeln!(
            o,
            "   {:<15} {:>9} {:>11} {:>11} {:>13} {:>11} {:>6}",
            ph.phase.label(),
            seconds(ph.duration_s),
            ph.device_used_peak.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(ph.pool_reserved_peak),
            bytes(ph.out_of_pool_allocated),
            bytes(ph.local_memory_growth),
            ph.failed_requests
        );
    }
}

fn render_process(o: &mut String, p: &ProcessAccount) {
    let _ = writeln!(o, "-- {}", who(p));
    if !p.capture.active {
        let _ = writeln!(
            o,
            "   capture: OFF — {} (the run itself was not affected)",
            p.capture.detail
        );
    }
    let s = &p.steps;
    match (s.step1_s, s.steady_step_s) {
        (Some(s1), Some(ss)) => {
            let _ = writeln!(
                o,
                "   step 1 took {} vs {} per steady step ({:.0}x); setup {}; {} steps",
                seconds(s1),
                seconds(ss),
                s1 / ss.max(1e-9),
                s.setup_s.map(seconds).unwrap_or_else(|| "?".into()),
                s.count
            );
        }
        (Some(s1), None) => {
            let _ = writeln!(o, "   step 1 took {}; {} steps", seconds(s1), s.count);
        }
        _ => {
            let _ = writeln!(
                o,
                "   no optimizer step completed: the whole run is counted as setup"
            );
        }
    }
    if s.step1_s.is_some() {
        let _ = writeln!(o, "   step 1 starts at: {}", s.rule);
    }
    if let Some(st) = p
        .phases
        .iter()
        .find(|ph| ph.phase == Phase::Step1)
        .map(|ph| &ph.stall)
    {
        let _ = writeln!(
            o,
            "   step-1 time: compile {}, autotune {}, NCCL init {}, module loading {}, other {}",
            seconds(st.compile_s),
            seconds(st.autotune_s),
            seconds(st.nccl_init_s),
            seconds(st.module_load_s),
            seconds(st.other_s)
        );
    }
    phase_table(o, &p.phases);
    for ph in &p.phases {
        let oop: Vec<String> = ph
            .by_source
            .iter()
            .filter(|x| x.source != TORCH_POOL && x.allocated > 0)
            .map(|x| {
                format!(
                    "{} {} ({} calls, {})",
                    x.source,
                    bytes(x.allocated),
                    x.calls,
                    seconds(x.alloc_seconds)
                )
            })
            .collect();
        if !oop.is_empty() {
            let _ = writeln!(
                o,
                "   out of pool in {}: {}",
                ph.phase.label(),
                oop.join(", ")
            );
        }
        let loads: Vec<String> = ph
            .by_source
            .iter()
            .filter(|x| x.module_loads > 0)
            .map(|x| {
                format!(
                    "{} {} ({})",
                    x.source,
                    x.module_loads,
                    seconds(x.load_seconds)
                )
            })
            .collect();
        if !loads.is_empty() {
            let _ = writeln!(
                o,
                "   module loads in {}: {}; {} kernels first launched",
                ph.phase.label(),
                loads.join(", "),
                ph.kernels_first_launched
            );
        }
    }
    for ph in &p.phases {
        if let Some(g) = &ph.gap_end {
            let _ = writeln!(o, "{}", gap_line(ph.phase, g));
        }
    }
    for l in &p.local_memory {
        let _ = writeln!(
            o,
            "   local memory {} {} -> {}{} in {} at {:.2}s: {}{} ({} regs)",
            if l.failed { "could NOT grow" } else { "grew" },
            bytes(l.before),
            bytes(l.after),
            if l.failed {
                String::new()
            } else {
                format!(" (device +{})", bytes(l.device_growth))
            },
            step_label_in(p, l.phase, l.step),
            l.t_s,
            terminal(&l.kernel),
            l.autotune_config
                .as_ref()
                .map(|c| format!(" [autotune candidate {}]", terminal(c)))
                .unwrap_or_default(),
            l.registers
        );
    }
    for c in &p.nccl {
        let _ = writeln!(
            o,
            "   NCCL communicator {} ({} ranks) created in {}: {}, {} allocated + {} without allocation calls",
            c.comm_id.clone().unwrap_or_else(|| c.comm.clone()),
            c.nranks.map_or("?".into(), |n| n.to_string()),
            c.phase
                .map(|ph| step_label_in(p, ph, c.step))
                .unwrap_or_else(|| "?".into()),
            c.init_seconds.map(seconds).unwrap_or_else(|| "?".into()),
            bytes(c.bytes),
            bytes(c.inferred_bytes)
        );
    }
    for a in &p.autotune {
        if a.configs == 0 {
            let _ = writeln!(
                o,
                "   Triton autotune of {} was interrupted by the failure while benchmarking candidate {}",
                terminal(&a.kernel),
                terminal(&a.spilling_configs.join(" | "))
            );
            continue;
        }
        let _ = writeln!(
            o,
            "   Triton autotune {} key {} in {}: {}, {}/{} configs benchmarked ({}), chose {}{}",
            terminal(&a.kernel),
            terminal(&a.key),
            step_label_in(p, a.phase, a.step),
            seconds(a.seconds),
            a.benchmarked,
            a.configs,
            a.source,
            terminal(&a.chosen),
            if a.spilling_configs.is_empty() {
                String::new()
            } else {
                format!(
                    "; local memory grew while benchmarking {}{}",
                    terminal(&a.spilling_configs.join(" | ")),
                    if a.local_memory_growth > 0 {
                        format!(" (+{})", bytes(a.local_memory_growth))
                    } else {
                        String::new()
                    }
                )
            }
        );
    }
    let compile_total: f64 = p.compiles.iter().map(|c| c.seconds).sum();
    if !p.compiles.is_empty() {
        let misses = p
            .compiles
            .iter()
            .filter(|c| c.cache_hit == Some(false))
            .count();
        let _ = writeln!(
            o,
            "   compiles: {} ({} cache misses), {} in total",
            p.compiles.len(),
            misses,
            seconds(compile_total)
        );
    }
    for t in &p.tightest {
        let _ = writeln!(
            o,
            "   tightest out-of-pool moment in {}: {} {} of {} with {} free{}",
            t.phase.label(),
            t.source,
            terminal(&t.what),
            bytes(t.bytes),
            t.device_free_before
                .map(bytes)
                .unwrap_or_else(|| "?".into()),
            t.headroom_after
                .map(|h| format!(" ({} left)", signed_bytes(h)))
                .unwrap_or_default()
        );
    }
    if let Some(c) = p.min_capacity_bytes {
        let _ = writeln!(
            o,
            "   every out-of-pool request of this process fits on a device of {} or more",
            bytes(c)
        );
    }
    if !p.late_warmups.is_empty() {
        let _ = writeln!(
            o,
            "   still lands after setup (the warmups you still need):"
        );
        for w in &p.late_warmups {
            let mut cost = Vec::new();
            if w.seconds > 0.0 {
                cost.push(seconds(w.seconds));
            }
            if w.bytes > 0 {
                cost.push(bytes(w.bytes));
            }
            let _ = writeln!(
                o,
                "     - [{}] {} in {}{}",
                w.class.label(),
                terminal(&w.what),
                step_label_in(p, w.phase, w.step),
                if cost.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", cost.join(", "))
                }
            );
        }
    }
    for f in &p.forensics {
        let _ = writeln!(
            o,
            "   OUT OF MEMORY in {} at {:.2}s: {} with {} free",
            step_label_in(p, f.phase, f.step),
            f.t_s,
            terminal(&f.request),
            f.device_free_before
                .map(bytes)
                .unwrap_or_else(|| "?".into())
        );
        if !f.preceded_by.is_empty() {
            let parts: Vec<String> = f
                .preceded_by
                .iter()
                .map(|(c, b)| format!("{} {}", c.label(), bytes(*b)))
                .collect();
            let since = if f.step.is_some() {
                "since setup ended"
            } else {
                "earlier in setup"
            };
            let _ = writeln!(o, "     lazy initialisation {since}: {}", parts.join(", "));
        }
        if let (false, Some(c)) = (f.prewarms.is_empty(), f.movable.first()) {
            let _ = writeln!(
                o,
                "     a prewarm for {} would move that out of the failing step (known: {})",
                c.label(),
                f.prewarms.join(", ")
            );
        }
        if let Some(m) = &f.message {
            let first = m.lines().next().unwrap_or(m);
            let _ = writeln!(
                o,
                "     the process died with: {}",
                terminal(&first.chars().take(200).collect::<String>())
            );
        }
    }
    if let Some(c) = p.step_checks.first() {
        let _ = writeln!(
            o,
            "   check at step {}: torch reserved {}, doctor's pool {}",
            c.step,
            c.torch_reserved.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(c.doctor_pool_reserved)
        );
    }
    let h = &p.health;
    if h.dropped_probe_events > 0 || h.dropped_cupti_records > 0 {
        let _ = writeln!(
            o,
            "   LOST: {} probe events and {} CUPTI records were dropped (counts from the probe)",
            h.dropped_probe_events, h.dropped_cupti_records
        );
    }
    let _ = writeln!(
        o,
        "   probe: {} callbacks ({}), {} kernel records ({}); memory from {}",
        h.callbacks,
        seconds(h.callback_seconds),
        h.activity_records,
        seconds(h.activity_seconds),
        p.memory_source
    );
    for pr in &p.problems {
        let _ = writeln!(o, "   problem: {}", terminal(&pr.to_string()));
    }
}
