//! A late warmup (what still lands after setup) in words, for every format.

use super::figures::{KEY_WIDTH, NAME_WIDTH, nccl_seconds, plural, seconds, shorten};
use crate::units::bytes;

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
