//! An out-of-memory failure's what-ifs and remedy in words, for every format.

use crate::units::bytes;

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
