//! Outputs: the one report model ([`model::ReportModel`]), built once from
//! the analysis, and the formats that render it to bytes through one trait
//! ([`renderer::Renderer`]); none prints, and none chooses where its bytes
//! go (`crate::output` does).
//!
//! The files, from the bottom up: `escape`, `text_layout`, the wording
//! (`verdict_text`, `comm_text`, `gate_text`, `step_text`), the model, `account_tables`
//! and `select`, `renderer` (the trait and its error), the renderers
//! (`terminal` with `terminal_matrix`, `markdown`, `json`, `csv_out`, `html`,
//! `charts` with `svg` and `png`, `perfetto`), `format` (which renderer a
//! `--format` picks), then `diff` (two runs side by side, in a format).

pub mod account_tables;
pub mod charts;
pub mod comm_text;
pub mod csv_out;
pub mod diff;
pub mod escape;
pub mod format;
pub mod gate_text;
pub mod html;
pub mod html_breaks;
pub mod json;
pub mod markdown;
pub mod model;
pub mod perfetto;
pub mod png;
pub mod renderer;
pub mod select;
pub mod step_text;
pub mod svg;
pub mod terminal;
pub mod terminal_matrix;
pub mod text_layout;
pub mod verdict_text;

/// A CUresult as the driver's header names it (the common ones), with its number.
pub fn cu_result_name(code: u32) -> String {
    let name = match code {
        0 => "CUDA_SUCCESS",
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        3 => "CUDA_ERROR_NOT_INITIALIZED",
        4 => "CUDA_ERROR_DEINITIALIZED",
        101 => "CUDA_ERROR_INVALID_DEVICE",
        201 => "CUDA_ERROR_INVALID_CONTEXT",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        600 => "CUDA_ERROR_NOT_READY",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        800 => "CUDA_ERROR_NOT_PERMITTED",
        801 => "CUDA_ERROR_NOT_SUPPORTED",
        900 => "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        _ => return format!("CUresult {code}"),
    };
    format!("{name} ({code})")
}

/// The one phase of a process whose step 1 could not be placed (it died
/// before its first step, or never stepped): not "setup", since it may hold
/// step 1's work (docs/step-rule.md). Every format names it so.
pub const BEFORE_ANY_STEP: &str = "before any step";

/// A phase as every format names it: "setup", "step 1", "step 7",
/// "after last step" — or [`BEFORE_ANY_STEP`] for the one phase of a process
/// without a step (`no_step`).
pub fn phase_word(
    no_step: bool,
    phase: crate::analysis::phases::Phase,
    step: Option<u32>,
) -> String {
    use crate::analysis::phases::Phase;
    match (phase, step) {
        (Phase::Setup, _) if no_step => BEFORE_ANY_STEP.into(),
        (Phase::Steady, Some(n)) => format!("step {n}"),
        (p, _) => p.label().into(),
    }
}

/// Whether a process has no step 1 placed (its run is one phase).
pub fn no_step(p: &crate::analysis::account::ProcessAccount) -> bool {
    p.steps.step1_s.is_none()
}

/// The byte formatter lives below analysis and report (`crate::units`).
pub use crate::units::{bytes, signed_bytes};

/// Seconds with sensible precision.
pub fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1000.0)
    }
}

/// An NCCL communicator's init time at the resolution NCCL gives it: its
/// "Init timings" line prints seconds with two decimals, so 10 ms steps —
/// "470 ms", "1.23 s", never "470.0 ms" (a time taken from the Init
/// START/COMPLETE timestamps instead is rounded the same way, never shown
/// finer than the figures beside it).
pub fn nccl_seconds(s: f64) -> String {
    let centis = (s * 100.0).round();
    if centis >= 100.0 {
        format!("{:.2} s", centis / 100.0)
    } else {
        format!("{:.0} ms", centis * 10.0)
    }
}

/// [`seconds`], with microseconds below a millisecond: for a hook's cost
/// in a warm step, which "0.0 ms" would hide.
pub fn fine_seconds(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else {
        seconds(s)
    }
}

/// Longest autotune key the terminal and Markdown show (JSON keeps them whole).
pub const KEY_WIDTH: usize = 48;

/// Longest kernel name in a late-warmup line (JSON keeps it whole).
pub const NAME_WIDTH: usize = 60;

