//! What the doctor injects into the training and how: the probe library and the
//! Python shim are embedded in this binary and extracted at run time into a
//! content-addressed cache folder, so one binary is the whole tool; finds a
//! usable libcupti; `check` tries the injection on this machine.

mod check;
mod cupti_search;

pub use check::{run_check, selftest_child};
pub use cupti_search::find_cupti;

use sha2::{Digest, Sha256};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The probe cdylib, built by build.rs from crates/probe.
static PROBE_SO: &[u8] = include_bytes!(env!("PREWARM_PROBE_SO"));

/// The Python shim (sitecustomize entry plus its modules).
static SHIM_FILES: &[(&str, &str)] = &[
    ("sitecustomize.py", include_str!("../shim/sitecustomize.py")),
    (
        "prewarm_doctor_events.py",
        include_str!("../shim/prewarm_doctor_events.py"),
    ),
    (
        "prewarm_doctor_shim.py",
        include_str!("../shim/prewarm_doctor_shim.py"),
    ),
    (
        "prewarm_doctor_monitor.py",
        include_str!("../shim/prewarm_doctor_monitor.py"),
    ),
    (
        "prewarm_doctor_triton.py",
        include_str!("../shim/prewarm_doctor_triton.py"),
    ),
    (
        "prewarm_doctor_groups.py",
        include_str!("../shim/prewarm_doctor_groups.py"),
    ),
    (
        "prewarm_doctor_prescribe.py",
        include_str!("../shim/prewarm_doctor_prescribe.py"),
    ),
];

/// Where the embedded assets were written.
#[derive(Debug, Clone)]
pub struct Assets {
    pub probe: PathBuf,
    pub shim_dir: PathBuf,
    pub probe_sha256: String,
}

/// Why the assets could not be made available.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    #[error(
        "cannot write the probe into {dir}: {source} (set PREWARM_DOCTOR_CACHE to a writable folder)"
    )]
    Write {
        dir: PathBuf,
        source: std::io::Error,
    },
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache root: $PREWARM_DOCTOR_CACHE, else $XDG_CACHE_HOME/prewarm-doctor,
/// else ~/.cache/prewarm-doctor, else the temp dir.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("PREWARM_DOCTOR_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("prewarm-doctor");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache").join("prewarm-doctor");
    }
    std::env::temp_dir().join("prewarm-doctor")
}

/// Writes `bytes` to `path` atomically (temp file + rename) unless it exists.
fn write_once(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().expect("asset paths have a parent");
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
    fs::rename(&tmp, path)
}

/// Extracts the probe and the shim under `root`, named by content hash so that
/// concurrent runs and different versions never clash.
pub fn extract_assets(root: &Path) -> Result<Assets, AssetError> {
    let probe_hash = hex(&Sha256::digest(PROBE_SO));
    let probe = root.join(format!("libprewarm_probe-{}.so", &probe_hash[..16]));
    let err = |source| AssetError::Write {
        dir: root.to_path_buf(),
        source,
    };
    write_once(&probe, PROBE_SO, 0o755).map_err(err)?;

    let mut shim_hasher = Sha256::new();
    for (name, text) in SHIM_FILES {
        shim_hasher.update(name.as_bytes());
        shim_hasher.update(text.as_bytes());
    }
    let shim_dir = root.join(format!("shim-{}", &hex(&shim_hasher.finalize())[..16]));
    for (name, text) in SHIM_FILES {
        write_once(&shim_dir.join(name), text.as_bytes(), 0o644).map_err(err)?;
    }
    Ok(Assets {
        probe,
        shim_dir,
        probe_sha256: probe_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extraction_is_content_addressed_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let a = extract_assets(dir.path()).unwrap();
        let b = extract_assets(dir.path()).unwrap();
        assert_eq!(a.probe, b.probe);
        assert_eq!(fs::read(&a.probe).unwrap(), PROBE_SO);
        assert!(a.shim_dir.join("sitecustomize.py").exists());
        assert!(
            a.probe
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("libprewarm_probe-")
        );
        // The embedded library really is the probe: it exports the injection entry point.
        let text = String::from_utf8_lossy(PROBE_SO);
        assert!(text.contains("InitializeInjection"));
    }
}
