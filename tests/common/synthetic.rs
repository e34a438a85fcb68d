//! SYNTHETIC run folders for renderer tests and benchmarks: written in the
//! real on-disk format (probe event files, shim JSON lines, host.json,
//! run.json) by this generator, never by a GPU. They exist to exercise
//! rendering at scale and with hostile names; the H200 recordings under
//! tests/fixtures/h200 and reports/h200-matrix are the real data.

#![allow(dead_code)]

use prewarm_events::*;
use std::io::Write;
use std::path::Path;

/// A kernel name no renderer may interpret: markup, quotes, a terminal
/// escape sequence and a bidirectional override.
pub const HOSTILE_KERNEL: &str =
    "<script>alert('kernel')</script>\"quoted\" \u{1b}[31mred\u{1b}[0m \u{202e}evil";
/// A variant name with markup and quotes (legal in a folder name).
pub const HOSTILE_VARIANT: &str = "warm\"<img src=x onerror=alert(1)>'";
/// A secret that must never reach a report.
pub const SECRET_VALUE: &str = "hunter2-do-not-print";

/// What to put into the synthetic run.
#[derive(Clone, Copy)]
pub struct Shape {
    pub ranks: u32,
    /// Allocation/free calls per rank.
    pub events: u64,
    /// Use hostile names, a secret in the variant environment, and an OOM.
    pub hostile: bool,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const START: u64 = 1_000_000_000;

fn rank_file(dir: &Path, rank: u32, shape: Shape) {
    let pid = 1000 + rank;
    let n = shape.events.max(20);
    // Setup takes the first 40% of the calls, step 1 the next 40%.
    let t_of = |i: u64| START + 10_000 + i * 1_000;
    let step1 = t_of(n * 4 / 10);
    let step1_end = t_of(n * 8 / 10);
    let end = t_of(n) + 50_000_000;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(dir.join(format!("rank-{rank}.pid-{pid}.events"))).unwrap(),
    );
    f.write_all(&encode_header(&[
        ("pid", &pid.to_string()),
        ("start_ns", &START.to_string()),
        ("status", "active"),
        ("RANK", &rank.to_string()),
        ("LOCAL_RANK", &rank.to_string()),
        ("WORLD_SIZE", &shape.ranks.to_string()),
    ]))
    .unwrap();
    let mut buf = Vec::new();
    let libs = [
        (1, "/x/torch/lib/libc10_cuda.so".to_string()),
        (2, "/x/nvidia/nccl/lib/libnccl.so.2".to_string()),
        (3, "/x/nvidia/cu13/lib/libcublasLt.so.13".to_string()),
        (
            4,
            if shape.hostile {
                "/opt/evil/lib<b onmouseover=alert(2)>\"x'.so".to_string()
            } else {
                "/opt/app/libmyalloc.so.1".to_string()
            },
        ),
    ];
    for (id, path) in libs {
        encode_record(&Record::Library(LibraryName { id, path }), &mut buf);
    }
    let total = 141 * GIB;
    let mut free = 140 * GIB;
    encode_record(
        &Record::Context(ContextCreated {
            t: START + 1_000,
            device: rank as i32,
            context_id: 1,
            pci_bus_id: format!("0000:{:02x}:00.0", rank % 256),
            free,
            total,
        }),
        &mut buf,
    );
    free -= 500 * MIB;
    let mut live: Vec<(u64, u64)> = Vec::new();
    for i in 0..n {
        let t = t_of(i);
        // Pool traffic, with out-of-pool requests by NCCL, cuBLAS and the
        // odd library now and then.
        let library = match i % 50 {
            7 => 2,
            17 => 3,
            27 => 4,
            _ => 1,
        };
        let alloc = library != 1 || i % 2 == 0 || live.is_empty();
        let (api, bytes, address) = if alloc {
            let bytes = if library == 1 { 2 * MIB } else { 4 * MIB };
            let address = 0x7000_0000_0000 + i * 8 * MIB;
            if library == 1 {
                live.push((address, bytes));
            }
            free -= bytes;
            (MemApi::MemAlloc, bytes, address)
        } else {
            let (address, bytes) = live.remove(0);
            free += bytes;
            (MemApi::MemFree, 0, address)
        };
        encode_record(
            &Record::Mem(MemCall {
                t_start: t,
                t_end: t + 200,
                api,
                thread: 1,
                device: rank as i32,
                bytes,
                address,
                result: 0,
                library,
                free_before: free,
                free_after: free,
                total,
            }),
            &mut buf,
        );
        if buf.len() > 1 << 20 {
            f.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    let kernel = if shape.hostile {
        HOSTILE_KERNEL.to_string()
    } else {
        "chunk_bwd_kernel_dqkwg".to_string()
    };
    for (t, before, after, name) in [
        (START + 5_000, 0, 150 * MIB, "first_kernel".to_string()),
        (step1 + 5_000, 150 * MIB, 1_150 * MIB, kernel.clone()),
    ] {
        encode_record(
            &Record::LocalMemory(LocalMemoryGrowth {
                t_start: t,
                t_end: t + 1_000,
                device: rank,
                context_id: 1,
                correlation_id: 1,
                kernel: name,
                total_before: before,
                total_after: after,
                per_thread: 1024,
                registers: 255,
                grid: [1, 1, 1],
                block: [128, 1, 1],
            }),
            &mut buf,
        );
    }
    if shape.hostile && rank == 0 {
        // The request that fails: an out-of-memory by the hostile library.
        encode_record(
            &Record::Mem(MemCall {
                t_start: end - 500_000,
                t_end: end - 400_000,
                api: MemApi::MemAlloc,
                thread: 1,
                device: 0,
                bytes: 200 * GIB,
                address: 0,
                result: 2,
                library: 4,
                free_before: free,
                free_after: free,
                total,
            }),
            &mut buf,
        );
    }
    f.write_all(&buf).unwrap();
    f.flush().unwrap();

    let mut shim =
        std::fs::File::create(dir.join(format!("rank-{rank}.pid-{pid}.shim.jsonl"))).unwrap();
    let line = |v: serde_json::Value| format!("{v}\n");
    let mut text = String::new();
    text += &line(serde_json::json!({"ev": "process", "t": START + 10,
        "versions": {"torch": "synthetic", "triton": "synthetic"}}));
    text += &line(serde_json::json!({"ev": "step1_begin", "t": step1, "rule": "synthetic"}));
    text += &line(
        serde_json::json!({"ev": "autotune_config", "kernel": kernel,
        "config": "BLOCK: 4096, num_warps: 1 <b>", "t0": step1 + 4_000, "t1": step1 + 9_000}),
    );
    text += &line(serde_json::json!({"ev": "autotune", "kernel": kernel,
        "key": "(4096, '<torch.bfloat16>')", "t0": step1 + 1_000, "t1": step1 + 40_000,
        "configs": 3, "benchmarked": 3, "chosen": "BLOCK: 1024 \"best\"", "source": "benchmark"}));
    text += &line(serde_json::json!({"ev": "compile", "kernel": kernel,
        "t0": step1 + 500, "t1": step1 + 900, "cache_hit": false}));
    let steps = 3u64;
    for s in 1..=steps {
        let t = step1_end + (s - 1) * (end - 10_000_000 - step1_end) / steps;
        text += &line(serde_json::json!({"ev": "step_end", "t": t, "step": s}));
    }
    if shape.hostile && rank == 0 {
        text += &line(serde_json::json!({"ev": "exception", "t": end - 300_000,
            "type": "OutOfMemoryError",
            "message": format!("CUDA out of memory. Tried <script>alert(3)</script> for {HOSTILE_KERNEL}")}));
    }
    shim.write_all(text.as_bytes()).unwrap();
}

fn host_json(dir: &Path, variant: &str, attempt: &str, shape: Shape) {
    let command = if shape.hostile {
        vec![
            "python3".to_string(),
            "train.py".to_string(),
            "--name=<img src=x onerror=alert(4)>".to_string(),
            "--token".to_string(),
            SECRET_VALUE.to_string(),
        ]
    } else {
        vec!["synthetic".to_string()]
    };
    std::fs::write(
        dir.join("host.json"),
        serde_json::json!({
            "schema": 1, "doctor_version": "synthetic", "host": "synth", "hostname": "synth",
            "variant": variant, "attempt": attempt, "command": command, "cwd": "/",
            "env": {}, "started": "", "started_unix_ns": 0, "t_start_ns": 0,
            "exit": {"code": 0, "signal": null, "forwarded": 0}, "gpus": [], "driver": {},
            "cache": "cold", "probe_path": null, "probe_sha256": null, "cupti_path": null,
            "notices": []
        })
        .to_string(),
    )
    .unwrap();
}

/// Writes a synthetic run folder: a baseline and one prewarm variant (its
/// name hostile when asked), one attempt each, `shape.ranks` ranks.
pub fn write_run(root: &Path, shape: Shape) {
    let variant = if shape.hostile {
        HOSTILE_VARIANT
    } else {
        "cublas"
    };
    let command: Vec<String> = if shape.hostile {
        vec![
            "python3".into(),
            "train.py".into(),
            "--name=<img src=x onerror=alert(4)>".into(),
            "--token".into(),
            "<redacted>".into(),
        ]
    } else {
        vec!["synthetic".into()]
    };
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(
        root.join("run.json"),
        serde_json::json!({
            "schema": 1, "doctor_version": "synthetic", "name": "synthetic <run>",
            "command": command, "created": "synthetic",
            "variants": [
                {"name": "baseline", "args": [], "env": [], "prewarms": []},
                {"name": variant, "args": ["--prewarm.cublas_backward", "true"],
                 "env": [["HF_TOKEN", SECRET_VALUE], ["PREWARM_X", "1"]],
                 "prewarms": ["cublas_backward"]}
            ],
            "repeat": 1, "cache": "cold", "kernel_steps": 3, "baseline": "baseline"
        })
        .to_string(),
    )
    .unwrap();
    for v in ["baseline", variant] {
        let dir = root.join(v).join("1").join("synth");
        std::fs::create_dir_all(&dir).unwrap();
        host_json(&dir, v, "1", shape);
        for r in 0..shape.ranks {
            rank_file(&dir, r, shape);
        }
    }
}
