//! Capture: run the command once with the probe, shim and NVML sampler around
//! it, and leave a complete host folder behind; `matrix` runs every attempt
//! of every variant, and `run` is `run`'s orchestration around it (the
//! variants, the run folder, run.json, the plan, what the attempts came to).
//! Never prints; returns what happened for the caller to show.

pub mod child;
pub mod child_output;
pub mod env;
pub mod matrix;
pub mod nvml;
pub mod run;

use crate::injection::Assets;
use crate::run_folder::layout::{AttemptDir, HOST_FILE, NVML_FILE};
use crate::run_folder::meta::{CacheMode, ChildExit, DriverInfo, GpuInfo, HostMeta, META_SCHEMA};
use crate::run_folder::redact::{redact_args, redacted};
use child::{ChildError, run_child};
use env::{EnvNotice, EnvPlan, build_env};
use prewarm_events::clock::now_ns;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything one attempt needs.
pub struct AttemptPlan<'a> {
    pub dir: AttemptDir,
    /// The command as given (arguments need not be UTF-8; they reach it byte for byte).
    pub command: Vec<OsString>,
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
    pub output: Option<Arc<dyn child_output::OutputSink>>,
}

/// Why an attempt could not produce a host folder.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(
        "{path} already exists: another doctor with the same host tag is writing this attempt (give each node of a job its own --host-tag, or each run its own --out)"
    )]
    HostTaken { path: PathBuf },
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

/// The default host tag: $PREWARM_DOCTOR_HOST or the hostname.
pub fn default_host_tag() -> String {
    std::env::var("PREWARM_DOCTOR_HOST")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(prewarm_events::host::hostname)
}

