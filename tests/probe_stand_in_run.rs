//! The doctor end to end on CPU: `prewarm-doctor run` around the stand-in
//! CUDA program of the probe's harness (crates/probe/tests/stand_in: a
//! stand-in libcuda that loads the embedded probe through
//! CUDA_INJECTION64_PATH, as the driver does), then the report's memory
//! account. Here: PyTorch's async allocator (a stand-in libc10_cuda making
//! stream-ordered allocations), whose pool the probe summarises per pool.

#[path = "../crates/probe/tests/support/mod.rs"]
mod support;

use assert_cmd::Command;

fn doctor() -> Command {
    let mut c = Command::cargo_bin("prewarm-doctor").unwrap();
    c.env(
        "PREWARM_DOCTOR_CACHE",
        std::env::temp_dir().join("prewarm-doctor-test-cache"),
    );
    c
}

#[test]
fn an_async_allocator_pool_is_accounted_as_pytorchs_pool_at_its_reserved_size() {
    let program = support::program();
    let plain = std::process::Command::new(&program)
        .arg("torch-async")
        .env_remove("CUDA_INJECTION64_PATH")
        .output()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = doctor()
        .args(["run", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&program)
        .arg("torch-async")
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    assert_eq!(
        run.stdout, plain.stdout,
        "the program's stdout is untouched"
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");

    let report = doctor()
        .args(["report", "--format", "json"])
        .arg(&out)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let process = &json["attempts"][0]["processes"][0];
    let setup = &process["phases"][0];
    const MIB: u64 = 1 << 20;
    // The pool holds 64 MiB (40 MiB live, 32 MiB chunks): PyTorch's pool.
    assert_eq!(setup["pool_reserved_end"], 64 * MIB);
    let gap = &setup["gap_end"];
    assert_eq!(gap["pool_reserved"], 64 * MIB);
    // Context 512 MiB + the program's own 16 MiB outside the pool: all explained.
    assert_eq!(gap["out_of_pool"], (512 + 16) * MIB);
    assert_eq!(gap["unexplained"], 0, "{gap}");
    let sources = setup["by_source"].as_array().unwrap();
    let torch = sources
        .iter()
        .find(|s| s["source"] == "torch pool")
        .expect("the torch pool among the sources");
    assert_eq!(torch["calls"], 1040);
    assert_eq!(torch["allocated"], 1000 * 65536 + 40 * MIB);
    assert_eq!(torch["live_end"], 64 * MIB);
}
