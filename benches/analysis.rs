//! Analysis speed on a large run: N ranks × M allocation events each, written
//! in the real event format by a synthetic generator (these are benchmark
//! inputs, not recordings). Target (DESIGN.md §8): 8 ranks × 1M events
//! analysed and reported in a couple of seconds on a 2-core machine.
//!
//! `cargo bench --bench analysis` (set PD_BENCH_EVENTS to change M).

use criterion::{Criterion, criterion_group, criterion_main};
use prewarm_events::*;
use std::io::Write;
use std::path::Path;

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

fn make_run(root: &Path, ranks: u32, events: u64) {
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

fn bench(c: &mut Criterion) {
    let events: u64 = std::env::var("PD_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    make_run(dir.path(), 8, events);
    let mut g = c.benchmark_group("analysis");
    g.sample_size(10);
    g.bench_function(
        format!("8 ranks x {events} events: load + analyse + render"),
        |b| {
            b.iter(|| {
                let run = prewarm_doctor::report::pipeline::Analysed::load(dir.path()).unwrap();
                let text = prewarm_doctor::report::terminal::Terminal::default()
                    .text(&run.into_model())
                    .unwrap();
                assert!(text.contains("rank 7"));
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
