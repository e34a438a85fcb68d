"""Does CUPTI attached make module loads and first launches slower — the
first-use work that fills a training's step 1?

Step 1 under the doctor reads 1.01-1.05 on an H100 (the README's footprint
table); the probe's own callbacks are 5-12 ms of it, and lazy's extra lies
in its forward (cuBLAS's first use, first kernels, Triton's loads), where the
parts bench's one-process-a-mode rounds spread +-50 ms (docs/footprint.md,
eighteenth session). This asks CUPTI alone, no probe, inside one process,
where process-to-process spread cancels: one cubin of FUNCTIONS kernels
(built with nvcc, once) is loaded MODULES times a block (cuLibraryLoadData,
as the CUDA runtime loads torch's kernels, or cuModuleLoadData: a new
library each time, its functions loaded lazily at their first launch, as
the driver loads torch's), each function launched once (its first launch)
and again; the blocks take turns through CUPTI's states, in an ABBA order
(up, then down: a linear drift cancels):

  detached   CUPTI torn down (cuptiFinalize): the process without the doctor
  subscribed a subscriber, no callback on
  callbacks  the probe's driver callbacks on (its traced calls: allocations,
             module loads, contexts, pools; and the launches of its
             first-launch watch), a C callback that does nothing
  records    callbacks, and concurrent-kernel records on through the block
             (buffers from fresh mappings, as the probe hands CUPTI)

A block's row holds microseconds a load, a first launch (with the
kernel's lookup: its lazy load) and a later launch. The
summary pairs each state with `detached` (and `records` with `callbacks`)
within the process's rounds: median added microseconds, its exact
interval, the sign test. A worker that fails gives a FAILED line and the
other processes go on; its rows so far are kept.

Usage, on a GPU machine from the repository root (needs nvcc and gcc):

  BIN=.gpu/prewarm-doctor python3 benches/gpu_cupti_module_loads.py [PROCESSES]

(PROCESSES 3; CUPTI_MODULES_ROUNDS rounds a process, 10, each one block a
state; CUPTI_MODULES_MODULES loads a block, 8; CUPTI_MODULES_FUNCTIONS
kernels a module, 64 (small kernels: a small cubin; each row says its
size in `cubin_bytes`: torch's and NCCL's modules are larger, so a
figure holds for the size it was taken at); CUPTI_MODULES_API `library` (default) or `module`,
the driver API that loads them; CUPTI_MODULES_DEADLINE_S stops starting processes past
that many seconds; CUPTI_MODULES_NVCC names nvcc; the libcupti is
PREWARM_DOCTOR_CUPTI, else the one `$BIN check` names). Every row goes to
stdout as `MODLOADS state=S round=P.R {json}` (and to CUPTI_MODULES_ROWS
when set), then the summary; `--summary FILE...` prints the summary of
stored rows. CUPTI_MODULES_PYTHON names the worker's interpreter.
"""

import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stored_rows
from exact_interval import paired_text
from gpu_cupti_residual import DOMAIN_DRIVER_API, KIND_CONCURRENT_KERNEL, LAUNCH_CBIDS, cupti_path

HERE = os.path.dirname(os.path.abspath(__file__))
STATES = ("detached", "subscribed", "callbacks", "records")
FIELDS = ("load_us", "first_launch_us", "again_launch_us")
# The driver calls the probe traces (prewarm_events::callback_ids:
# TRACED_DRIVER_CALLS, then CBID_POOL_CREATE and CBID_POOL_DESTROY); its
# watch's launches are LAUNCH_CBIDS. tests/cupti_module_loads_bench.rs
# checks both against the crate's tables.
TRACED_CBIDS = (243, 244, 371, 598, 599, 611, 612, 549, 550, 551, 552, 245, 600, 601, 39, 271, 294,
                301, 379, 38, 302, 18, 19, 20, 21, 678, 679, 22, 680, 10, 235, 645, 757, 386, 607, 608)
