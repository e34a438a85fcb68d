//! The fuzz targets of `fuzz/` on any stable toolchain: a deterministic
//! mutation driver seeded with the real H200 recordings under
//! tests/fixtures/h200 (event files, shim JSON lines, NCCL logs), the
//! variants examples of docs/variants.md and hostile strings. Each run mutates
//! seeds (bit flips, interesting bytes and lengths, inserts, deletes,
//! duplicated and spliced ranges, dictionary tokens) and feeds them to the
//! same target functions cargo-fuzz runs; a panic or a broken property fails
//! the test and saves the input under target/fuzz-crashes/.
//!
//! `cargo test --test fuzz_stable` runs a short bounded pass (CI).
//! `PREWARM_FUZZ_RUNS=10000000 cargo test --release --test fuzz_stable -- --nocapture`
//! runs each target that many times; `PREWARM_FUZZ_SEED` picks another sequence.
//! Crashes found earlier are replayed from fuzz/regressions/<target>/ first.

#[path = "../fuzz/src/lib.rs"]
mod targets;

use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// proptest's deterministic ChaCha generator (already a dependency): the same
/// sequence for a seed on every machine.
struct Rng(TestRng);

impl Rng {
    fn seeded(seed: u64) -> Rng {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        Rng(TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING_BYTES: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b'\r', b'"', b'\\', b'{', b'[', 0x1b,
];
const INTERESTING_U32: &[u32] = &[
    0,
    1,
    7,
    8,
    4095,
    4096,
    4097,
    1 << 20,
    (1 << 20) + 1,
    0x7fff_ffff,
    0xffff_ffff,
];

/// One mutation step on `data`; `others` are the seeds to splice from,
/// `dictionary` tokens that matter to the parser.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>, others: &[Vec<u8>], dictionary: &[&[u8]]) {
    let len = data.len();
    match rng.below(10) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
        }
        2 if len >= 4 => {
            let i = rng.below(len - 3);
            let v = INTERESTING_U32[rng.below(INTERESTING_U32.len())];
            data[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        3 => {
            let i = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            data.splice(i..i, bytes);
        }
        4 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            data.drain(i..i + n);
        }
        5 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(64));
            let copy = data[i..i + n].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, copy);
        }
        6 if !others.is_empty() => {
            let other = &others[rng.below(others.len())];
            if !other.is_empty() {
                let i = rng.below(other.len());
                let n = 1 + rng.below((other.len() - i).min(256));
                let at = rng.below(len + 1);
                let cut = rng.below(len - at + 1);
                data.splice(at..at + cut, other[i..i + n].iter().copied());
            }
        }
        7 if len > 0 => data.truncate(rng.below(len)),
        8 if !dictionary.is_empty() => {
            let token = dictionary[rng.below(dictionary.len())];
            let at = rng.below(len + 1);
            data.splice(at..at, token.iter().copied());
        }
        _ => {
            let i = rng.below(len + 1);
            let b = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
            data.insert(i, b);
        }
    }
}

/// Files under `dir` whose names satisfy `keep`, at most `max` bytes each
/// (longer ones contribute their first `max` bytes: a cut-short file).
fn seeds(dir: &Path, keep: &dyn Fn(&str) -> bool, max: usize, out: &mut Vec<Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            seeds(&p, keep, max, out);
        } else if keep(&p.file_name().unwrap_or_default().to_string_lossy()) {
            let mut bytes = std::fs::read(&p).unwrap();
            bytes.truncate(max);
            if !out.contains(&bytes) {
                out.push(bytes);
            }
        }
    }
}

fn fixture_seeds(keep: &dyn Fn(&str) -> bool, max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    seeds(&root().join("tests/fixtures/h200"), keep, max, &mut out);
    assert!(!out.is_empty(), "no seeds found under tests/fixtures/h200");
    out
}

fn variants_seeds() -> Vec<Vec<u8>> {
    let doc = std::fs::read_to_string(root().join("docs/variants.md")).unwrap();
    let mut out: Vec<Vec<u8>> = doc
        .split("```toml")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .map(|t| t.as_bytes().to_vec())
        .collect();
    out.push(b"baseline = \"b\"\n[[variant]]\nname = \"b\"\n[[variant]]\nname = \"cublas\"\nargs = [\"--prewarm-cublas\"]\nenv = { PREWARM_CUBLAS = \"1\" }\n".to_vec());
    out
}

