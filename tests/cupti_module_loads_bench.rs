//! benches/gpu_cupti_module_loads.py, the bench that asks CUPTI alone
//! whether module loads and first launches are slower while it is attached,
//! driven with a stand-in nvcc and a stand-in worker interpreter: the blocks
//! of a process drift (a module load 3 µs slower every block), and each
//! CUPTI state adds a known cost. The summary must find exactly each cost
//! within rounds, name a dying process and keep its rows, read the same
//! from the rows it stored, and subscribe the callbacks the probe does.

mod common;

use std::path::Path;
use std::process::Command;

/// The stand-in nvcc: writes the file after `-o`, after checking it was
/// given kernels; `STANDIN_NVCC_FAILS` makes it fail as a broken one does.
const NVCC: &str = r#"#!/usr/bin/env bash
[ -n "$STANDIN_NVCC_FAILS" ] && { echo "nvcc fatal: unsupported gpu architecture" >&2; exit 1; }
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; *.cu) src=$1; shift ;; *) shift ;; esac; done
grep -q '__global__ void k63(float \*p)' "$src" || { echo "no k63 in $src" >&2; exit 1; }
echo cubin > "$out"
"#;

/// The stand-in worker: `python <bench> --worker P` prints the rows a
/// worker prints, in the bench's ABBA order, with a drift of 3 µs a block
/// on loads and each state's known cost; process 2 dies after 5 rows when
/// STANDIN_DIES is set. The environment must carry what the bench built.
const WORKER: &str = r#"#!/usr/bin/env python3
import json, os, sys
p = sys.argv[-1]
for key in ("CUPTI_MODULES_CUBIN", "CUPTI_MODULES_HELPER"):
    if not os.path.exists(os.environ[key]):
        sys.exit(f"{key} missing")
if os.environ["PREWARM_DOCTOR_CUPTI"] != "/opt/cupti/libcupti.so.13":
    sys.exit("the worker got another libcupti")
states = ["detached", "subscribed", "callbacks", "records"]
cost = {"detached": (0, 0), "subscribed": (1, 0), "callbacks": (40, 2), "records": (45, 9)}
block = 0
for r in range(1, int(os.environ["CUPTI_MODULES_ROUNDS"]) + 1):
    for s in states if r % 2 else states[::-1]:
        if os.environ.get("STANDIN_DIES") and p == "2" and block == 5:
            sys.stderr.write("Segmentation fault\n")
            sys.exit(139)
        load, first = cost[s]
        row = {"load_us": 500 + 3 * block + load, "first_launch_us": 20 + first, "again_launch_us": 4,
               "modules": 8, "functions": int(os.environ["CUPTI_MODULES_FUNCTIONS"])}
        print(f"MODLOADS state={s} round={p}.{r} {json.dumps(row, sort_keys=True)}", flush=True)
        block += 1
"#;

fn bench(dir: &Path, processes: &str) -> Command {
    common::write_executable(dir, "python", WORKER);
    common::write_executable(dir, "nvcc", NVCC);
    let mut c = Command::new("python3");
    c.arg(common::repo("benches/gpu_cupti_module_loads.py"))
        .arg(processes)
        .env("CUPTI_MODULES_PYTHON", dir.join("python"))
        .env("CUPTI_MODULES_NVCC", dir.join("nvcc"))
        .env("CUPTI_MODULES_ROWS", dir.join("rows.txt"))
        .env("CUPTI_MODULES_ROUNDS", "6")
        .env("PREWARM_DOCTOR_CUPTI", "/opt/cupti/libcupti.so.13");
    c
}

fn line<'a>(out: &'a str, start: &str, has: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start) && l.contains(has))
        .unwrap_or_else(|| panic!("no {start} line with {has:?} in\n{out}"))
}

fn pairing<'a>(out: &'a str, state: &str, against: &str, field: &str) -> &'a str {
    line(
        out,
        "MODLOADS_PAIRED ",
        &format!("state={state} against={against} field={field} "),
    )
}

