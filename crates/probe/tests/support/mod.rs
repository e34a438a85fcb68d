//! The probe's CPU harness: builds the stand-in libcupti/libcuda (C, in
//! `crates/probe/tests/stand_in/`) and a program that plays a CUDA application against
//! them, then runs that program with the real probe cdylib injected through
//! `CUDA_INJECTION64_PATH` (the stand-in cuInit loads it like the driver does)
//! and without it. Shared by the harness tests and the callback-cost bench.
#![allow(dead_code)]

use prewarm_events::{ReadOutcome, Record, read_file_bytes};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;

/// The C sources, from the probe crate's tests or the workspace root's.
fn sources() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let here = manifest.join("tests/stand_in");
    if here.exists() {
        here
    } else {
        manifest.join("crates/probe/tests/stand_in")
    }
}

/// Where the stand-in libraries and the program were built.
pub struct StandIn {
    pub dir: PathBuf,
}

fn compile(args: &[&str], dir: &Path) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(args)
        .current_dir(sources())
        .output()
        .unwrap_or_else(|e| {
            panic!("the probe harness needs a C compiler: running `{cc}` failed: {e}")
        });
    assert!(
        out.status.success(),
        "compiling the stand-in CUDA libraries into {} failed: {cc} {}\n{}",
        dir.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds the stand-ins once per test process, into a folder named after a
/// hash of the sources (reused by later runs; built in a private folder and
/// renamed into place, so test binaries running at once never share
/// half-written files).
pub fn stand_in() -> &'static StandIn {
    static BUILT: OnceLock<StandIn> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for name in [
            "stand_in.h",
            "cupti.c",
            "cuda.c",
            "othercaller.c",
            "c10_cuda.c",
            "program.c",
            "alloc_count.c",
        ] {
            let path = sources().join(name);
            let text =
                std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            std::hash::Hash::hash(&text, &mut hasher);
        }
        std::hash::Hash::hash(&std::env::var("CC").unwrap_or_default(), &mut hasher);
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let dir = tmp.join(format!(
            "probe-stand-in-{:016x}",
            std::hash::Hasher::finish(&hasher)
        ));
        if !dir.join("program").exists() {
            let building = tmp.join(format!("probe-stand-in-building-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&building);
            std::fs::create_dir_all(&building).expect("create the stand-in folder");
            build_into(&building);
            if std::fs::rename(&building, &dir).is_err() {
                // Another test binary got there first with the same sources.
                let _ = std::fs::remove_dir_all(&building);
            }
        }
        StandIn { dir }
    })
}

fn build_into(dir: &Path) {
    let d = dir.to_str().expect("UTF-8 target dir");
    let out = |name: &str| format!("{d}/{name}");
    let lib_dir = format!("-L{d}");
    let rpath = "-Wl,-rpath,$ORIGIN";
    let warn = ["-Wall", "-Wextra", "-Werror", "-Wno-infinite-recursion"];
    let mut cupti = vec!["-shared", "-fPIC", "-O1", "-g"];
    cupti.extend(warn);
    let o = out("libcupti.so.13");
    cupti.extend([
        "-o",
        &o,
        "-Wl,-soname,libcupti.so.13",
        "cupti.c",
        "-lpthread",
    ]);
    compile(&cupti, dir);
    let mut cuda = vec!["-shared", "-fPIC", "-O1", "-g"];
    cuda.extend(warn);
    let o = out("libcuda.so.1");
    cuda.extend(["-o", &o, "-Wl,-soname,libcuda.so.1", "cuda.c", &lib_dir]);
    cuda.extend(["-l:libcupti.so.13", rpath, "-ldl", "-lpthread"]);
    compile(&cuda, dir);
    let mut other = vec!["-shared", "-fPIC", "-O1", "-g"];
    other.extend(warn);
    let o = out("libothercaller.so");
    other.extend([
        "-o",
        &o,
        "othercaller.c",
        &lib_dir,
        "-l:libcuda.so.1",
        rpath,
    ]);
    compile(&other, dir);
    // Named like PyTorch's library: the analysis classifies callers by name.
    let mut c10 = vec!["-shared", "-fPIC", "-O1", "-g"];
    c10.extend(warn);
    let o = out("libc10_cuda.so");
    c10.extend(["-o", &o, "c10_cuda.c", &lib_dir, "-l:libcuda.so.1", rpath]);
    compile(&c10, dir);
    let mut program = vec!["-O0", "-g"];
    program.extend(warn);
    let o = out("program");
    program.extend([
        "-o",
        &o,
        "program.c",
        "alloc_count.c",
        &lib_dir,
        "-l:libcuda.so.1",
    ]);
    program.extend(["-l:libothercaller.so", "-l:libc10_cuda.so", rpath]);
    program.extend(["-lpthread", "-ldl"]);
    compile(&program, dir);
}

/// The stand-in program (built on first use).
pub fn program() -> PathBuf {
    stand_in().dir.join("program")
}