ATTR_ZEROED_OUT_ACTIVITY_BUFFER = 5


def kernel_source(functions):
    """`functions` small distinct kernels, k0 ... k<n-1>, one float* each."""
    return "".join(
        f'extern "C" __global__ void k{i}(float *p) {{\n'
        f"  float x = p[threadIdx.x] + {i}.0f;\n"
        f"  for (int j = 0; j < {16 + i % 8}; ++j) x = x * 1.0001f + 0.5f;\n"
        f"  p[threadIdx.x] = x;\n}}\n"
        for i in range(functions))


class Cupti:
    """CUPTI moved one state at a time along STATES; every call checked."""

    def __init__(self, path, helper):
        self.lib = ctypes.CDLL(path)
        function = ctypes.CDLL(helper).bare_cupti_function
        function.restype = ctypes.c_void_p
        function.argtypes = [ctypes.c_int]
        self.callback, self.request, self.complete = (function(i) for i in range(3))
        self.subscriber = ctypes.c_void_p()
        self.state = "detached"
        self.enabled = 0

    def check(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} returned CUPTI error {rc} (moving from {self.state})")

    def go(self, target):
        while self.state != target:
            step = 1 if STATES.index(target) > STATES.index(self.state) else -1
            self.move(STATES[STATES.index(self.state) + step])

    def move(self, to):
        if to == "subscribed" and self.state == "detached":
            self.subscriber = ctypes.c_void_p()
            self.check("cuptiSubscribe", ctypes.byref(self.subscriber), ctypes.c_void_p(self.callback), None)
            self.check("cuptiActivityRegisterCallbacks", ctypes.c_void_p(self.request),
                       ctypes.c_void_p(self.complete))
            # Best effort: refused, CUPTI clears the (already zero) buffers itself.
            one, size = ctypes.c_uint8(1), ctypes.c_size_t(1)
            self.lib.cuptiActivitySetAttribute(ATTR_ZEROED_OUT_ACTIVITY_BUFFER, ctypes.byref(size),
                                               ctypes.byref(one))
        elif to == "detached":
            self.check("cuptiActivityFlushAll", 1)
            self.check("cuptiFinalize")
        elif to in ("callbacks", "subscribed"):
            if self.state == "records":
                self.check("cuptiActivityDisable", KIND_CONCURRENT_KERNEL)
                self.check("cuptiActivityFlushAll", 1)
            else:
                on = int(to == "callbacks")
                # An id this CUDA lacks is refused; the others are what counts.
                self.enabled = sum(self.lib.cuptiEnableCallback(on, self.subscriber, DOMAIN_DRIVER_API, c) == 0
                                   for c in TRACED_CBIDS + LAUNCH_CBIDS)
                if on and self.enabled == 0:
                    raise RuntimeError("CUPTI refused every driver callback id")
        elif to == "records":
            self.check("cuptiActivityEnable", KIND_CONCURRENT_KERNEL)
        self.state = to