/// Each state's own cost is found exactly in every round although the
/// blocks drift by 3 µs each (the ABBA order and the pairing within a
/// round take it out); `records` against `callbacks` is the records' share.
#[test]
fn each_states_cost_is_found_within_rounds_despite_the_drift() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(&mut bench(dir.path(), "2"));
    let callbacks = pairing(&out, "callbacks", "detached", "load_us");
    assert!(callbacks.contains(" rounds=12 "), "{callbacks}");
    // Within a round the drift between a state's block and detached's is
    // +6 µs in odd rounds and −6 in even ones: the median is the cost.
    assert!(
        callbacks.contains(" added_us=40.00 added_us_90=34.00..46.00 "),
        "{callbacks}"
    );
    let first = pairing(&out, "callbacks", "detached", "first_launch_us");
    assert!(first.contains(" added_us=2.00 "), "{first}");
    assert!(first.contains(" slower=12/12 "), "{first}");
    let records = pairing(&out, "records", "callbacks", "first_launch_us");
    assert!(records.contains(" added_us=7.00 "), "{records}");
    let again = pairing(&out, "subscribed", "detached", "again_launch_us");
    assert!(
        again.contains(" added_us=0.00 ") && again.contains(" slower=0/0 "),
        "{again}"
    );
    let state = line(&out, "MODLOADS_STATE ", "state=records ");
    assert!(state.contains(" blocks=12 "), "{state}");
}

/// A process that dies is named with its exit, its last stderr line and
/// the rows it gave, which count; the next process runs; the stored rows
/// give the very summary the run printed.
#[test]
fn a_dying_process_is_named_and_the_stored_rows_give_the_same_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(bench(dir.path(), "3").env("STANDIN_DIES", "1"));
    let failed = line(&out, "FAILED ", "");
    assert_eq!(
        failed,
        "FAILED process=2 exit=139 after 5 rows: Segmentation fault"
    );
    let rows = std::fs::read_to_string(dir.path().join("rows.txt")).unwrap();
    assert_eq!(rows.lines().count(), 24 + 5 + 24, "{rows}");
    common::stored_rows_give_the_printed_summary(
        "benches/gpu_cupti_module_loads.py",
        &dir.path().join("rows.txt"),
        "MODLOADS_",
        &out,
    );
}

