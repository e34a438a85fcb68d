use prewarm_events::*;
use proptest::prelude::*;

fn sample_records() -> Vec<Record> {
    vec![
        Record::Library(LibraryName {
            id: 3,
            path: "/usr/lib/libnccl.so.2".into(),
        }),
        Record::Mem(MemCall {
            t_start: 10,
            t_end: 20,
            api: MemApi::MemCreate,
            thread: 77,
            device: 0,
            bytes: 1 << 21,
            address: 0xdead_beef,
            result: 2,
            library: 3,
            free_before: 100,
            free_after: 90,
            total: 1000,
        }),
        Record::Context(ContextCreated {
            t: 5,
            device: 0,
            context_id: 1,
            pci_bus_id: "0000:19:00.0".into(),
            free: 1,
            total: 2,
        }),
        Record::Module(ModuleLoad {
            t: 6,
            context_id: 1,
            module_id: 9,
            cubin_bytes: 4096,
        }),
        Record::LocalMemory(LocalMemoryGrowth {
            t_start: 30,
            t_end: 31,
            device: 0,
            context_id: 1,
            correlation_id: 5,
            kernel: "chunk_gated_delta_rule_bwd_kernel".into(),
            total_before: 0,
            total_after: 3 << 30,
            per_thread: 1024,
            registers: 255,
            grid: [1, 2, 3],
            block: [128, 1, 1],
        }),
        Record::KernelFirst(KernelFirstLaunch {
            t_start: 1,
            t_end: 2,
            device: 0,
            context_id: 1,
            kernel: "ampere_sgemm".into(),
            local_total: 0,
        }),
        Record::Marker(Marker {
            t_start: 1,
            t_end: 9,
            name: "train_step".into(),
        }),
        Record::Notice(Notice {
            t: 1,
            level: NoticeLevel::Disabled,
            text: "no CUPTI".into(),
        }),
        Record::Dropped(RecordsDropped {
            t: 1,
            probe_events: 2,
            cupti_records: 3,
        }),
        Record::Cost(ProbeCost {
            t: 1,
            callbacks: 2,
            callback_ns: 3,
            activity_records: 4,
            activity_ns: 5,
            activity_buffer_bytes: 6,
            bytes_written: 7,
            flush_ns: 8,
            launch_ns: 2,
            module_ns: 1,
            reading_ns: 3,
            walk_ns: 5,
            slowest_callback_ns: 9,
            slowest_callback_id: 20,
        }),
        Record::Activity(ActivityState {
            t: 4,
            kernel_records: false,
        }),
        Record::Pool(PoolUse {
            t: 7,
            pool_id: 1,
            device: 0,
            handle: 0x5555_0000,
            library: 3,
            allocs: 4000,
            alloc_bytes: 1 << 30,
            frees: 3990,
            failed: 1,
            reserved: 64 << 20,
            reserved_high: 96 << 20,
            used: UNKNOWN_BYTES,
        }),
        Record::Untraced(UntracedSpan {
            t_start: 8,
            t_end: 30_000_008,
            device: 0,
            free_before: 70 << 30,
            free_after: (70 << 30) - (2 << 20),
            total: 80 << 30,
        }),
        Record::NvmlDevice(NvmlDeviceSample {
            t: 1,
            gpu: 0,
            used: 5,
            total: 6,
        }),
        Record::NvmlProcess(NvmlProcessSample {
            t: 1,
            gpu: 0,
            pid: 42,
            used: 5,
        }),
    ]
}

fn encode_all(records: &[Record]) -> Vec<u8> {
    let mut bytes = encode_header(&[("pid", "42"), ("rank", "0")]);
    for r in records {
        encode_record(r, &mut bytes);
    }
    bytes
}

#[test]
fn every_record_kind_round_trips() {
    let records = sample_records();
    let out = read_file_bytes(&encode_all(&records)).unwrap();
    assert_eq!(out.records, records);
    assert_eq!(out.tail, Tail::Clean);
    assert_eq!(out.header.get("rank"), Some("0"));
    assert_eq!(out.header.get("missing"), None);
}

