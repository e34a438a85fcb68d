//! Where things live in a run directory:
//!
//! ```text
//! <run>/run.json                                   what was asked (command, variants, modes)
//! <run>/<variant>/<attempt>/<host>/host.json       one doctor instance: env, GPUs, exit status
//! <run>/<variant>/<attempt>/<host>/*.events        probe event file per process
//! <run>/<variant>/<attempt>/<host>/*.shim.jsonl    shim events per Python process
//! <run>/<variant>/<attempt>/<host>/*.shim.steps    warm steps' ends (the step file)
//! <run>/<variant>/<attempt>/<host>/nvml.events     NVML timeline of this host's GPUs
//! <run>/<variant>/<attempt>/<host>/nccl.*.log      NCCL INIT debug output
//! <run>/<variant>/<attempt>/<host>/prescription-errors.*.txt  a prescription's failed items
//! ```
//!
//! The per-process names (`rank-R.pid-P` / `proc.pid-P` and their suffixes)
//! are `prewarm_events::names`, below the probe that writes the event files,
//! re-exported here; the shim spells the same (tests/shim_python.rs).

pub use prewarm_events::names::*;

use super::meta::RunMeta;
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
    pub fn cache_dir(&self, mode: super::meta::CacheMode) -> PathBuf {
        use super::meta::CacheMode::*;
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

/// Creates a new default run folder `base/<name>-<YYYYmmdd-HHMMSS>-<suffix>`.
/// The random suffix and `create_dir` (which fails on an existing folder, so a
/// taken name is never reused) keep two runs started in the same second apart.
pub fn create_default_run_dir(base: &Path, name: &str) -> std::io::Result<PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    std::fs::create_dir_all(base)?;
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let mut last = None;
    for _ in 0..64 {
        // RandomState is seeded randomly per process and per call.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let suffix = h.finish() & 0xffff;
        let dir = base.join(format!("{}-{stamp}-{suffix:04x}", safe_component(name)));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free run folder name")))
}

/// The repeat number this host's next attempt gets: one above the highest
/// numbered `<variant>/<N>/<host>` folder already in the run, so a second
/// `run` of the same command into the same `--out` adds attempts instead of
/// writing over the earlier ones (other hosts' folders do not count: the
/// nodes of one multi-node job all start at 1).
pub fn next_repeat(run: &Path, variants: &[String], host: &str) -> u32 {
    let mut highest = 0u32;
    for v in variants {
        let Ok(entries) = std::fs::read_dir(run.join(v)) else {
            continue;
        };
        for e in entries.flatten() {
            if let Ok(n) = e.file_name().to_string_lossy().parse::<u32>()
                && e.path().join(host).exists()
            {
                highest = highest.max(n);
            }
        }
    }
    highest.saturating_add(1)
}

/// Command-line flags whose value differs between the nodes of one job
/// (torchrun's, deepspeed's and accelerate's node rank): two doctors of one
/// multi-node job share a run folder although their commands differ there.
const PER_NODE_FLAGS: &[&str] = &[
    "--node_rank",
    "--node-rank",
    "--machine_rank",
    "--machine-rank",
];

/// A command with the values of per-node flags blanked, for comparing runs.
fn job_command(command: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(command.len());
    let mut blank_next = false;
    for arg in command {
        if blank_next {
            out.push("<per-node>".to_string());
            blank_next = false;
        } else if PER_NODE_FLAGS.contains(&arg.as_str()) {
            out.push(arg.clone());
            blank_next = true;
        } else if let Some((flag, _)) = arg.split_once('=')
            && PER_NODE_FLAGS.contains(&flag)
        {
            out.push(format!("{flag}=<per-node>"));
        } else {
            out.push(arg.clone());
        }
    }
    out
}

/// What an `--out` folder holds before `run` writes into it.
#[derive(Debug, PartialEq, Eq)]
pub enum OutFolder {
    /// Missing or empty: a new run.
    Fresh,
    /// A run of the same command and matrix (another node of the job, or more attempts).
    SameRun,
    /// Something `run` must not mix into without `--force`; the text says what and why.
    Conflict(String),
}

/// Decides whether `run` may write a run described by `new` into `out`.
pub fn classify_out(out: &Path, new: &RunMeta) -> OutFolder {
    let Ok(entries) = std::fs::read_dir(out) else {
        return OutFolder::Fresh;
    };
    // Hidden files are run.json copies being staged by another node.
    let visible = entries
        .flatten()
        .any(|e| !e.file_name().to_string_lossy().starts_with('.'));
    if !visible {
        return OutFolder::Fresh;
    }
    let run_file = out.join(RUN_FILE);
    let old: RunMeta = match std::fs::read_to_string(&run_file)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(m) => m,
        Err(_) if !run_file.exists() => {
            return OutFolder::Conflict(format!(
                "{} is not empty and holds no prewarm-doctor run (no {RUN_FILE})",
                out.display()
            ));
        }
        Err(e) => {
            return OutFolder::Conflict(format!("{} cannot be read ({e})", run_file.display()));
        }
    };
    let shell = |c: &[String]| {
        shlex::try_join(c.iter().map(String::as_str)).unwrap_or_else(|_| c.join(" "))
    };
    if job_command(&old.command) != job_command(&new.command) {
        return OutFolder::Conflict(format!(
            "{} holds a run of another command: `{}` (this run: `{}`)",
            out.display(),
            shell(&old.command),
            shell(&new.command)
        ));
    }
    if old.variants != new.variants || old.cache != new.cache {
        let names = |m: &RunMeta| {
            m.variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return OutFolder::Conflict(format!(
            "{} holds a run of this command with another matrix: variants {} with {:?} caches (this run: variants {} with {:?} caches)",
            out.display(),
            names(&old),
            old.cache,
            names(new),
            new.cache
        ));
    }
    OutFolder::SameRun
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
    fn the_nodes_of_one_job_run_the_same_command() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            job_command(&words("torchrun --nnodes 2 --node_rank 0 t.py")),
            job_command(&words("torchrun --nnodes 2 --node_rank 1 t.py"))
        );
        assert_eq!(
            job_command(&words("accelerate launch --machine-rank=3 t.py")),
            job_command(&words("accelerate launch --machine-rank=0 t.py"))
        );
        assert_ne!(
            job_command(&words("torchrun --nnodes 2 --node_rank 0 a.py")),
            job_command(&words("torchrun --nnodes 2 --node_rank 0 b.py"))
        );
    }

    #[test]
    fn default_run_folders_never_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let a = create_default_run_dir(dir.path(), "x y").unwrap();
        let b = create_default_run_dir(dir.path(), "x y").unwrap();
        assert_ne!(a, b);
        assert!(a.file_name().unwrap().to_string_lossy().starts_with("x_y-"));
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