/// The bench run with one more variable, expected to stop before any
/// process ran: its stderr.
fn stopped_early(name: &str, value: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(dir.path(), "2").env(name, value).output().unwrap();
    assert!(!out.status.success());
    assert!(!dir.path().join("rows.txt").exists());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// An API the bench cannot load with is refused by name before anything
/// is built or run.
#[test]
fn an_unknown_loading_api_is_refused_by_name() {
    let err = stopped_early("CUPTI_MODULES_API", "modules");
    assert!(
        err.contains("CUPTI_MODULES_API must be library or module, got 'modules'"),
        "{err}"
    );
}

/// A failing nvcc stops the bench before any process, naming the setting
/// that picks another and nvcc's own message.
#[test]
fn a_failing_nvcc_is_named() {
    let err = stopped_early("STANDIN_NVCC_FAILS", "1");
    assert!(
        err.contains("nvcc (CUPTI_MODULES_NVCC) failed (exit 1)")
            && err.contains("unsupported gpu architecture"),
        "{err}"
    );
}

/// The callback ids the bench switches on are the probe's: its traced
/// driver calls, the pool calls and its watch's launches.
#[test]
fn the_bench_subscribes_the_callbacks_the_probe_does() {
    use prewarm_events::callback_ids::{
        CBID_POOL_CREATE, CBID_POOL_DESTROY, LAUNCH_CALLS, TRACED_DRIVER_CALLS,
    };
    let tuple = |file: &str, name: &str| -> Vec<u32> {
        let text = std::fs::read_to_string(common::repo(file)).unwrap();
        let start = text.find(&format!("\n{name} = (")).unwrap() + name.len() + 5;
        let end = start + text[start..].find(')').unwrap();
        text[start..end]
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect()
    };
    let mut traced: Vec<u32> = TRACED_DRIVER_CALLS.iter().map(|r| r.0).collect();
    traced.extend([CBID_POOL_CREATE, CBID_POOL_DESTROY]);
    assert_eq!(
        tuple("benches/gpu_cupti_module_loads.py", "TRACED_CBIDS"),
        traced
    );
    let launches: Vec<u32> = LAUNCH_CALLS.iter().map(|r| r.0).collect();
    assert_eq!(
        tuple("benches/gpu_cupti_residual.py", "LAUNCH_CBIDS"),
        launches
    );
}

/// Stand-ins for the CUPTI and driver entry points the worker calls: each
/// call appends its name (and, for a launch, its grid and block) to
/// STANDIN_LOG; a module is a counter; everything succeeds.
const LIBS: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stddef.h>
static void note(const char *what) {
  FILE *f = fopen(getenv("STANDIN_LOG"), "a");
  if (f) { fprintf(f, "%s\n", what); fclose(f); }
}
typedef void (*callback_fn)(void *, int, uint32_t, const void *);
int cuptiSubscribe(void **s, callback_fn cb, void *user) {
  (void)user; note(cb ? "cuptiSubscribe" : "cuptiSubscribe without callback"); *s = (void *)0x5; return 0;
}
int cuptiActivityRegisterCallbacks(void *req, void *done) {
  note(req && done ? "cuptiActivityRegisterCallbacks" : "register: null"); return 0;
}
int cuptiActivitySetAttribute(int a, size_t *size, void *v) {
  (void)v; note(a == 5 && *size == 1 ? "cuptiActivitySetAttribute" : "attribute: wrong"); return 0;
}
int cuptiEnableCallback(uint32_t on, void *s, int domain, uint32_t cbid) {
  (void)cbid; note(s == (void *)0x5 && domain == 1 ? (on ? "cuptiEnableCallback 1" : "cuptiEnableCallback 0") : "enable: wrong");
  return 0;
}
int cuptiActivityEnable(int kind) { note(kind == 10 ? "cuptiActivityEnable" : "activity: wrong kind"); return 0; }
int cuptiActivityDisable(int kind) { note(kind == 10 ? "cuptiActivityDisable" : "activity: wrong kind"); return 0; }
int cuptiActivityFlushAll(int flag) { note(flag == 1 ? "cuptiActivityFlushAll" : "flush: wrong"); return 0; }
int cuptiFinalize(void) { note("cuptiFinalize"); return 0; }
static uintptr_t modules;
int cuModuleLoadData(void **m, const void *image) {
  note(image && *(const char *)image == 'c' ? "cuModuleLoadData" : "load: no image"); *m = (void *)++modules; return 0;
}
int cuModuleGetFunction(void **f, void *m, const char *name) {
  note(m && name[0] == 'k' ? "cuModuleGetFunction" : "function: wrong"); *f = (void *)0x7; return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  (void)stream; (void)extra;
  int ok = f == (void *)0x7 && gx == 1 && gy == 1 && gz == 1 && bx == 32 && by == 1 && bz == 1 && shared == 0
           && params && *(uintptr_t *)params[0] == 0x1000;
  note(ok ? "cuLaunchKernel" : "launch: wrong arguments"); return 0;
}
int cuLibraryLoadData(void **l, const void *image, void *jo, void **jv, unsigned nj, void *lo, void **lv,
                      unsigned nl) {
  int ok = image && *(const char *)image == 'c' && !jo && !jv && !nj && !lo && !lv && !nl;
  note(ok ? "cuLibraryLoadData" : "load: wrong arguments"); *l = (void *)++modules; return 0;
}
int cuLibraryGetKernel(void **k, void *l, const char *name) {
  note(l && name[0] == 'k' ? "cuLibraryGetKernel" : "function: wrong"); *k = (void *)0x7; return 0;
}
int cuLibraryUnload(void *l) { note(l ? "cuLibraryUnload" : "unload: null"); return 0; }
int cuCtxSynchronize(void) { note("cuCtxSynchronize"); return 0; }
int cuModuleUnload(void *m) { note(m ? "cuModuleUnload" : "unload: null"); return 0; }
"#;

/// The few torch calls the worker makes, for a machine without torch.
const FAKE_TORCH: &str = r#"
class _Tensor:
    def data_ptr(self):
        return 0x1000
def zeros(n, device=None):
    return _Tensor()
class cuda:
    @staticmethod
    def synchronize():
        pass
"#;

/// The real worker against stand-in CUPTI and driver libraries (and a fake
/// torch), through each driver API it can load with: CUPTI is subscribed
/// before CUDA starts, finalised each time the ABBA order reaches
/// `detached` and subscribed again after it, the probe's callbacks
/// switched on and off as a set, records on once a visit to `records`;
/// every block loads, launches (twice each function, with the buffer as
/// argument) and unloads its modules; every row is printed.
#[test]
fn the_worker_moves_cupti_through_its_states_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("libs.c"), LIBS).unwrap();
    let lib = d.join("libcuda.so.1");
    let helper = d.join("bare_cupti.so");
    for (out, source) in [
        (&lib, d.join("libs.c")),
        (&helper, common::repo("benches/bare_cupti.c")),
    ] {
        let cc = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(out)
            .arg(source)
            .arg("-ldl")
            .output()
            .unwrap();
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
    }
    std::fs::write(d.join("torch.py"), FAKE_TORCH).unwrap();
    std::fs::write(d.join("kernels.cubin"), "cubin").unwrap();
    for (api, load, lookup, unload) in [
        (
            "library",
            "cuLibraryLoadData",
            "cuLibraryGetKernel",
            "cuLibraryUnload",
        ),
        (
            "module",
            "cuModuleLoadData",
            "cuModuleGetFunction",
            "cuModuleUnload",
        ),
    ] {
        let log = d.join(format!("calls-{api}.log"));
        let (rounds, modules, functions) = (3, 2, 5);
        let out = common::stdout_of_success(
            Command::new("python3")
                .arg(common::repo("benches/gpu_cupti_module_loads.py"))
                .args(["--worker", "7"])
                .env("PYTHONPATH", d)
                .env("LD_LIBRARY_PATH", d)
                .env("PREWARM_DOCTOR_CUPTI", &lib)
                .env("CUPTI_MODULES_HELPER", &helper)
                .env("CUPTI_MODULES_CUBIN", d.join("kernels.cubin"))
                .env("CUPTI_MODULES_API", api)
                .env("CUPTI_MODULES_ROUNDS", rounds.to_string())
                .env("CUPTI_MODULES_MODULES", modules.to_string())
                .env("CUPTI_MODULES_FUNCTIONS", functions.to_string())
                .env("STANDIN_LOG", &log),
        );
        let states: Vec<String> = out
            .lines()
            .map(|l| {
                let fields: Vec<&str> = l.split(' ').take(3).collect();
                format!("{} {}", fields[1], fields[2])
            })
            .collect();
        let want: Vec<String> = [(1, true), (2, false), (3, true)]
            .iter()
            .flat_map(|&(round, up)| {
                let mut order = ["detached", "subscribed", "callbacks", "records"];
                if !up {
                    order.reverse();
                }
                order.map(|s| format!("state={s} round=7.{round}"))
            })
            .collect();
        assert_eq!(states, want);
        assert!(out.contains("\"enabled_callbacks\": 47"), "{out}");
        assert!(out.contains(&format!("\"api\": \"{api}\"")), "{out}");
        // The stand-in cubin's size: the 5 bytes of "cubin".
        assert!(out.contains("\"cubin_bytes\": 5"), "{out}");

        let calls = std::fs::read_to_string(&log).unwrap();
        let count = |name: &str| calls.lines().filter(|l| *l == name).count();
        assert!(
            !calls
                .lines()
                .any(|l| l.contains(": ") || l.ends_with("without callback")),
            "{calls}"
        );
        // Subscribed before CUDA, then once after each finalise.
        assert_eq!(count("cuptiSubscribe"), 3);
        assert_eq!(count("cuptiActivityRegisterCallbacks"), 3);
        assert_eq!(count("cuptiFinalize"), 2);
        assert_eq!(count("cuptiActivityEnable"), 2);
        assert_eq!(count("cuptiActivityDisable"), 1);
        // The probe's set (36 traced calls and pools, 11 launches) a switch.
        let ids = 36 + 11;
        assert_eq!(count("cuptiEnableCallback 1"), 2 * ids);
        assert_eq!(count("cuptiEnableCallback 0"), ids);
        let loads = modules * (1 + 4 * rounds);
        assert_eq!(count(load), loads);
        assert_eq!(count(unload), loads);
        assert_eq!(count(lookup), loads * functions);
        assert_eq!(count("cuLaunchKernel"), 2 * loads * functions);
        let first = calls.lines().position(|l| l == load).unwrap();
        assert!(calls.lines().position(|l| l == "cuptiSubscribe").unwrap() < first);
        let finalize = calls.lines().position(|l| l == "cuptiFinalize").unwrap();
        assert_eq!(
            calls.lines().nth(finalize - 1),
            Some("cuptiActivityFlushAll")
        );
    }
}

