//! A large synthetic run for the benchmarks: N ranks x M allocation events
//! each, written in the real event format (benchmark input, not a
//! recording). Shared by benches/analysis.rs and benches/tui.rs.

use prewarm_events::*;
use std::io::Write;
use std::path::Path;

/// One rank's event and shim files.
fn write_rank(dir: &Path, rank: u32, events: u64) {
    let pid = 1000 + rank;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(dir.join(format!("rank-{rank}.pid-{pid}.events"))).unwrap(),
    );
    let start = 1_000_000_000u64;
    f.write_all(&encode_header(&[
        ("pid", &pid.to_string()),
        ("start_ns", &start.to_string()),
        ("status", "active"),
        ("RANK", &rank.to_string()),
    ]))
    .unwrap();
    let mut buf = Vec::new();
    encode_record(
        &Record::Library(LibraryName {
            id: 1,
            path: "/x/torch/lib/libc10_cuda.so".into(),
        }),
        &mut buf,
    );
    encode_record(
        &Record::Library(LibraryName {
            id: 2,
            path: "/x/nvidia/nccl/lib/libnccl.so.2".into(),
        }),
        &mut buf,
    );
    encode_record(
        &Record::Context(ContextCreated {
            t: start + 1,
            device: rank as i32,
            context_id: 1,
            pci_bus_id: format!("0000:{:02x}:00.0", rank),
            free: 140 << 30,
            total: 141 << 30,
        }),
        &mut buf,
    );
    let total = 141u64 << 30;
    let mut free = 140u64 << 30;
    for i in 0..events {
        let t = start + 10 + i * 1000;
        let alloc = i % 2 == 0;
        let bytes = 2 << 20;
        let address = 0x7000_0000_0000 + (i / 2) * bytes;
        if alloc {
            free -= bytes;
        } else {
            free += bytes;
        }
        encode_record(
            &Record::Mem(MemCall {
                t_start: t,
                t_end: t + 200,
                api: if alloc {
                    MemApi::MemAlloc
                } else {
                    MemApi::MemFree
                },
                thread: 1,
                device: rank as i32,
                bytes: if alloc { bytes } else { 0 },
                address,
                result: 0,
                library: if i % 10 == 0 { 2 } else { 1 },
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
    f.write_all(&buf).unwrap();
    let mut shim =
        std::fs::File::create(dir.join(format!("rank-{rank}.pid-{pid}.shim.jsonl"))).unwrap();
    let step1 = start + 10 + events * 500;
    writeln!(
        shim,
        "{{\"ev\":\"step1_begin\",\"t\":{step1},\"rule\":\"synthetic\"}}"
    )
    .unwrap();
    for s in 1..=5u64 {
        writeln!(
            shim,
            "{{\"ev\":\"step_end\",\"t\":{},\"step\":{s}}}",
            step1 + s * events * 100
        )
        .unwrap();
    }
}

/// Writes one attempt of `ranks` ranks with `events` allocation events each.
pub fn make_run(root: &Path, ranks: u32, events: u64) {
    let host = root.join("default/1/bench");
    std::fs::create_dir_all(&host).unwrap();
    std::fs::write(
        host.join("host.json"),
        serde_json::json!({
            "schema": 1, "doctor_version": "bench", "host": "bench", "hostname": "bench", "variant": "default", "attempt": "1",
            "command": ["synthetic"], "cwd": "/", "env": {}, "started": "", "started_unix_ns": 0, "t_start_ns": 0,
            "exit": {"code": 0, "signal": null, "forwarded": 0}, "gpus": [], "driver": {}, "cache": "cold",
            "probe_path": null, "probe_sha256": null, "cupti_path": null, "notices": []
        })
        .to_string(),
    )
    .unwrap();
    for r in 0..ranks {
        write_rank(&host, r, events);
    }
}