fn hostile_seeds() -> Vec<Vec<u8>> {
    [
        "k\u{1b}[31mred\u{1b}[0m\u{1b}]8;;http://evil\u{7}x\u{1b}]8;;\u{7}\r\n| a | <b> `c` *d* _e_ [f](g)",
        "\u{9b}2J\u{202e}abc\u{2066}\u{7f}\u{85}\u{2028}",
        "=cmd|' /C calc'!A0",
        "```\n````\n`",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain([b"\xff\xfe\x1b[\xc2\x9b".to_vec()])
    .collect()
}

/// Runs `target` on every saved regression input, then on `runs` mutated seeds.
fn drive(
    name: &str,
    target: fn(&[u8]),
    corpus: Vec<Vec<u8>>,
    dictionary: &[&[u8]],
    default_runs: u64,
) {
    let regressions = root().join("fuzz/regressions").join(name);
    if let Ok(entries) = std::fs::read_dir(&regressions) {
        for e in entries.flatten() {
            let input = std::fs::read(e.path()).unwrap();
            run_one(name, target, &input);
        }
    }
    for seed in &corpus {
        run_one(name, target, seed);
    }
    let runs: u64 = std::env::var("PREWARM_FUZZ_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_runs);
    let seed: u64 = std::env::var("PREWARM_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = Rng::seeded(seed ^ ((name.len() as u64) << 32));
    let started = std::time::Instant::now();
    for _ in 0..runs {
        let mut input = corpus[rng.below(corpus.len())].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut input, &corpus, dictionary);
        }
        run_one(name, target, &input);
    }
    eprintln!(
        "fuzz_stable {name}: {runs} mutated inputs from {} seeds in {:.1?}, no failure",
        corpus.len(),
        started.elapsed()
    );
}

fn run_one(name: &str, target: fn(&[u8]), input: &[u8]) {
    if std::panic::catch_unwind(|| target(input)).is_err() {
        let dir = root().join("target/fuzz-crashes");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}-{:016x}.bin", fnv(input)));
        let _ = std::fs::write(&path, input);
        panic!(
            "fuzz target {name} failed on a {}-byte input saved as {} (replay: copy it to fuzz/regressions/{name}/)",
            input.len(),
            path.display()
        );
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn event_decoder() {
    let corpus = fixture_seeds(&|n| n.ends_with(".events"), 4096);
    drive(
        "event_decoder",
        targets::event_decoder,
        corpus,
        &[b"PWDOCEV\0", b"\x01\x00\x00\x00"],
        3_000,
    );
}

#[test]
fn shim_jsonl() {
    let corpus = fixture_seeds(&|n| n.ends_with(".shim.jsonl"), 4096);
    let dictionary: &[&[u8]] = &[
        b"{\"ev\":\"step_end\",\"t\":1,\"step\":1}\n",
        b"{\"ev\":\"autotune\",\"kernel\":\"k\",\"key\":\"x\",\"t0\":1,\"t1\":2}\n",
        b"\"ev\":\"exception\"",
        b"\\u0000",
        b"1e999",
        b"-1",
        b"18446744073709551616",
        b"null",
    ];
    drive("shim_jsonl", targets::shim_jsonl, corpus, dictionary, 3_000);
}

/// A step file as the shim writes it: steps `first..first + n`, with one
/// slot left unwritten.
fn step_file_seed(first: u64, n: u64) -> Vec<u8> {
    let mut b = b"PDSTEP01".to_vec();
    b.extend_from_slice(&24u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&first.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    for i in 0..n {
        let step = if i == n / 2 { 0 } else { first + i };
        for v in [step, 1_000_000 * (first + i), 25_000 * i] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

#[test]
fn step_file() {
    let corpus = vec![
        step_file_seed(6, 12),
        step_file_seed(101, 3),
        step_file_seed(u64::from(u32::MAX) - 1, 4),
    ];
    let dictionary: &[&[u8]] = &[b"PDSTEP01", &[24, 0, 0, 0], &[0; 24], &[0xff; 8]];
    drive("step_file", targets::step_file, corpus, dictionary, 3_000);
}

#[test]
fn nccl_log() {
    let corpus = fixture_seeds(&|n| n.starts_with("nccl.") && n.ends_with(".log"), 8192);
    let dictionary: &[&[u8]] = &[
        b" NCCL INFO ",
        b" - Init START",
        b" - Init COMPLETE",
        b"Init timings",
        b" comm 0x1 ",
        b" rank ",
        b" nranks ",
        b" total ",
        b"(",
        b"[1.5] ",
        b"h:1:2 [0]",
    ];
    drive("nccl_log", targets::nccl_log, corpus, dictionary, 3_000);
}

#[test]
fn variants_toml() {
    let dictionary: &[&[u8]] = &[
        b"[[variant]]\n",
        b"name = \"x\"\n",
        b"baseline = \"x\"\n",
        b"args = [\"--prewarm-cublas\"]\n",
        b"env = { PREWARM_NCCL_COMM = \"1\" }\n",
        b"prewarms = [\"cublas\"]\n",
        b"\"\"\"",
        b"'''",
    ];
    drive(
        "variants_toml",
        targets::variants_toml,
        variants_seeds(),
        dictionary,
        3_000,
    );
}

#[test]
fn escape() {
    let dictionary: &[&[u8]] = &[
        b"\x1b[",
        b"\x1b]8;;",
        b"\x07",
        b"|",
        b"`",
        b"\\",
        b"\xc2\x9b",
        b"\xe2\x80\xae",
    ];
    drive(
        "escape",
        targets::escape,
        hostile_seeds(),
        dictionary,
        3_000,
    );
}

#[test]
fn report_pipeline() {
    // Seeds: each replaceable file of the recording, behind its selector byte.
    let run = root().join("tests/fixtures/h200/examples-cublas-baseline");
    let nccl =
        root().join("tests/fixtures/h200/examples-nccl-baseline/default/1/vm/nccl.vm.780.log");
    let files = [
        run.join("default/1/vm/proc.pid-427.events"),
        run.join("default/1/vm/proc.pid-427.shim.jsonl"),
        run.join("default/1/vm/nvml.events"),
        run.join("default/1/vm/host.json"),
        nccl,
        run.join("run.json"),
    ];
    let corpus: Vec<Vec<u8>> = files
        .iter()
        .enumerate()
        .map(|(i, f)| [vec![i as u8], std::fs::read(f).unwrap()].concat())
        .collect();
    // Each input runs the whole report path (milliseconds): fewer of them.
    drive(
        "report_pipeline",
        targets::report_pipeline,
        corpus,
        &[b"\x00\x00\x00\x00"],
        500,
    );
    targets::report_pipeline_cleanup();
}
