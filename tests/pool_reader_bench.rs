//! benches/pool_reader.c, the contention bench's native pool reader (modes
//! `pool-reads-native` and `pool-reads-1ms` of benches/gpu_nvml_contention.py),
//! built by the bench's own `native_pool_reader()` and run against a stand-in
//! libcuda.so.1 that counts the calls it gets: the reader reads the pool the
//! stand-in hands out, three attributes a read, at its period, and stops.

mod common;

use std::path::Path;
use std::process::Command;

/// The stand-in driver: device 0's pool is 0x1234 (none with FAKE_NO_POOL),
/// every attribute read is counted, and one of another pool or attribute
/// than the probe reads is remembered.
const FAKE_CUDA: &str = r#"
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
static atomic_ulong attribute_calls;
static atomic_int wrong;
int cuDeviceGetMemPool(void **pool, int device) {
  if (getenv("FAKE_NO_POOL")) return 1;
  *pool = (void *)0x1234;
  return device == 0 ? 0 : 101;
}
int cuMemPoolGetAttribute(void *pool, int attribute, void *value) {
  if (pool != (void *)0x1234 || attribute < 5 || attribute > 7) atomic_store(&wrong, 1);
  *(uint64_t *)value = 42;
  atomic_fetch_add(&attribute_calls, 1);
  return getenv("FAKE_REFUSE") ? 1 : 0;
}
unsigned long fake_attribute_calls(void) { return atomic_load(&attribute_calls); }
int fake_wrong(void) { return atomic_load(&wrong); }
"#;

/// Loads the stand-in first (so the reader's dlopen of libcuda.so.1 finds
/// it), builds the reader through the bench, reads at 1 ms for 300 ms.
const DRIVER: &str = r#"
import ctypes, json, os, sys, time
fake = ctypes.CDLL(os.path.join(sys.argv[1], "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
fake.fake_attribute_calls.restype = ctypes.c_ulong
sys.path.insert(0, sys.argv[2])
import gpu_nvml_contention as bench
lib = bench.native_pool_reader()
started = lib.pr_start(1000)
again = lib.pr_start(1000)
time.sleep(0.3)
reads = lib.pr_stop()
calls = fake.fake_attribute_calls()
time.sleep(0.05)
print(json.dumps({"started": started, "again": again, "reads": reads, "calls": calls,
                  "calls_after_stop": fake.fake_attribute_calls() - calls, "wrong": fake.fake_wrong(),
                  "busy_ns": lib.pr_busy_ns(), "max_ns": lib.pr_max_ns(), "errors": lib.pr_errors(),
                  "restart": lib.pr_start(1000), "stopped": lib.pr_stop() >= 0}))
"#;

fn run_reader(env: &[(&str, &str)]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("fake_cuda.c");
    std::fs::write(&source, FAKE_CUDA).unwrap();
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(dir.path().join("libcuda.so.1"))
        .arg(&source)
        .status()
        .expect("gcc, which the reader's build needs too");
    assert!(built.success());
    let benches = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let out = common::stdout_of_success(
        Command::new("python3")
            .arg("-c")
            .arg(DRIVER)
            .arg(dir.path())
            .arg(&benches)
            .envs(env.iter().copied()),
    );
    let last = out.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn the_native_reader_reads_three_attributes_of_device_0s_pool_at_its_period_until_stopped() {
    let got = run_reader(&[]);
    assert_eq!(got["started"], 0, "{got}");
    assert_eq!(got["again"], -5, "a second start while running: {got}");
    let reads = got["reads"].as_u64().unwrap();
    // 300 ms at a 1 ms period: at most 300 reads, and a loaded build
    // machine still wakes the thread far more than 30 times.
    assert!((30..=300).contains(&reads), "{got}");
    assert_eq!(got["calls"].as_u64().unwrap(), 3 * reads, "{got}");
    assert_eq!(got["calls_after_stop"], 0, "{got}");
    assert_eq!(got["wrong"], 0, "another pool or attribute was read: {got}");
    assert!(got["busy_ns"].as_u64().unwrap() > 0, "{got}");
    assert!(got["max_ns"].as_u64().unwrap() <= got["busy_ns"].as_u64().unwrap());
    assert_eq!(got["restart"], 0, "a start after a stop: {got}");
    assert_eq!(got["errors"], 0, "{got}");
}

#[test]
fn attribute_reads_the_driver_refuses_are_counted() {
    let got = run_reader(&[("FAKE_REFUSE", "1")]);
    assert_eq!(got["started"], 0, "{got}");
    assert_eq!(got["errors"], got["calls"], "{got}");
    assert!(got["errors"].as_u64().unwrap() > 0, "{got}");
}

#[test]
fn without_a_pool_the_reader_does_not_start() {
    let got = run_reader(&[("FAKE_NO_POOL", "1")]);
    assert_eq!(got["started"], -3, "{got}");
    assert_eq!(got["reads"], 0, "{got}");
    assert_eq!(got["calls"], 0, "{got}");
}
