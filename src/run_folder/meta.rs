//! The JSON descriptions written into a run directory (`run.json`, `host.json`),
//! and the plain data they hold: what capture writes and load reads.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildExit {
    /// Exit code the doctor passes on: the child's code, or 128+N for signal N.
    pub code: i32,
    pub signal: Option<i32>,
    /// Signals the doctor forwarded to the child's process group.
    pub forwarded: u32,
}

/// How caches are handled for the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// Fresh, empty caches for this attempt: what a first run sees.
    Cold,
    /// The attempt's own caches, warmed by an untimed run first.
    Warm,
    /// The user's own caches, untouched (no isolation).
    User,
    /// One cache shared by every variant, in run order: order effects on purpose
    /// (shows what isolation prevents); verdicts are flagged as not isolated.
    Shared,
}

/// What is known about one GPU (written to host.json).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    pub total_bytes: u64,
    /// Device memory in use before the command started (other tenants, display).
    pub used_before_bytes: u64,
}

/// Driver-level facts for host.json.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DriverInfo {
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub nvml_version: Option<String>,
}

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
