//! What a timeline marker is called and says, in every format that
//! draws one.

use crate::analysis::timeline::{Marker, MarkerKind};
use crate::report::{bytes, seconds};

/// Short name of a marker kind (legends, lanes, tables).
pub fn marker_kind_label(k: MarkerKind) -> &'static str {
    match k {
        MarkerKind::Allocation => "allocation",
        MarkerKind::LocalMemory => "local memory",
        MarkerKind::NcclComm => "NCCL init",
        MarkerKind::Autotune => "autotune",
        MarkerKind::Compile => "compile",
        MarkerKind::Oom => "OOM",
    }
}

/// One line describing a timeline marker: what it was, when, and its detail
/// (hover text in HTML, the detail line in the dashboard). `no_step`: the
/// process has no step placed, so its one phase is "before any step".
pub fn marker_text(m: &Marker, no_step: bool) -> String {
    let at = if m.t_s < 1.0 {
        format!("{:.3} ms", m.t_s * 1e3)
    } else {
        format!("{:.3} s", m.t_s)
    };
    let when = format!(
        "at {at}{}",
        m.phase.map_or(String::new(), |p| {
            match crate::report::phase_word(no_step, p, None) {
                w if w == crate::report::BEFORE_ANY_STEP => format!(" {w}"),
                w => format!(" in {w}"),
            }
        })
    );
    let dur = m
        .end_s
        .map(|e| {
            let d = (e - m.t_s).max(0.0);
            let d = if m.kind == MarkerKind::NcclComm {
                crate::report::nccl_seconds(d)
            } else {
                seconds(d)
            };
            format!(", {d}")
        })
        .unwrap_or_default();
    let times = if m.count > 1 {
        format!(" ({} events)", m.count)
    } else {
        String::new()
    };
    let what = if m.what.is_empty() {
        "various".to_string()
    } else {
        m.what.clone()
    };
    match m.kind {
        MarkerKind::Allocation => format!(
            "{} out-of-pool allocation{times}: {} by {} [{}] {when}",
            m.source,
            bytes(m.bytes),
            if m.libraries.is_empty() {
                "an unknown library".to_string()
            } else {
                m.libraries.join(", ")
            },
            what,
        ),
        MarkerKind::LocalMemory => format!(
            "local-memory growth{} of {} by kernel {what}{} {when}",
            if m.failed { " (failed)" } else { "" },
            bytes(m.bytes),
            m.config
                .as_ref()
                .map_or(String::new(), |c| format!(" [autotune candidate {c}]")),
        ),
        MarkerKind::NcclComm => format!(
            "NCCL communicator {}{dur}, {} {when}",
            m.key.clone().unwrap_or(what),
            bytes(m.bytes),
        ),
        MarkerKind::Autotune => format!(
            "Triton autotune {what}{} key {}{dur}{} {when}",
            times,
            m.key.as_deref().unwrap_or("not recorded"),
            m.config
                .as_ref()
                .map_or(String::new(), |c| format!(", chose {c}")),
        ),
        MarkerKind::Compile => format!("compile {what}{times}{dur} {when}"),
        MarkerKind::Oom => format!(
            "OUT OF MEMORY: {what} ({} by {}) {when}",
            bytes(m.bytes),
            if m.libraries.is_empty() {
                m.source.clone()
            } else {
                m.libraries.join(", ")
            }
        ),
    }
}