class Modules:
    """The cubin loaded again and again, each module's functions launched:
    through the library API (cuLibraryLoadData, cuLibraryGetKernel: what
    the CUDA runtime does for torch's kernels under lazy loading) or the
    module API (cuModuleLoadData, cuModuleGetFunction)."""

    def __init__(self, image, functions, pointer, api="library"):
        if api not in ("library", "module"):
            raise ValueError(f"CUPTI_MODULES_API: {api!r} is neither library nor module")
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.api = api
        self.image = image
        self.names = [f"k{i}".encode() for i in range(functions)]
        self.arg = ctypes.c_void_p(pointer)
        self.params = (ctypes.c_void_p * 1)(ctypes.addressof(self.arg))

    def load(self):
        handle = ctypes.c_void_p()
        if self.api == "library":
            self.check("cuLibraryLoadData", ctypes.byref(handle), self.image, None, None, 0, None, None, 0)
        else:
            self.check("cuModuleLoadData", ctypes.byref(handle), self.image)
        return handle

    def function(self, handle, name):
        f = ctypes.c_void_p()
        self.check("cuLibraryGetKernel" if self.api == "library" else "cuModuleGetFunction",
                   ctypes.byref(f), handle, name)
        return f

    def unload(self, handle):
        self.check("cuLibraryUnload" if self.api == "library" else "cuModuleUnload", handle)

    def check(self, name, *args):
        rc = getattr(self.cuda, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} returned CUDA error {rc}")

    def launch_all(self, functions):
        for f in functions:
            self.check("cuLaunchKernel", f, 1, 1, 1, 32, 1, 1, 0, None, self.params, None)
        self.check("cuCtxSynchronize")

    def block(self, modules):
        """One block: microseconds a load, a first launch, a later launch."""
        spent = [0, 0, 0]
        loaded = []
        for _ in range(modules):
            t0 = time.perf_counter_ns()
            module = self.load()
            t1 = time.perf_counter_ns()
            functions = [self.function(module, name) for name in self.names]
            self.launch_all(functions)
            t2 = time.perf_counter_ns()
            self.launch_all(functions)
            t3 = time.perf_counter_ns()
            for i, (a, b) in enumerate(((t0, t1), (t1, t2), (t2, t3))):
                spent[i] += b - a
            loaded.append(module)
        for module in loaded:
            self.unload(module)
        launches = modules * len(self.names)
        return {"load_us": spent[0] / modules / 1e3, "first_launch_us": spent[1] / launches / 1e3,
                "again_launch_us": spent[2] / launches / 1e3, "modules": modules,
                "functions": len(self.names), "api": self.api, "cubin_bytes": len(self.image)}


def worker(process):
    """One process: subscribed before CUDA starts (as the probe is), then
    ROUNDS rounds of one block a state; prints each row as it is taken."""
    cupti = Cupti(os.environ["PREWARM_DOCTOR_CUPTI"], os.environ["CUPTI_MODULES_HELPER"])
    cupti.go("subscribed")
    import torch

    buffer = torch.zeros(1024, device="cuda")
    torch.cuda.synchronize()
    with open(os.environ["CUPTI_MODULES_CUBIN"], "rb") as f:
        image = f.read()
    modules = Modules(image, int(os.environ["CUPTI_MODULES_FUNCTIONS"]), buffer.data_ptr(),
                      os.environ.get("CUPTI_MODULES_API", "library"))
    count = int(os.environ["CUPTI_MODULES_MODULES"])
    modules.block(count)  # the first loads of the process, not a round
    for r in range(1, int(os.environ["CUPTI_MODULES_ROUNDS"]) + 1):
        for state in STATES if r % 2 else tuple(reversed(STATES)):
            cupti.go(state)
            row = dict(modules.block(count), enabled_callbacks=cupti.enabled if state in ("callbacks", "records") else 0)
            print(f"MODLOADS state={state} round={process}.{r} {json.dumps(row, sort_keys=True)}", flush=True)