/// Arguments as text for run metadata and messages (bytes that are not UTF-8
/// become U+FFFD there; the command itself gets the original bytes).
pub fn lossy(args: &[OsString]) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// The doctor's environment, split: the variables it can read and edit
/// (UTF-8 names and values), and the rest, which the command gets byte for
/// byte (`std::env::vars` would panic on them).
fn split_environment(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> (BTreeMap<String, String>, Vec<(OsString, OsString)>) {
    let mut text = BTreeMap::new();
    let mut foreign = Vec::new();
    for (k, v) in vars {
        match (k.to_str(), v.to_str()) {
            (Some(k), Some(v)) => {
                text.insert(k.to_string(), v.to_string());
            }
            _ => foreign.push((k, v)),
        }
    }
    (text, foreign)
}

/// The command's environment: what the doctor built, plus the variables that
/// are not UTF-8, unchanged. Where the doctor also sets such a variable
/// (PYTHONPATH), the user's bytes win and a notice says what is not applied.
fn child_environment(
    built: &BTreeMap<String, String>,
    foreign: Vec<(OsString, OsString)>,
) -> (Vec<(OsString, OsString)>, Vec<String>) {
    let mut env: Vec<(OsString, OsString)> = built
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    let mut notices = Vec::new();
    for (k, v) in foreign {
        if let Some(name) = k.to_str()
            && built.contains_key(name)
        {
            notices.push(format!(
                "{name} holds bytes that are not UTF-8: passed on unchanged, so the doctor's own setting of it is not applied and capture may be incomplete"
            ));
            env.retain(|(key, _)| *key != k);
        }
        env.push((k, v));
    }
    (env, notices)
}

fn write_meta(path: &Path, meta: &HostMeta) -> Result<(), CaptureError> {
    let text = serde_json::to_string_pretty(meta).expect("metadata serialises");
    std::fs::write(path, text).map_err(|source| CaptureError::Meta {
        path: path.to_path_buf(),
        source,
    })
}

/// Creates this attempt's host folder, which must not exist yet: `run`
/// numbers attempts after the ones already there, so an existing folder means
/// another doctor with the same host tag is writing it right now, and the two
/// would mix their files.
fn claim_host_dir(host_dir: &Path) -> Result<(), CaptureError> {
    let folder = |source| CaptureError::Folder {
        path: host_dir.to_path_buf(),
        source,
    };
    if let Some(parent) = host_dir.parent() {
        std::fs::create_dir_all(parent).map_err(folder)?;
    }
    match std::fs::create_dir(host_dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(CaptureError::HostTaken {
            path: host_dir.to_path_buf(),
        }),
        Err(e) => Err(folder(e)),
    }
}

/// Runs the command once under capture: the host folder, the NVML sampler,
/// the command's environment and metadata, the command, then what it left.
pub fn run_attempt(plan: &AttemptPlan) -> Result<AttemptOutcome, CaptureError> {
    let host_dir = plan.dir.host_dir();
    claim_host_dir(&host_dir)?;
    if plan.cache != CacheMode::User {
        std::fs::create_dir_all(&plan.cache_dir).map_err(|source| CaptureError::Folder {
            path: plan.cache_dir.clone(),
            source,
        })?;
    }
    let (parent, foreign) = split_environment(std::env::vars_os());
    let mut notices = Vec::new();
    let (sampler, gpus, driver) = start_sampler(&parent, &host_dir, &mut notices);
    let child_env = command_environment(plan, &parent, foreign, &host_dir, &mut notices);
    let mut meta = host_meta(plan, &child_env, gpus, driver, notices);
    let meta_path = host_dir.join(HOST_FILE);
    write_meta(&meta_path, &meta)?;

    let capture = plan.output.as_ref().map(|sink| {
        Arc::new(child_output::OutputCapture::new(
            host_dir.join(child_output::OUTPUT_FILE),
            sink.clone(),
        ))
    });
    let result = run_child(
        &plan.command,
        child_env.iter().map(|(k, v)| (k, v)),
        capture.as_ref(),
        |_| {},
    );
    if let Some(e) = capture.as_ref().and_then(|c| c.error()) {
        meta.notices
            .push(format!("the command's output is incomplete: {e}"));
    }
    meta.t_end_ns = Some(now_ns());
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

/// The GPUs and driver by NVML, and its sampler writing the host's NVML
/// timeline (none with PREWARM_DOCTOR_NVML_SAMPLING=0: the GPUs are still
/// named; every PREWARM_DOCTOR_NVML_PERIOD_MS instead of every millisecond;
/// benches/gpu_overhead.sh's breakdown switches parts off).
fn start_sampler(
    parent: &BTreeMap<String, String>,
    host_dir: &Path,
    notices: &mut Vec<String>,
) -> (Option<nvml::Sampler>, Vec<GpuInfo>, DriverInfo) {
    let visible = parent.get("CUDA_VISIBLE_DEVICES").map(String::as_str);
    let sampling_off = parent
        .get("PREWARM_DOCTOR_NVML_SAMPLING")
        .map(String::as_str)
        == Some("0");
    match nvml::open(visible) {
        Ok((_, gpus, driver)) if sampling_off => (None, gpus, driver),
        Ok((nvml, gpus, driver)) => {
            let period = nvml::period_from(
                parent
                    .get("PREWARM_DOCTOR_NVML_PERIOD_MS")
                    .map(String::as_str),
            )
            .unwrap_or_else(|why| {
                notices.push(why);
                nvml::DEVICE_PERIOD
            });
            match nvml::Sampler::start(nvml, &gpus, &host_dir.join(NVML_FILE), period) {
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
    }
}

/// The command's environment: the probe, the shim, the caches and the
/// variables the user set, with a notice for each thing that keeps the run
/// from being captured as asked.
fn command_environment(
    plan: &AttemptPlan,
    parent: &BTreeMap<String, String>,
    foreign: Vec<(OsString, OsString)>,
    host_dir: &Path,
    notices: &mut Vec<String>,
) -> Vec<(OsString, OsString)> {
    let fallback_shim = host_dir.join("no-shim");
    let env_plan = EnvPlan {
        probe: plan.assets.map(|a| a.probe.as_path()),
        shim_dir: plan
            .assets
            .map_or(fallback_shim.as_path(), |a| a.shim_dir.as_path()),
        host_dir,
        host_tag: &plan.dir.host,
        cupti: plan.cupti.as_deref(),
        cache: plan.cache,
        cache_dir: &plan.cache_dir,
        kernel_steps: plan.kernel_steps,
        step_marker: plan.step_marker.as_deref(),
        extra: &plan.extra_env,
    };
    let (mut env, env_notices) = build_env(parent, &env_plan);
    if plan.output.is_some() {
        // Piped, Python would hold the output back in 8 KiB blocks: the
        // dashboard's log pane shows it as it comes.
        env.entry("PYTHONUNBUFFERED".into())
            .or_insert_with(|| "1".into());
    }
    notices.extend(env_notices.into_iter().map(env_notice_text));
    let (child_env, foreign_notices) = child_environment(&env, foreign);
    notices.extend(foreign_notices);
    if plan.assets.is_none() {
        notices.push("the probe could not be prepared: this run is not instrumented".to_string());
    }
    if plan.cupti.is_none() && plan.assets.is_some() {
        notices.push(
            "no libcupti was found by the doctor; the probe will try the copy torch loads, if any"
                .to_string(),
        );
    }
    child_env
}

fn env_notice_text(notice: EnvNotice) -> String {
    match notice {
        EnvNotice::InjectionTaken(p) => format!(
            "CUDA_INJECTION64_PATH was already set to {p}: CUDA loads one injection library, so this run is not instrumented (unset it to capture)"
        ),
        EnvNotice::NcclDebugTaken => {
            "NCCL_DEBUG is set by you: NCCL output goes where you asked and communicator init timings are not captured (unset NCCL_DEBUG to capture them)".to_string()
        }
    }
}

/// The attempt's host.json as the command starts (redacted command and
/// environment; exit and end time come after).
fn host_meta(
    plan: &AttemptPlan,
    child_env: &[(OsString, OsString)],
    gpus: Vec<GpuInfo>,
    driver: DriverInfo,
    notices: Vec<String>,
) -> HostMeta {
    let env_text = child_env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    HostMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").to_string(),
        host: plan.dir.host.clone(),
        hostname: prewarm_events::host::hostname(),
        variant: plan.dir.variant.clone(),
        attempt: plan.dir.attempt.clone(),
        command: redact_args(&lossy(&plan.command)),
        cwd: std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        env: redacted(&env_text),
        started: chrono::Local::now().to_rfc3339(),
        started_unix_ns: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        t_start_ns: now_ns(),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_folder_is_claimed_once() {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("run/default/1/h");
        claim_host_dir(&host).unwrap();
        assert!(host.is_dir());
        let err = claim_host_dir(&host).unwrap_err();
        assert!(matches!(err, CaptureError::HostTaken { .. }));
        assert!(err.to_string().contains("--host-tag"), "{err}");
    }
}
