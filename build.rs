//! Builds the probe cdylib (crates/probe) so the doctor can embed it with
//! `include_bytes!` — `cargo build` and `cargo install --path .` then give one
//! self-contained binary. Set PREWARM_DOCTOR_PROBE_SO to embed a prebuilt probe.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    for path in [
        "crates/probe/src",
        "crates/probe/Cargo.toml",
        "crates/events/src",
        "crates/events/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", manifest.join(path).display());
    }
    println!("cargo:rerun-if-env-changed=PREWARM_DOCTOR_PROBE_SO");

    let so = match env::var("PREWARM_DOCTOR_PROBE_SO") {
        Ok(prebuilt) if !prebuilt.is_empty() => PathBuf::from(prebuilt),
        _ => build_probe(&manifest, &out),
    };
    println!("cargo:rustc-env=PREWARM_PROBE_SO={}", so.display());
}

fn build_probe(manifest: &std::path::Path, out: &std::path::Path) -> PathBuf {
    let target_dir = out.join("probe-target");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--release")
        .args(["-p", "prewarm-probe", "--lib"])
        .arg("--manifest-path")
        .arg(manifest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings are for the doctor, not for the nested build.
    for (key, _) in env::vars() {
        let keep = key == "CARGO_HOME"
            || key == "CARGO_NET_OFFLINE"
            || key.starts_with("CARGO_REGISTRIES")
            || key.starts_with("CARGO_HTTP");
        if (key.starts_with("CARGO_") && !keep)
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
            || key == "MAKEFLAGS"
        {
            cmd.env_remove(&key);
        }
    }
    let status = cmd
        .status()
        .expect("could not run cargo to build the probe");
    if !status.success() {
        panic!("building the probe (crates/probe) failed; see the cargo output above");
    }
    target_dir.join("release").join("libprewarm_probe.so")
}