def build(folder, functions):
    """(cubin, helper .so) built in `folder`; exits naming what failed."""
    nvcc = os.environ.get("CUPTI_MODULES_NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    source = os.path.join(folder, "kernels.cu")
    with open(source, "w") as f:
        f.write(kernel_source(functions))
    cubin, helper = os.path.join(folder, "kernels.cubin"), os.path.join(folder, "bare_cupti.so")
    for what, cmd in (("nvcc (CUPTI_MODULES_NVCC)", [nvcc, "-cubin", "-arch=native", "-o", cubin, source]),
                      ("gcc", ["gcc", "-shared", "-fPIC", "-O2", "-o", helper,
                               os.path.join(HERE, "bare_cupti.c"), "-ldl"])):
        try:
            done = subprocess.run(cmd, capture_output=True, text=True)
        except OSError as e:
            sys.exit(f"cannot run {what}: {e}")
        if done.returncode != 0:
            sys.exit(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    return cubin, helper


def summarise(rounds):
    """The MODLOADS_STATE and MODLOADS_PAIRED lines of the rounds."""
    lines = []
    present = [s for s in STATES if any(s in r for r in rounds.values())]
    for s in present:
        rows = [r[s] for r in rounds.values() if s in r]
        medians = " ".join(f"{k}={statistics.median(row[k] for row in rows):.2f}" for k in FIELDS)
        lines.append(f"MODLOADS_STATE state={s} blocks={len(rows)} {medians}")
    pairs = [(s, "detached") for s in present if s != "detached"] + [("records", "callbacks")]
    for state, against in pairs:
        for k in FIELDS:
            diffs = [r[state][k] - r[against][k] for r in rounds.values() if state in r and against in r]
            if diffs:
                lines.append(f"MODLOADS_PAIRED state={state} against={against} field={k} rounds={len(diffs)} "
                             + paired_text(diffs, "us", 2))
    return lines


def run_process(process, python, env, store):
    """One worker process: its rows (printed and stored as they come), or a
    FAILED line after the rows it gave."""
    done = subprocess.run([python, os.path.abspath(__file__), "--worker", str(process)],
                          env=env, capture_output=True, text=True)
    rows = [line for line in done.stdout.splitlines() if line.startswith("MODLOADS ")]
    for line in rows:
        print(line, flush=True)
        if store:
            with open(store, "a") as f:
                f.write(line + "\n")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        print(f"FAILED process={process} exit={done.returncode} after {len(rows)} rows: {last}", flush=True)
    return rows


def main(argv):
    files = stored_rows.summary_files(argv, "gpu_cupti_module_loads.py")
    if files is not None:
        print("\n".join(summarise(stored_rows.read_rounds(files, "MODLOADS", "state"))))
        return
    processes = int(argv[1]) if len(argv) > 1 else 3
    api = os.environ.get("CUPTI_MODULES_API", "library")
    if api not in ("library", "module"):
        sys.exit(f"CUPTI_MODULES_API must be library or module, got {api!r}")
    functions = int(os.environ.get("CUPTI_MODULES_FUNCTIONS", "64"))
    deadline = float(os.environ.get("CUPTI_MODULES_DEADLINE_S", "0"))
    store = os.environ.get("CUPTI_MODULES_ROWS")
    python = os.environ.get("CUPTI_MODULES_PYTHON", sys.executable)
    cupti = cupti_path(os.environ.get("BIN", "target/release/prewarm-doctor"))
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        cubin, helper = build(folder, functions)
        env = dict(os.environ, PREWARM_DOCTOR_CUPTI=cupti, CUPTI_MODULES_CUBIN=cubin, CUPTI_MODULES_HELPER=helper,
                   CUPTI_MODULES_FUNCTIONS=str(functions),
                   CUPTI_MODULES_MODULES=os.environ.get("CUPTI_MODULES_MODULES", "8"),
                   CUPTI_MODULES_ROUNDS=os.environ.get("CUPTI_MODULES_ROUNDS", "10"))
        lines = []
        for p in range(1, processes + 1):
            if deadline and time.monotonic() - start > deadline:
                print(f"DEADLINE {p - 1} of {processes} processes ran (CUPTI_MODULES_DEADLINE_S={deadline:g})",
                      flush=True)
                break
            lines += run_process(p, python, env, store)
    rounds = {}
    for line in lines:
        fields, figures = stored_rows.parse(line, "MODLOADS")
        rounds.setdefault((0, fields["round"]), {})[fields["state"]] = figures
    print("\n".join(summarise(rounds)))


if __name__ == "__main__":
    worker(sys.argv[sys.argv.index("--worker") + 1]) if "--worker" in sys.argv else main(sys.argv)
