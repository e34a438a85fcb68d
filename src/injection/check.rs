//! `prewarm-doctor check`: can this machine capture? Driver, NVML, CUPTI and a
//! real injection test (a child process calls cuInit with the probe injected).

use super::{Assets, find_cupti};
use prewarm_events::{Record, read_file_bytes};
use serde::Serialize;
use std::ffi::{CString, c_void};
use std::path::Path;
use std::process::Command;

/// One line of the check.
#[derive(Debug, Clone, Serialize)]
pub struct CheckItem {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Everything `check` found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub items: Vec<CheckItem>,
}

impl CheckReport {
    /// True when a run would be fully instrumented.
    pub fn all_ok(&self) -> bool {
        self.items.iter().all(|i| i.ok)
    }
}

fn dlopen(name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: valid C string.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    (!h.is_null()).then_some(h)
}

fn dlsym(h: *mut c_void, name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: handle from dlopen, valid C string.
    let p = unsafe { libc::dlsym(h, c.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn check_nvml() -> CheckItem {
    match nvml_wrapper::Nvml::init() {
        Ok(nvml) => {
            let driver = nvml.sys_driver_version().unwrap_or_else(|_| "?".into());
            let count = nvml.device_count().unwrap_or(0);
            let names: Vec<String> = (0..count)
                .filter_map(|i| nvml.device_by_index(i).ok().and_then(|d| d.name().ok()))
                .collect();
            CheckItem {
                name: "driver+NVML",
                ok: count > 0,
                detail: format!("driver {driver}, {count} GPU(s): {}", names.join(", ")),
            }
        }
        Err(e) => CheckItem {
            name: "driver+NVML",
            ok: false,
            detail: format!(
                "NVML unavailable ({e}): no NVIDIA driver here, so no GPU-side capture is possible"
            ),
        },
    }
}

fn check_cupti() -> (CheckItem, Option<String>) {
    let (found, searched) = find_cupti();
    let Some(path) = found else {
        return (
            CheckItem {
                name: "CUPTI",
                ok: false,
                detail: format!(
                    "no libcupti found (searched {} folders); install the CUDA toolkit or the nvidia-cuda-cupti wheel, or set PREWARM_DOCTOR_CUPTI=/path/to/libcupti.so",
                    searched.len()
                ),
            },
            None,
        );
    };
    let p = path.display().to_string();
    let Some(h) = dlopen(&p) else {
        return (
            CheckItem {
                name: "CUPTI",
                ok: false,
                detail: format!("{p} exists but cannot be loaded"),
            },
            None,
        );
    };
    let version = dlsym(h, "cuptiGetVersion").map(|f| {
        // SAFETY: cuptiGetVersion(uint32_t*) per cupti.h.
        let f: unsafe extern "C" fn(*mut u32) -> u32 = unsafe { std::mem::transmute(f) };
        let mut v = 0u32;
        unsafe { f(&mut v) };
        v
    });
    match version {
        Some(v) if v >= 18 => (
            CheckItem {
                name: "CUPTI",
                ok: true,
                detail: format!("{p} (API version {v})"),
            },
            Some(p),
        ),
        Some(v) => (
            CheckItem {
                name: "CUPTI",
                ok: false,
                detail: format!("{p} has API version {v}; CUDA 12+ CUPTI (18+) is needed"),
            },
            Some(p),
        ),
        None => (
            CheckItem {
                name: "CUPTI",
                ok: false,
                detail: format!("{p} lacks cuptiGetVersion"),
            },
            None,
        ),
    }
}

/// Runs every check; the injection test spawns `exe __injection-selftest`.
pub fn run_check(exe: &Path, assets: &Assets) -> CheckReport {
    let mut items = vec![check_nvml()];
    let libcuda = dlopen("libcuda.so.1");
    items.push(CheckItem {
        name: "libcuda",
        ok: libcuda.is_some(),
        detail: if libcuda.is_some() {
            "libcuda.so.1 loads".into()
        } else {
            "libcuda.so.1 not found (no NVIDIA driver)".into()
        },
    });
    let (cupti, cupti_path) = check_cupti();
    items.push(cupti);
    if let Some(existing) = std::env::var_os("CUDA_INJECTION64_PATH").filter(|v| !v.is_empty()) {
        items.push(CheckItem {
            name: "injection",
            ok: false,
            detail: format!(
                "CUDA_INJECTION64_PATH is already set to {}; CUDA loads one injection library, so unset it to let prewarm-doctor inject its probe",
                existing.to_string_lossy()
            ),
        });
        return CheckReport { items };
    }
    if libcuda.is_none() {
        items.push(CheckItem {
            name: "injection",
            ok: false,
            detail: "not tested: no libcuda".into(),
        });
        return CheckReport { items };
    }
    items.push(injection_test(exe, assets, cupti_path.as_deref()));
    CheckReport { items }
}

fn injection_test(exe: &Path, assets: &Assets, cupti: Option<&str>) -> CheckItem {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            return CheckItem {
                name: "injection",
                ok: false,
                detail: format!("no temp dir: {e}"),
            };
        }
    };
    let mut cmd = Command::new(exe);
    cmd.arg("__injection-selftest")
        .env("CUDA_INJECTION64_PATH", &assets.probe)
        .env("PREWARM_DOCTOR_DIR", dir.path())
        .env("PREWARM_DOCTOR_KERNEL_RECORDS", "0");
    if let Some(c) = cupti {
        cmd.env("PREWARM_DOCTOR_CUPTI", c);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => {
            return CheckItem {
                name: "injection",
                ok: false,
                detail: format!("cannot run the self-test: {e}"),
            };
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut notices = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.path()) {
        for e in entries.filter_map(|e| e.ok()) {
            if let Ok(bytes) = std::fs::read(e.path())
                && let Ok(file) = read_file_bytes(&bytes)
            {
                for r in file.records {
                    if let Record::Notice(n) = r {
                        notices.push(n.text);
                    }
                }
            }
        }
    }
    let ok = stdout.contains("probe_active=1");
    CheckItem {
        name: "injection",
        ok,
        detail: if ok {
            format!("probe injected and capturing ({})", notices.join("; "))
        } else {
            format!(
                "self-test said '{stdout}'; probe notices: {}",
                if notices.is_empty() {
                    "none".into()
                } else {
                    notices.join("; ")
                }
            )
        },
    }
}

/// The hidden `__injection-selftest` child: cuInit with the probe injected,
/// then ask the probe whether it is capturing. Prints one line.
pub fn selftest_child() -> i32 {
    let Some(cuda) = dlopen("libcuda.so.1") else {
        println!("cuinit=unavailable probe_active=0");
        return 1;
    };
    let Some(init) = dlsym(cuda, "cuInit") else {
        println!("cuinit=missing probe_active=0");
        return 1;
    };
    // SAFETY: cuInit(unsigned int) per cuda.h.
    let init: unsafe extern "C" fn(u32) -> u32 = unsafe { std::mem::transmute(init) };
    let rc = unsafe { init(0) };
    let probe = std::env::var("CUDA_INJECTION64_PATH").unwrap_or_default();
    let active = CString::new(probe)
        .ok()
        .map(|c| {
            // SAFETY: RTLD_NOLOAD only returns an already-loaded handle.
            let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
            if h.is_null() {
                return -1;
            }
            match dlsym(h, "prewarm_probe_active") {
                Some(f) => {
                    // SAFETY: exported by the probe as extern "C" fn() -> i32.
                    let f: extern "C" fn() -> i32 = unsafe { std::mem::transmute(f) };
                    f()
                }
                None => -2,
            }
        })
        .unwrap_or(-3);
    println!("cuinit={rc} probe_active={active}");
    if active == 1 { 0 } else { 1 }
}
