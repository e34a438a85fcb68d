//! Capture: run the command once with the probe, shim and NVML sampler around
//! it, and leave a complete host folder behind. Never prints; returns what
//! happened for the caller to show.

pub mod child;
pub mod env;
pub mod layout;
pub mod matrix;
pub mod meta;
pub mod nvml;
pub mod output;

use crate::probe::Assets;
use child::{ChildError, ChildExit, run_child};
use env::{CacheMode, EnvNotice, EnvPlan, build_env, redact_args, redacted};
use layout::{AttemptDir, HOST_FILE, NVML_FILE};
use meta::{HostMeta, META_SCHEMA};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything one attempt needs.
pub struct AttemptPlan<'a> {
    pub dir: AttemptDir,
    pub command: Vec<String>,
    pub assets: Option<&'a Assets>,
    pub cupti: Option<PathBuf>,
    pub cache: CacheMode,
    /// Where this attempt's Triton/inductor/CUDA-JIT caches live (unused for `User`).
    pub cache_dir: PathBuf,
    pub warmup: bool,
    pub kernel_steps: u32,
    pub step_marker: Option<String>,
    pub extra_env: Vec<(String, String)>,
    /// `run --tui`: where the command's output goes besides `output.log`.
    pub output: Option<Arc<dyn output::OutputSink>>,
}

/// Why an attempt could not produce a host folder.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot create the run folder {path}: {source}")]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Meta {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Child(#[from] ChildError),
}

/// The result of one attempt (its host.json holds the rest).
#[derive(Debug)]
pub struct AttemptOutcome {
    pub exit: ChildExit,
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: writes at most buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The default host tag: $PREWARM_DOCTOR_HOST or the hostname.
pub fn default_host_tag() -> String {
    std::env::var("PREWARM_DOCTOR_HOST")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(hostname)
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into our timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn write_meta(path: &Path, meta: &HostMeta) -> Result<(), CaptureError> {
    let text = serde_json::to_string_pretty(meta).expect("metadata serialises");
    std::fs::write(path, text).map_err(|source| CaptureError::Meta {
        path: path.to_path_buf(),
        source,
    })
}

/// Runs the command once under capture.
pub fn run_attempt(plan: &AttemptPlan) -> Result<AttemptOutcome, CaptureError> {
    let host_dir = plan.dir.host_dir();
    std::fs::create_dir_all(&host_dir).map_err(|source| CaptureError::Folder {
        path: host_dir.clone(),
        source,
    })?;
    let cache_dir = plan.cache_dir.clone();
    if plan.cache != CacheMode::User {
        std::fs::create_dir_all(&cache_dir).map_err(|source| CaptureError::Folder {
            path: cache_dir.clone(),
            source,
        })?;
    }
    let parent: BTreeMap<String, String> = std::env::vars().collect();
    let mut notices = Vec::new();

    let visible = parent.get("CUDA_VISIBLE_DEVICES").cloned();
    let (sampler, gpus, driver) = match nvml::open(visible.as_deref()) {
        Ok((nvml, gpus, driver)) => {
            match nvml::Sampler::start(nvml, &gpus, &host_dir.join(NVML_FILE)) {
                Ok(s) => (Some(s), gpus, driver),
                Err(e) => {
                    notices.push(e.to_string());
                    (None, gpus, driver)
                }
            }
        }
        Err(e) => {
            notices.push(e.to_string());
            (None, Vec::new(), Default::default())
        }
    };

    let fallback_shim = host_dir.join("no-shim");
    let shim_dir = plan
        .assets
        .map_or(fallback_shim.as_path(), |a| a.shim_dir.as_path());
    let host_tag = plan.dir.host.clone();
    let env_plan = EnvPlan {
        probe: plan.assets.map(|a| a.probe.as_path()),
        shim_dir,
        host_dir: &host_dir,
        host_tag: &host_tag,
        cupti: plan.cupti.as_deref(),
        cache: plan.cache,
        cache_dir: &cache_dir,
        kernel_steps: plan.kernel_steps,
        step_marker: plan.step_marker.as_deref(),
        extra: &plan.extra_env,
    };
    let (mut env, env_notices) = build_env(&parent, &env_plan);
    if plan.output.is_some() {
        // Piped, Python would hold the output back in 8 KiB blocks: the
        // dashboard's log pane shows it as it comes.
        env.entry("PYTHONUNBUFFERED".into())
            .or_insert_with(|| "1".into());
    }
    for n in env_notices {
        notices.push(match n {
            EnvNotice::InjectionTaken(p) => format!(
                "CUDA_INJECTION64_PATH was already set to {p}: CUDA loads one injection library, so this run is not instrumented (unset it to capture)"
            ),
            EnvNotice::NcclDebugTaken => {
                "NCCL_DEBUG is set by you: NCCL output goes where you asked and communicator init timings are not captured (unset NCCL_DEBUG to capture them)".to_string()
            }
        });
    }
    if plan.assets.is_none() {
        notices.push("the probe could not be prepared: this run is not instrumented".to_string());
    }
    if plan.cupti.is_none() && plan.assets.is_some() {
        notices.push(
            "no libcupti was found by the doctor; the probe will try the copy torch loads, if any"
                .to_string(),
        );
    }

    let mut meta = HostMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").to_string(),
        host: host_tag.clone(),
        hostname: hostname(),
        variant: plan.dir.variant.clone(),
        attempt: plan.dir.attempt.clone(),
        command: redact_args(&plan.command),
        cwd: std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        env: redacted(&env),
        started: chrono::Local::now().to_rfc3339(),
        started_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        t_start_ns: monotonic_ns(),
        t_end_ns: None,
        exit: None,
        spawn_error: None,
        gpus,
        driver,
        cache: plan.cache,
        warmup: plan.warmup,
        probe_path: plan.assets.map(|a| a.probe.display().to_string()),
        probe_sha256: plan.assets.map(|a| a.probe_sha256.clone()),
        cupti_path: plan.cupti.as_ref().map(|p| p.display().to_string()),
        notices,
        nvml_samples: 0,
    };
    let meta_path = host_dir.join(HOST_FILE);
    write_meta(&meta_path, &meta)?;

    let capture = plan.output.as_ref().map(|sink| {
        Arc::new(output::OutputCapture::new(
            host_dir.join(output::OUTPUT_FILE),
            sink.clone(),
        ))
    });
    let result = run_child(&plan.command, &env, capture.as_ref(), |_| {});
    if let Some(e) = capture.as_ref().and_then(|c| c.error()) {
        meta.notices
            .push(format!("the command's output is incomplete: {e}"));
    }
    meta.t_end_ns = Some(monotonic_ns());
    if let Some(s) = sampler {
        let (n, err) = s.stop();
        meta.nvml_samples = n;
        if let Some(e) = err {
            meta.notices
                .push(format!("the NVML timeline stopped early: {e}"));
        }
    }
    match result {
        Ok(exit) => {
            meta.exit = Some(exit);
            write_meta(&meta_path, &meta)?;
            Ok(AttemptOutcome { exit })
        }
        Err(e) => {
            meta.spawn_error = Some(e.to_string());
            write_meta(&meta_path, &meta)?;
            Err(e.into())
        }
    }
}
