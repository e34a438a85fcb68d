//! The JSON descriptions written into a run directory (`run.json`, `host.json`).

use super::child::ChildExit;
use super::env::CacheMode;
use super::nvml::{DriverInfo, GpuInfo};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of run.json/host.json; bumped on incompatible changes.
pub const META_SCHEMA: u32 = 1;

/// One variant as asked for: a name plus what it adds to the command.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VariantSpec {
    pub name: String,
    /// Extra arguments appended to the command.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Prewarms this variant enables (names from the catalog), for verdicts.
    #[serde(default)]
    pub prewarms: Vec<String>,
}

/// `run.json`: what the user asked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    pub schema: u32,
    pub doctor_version: String,
    pub name: String,
    pub command: Vec<String>,
    pub created: String,
    pub variants: Vec<VariantSpec>,
    pub repeat: u32,
    pub cache: CacheMode,
    pub kernel_steps: u32,
    #[serde(default)]
    pub step_marker: Option<String>,
    #[serde(default)]
    pub baseline: Option<String>,
    #[serde(default)]
    pub label: Option<String>,
}

/// `host.json`: one doctor instance's attempt on one host.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostMeta {
    pub schema: u32,
    pub doctor_version: String,
    pub host: String,
    pub hostname: String,
    pub variant: String,
    pub attempt: String,
    pub command: Vec<String>,
    pub cwd: String,
    pub env: BTreeMap<String, String>,
    pub started: String,
    /// Wall clock (Unix ns) and CLOCK_MONOTONIC (ns) read together at start, to
    /// place wall-clock timestamps (NCCL logs) on the monotonic timeline.
    pub started_unix_ns: u64,
    pub t_start_ns: u64,
    #[serde(default)]
    pub t_end_ns: Option<u64>,
    #[serde(default)]
    pub exit: Option<ChildExit>,
    #[serde(default)]
    pub spawn_error: Option<String>,
    pub gpus: Vec<GpuInfo>,
    pub driver: DriverInfo,
    pub cache: CacheMode,
    #[serde(default)]
    pub warmup: bool,
    pub probe_path: Option<String>,
    pub probe_sha256: Option<String>,
    pub cupti_path: Option<String>,
    pub notices: Vec<String>,
    #[serde(default)]
    pub nvml_samples: u64,
}
