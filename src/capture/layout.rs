//! Where things live in a run directory:
//!
//! ```text
//! <run>/run.json                                   what was asked (command, variants, modes)
//! <run>/<variant>/<attempt>/<host>/host.json       one doctor instance: env, GPUs, exit status
//! <run>/<variant>/<attempt>/<host>/*.events        probe event file per process
//! <run>/<variant>/<attempt>/<host>/*.shim.jsonl    shim events per Python process
//! <run>/<variant>/<attempt>/<host>/nvml.events     NVML timeline of this host's GPUs
//! <run>/<variant>/<attempt>/<host>/nccl.*.log      NCCL INIT debug output
//! ```

use std::path::{Path, PathBuf};

/// File name of the run-level description.
pub const RUN_FILE: &str = "run.json";
/// File name of a host's description inside its folder.
pub const HOST_FILE: &str = "host.json";
/// File name of the NVML timeline inside a host folder.
pub const NVML_FILE: &str = "nvml.events";

/// One attempt of one variant on one host.
#[derive(Debug, Clone)]
pub struct AttemptDir {
    pub run: PathBuf,
    pub variant: String,
    pub attempt: String,
    pub host: String,
}

impl AttemptDir {
    /// `<run>/<variant>/<attempt>`.
    pub fn attempt_dir(&self) -> PathBuf {
        self.run.join(&self.variant).join(&self.attempt)
    }

    /// `<run>/<variant>/<attempt>/<host>`.
    pub fn host_dir(&self) -> PathBuf {
        self.attempt_dir().join(&self.host)
    }

    /// Where an attempt's caches live for a cache mode: per attempt (cold), per
    /// variant (warm), or one folder for the whole run (shared).
    pub fn cache_dir(&self, mode: super::env::CacheMode) -> PathBuf {
        use super::env::CacheMode::*;
        match mode {
            Cold | User => self.attempt_dir().join(format!("cache-{}", self.host)),
            Warm => self
                .run
                .join(&self.variant)
                .join(format!("cache-{}", self.host)),
            Shared => self.run.join(format!("cache-shared-{}", self.host)),
        }
    }
}

/// Makes a name safe as one path component (host tags and variant names are user input).
pub fn safe_component(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = cleaned.trim_matches('.');
    if trimmed.is_empty() {
        "_".to_string()
    } else {
        trimmed.chars().take(100).collect()
    }
}

/// A default run folder: `prewarm-runs/<name>-<YYYYmmdd-HHMMSS>`.
pub fn default_run_dir(base: &Path, name: &str) -> PathBuf {
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    base.join(format!("{}-{stamp}", safe_component(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_sanitised() {
        assert_eq!(safe_component("node-1.example"), "node-1.example");
        assert_eq!(safe_component("../../etc"), "_.._etc");
        assert_eq!(safe_component(""), "_");
        assert_eq!(safe_component("a b/c"), "a_b_c");
    }

    #[test]
    fn paths_nest_variant_attempt_host() {
        let a = AttemptDir {
            run: "/r".into(),
            variant: "cublas".into(),
            attempt: "2".into(),
            host: "h".into(),
        };
        assert_eq!(a.host_dir(), PathBuf::from("/r/cublas/2/h"));
    }
}
