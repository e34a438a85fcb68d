//! benches/gpu_first_backward.sh tells CUPTI's cost on the first cuBLAS
//! backward from the probe's; its logic (modes, pairing, the bare CUPTI
//! client it builds) is tested here without a GPU: a stand-in doctor (its
//! `check` names a probe and a CUPTI) and a stand-in python whose backward
//! is 12 ms slower whenever some CUDA injection is set, 3 ms more with the
//! probe's kernel records on.

mod common;

use std::path::Path;
use std::process::Command;

const DOCTOR: &str = r#"#!/usr/bin/env bash
echo "probe: $SB/libprewarm_probe.so"
echo "cupti: $SB/libcupti.so.13 (found)"
"#;

const PYTHON: &str = r#"#!/usr/bin/env bash
[ "$1" = - ] && exec python3 "$@"
echo "run inj=${CUDA_INJECTION64_PATH:-none} bare=${BARE_CUPTI:-none} kernels=${PREWARM_DOCTOR_KERNEL_RECORDS:-on} tick=${PREWARM_DOCTOR_EARLY_TICK_MS:-10}" >> "$SB/log"
exec python3 - <<'EOF'
import json, os, random
inj = os.environ.get("CUDA_INJECTION64_PATH", "")
extra = 12.0 if inj else 0.0
if inj.endswith("libprewarm_probe.so") and os.environ.get("PREWARM_DOCTOR_KERNEL_RECORDS") != "0":
    extra += 3.0
n = lambda: random.uniform(-0.1, 0.1)
print("FIRSTBW " + json.dumps({"init": 400 + n(), "forward": 90 + n(), "backward": 70 + extra + n(),
                               "forward2": 1 + n(), "backward2": 2 + n(), "thread_matmul": 5 + n()}))
EOF
"#;

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line.find(&format!(" {key}=")).expect(key) + key.len() + 2;
    line[at..].split(' ').next().unwrap()
}

#[test]
fn each_mode_is_paired_with_plain_and_the_bare_client_is_built_and_injected() {
    let dir = tempfile::tempdir().unwrap();
    common::write_executable(dir.path(), "prewarm-doctor", DOCTOR);
    common::write_executable(dir.path(), "py", PYTHON);
    let stdout = common::stdout_of_success(
        Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/gpu_first_backward.sh"))
            .env("SB", dir.path())
            .env("BIN", dir.path().join("prewarm-doctor"))
            .env("PY", dir.path().join("py"))
            .env("OUTDIR", dir.path().join("out"))
            .env("FIRSTBW_ROUNDS", "4"),
    );
    assert!(
        dir.path().join("out/bare_cupti.so").exists(),
        "the bare client was not built"
    );
    let backward = |mode: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!(" mode={mode} field=backward ")))
            .unwrap_or_else(|| panic!("no backward line for {mode}:\n{stdout}"))
    };
    let diff = |mode: &str| {
        field(backward(mode), "paired_diff_ms")
            .parse::<f64>()
            .unwrap()
    };
    assert!(!backward("plain").contains("paired_diff_ms"), "{stdout}");
    assert!((diff("bare-sub") - 12.0).abs() < 0.5, "{stdout}");
    assert!((diff("bare-kernels") - 12.0).abs() < 0.5, "{stdout}");
    assert!((diff("bare-kernels-zeroed") - 12.0).abs() < 0.5, "{stdout}");
    assert!((diff("probe-nokernels") - 12.0).abs() < 0.5, "{stdout}");
    assert!((diff("probe") - 15.0).abs() < 0.5, "{stdout}");
    assert_eq!(field(backward("probe"), "above_zero"), "4/4");
    assert_eq!(field(backward("probe"), "rounds"), "4");
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    let runs = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(runs("inj=none"), 4, "{log}");
    assert_eq!(runs("bare_cupti.so bare=sub"), 4, "{log}");
    assert_eq!(runs("bare_cupti.so bare=kernels "), 4, "{log}");
    assert_eq!(runs("bare_cupti.so bare=kernels-zeroed "), 4, "{log}");
    assert_eq!(runs("libprewarm_probe.so bare=none kernels=0"), 4, "{log}");
    assert_eq!(log.lines().count(), 24, "{log}");
}
