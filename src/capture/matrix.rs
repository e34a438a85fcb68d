//! The A/B matrix: every variant, repeated, each attempt in a fresh process
//! tree with its own caches. Attempts are interleaved (round-robin over
//! variants) so slow drift of the machine does not favour one variant.

use super::child_output::OutputSink;
use super::{AttemptOutcome, AttemptPlan, CaptureError, run_attempt};
use crate::injection::Assets;
use crate::run_folder::layout::AttemptDir;
use crate::run_folder::meta::CacheMode;
use crate::run_folder::meta::VariantSpec;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One planned attempt.
#[derive(Debug, Clone)]
pub struct PlannedAttempt {
    pub variant: usize,
    pub attempt: String,
    pub warmup: bool,
}

/// The order attempts run in: warm-ups first (warm mode), then repeats
/// round-robin, numbered from `first` (above the attempts an earlier run of
/// the same command left in the folder, which are never overwritten).
pub fn schedule(variants: usize, first: u32, repeat: u32, cache: CacheMode) -> Vec<PlannedAttempt> {
    let mut out = Vec::new();
    if cache == CacheMode::Warm {
        let name = if first > 1 {
            format!("warmup-{first}")
        } else {
            "warmup".into()
        };
        for v in 0..variants {
            out.push(PlannedAttempt {
                variant: v,
                attempt: name.clone(),
                warmup: true,
            });
        }
    }
    for r in first..first.saturating_add(repeat) {
        for v in 0..variants {
            out.push(PlannedAttempt {
                variant: v,
                attempt: r.to_string(),
                warmup: false,
            });
        }
    }
    out
}

/// Progress reported before each attempt.
#[derive(Debug, Clone)]
pub struct Progress {
    pub index: usize,
    pub total: usize,
    pub variant: String,
    pub attempt: String,
    pub warmup: bool,
    pub elapsed: Duration,
    pub eta: Option<Duration>,
}

/// What the matrix needs.
pub struct MatrixPlan<'a> {
    pub run: PathBuf,
    pub host: String,
    /// The command as given (need not be UTF-8); each variant's args are appended.
    pub command: Vec<std::ffi::OsString>,
    pub variants: Vec<VariantSpec>,
    pub repeat: u32,
    /// Number of the first repeat (1 unless the folder already holds attempts of this host).
    pub first_repeat: u32,
    pub cache: CacheMode,
    pub keep_caches: bool,
    pub assets: Option<&'a Assets>,
    pub cupti: Option<PathBuf>,
    pub kernel_steps: u32,
    pub step_marker: Option<String>,
    /// `run --tui`: where each attempt's output goes besides its `output.log`.
    pub output: Option<Arc<dyn OutputSink>>,
    /// Set to stop before the next attempt (the dashboard's "stop the run").
    pub stop: Option<Arc<AtomicBool>>,
}

/// One attempt's result (a failure to even start is kept, not raised).
pub type AttemptResult = (PlannedAttempt, Result<AttemptOutcome, CaptureError>);

/// Runs the whole matrix; `on_progress` is called before each attempt.
pub fn run_matrix(plan: &MatrixPlan, mut on_progress: impl FnMut(&Progress)) -> Vec<AttemptResult> {
    let order = schedule(
        plan.variants.len(),
        plan.first_repeat,
        plan.repeat,
        plan.cache,
    );
    let started = Instant::now();
    let mut results = Vec::new();
    for (i, planned) in order.iter().enumerate() {
        if plan.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst)) {
            break;
        }
        let variant = &plan.variants[planned.variant];
        let elapsed = started.elapsed();
        let eta = (i > 0).then(|| elapsed.mul_f64((order.len() - i) as f64 / i as f64));
        on_progress(&Progress {
            index: i + 1,
            total: order.len(),
            variant: variant.name.clone(),
            attempt: planned.attempt.clone(),
            warmup: planned.warmup,
            elapsed,
            eta,
        });
        let dir = AttemptDir {
            run: plan.run.clone(),
            variant: variant.name.clone(),
            attempt: planned.attempt.clone(),
            host: plan.host.clone(),
        };
        let cache_dir = dir.cache_dir(plan.cache);
        let mut command = plan.command.clone();
        command.extend(variant.args.iter().map(std::ffi::OsString::from));
        let attempt = AttemptPlan {
            dir,
            command,
            assets: plan.assets,
            cupti: plan.cupti.clone(),
            cache: plan.cache,
            cache_dir: cache_dir.clone(),
            warmup: planned.warmup,
            kernel_steps: plan.kernel_steps,
            step_marker: plan.step_marker.clone(),
            extra_env: variant.env.clone(),
            output: plan.output.clone(),
        };
        let outcome = run_attempt(&attempt);
        if plan.cache == CacheMode::Cold && !plan.keep_caches {
            let _ = std::fs::remove_dir_all(&cache_dir);
        }
        // A signal from the user (Ctrl-C, SIGTERM) stops the whole matrix, not just this attempt.
        let interrupted = matches!(&outcome, Ok(o) if o.exit.forwarded > 0);
        results.push((planned.clone(), outcome));
        if interrupted {
            break;
        }
    }
    if !plan.keep_caches && matches!(plan.cache, CacheMode::Warm | CacheMode::Shared) {
        for v in &plan.variants {
            let dir = AttemptDir {
                run: plan.run.clone(),
                variant: v.name.clone(),
                attempt: String::new(),
                host: plan.host.clone(),
            };
            let _ = std::fs::remove_dir_all(dir.cache_dir(plan.cache));
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_interleaves_and_warms_first() {
        let s = schedule(2, 1, 2, CacheMode::Cold);
        let order: Vec<(usize, &str)> = s.iter().map(|a| (a.variant, a.attempt.as_str())).collect();
        assert_eq!(order, vec![(0, "1"), (1, "1"), (0, "2"), (1, "2")]);
        let w = schedule(2, 1, 1, CacheMode::Warm);
        assert!(w[0].warmup && w[1].warmup && !w[2].warmup);
        assert_eq!(w.len(), 4);
    }

    #[test]
    fn a_continued_run_numbers_after_the_existing_attempts() {
        let s = schedule(1, 3, 2, CacheMode::Warm);
        let names: Vec<&str> = s.iter().map(|a| a.attempt.as_str()).collect();
        assert_eq!(names, vec!["warmup-3", "3", "4"]);
    }
}