/// The probe cdylib cargo built next to this test binary (or
/// `PREWARM_PROBE_UNDER_TEST`, to measure another build).
pub fn probe_library() -> PathBuf {
    if let Some(p) = std::env::var_os("PREWARM_PROBE_UNDER_TEST").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("the deps folder");
    let so = deps.join("libprewarm_probe.so");
    assert!(
        so.exists(),
        "{} is missing: cargo builds the probe cdylib with the crate's tests",
        so.display()
    );
    so
}

/// One run of the stand-in program.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Event files the probe wrote (empty without the probe).
    pub event_files: Vec<PathBuf>,
    pub folder: tempfile::TempDir,
}

impl Run {
    /// The one event file, decoded.
    pub fn events(&self) -> ReadOutcome {
        assert_eq!(
            self.event_files.len(),
            1,
            "expected exactly one event file, found {:?}",
            self.event_files
        );
        let bytes = std::fs::read(&self.event_files[0]).expect("read the event file");
        read_file_bytes(&bytes)
            .unwrap_or_else(|e| panic!("{} does not decode: {e}", self.event_files[0].display()))
    }

    /// What the stand-in libcupti delivered: driver API callback id →
    /// (callbacks handed to the subscriber, enabled at exit).
    pub fn cupti_deliveries(&self) -> std::collections::BTreeMap<u32, (u64, bool)> {
        self.number_rows("cupti-report")
            .into_iter()
            .map(|f| (f[0] as u32, (f[1], f[2] != 0)))
            .collect()
    }

    /// A report a stand-in wrote into the run's folder: a row of numbers a
    /// line.
    pub fn number_rows(&self, name: &str) -> Vec<Vec<u64>> {
        let path = self.folder.path().join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the stand-in's report {}: {e}", path.display()));
        text.lines()
            .map(|line| {
                line.split_whitespace()
                    .map(|x| x.parse().expect("a number"))
                    .collect()
            })
            .collect()
    }

    /// How the process ended, for comparisons: exit code or signal.
    pub fn ending(&self) -> (Option<i32>, Option<i32>) {
        (self.status.code(), self.status.signal())
    }
}

/// Runs `program ARGS`, with the probe injected when `probe` is given.
pub fn run(args: &[&str], probe: Option<&Path>) -> Run {
    run_with(args, probe, &[])
}

/// As [`run`], with extra environment variables (both with and without the probe).
pub fn run_with(args: &[&str], probe: Option<&Path>, env: &[(&str, &str)]) -> Run {
    let folder = tempfile::tempdir().expect("temp dir");
    let events = folder.path().join("events");
    let mut cmd = Command::new(program());
    // A backtrace setting must not make a caught panic print anything either.
    cmd.args(args)
        .current_dir(folder.path())
        .env("RUST_BACKTRACE", "1")
        .env("STANDIN_CUPTI_REPORT", folder.path().join("cupti-report"));
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("PREWARM_DOCTOR_") || k == "CUDA_INJECTION64_PATH" || k == "RANK" {
            cmd.env_remove(&key);
        }
    }
    cmd.envs(env.iter().copied());
    if let Some(p) = probe {
        cmd.env("CUDA_INJECTION64_PATH", p)
            .env("PREWARM_DOCTOR_DIR", &events);
    }
    // SAFETY: setrlimit is async-signal-safe; no core files from the crash scenarios.
    unsafe {
        cmd.pre_exec(|| {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            Ok(())
        });
    }
    let out = cmd.output().expect("run the stand-in program");
    let mut event_files: Vec<PathBuf> = std::fs::read_dir(&events)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    event_files.sort();
    Run {
        status: out.status,
        stdout: out.stdout,
        stderr: out.stderr,
        event_files,
        folder,
    }
}

/// Runs the scenario without and with the probe and asserts that the program
/// cannot tell: same stdout, same stderr (byte for byte), same ending.
pub fn run_both(args: &[&str]) -> Run {
    run_both_with(args, &[])
}

/// As [`run_both`], with extra environment variables for both runs.
pub fn run_both_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    let plain = run_with(args, None, env);
    let probed = run_with(args, Some(&probe_library()), env);
    assert_eq!(
        String::from_utf8_lossy(&probed.stderr),
        String::from_utf8_lossy(&plain.stderr),
        "stderr of `{}` changed under the probe",
        args.join(" ")
    );
    assert_eq!(probed.stderr, plain.stderr);
    assert_eq!(
        String::from_utf8_lossy(&probed.stdout),
        String::from_utf8_lossy(&plain.stdout),
        "stdout of `{}` changed under the probe",
        args.join(" ")
    );
    assert_eq!(probed.stdout, plain.stdout);
    assert_eq!(
        probed.ending(),
        plain.ending(),
        "`{}` ended differently under the probe",
        args.join(" ")
    );
    assert!(plain.event_files.is_empty());
    probed
}

/// Records of one kind, by a matcher returning the inner value.
pub fn all<T>(records: &[Record], pick: impl Fn(&Record) -> Option<T>) -> Vec<T> {
    records.iter().filter_map(pick).collect()
}
