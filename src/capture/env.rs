//! The environment a captured command runs in, built from the parent's
//! environment plus the probe/shim/NCCL/cache settings. Also redaction of
//! secrets before anything is written to disk.

use std::collections::BTreeMap;
use std::path::Path;

use crate::run_folder::meta::CacheMode;

/// What the environment builder needs to know.
pub struct EnvPlan<'a> {
    pub probe: Option<&'a Path>,
    pub shim_dir: &'a Path,
    pub host_dir: &'a Path,
    pub host_tag: &'a str,
    pub cupti: Option<&'a Path>,
    pub cache: CacheMode,
    pub cache_dir: &'a Path,
    pub kernel_steps: u32,
    pub step_marker: Option<&'a str>,
    pub extra: &'a [(String, String)],
}

/// Something the user should know about the environment we built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvNotice {
    /// The user's own CUDA_INJECTION64_PATH wins; no probe in this run.
    InjectionTaken(String),
    /// The user's NCCL_DEBUG settings are kept; communicator timings are not captured.
    NcclDebugTaken,
}

/// Builds the child's environment from `parent`.
pub fn build_env(
    parent: &BTreeMap<String, String>,
    plan: &EnvPlan,
) -> (BTreeMap<String, String>, Vec<EnvNotice>) {
    let mut env = parent.clone();
    let mut notices = Vec::new();
    let dir = plan.host_dir.display().to_string();
    env.insert("PREWARM_DOCTOR_DIR".into(), dir.clone());
    env.insert("PREWARM_DOCTOR_HOST".into(), plan.host_tag.to_string());
    env.insert(
        "PREWARM_DOCTOR_KERNEL_STEPS".into(),
        plan.kernel_steps.to_string(),
    );
    if let Some(m) = plan.step_marker {
        env.insert("PREWARM_DOCTOR_STEP_MARKER".into(), m.to_string());
    }
    if let Some(c) = plan.cupti {
        env.insert("PREWARM_DOCTOR_CUPTI".into(), c.display().to_string());
    }
    if let Some(probe) = plan.probe {
        match parent
            .get("CUDA_INJECTION64_PATH")
            .filter(|v| !v.is_empty())
        {
            Some(existing) if Path::new(existing) != probe => {
                notices.push(EnvNotice::InjectionTaken(existing.clone()));
            }
            _ => {
                env.insert("CUDA_INJECTION64_PATH".into(), probe.display().to_string());
            }
        }
    }
    let shim = plan.shim_dir.display().to_string();
    let pythonpath = match parent.get("PYTHONPATH").filter(|v| !v.is_empty()) {
        Some(existing) => format!("{shim}:{existing}"),
        None => shim,
    };
    env.insert("PYTHONPATH".into(), pythonpath);
    if parent.get("NCCL_DEBUG").is_some_and(|v| !v.is_empty()) {
        notices.push(EnvNotice::NcclDebugTaken);
    } else {
        env.insert("NCCL_DEBUG".into(), "INFO".into());
        env.insert("NCCL_DEBUG_SUBSYS".into(), "INIT".into());
        env.insert("NCCL_DEBUG_FILE".into(), format!("{dir}/nccl.%h.%p.log"));
        // Unix time with microseconds on every line (NCCL >= 2.26; "_" prints a space).
        env.insert("NCCL_DEBUG_TIMESTAMP_FORMAT".into(), "[%s.%6f]_".into());
        env.insert("NCCL_DEBUG_TIMESTAMP_LEVELS".into(), "ALL".into());
    }
    if plan.cache != CacheMode::User {
        let c = plan.cache_dir.display().to_string();
        env.insert("TRITON_CACHE_DIR".into(), format!("{c}/triton"));
        env.insert("TORCHINDUCTOR_CACHE_DIR".into(), format!("{c}/inductor"));
        env.insert("CUDA_CACHE_PATH".into(), format!("{c}/cuda-jit"));
    }
    for (k, v) in plan.extra {
        env.insert(k.clone(), v.clone());
    }
    (env, notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan<'a>(probe: &'a Path, dir: &'a Path) -> EnvPlan<'a> {
        EnvPlan {
            probe: Some(probe),
            shim_dir: dir,
            host_dir: dir,
            host_tag: "h",
            cupti: None,
            cache: CacheMode::Cold,
            cache_dir: dir,
            kernel_steps: 3,
            step_marker: None,
            extra: &[],
        }
    }

    #[test]
    fn injects_probe_shim_nccl_and_caches() {
        let parent: BTreeMap<String, String> =
            [("PYTHONPATH".to_string(), "/mine".to_string())].into();
        let (env, notices) = build_env(&parent, &plan(Path::new("/p.so"), Path::new("/d")));
        assert!(notices.is_empty());
        assert_eq!(env["CUDA_INJECTION64_PATH"], "/p.so");
        assert_eq!(env["PYTHONPATH"], "/d:/mine");
        assert_eq!(env["NCCL_DEBUG_FILE"], "/d/nccl.%h.%p.log");
        assert_eq!(env["TRITON_CACHE_DIR"], "/d/triton");
    }

    /// Machine-level NCCL/NVSHMEM switches (NVLink multicast off on the lent
    /// H200 machines) reach every rank untouched.
    #[test]
    fn the_users_nccl_and_multicast_switches_pass_through() {
        let keep = [
            ("NCCL_NVLS_ENABLE", "0"),
            ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
            ("NVSHMEM_DISABLE_NVLS", "1"),
            ("NCCL_SOCKET_IFNAME", "lo"),
        ];
        let parent: BTreeMap<String, String> = keep
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (env, _) = build_env(&parent, &plan(Path::new("/p.so"), Path::new("/d")));
        for (k, v) in keep {
            assert_eq!(env[k], v, "{k}");
        }
    }

    #[test]
    fn respects_the_users_injection_and_nccl_debug() {
        let parent: BTreeMap<String, String> = [
            ("CUDA_INJECTION64_PATH".to_string(), "/other.so".to_string()),
            ("NCCL_DEBUG".to_string(), "WARN".to_string()),
        ]
        .into();
        let (env, notices) = build_env(&parent, &plan(Path::new("/p.so"), Path::new("/d")));
        assert_eq!(env["CUDA_INJECTION64_PATH"], "/other.so");
        assert_eq!(env["NCCL_DEBUG"], "WARN");
        assert!(!env.contains_key("NCCL_DEBUG_FILE"));
        assert_eq!(
            notices,
            vec![
                EnvNotice::InjectionTaken("/other.so".into()),
                EnvNotice::NcclDebugTaken
            ]
        );
    }
}
