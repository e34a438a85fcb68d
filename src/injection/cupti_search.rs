//! Finding libcupti for the probe: next to the Python environment's torch
//! (the `nvidia-cuda-cupti` wheel), then the CUDA toolkit, then the loader path.

use std::path::{Path, PathBuf};

fn candidates_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().starts_with("libcupti.so"))
                .unwrap_or(false)
        })
        .collect();
    // Prefer the most specific (longest) soname, e.g. libcupti.so.13 over libcupti.so.
    found.sort_by_key(|p| std::cmp::Reverse(p.to_string_lossy().len()));
    found
}

/// Folders to look in, most preferred first.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(v) = std::env::var_os("PREWARM_DOCTOR_CUPTI_DIR") {
        dirs.push(PathBuf::from(v));
    }
    // Python site-packages of any interpreter on PATH-ish prefixes: the torch wheels
    // ship nvidia/cu13/lib or nvidia/cuda_cupti/lib.
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            prefixes.push(PathBuf::from(v));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for p in std::env::split_paths(&path) {
            if p.join("python3").exists()
                && let Some(parent) = p.parent()
            {
                prefixes.push(parent.to_path_buf());
            }
        }
    }
    prefixes.push(PathBuf::from("/usr/local"));
    prefixes.push(PathBuf::from("/usr"));
    for prefix in prefixes {
        for lib in ["lib", "lib64"] {
            let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
                continue;
            };
            for e in entries.filter_map(|e| e.ok()) {
                let name = e.file_name().to_string_lossy().to_string();
                if !name.starts_with("python3") {
                    continue;
                }
                for site in ["site-packages", "dist-packages"] {
                    let nv = e.path().join(site).join("nvidia");
                    for sub in ["cu13/lib", "cu12/lib", "cuda_cupti/lib"] {
                        dirs.push(nv.join(sub));
                    }
                }
            }
        }
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            let root = PathBuf::from(v);
            dirs.push(root.join("extras/CUPTI/lib64"));
            dirs.push(root.join("targets/x86_64-linux/lib"));
            dirs.push(root.join("lib64"));
        }
    }
    for root in [
        "/usr/local/cuda",
        "/usr/local/cuda-13.0",
        "/usr/local/cuda-12",
    ] {
        let root = PathBuf::from(root);
        dirs.push(root.join("extras/CUPTI/lib64"));
        dirs.push(root.join("targets/x86_64-linux/lib"));
        dirs.push(root.join("lib64"));
    }
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs
}

/// The first libcupti found, with every folder searched (for `check`'s report).
pub fn find_cupti() -> (Option<PathBuf>, Vec<PathBuf>) {
    if let Some(explicit) = std::env::var_os("PREWARM_DOCTOR_CUPTI").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(explicit);
        if p.exists() {
            return (Some(p), Vec::new());
        }
    }
    let dirs = search_dirs();
    for d in &dirs {
        if let Some(p) = candidates_in(d).into_iter().next() {
            return (Some(p), dirs);
        }
    }
    (None, dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_specific_sonames_in_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["libcupti.so", "libcupti.so.13", "libcuda.so"] {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        let found = candidates_in(dir.path());
        assert_eq!(found.len(), 2);
        assert!(found[0].ends_with("libcupti.so.13"));
    }
}