/// Every event file recorded on the H200 (tests/fixtures, reports): each
/// record written again reads back as itself, so the encoder and the decoder
/// agree on real data, every record kind the probe wrote included.
#[test]
fn every_recorded_h200_event_file_round_trips() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if e.is_dir() {
                files(&e, out);
            } else if e.extension().is_some_and(|x| x == "events") {
                out.push(e);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut paths = Vec::new();
    files(&root.join("tests/fixtures/h200"), &mut paths);
    files(&root.join("reports"), &mut paths);
    assert!(paths.len() >= 100, "{}", paths.len());
    let mut kinds = std::collections::HashSet::new();
    for path in paths {
        let read = read_file_bytes(&std::fs::read(&path).unwrap()).unwrap();
        for r in &read.records {
            kinds.insert(std::mem::discriminant(r));
        }
        let again = read_file_bytes(&encode_all(&read.records)).unwrap();
        assert_eq!(again.records, read.records, "{}", path.display());
    }
    assert!(kinds.len() >= 10, "{} record kinds seen", kinds.len());
}

#[test]
fn every_truncation_point_reads_the_complete_prefix() {
    let records = sample_records();
    let bytes = encode_all(&records);
    let header_len = encode_header(&[("pid", "42"), ("rank", "0")]).len();
    // Offsets where a record ends.
    let mut ends = vec![header_len];
    let mut buf = bytes[..header_len].to_vec();
    for r in &records {
        encode_record(r, &mut buf);
        ends.push(buf.len());
    }
    for cut in header_len..bytes.len() {
        let out = read_file_bytes(&bytes[..cut]).unwrap();
        let complete = ends.iter().filter(|&&e| e <= cut).count() - 1;
        assert_eq!(out.records.len(), complete, "cut at {cut}");
        assert_eq!(out.records[..], records[..complete]);
        if ends.contains(&cut) {
            assert_eq!(out.tail, Tail::Clean);
        } else {
            assert!(matches!(out.tail, Tail::Truncated { .. }), "cut at {cut}");
        }
    }
}

#[test]
fn foreign_and_damaged_files_name_the_offset() {
    let err = read_file_bytes(b"#!/bin/sh\necho hi\n").unwrap_err();
    assert_eq!(err.offset, 0);
    assert!(err.what.contains("not a prewarm-doctor event file"));

    let mut bytes = encode_all(&sample_records());
    let header_len = encode_header(&[("pid", "42"), ("rank", "0")]).len();
    bytes[header_len + 10] ^= 0xff;
    let err = read_file_bytes(&bytes).unwrap_err();
    assert_eq!(err.offset, header_len as u64);
    assert!(err.to_string().contains("checksum"));

    let mut bytes = encode_all(&sample_records());
    bytes[8] = 99;
    let err = read_file_bytes(&bytes).unwrap_err();
    assert!(err.what.contains("version 99"));
}

#[test]
fn unknown_kinds_are_skipped_and_counted() {
    let mut bytes = encode_header(&[]);
    encode_record(&Record::Unknown { kind: 200 }, &mut bytes);
    encode_record(
        &Record::Activity(ActivityState {
            t: 1,
            kernel_records: true,
        }),
        &mut bytes,
    );
    let out = read_file_bytes(&bytes).unwrap();
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.unknown_records, 1);
}

#[test]
fn api_codes_are_stable_and_unique() {
    let codes: Vec<u16> = MemApi::all().map(|a| a.code()).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), codes.len());
    for api in MemApi::all() {
        assert_eq!(MemApi::from_code(api.code()), api);
    }
    assert_eq!(MemApi::from_code(999), MemApi::Unknown(999));
    assert_eq!(MemApi::MemAlloc.code(), 1);
    assert_eq!(MemApi::MemCreate.name(), "cuMemCreate");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_file_bytes(&bytes);
        let mut with_header = encode_header(&[("k", "v")]);
        with_header.extend_from_slice(&bytes);
        let _ = read_file_bytes(&with_header);
    }

    #[test]
    fn strings_round_trip(name in ".{0,300}") {
        let r = Record::Marker(Marker { t_start: 1, t_end: 2, name: name.clone() });
        let mut bytes = encode_header(&[]);
        encode_record(&r, &mut bytes);
        let out = read_file_bytes(&bytes).unwrap();
        prop_assert_eq!(out.records, vec![r]);
    }
}
