//! Figures and words as every format writes them: seconds at the precision
//! they have, shortened names, a driver result's name, a phase's name.

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

/// "1 kernel first launched", "3 kernels first launched": a count with its
/// noun, so no line says "1 kernels".
pub fn plural(n: u32, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

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

/// Shortens `text` to at most `width` display columns (wide and combining
/// characters counted as a terminal shows them), ending in "…" when cut; a
/// wide character that would cross the edge is left out whole. The one
/// shortener of the text formats and the dashboard.
pub fn shorten(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let room = width - 1;
    let mut used = 0;
    let cut: String = text
        .chars()
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= room
        })
        .collect();
    format!("{cut}…")
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