/// Calls 59, 61 and 62 (H100s, tests/fixtures/h200-overhead/2026-12-07-h100):
/// the library API and the module API on the 64-function cubin, then the
/// library API on a 2,048-function one (a module the size of torch's), 3
/// processes of 10 rounds each. Their stored rows give what each call
/// printed; every state ran in every round with 8 loads of the call's cubin
/// (call 62's rows name its size, over a megabyte); and docs/footprint.md's
/// quoted pairings are lines of those summaries.
#[test]
fn the_h100_calls_rows_give_their_printed_summaries() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-07-h100");
    let docs = std::fs::read_to_string(common::repo("docs/footprint.md")).unwrap();
    let mut quoted_found = 0;
    for (call, api, functions) in [
        (59, "library", 64),
        (61, "module", 64),
        (62, "library", 2048),
    ] {
        let rows = folder.join(format!("modloads-call{call}.txt"));
        let printed =
            std::fs::read_to_string(folder.join(format!("summary-call{call}.txt"))).unwrap();
        common::stored_rows_give_the_printed_summary(
            "benches/gpu_cupti_module_loads.py",
            &rows,
            "MODLOADS_",
            &printed,
        );
        let text = std::fs::read_to_string(&rows).unwrap();
        assert_eq!(text.lines().count(), 3 * 10 * 4, "call {call}");
        for l in text.lines() {
            let json: serde_json::Value = serde_json::from_str(&l[l.find('{').unwrap()..]).unwrap();
            assert_eq!(json["api"], api, "{l}");
            assert_eq!(json["modules"], 8, "{l}");
            assert_eq!(json["functions"], functions, "{l}");
            if call == 62 {
                assert!(json["cubin_bytes"].as_u64().unwrap() > 1 << 20, "{l}");
            }
        }
        let summary = common::lines_starting(&printed, "MODLOADS_PAIRED");
        quoted_found += docs
            .lines()
            .filter(|q| q.starts_with("MODLOADS_PAIRED") && summary.iter().any(|s| s == q))
            .count();
    }
    let quoted = docs
        .lines()
        .filter(|q| q.starts_with("MODLOADS_PAIRED"))
        .count();
    assert!(
        quoted > 0,
        "docs/footprint.md quotes no MODLOADS_PAIRED line"
    );
    assert_eq!(quoted_found, quoted, "a quoted line is in neither summary");
}