/// Shortens `text` to `width` characters, ending in "…" when cut.
pub fn shorten(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let cut: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// A late warmup in words, for any renderer: what to warm, what it cost,
/// where it appeared, and its keys shortened to `KEY_WIDTH` (at most three).
/// Names come from the run: renderers escape them.
pub struct WarmupText {
    pub class: &'static str,
    pub what: String,
    pub cost: String,
    pub when: String,
    pub keys: Vec<String>,
}

/// Phrases one late warmup.
pub fn warmup_text(w: &crate::analysis::account::LateWarmup) -> WarmupText {
    use crate::prewarm::catalog::EventClass;
    let plural = |n: u32, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let what = match w.class {
        EventClass::TritonAutotune => {
            let mut t = if w.keys.is_empty() {
                format!("{}: autotune", shorten(&w.subject, NAME_WIDTH))
            } else {
                format!(
                    "{}: {} autotuned",
                    shorten(&w.subject, NAME_WIDTH),
                    plural(w.keys.len() as u32, "new key", "new keys")
                )
            };
            if w.compiles > 0 {
                t.push_str(&format!(", {}", plural(w.compiles, "compile", "compiles")));
            }
            t
        }
        EventClass::Compile => {
            format!(
                "{}: {}",
                shorten(&w.subject, NAME_WIDTH),
                plural(w.compiles, "compile", "compiles")
            )
        }
        EventClass::NcclComm => format!("communicator {}", w.subject),
        EventClass::Cublas => format!("{} (handles, workspaces, kernels)", w.subject),
        EventClass::LocalMemory => {
            format!("{}: local-memory growth", shorten(&w.subject, NAME_WIDTH))
        }
        EventClass::ModuleLoad => format!(
            "{} (lazy module loading)",
            plural(w.events, "kernel first launched", "kernels first launched")
        ),
    };
    let mut cost = Vec::new();
    if w.seconds > 0.0 {
        cost.push(if w.class == EventClass::NcclComm {
            nccl_seconds(w.seconds)
        } else {
            seconds(w.seconds)
        });
    }
    if w.bytes > 0 {
        cost.push(bytes(w.bytes));
    }
    let when = match w.steps.split_first() {
        Some((first, [])) => format!("step {first}"),
        Some((first, rest)) => {
            let more: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
            format!("step {first}, again in step {}", more.join(", "))
        }
        None if w.phase == crate::analysis::phases::Phase::Teardown => {
            "after the last step".to_string()
        }
        None => w.phase.label().to_string(),
    };
    let mut keys: Vec<String> = w
        .keys
        .iter()
        .take(3)
        .map(|k| shorten(k, KEY_WIDTH))
        .collect();
    if w.keys.len() > 3 {
        keys.push(format!("+{} more", w.keys.len() - 3));
    }
    WarmupText {
        class: w.class.label(),
        what,
        cost: cost.join(", "),
        when,
        keys,
    }
}

/// The line that stands for the minor late warmups, if any: "and 12 more
/// under 50 ms / 1 MiB each (35.2 ms, 12.0 KiB in all)".
pub fn minor_warmups_line(ws: &[crate::analysis::account::LateWarmup]) -> Option<String> {
    let minor: Vec<_> = ws.iter().filter(|w| w.minor).collect();
    if minor.is_empty() {
        return None;
    }
    let secs: f64 = minor.iter().map(|w| w.seconds).sum();
    let b: u64 = minor.iter().map(|w| w.bytes).sum();
    Some(format!(
        "and {} more under {} / {} each ({}, {} in all)",
        minor.len(),
        seconds(crate::analysis::framework_joins::MINOR_SECONDS),
        bytes(crate::analysis::framework_joins::MINOR_BYTES),
        seconds(secs),
        bytes(b)
    ))
}

/// "fits with 1.2 GiB to spare" / "still short by 1.6 GiB".
pub fn margin_text(margin: i64) -> String {
    if margin >= 0 {
        format!("fits with {} to spare", bytes(margin as u64))
    } else {
        format!("still short by {}", bytes(margin.unsigned_abs()))
    }
}

/// Candidate prewarms that would leave the failure point alike, in words:
/// their names, the outcome ("still short by …"), and why.
pub struct ProjectionText {
    pub prewarms: Vec<String>,
    pub outcome: String,
    /// Clauses, in order.
    pub why: Vec<String>,
}

/// Groups a failure's projections (same outcome, same reason) and phrases
/// them, best outcome first.
pub fn projection_texts(f: &crate::analysis::account::Forensic) -> Vec<ProjectionText> {
    let mut groups: Vec<(&crate::analysis::account::PrewarmProjection, Vec<String>)> = Vec::new();
    for p in &f.projections {
        let same = groups.iter_mut().find(|(q, _)| {
            q.margin == p.margin
                && q.moves_request == p.moves_request
                && q.persistent_bytes == p.persistent_bytes
                && q.transient_bytes == p.transient_bytes
                && q.margin_with_pool_cache == p.margin_with_pool_cache
        });
        match same {
            Some((_, names)) => names.push(p.prewarm.clone()),
            None => groups.push((p, vec![p.prewarm.clone()])),
        }
    }
    groups.sort_by_key(|(p, _)| std::cmp::Reverse(p.margin));
    let request_persists = crate::analysis::framework_joins::class_of_source(&f.source)
        .is_none_or(crate::analysis::forensics::persists);
    let held_phrase = if f.source == "local memory" {
        "where it stays: local memory is never given back"
    } else if request_persists {
        "where it stays held"
    } else {
        "and gives it back before the step"
    };
    groups
        .into_iter()
        .map(|(p, prewarms)| {
            let mut why = Vec::new();
            if p.moves_request {
                why.push(format!(
                    "moves the {} request to setup, {held_phrase}",
                    bytes(f.bytes)
                ));
            }
            let request_held = if p.moves_request && request_persists {
                f.bytes
            } else {
                0
            };
            let other_held = p.persistent_bytes - request_held;
            if p.moved_bytes > 0 {
                let what = if p.moves_request {
                    format!(
                        "and {} more of the classes it targets before it",
                        bytes(p.moved_bytes)
                    )
                } else {
                    format!("moves {} to setup", bytes(p.moved_bytes))
                };
                let held = if other_held >= p.moved_bytes {
                    "all of it still held here".to_string()
                } else {
                    format!("{} of it still held here", bytes(other_held))
                };
                why.push(format!("{what}, {held}"));
            }
            if why.is_empty() {
                why.push("moves nothing held at the failure".to_string());
            }
            if let Some(m) = p.margin_with_pool_cache {
                why.push(format!(
                    "if the pool gave back its unused cache: {}",
                    margin_text(m)
                ));
            }
            ProjectionText {
                prewarms,
                outcome: margin_text(p.margin),
                why,
            }
        })
        .collect()
}

/// A remedy in words (names from the run: renderers escape them).
pub fn remedy_text(r: &crate::analysis::account::Remedy) -> String {
    match r {
        crate::analysis::account::Remedy::PruneAutotuneConfig {
            kernel,
            config,
            local_bytes,
            per_thread,
            registers,
            margin,
        } => {
            let per_thread = if *per_thread > 0 {
                format!("{per_thread} bytes of local memory per thread, ")
            } else {
                String::new()
            };
            format!(
                "prune the candidate {config} from {kernel}'s autotune configs: its launch asked \
                 the local-memory reservation for {} more ({per_thread}{registers} registers); \
                 without it this point {} and the autotuner chooses among the rest",
                bytes(*local_bytes),
                margin_text(*margin)
            )
        }
    }
}

/// One line of the rank spread: figure, the rank it belongs to, its value,
/// and the skew across ranks, formatted for any renderer.
pub struct SpreadLine {
    pub label: &'static str,
    pub owner: String,
    pub value: String,
    pub skew: String,
}

/// The worst rank and skew for each figure the spread holds.
pub fn spread_lines(s: &crate::analysis::ranks::RankSpread) -> Vec<SpreadLine> {
    let mut out = Vec::new();
    let mut push = |label, owner: Option<String>, value: Option<String>, skew: Option<String>| {
        if let (Some(owner), Some(value), Some(skew)) = (owner, value, skew) {
            out.push(SpreadLine {
                label,
                owner,
                value,
                skew,
            });
        }
    };
    let peak = s.worst_step1_peak.as_ref();
    push(
        "worst step-1 peak",
        peak.map(|w| w.owner()),
        peak.map(|w| bytes(w.value)),
        s.step1_peak_skew.map(bytes),
    );
    let oop = s.worst_step1_out_of_pool.as_ref();
    push(
        "most step-1 out-of-pool",
        oop.map(|w| w.owner()),
        oop.map(|w| bytes(w.value)),
        s.step1_out_of_pool_skew.map(bytes),
    );
    let slow = s.slowest_step1.as_ref();
    push(
        "slowest step 1",
        slow.map(|w| w.owner()),
        slow.map(|w| seconds(w.value)),
        s.step1_skew_s.map(seconds),
    );
    out
}

/// The ranks of the world with no capture here, and the likely reason.
pub fn missing_ranks_line(s: &crate::analysis::ranks::RankSpread) -> Option<String> {
    if s.missing_ranks.is_empty() {
        return None;
    }
    Some(format!(
        "missing: rank(s) {} of world size {} have no capture in this run folder (their node's doctor wrote elsewhere: `--out` must be on a filesystem every node shares; or it never started)",
        crate::analysis::ranks::rank_ranges(&s.missing_ranks),
        s.world_size.unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL prints init times with two decimals of a second: shown in 10 ms
    /// steps, never with a tenth of a millisecond it does not have.
    #[test]
    fn nccl_init_times_are_shown_at_the_logs_resolution() {
        assert_eq!(nccl_seconds(0.47), "470 ms");
        assert_eq!(nccl_seconds(0.05), "50 ms");
        assert_eq!(nccl_seconds(0.0), "0 ms");
        assert_eq!(nccl_seconds(1.23), "1.23 s");
        assert_eq!(nccl_seconds(0.999), "1.00 s");
        // A time from the Init START/COMPLETE timestamps: rounded alike.
        assert_eq!(nccl_seconds(0.3849), "380 ms");
    }

    #[test]
    fn long_keys_are_shortened_for_people() {
        assert_eq!(shorten("(4096, 'bf16')", 48), "(4096, 'bf16')");
        let long = "x".repeat(60);
        let short = shorten(&long, 10);
        assert_eq!(short.chars().count(), 10);
        assert!(short.ends_with('…'));
    }

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(signed_bytes(-(1 << 20)), "-1.0 MiB");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(12.345), "12.35 s");
    }
}
