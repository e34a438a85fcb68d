"""Does NVML sampling at the doctor's rates slow the training's driver calls?

The doctor's sampler (src/capture/nvml.rs) reads each GPU's used memory at
about 1 kHz and the per-process list at about 100 Hz, from its own process.
Both go through the driver, which step 1's allocation-heavy parts (the
first cuBLAS backward, NCCL's communicator, the optimizer's first state)
also need. This measures, in one process, units of such work while a
sampler process runs at those rates, and while none runs, in alternating
blocks (so the process's own speed is the same on both sides):

  - `mem_get_info`: torch.cuda.mem_get_info() (cuMemGetInfo, which the
    probe calls around every allocation it records);
  - `alloc_free`: a 64 MiB tensor allocated and freed with the cache
    emptied (cudaMalloc + cudaFree).

Sampler modes: `off`, `device` (memory info at ~1 kHz), `device+process`
(and the per-process list every 10th sample, as the doctor does),
`device+process-max` (the same queries back to back with no sleep: tens of
times the doctor's rate, so a query that holds up the training's driver
calls shows amplified). Prints
one `NVML {json}` line per mode and unit (microseconds, median over blocks
of the block medians, with the blocks' min-max) and `NVML_QUERY {json}` with
the sampler's own query latencies. Run: `python3 benches/gpu_nvml_contention.py`
on a GPU machine (about a minute; NVML_BLOCKS sets the blocks, 12); uses
libnvidia-ml.so.1 through ctypes.

Two more, for where a CPU-bound step's steady-state extra under the doctor
comes from (docs/footprint.md, 2026-12-06: +0.58 ms a 25 ms transformers
step), both inside one process so whole-process speed differences drop out:

  - unit `hf_step` (when transformers imports; NVML_HF_STEP=0 skips it): one
    training step of examples/zoo_hf_decoder.py's shape (a 4-layer Qwen3,
    hidden 1024, 8 x 1024 tokens, AdamW, grad-norm clipping), synchronised,
    HF_REPEATS (15) a block;
  - mode `cupti`: no sampler, but CUPTI subscribed in this process to the
    driver calls the probe keeps traced after its first steps
    (`PROBE_STEADY_CBIDS`, crates/probe/src/driver_api.rs's TRACKED less the
    stream-ordered calls, and the pool create/destroy calls; a unit test
    there keeps the two lists equal),
    the callback only counting; unsubscribed again after the block. CUPTI
    from PREWARM_DOCTOR_CUPTI, else torch's nvidia wheel, else the CUDA
    toolkit's; without it the mode prints an error line and is skipped;
    mode `cupti-none` the same subscription with no callback enabled.

Mode `shim-unwind`: no sampler, but the shim's one program-wide hook on
(src/shim/prewarm_doctor_monitor.py's `sys.monitoring` PY_UNWIND callback,
the shim's own function, claimed as the shim claims it), switched off
again after the block: what the shim leaves on in steady state besides its
optimizer hook (whose time its OWN lines already count).

With `NVML_ALLOCATOR=async` the process runs PyTorch's
`backend:cudaMallocAsync` (every tensor allocation and free a driver call),
for where the async allocator's steady step pays the doctor (docs/footprint.md,
2026-12-06 on an H100: +0.21 ms a step there, nothing on the default
allocator), with three more modes:

  - `cupti-stream-off`: the steady subscription plus the stream-ordered
    calls (`PROBE_STREAM_ORDERED_CBIDS`), one training step traced, then the
    stream-ordered callbacks switched off as the probe switches them
    (`cuptiEnableCallback(0, ...)`): what a switched-off call still costs;
    the callbacks counted after the switch go in `NVML_CUPTI` (0 expected);
  - `cupti-stream-on`: the stream-ordered callbacks left on (what tracing
    them costs, as an upper bound: this bench's callback is a Python
    function, the probe's is not);
  - `cupti-stream-resubscribed`: as `cupti-stream-off`, but switched off by
    unsubscribing and subscribing anew to the steady callbacks only (a
    candidate fix, should a switched-off callback still cost its call);
  - `pool-reads`: a thread reading the device's current memory pool's
    reserved, high-water and used bytes every 100 ms, as the probe's writer
    thread does (`NVML_POOL_READ` gives the reads' latency);
  - `pool-reads-native` and `pool-reads-1ms`: the same reads from a native
    thread (benches/pool_reader.c, built here with gcc; a Python thread
    takes the GIL at each wake-up, the probe's thread never does), every
    100 ms as the probe, and every 1 ms: a hundred times the reads, so a
    read that holds up the training's stream-ordered calls shows a hundred
    times larger (`NVML_POOL_READER` gives each mode's reads a block and
    their mean and slowest time). Without gcc or the pool functions, an
    `NVML_POOL_READER` error line and the two modes are skipped.

Unit `nccl_comm` (NVML_NCCL=0 skips it): a new one-rank NCCL communicator
(`dist.new_group`), its first `all_reduce` synchronised, and the group
destroyed, NCCL_REPEATS (5) a block, in a process group of one rank over a
HashStore (the first communicator, which loads NCCL's kernels, is made
before the blocks): what a communicator's creation in step 1 pays while
NVML is sampled at the doctor's rates (docs/footprint.md, 2026-12-06 fourth
session: FSDP2's step 1, which creates the first communicator, was 18%
slower under the doctor, and about as slow without its probe).

Unit `fsdp2_step` (NVML_FSDP2_STEP=0 skips it): one training step of
examples/zoo_fsdp2.py's shape (FSDP2 over NCCL on a 4-layer Mistral, 8 x
1024 tokens, the logged loss's all_reduce) on the one-rank process group,
synchronised, HF_REPEATS a block: fsdp2's steady step read 1.097 under the
doctor over 32 whole-run rounds on an H100 (+3.5 ms a 38 ms step), which
this places, or not, on NVML sampling, a CUPTI subscription or the shim's
program-wide hook.

Unit `launch_x100`: 100 launches of a tiny kernel and a synchronize, the
driver's per-call path (what CUPTI's attachment costs each call shows here).
Unit `alloc_x100`: 100 small tensors allocated and freed one after another
and a synchronize: on the async allocator 200 stream-ordered driver calls
(cuMemAllocAsync, cuMemFreeAsync), what a per-call cost on that path comes
to; on the default allocator none (PyTorch's cache serves them), a control.
"""

import ctypes
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

BLOCKS = int(os.environ.get("NVML_BLOCKS", "12"))
REPEATS = 200
HF_REPEATS = int(os.environ.get("HF_REPEATS", "15"))
NCCL_REPEATS = int(os.environ.get("NCCL_REPEATS", "5"))
# The driver callbacks the probe keeps enabled after its watched steps
# (crates/probe/src/driver_api.rs: TRACKED less the stream-ordered calls,
# switched off once a step uses only known pools, then cuMemPoolCreate/Destroy).
PROBE_STEADY_CBIDS = [
    243, 244, 371, 549, 550, 551, 552, 245, 39, 271, 294, 301, 379, 38, 302, 18, 19,
    20, 21, 678, 679, 22, 680, 10, 235, 645, 757, 386, 607, 608,
]
# The stream-ordered calls (cuMemAllocAsync, cuMemFreeAsync, ... : the
# probe traces them until a step uses only known pools).
PROBE_STREAM_ORDERED_CBIDS = [598, 599, 600, 601, 611, 612]
DOMAIN_DRIVER_API = 1
POOL_ATTRIBUTES = (5, 6, 7)  # reserved current, reserved high, used current
POOL_READ_EVERY_S = 0.1
PERIOD_S = 0.001
PROCESS_EVERY = 10


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def sampler(mode, stop, out):
    """The sampler process: NVML queries at the doctor's rates until `stop`."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        out.send({"error": str(e)})
        return
    if nvml.nvmlInit_v2() != 0:
        out.send({"error": "nvmlInit_v2 failed"})
        return
    handle = ctypes.c_void_p()
    nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
    mem = Memory()
    procs = (ProcessInfo * 64)()
    device_us, process_us = [], []
    n = 0
    began = time.perf_counter()
    while not stop.is_set():
        t0 = time.perf_counter()
        nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
        device_us.append(1e6 * (time.perf_counter() - t0))
        if mode in ("device+process", "device+process-max") and n % PROCESS_EVERY == 0:
            count = ctypes.c_uint(64)
            t0 = time.perf_counter()
            nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), procs)
            process_us.append(1e6 * (time.perf_counter() - t0))
        n += 1
        if not mode.endswith("-max"):
            time.sleep(PERIOD_S)
    elapsed = time.perf_counter() - began
    nvml.nvmlShutdown()
    out.send({
        "mode": mode,
        "rate_hz": n / elapsed,
        "device_query_us": statistics.median(device_us) if device_us else None,
        "process_query_us": statistics.median(process_us) if process_us else None,
    })


def find_cupti():
    """libcupti: PREWARM_DOCTOR_CUPTI, torch's nvidia wheel, the toolkit's."""
    import glob

    named = os.environ.get("PREWARM_DOCTOR_CUPTI")
    if named:
        return named
    import torch

    site = os.path.dirname(os.path.dirname(torch.__file__))
    for pattern in (site + "/nvidia/cu*/lib/libcupti.so*", site + "/nvidia/cuda_cupti/lib/libcupti.so*",
                    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so*", "/usr/local/cuda/lib64/libcupti.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def cupti_subscribes(path):
    """Whether a CUDA process can subscribe CUPTI from `path` and go on (a
    child tries first: a CUPTI that cannot reach the driver crashes)."""
    import subprocess

    child = (
        "import ctypes, torch; torch.zeros(1, device='cuda'); "
        f"lib = ctypes.CDLL({path!r}); h = ctypes.c_void_p(); "
        "cb = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)(lambda *a: None); "
        "assert lib.cuptiSubscribe(ctypes.byref(h), cb, None) == 0; lib.cuptiUnsubscribe(h)"
    )
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    return done.returncode == 0, done.stderr[-300:]


class CuptiSubscription:
    """CUPTI subscribed in this process to the probe's steady-state driver
    callbacks, the callback counting calls; `close` unsubscribes."""

    CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)

    def __init__(self, lib, cbids):
        self.lib = lib
        self.calls = 0

        def count(_user, _domain, _cbid, _data):
            self.calls += 1

        self.callback = self.CALLBACK(count)
        self.handle = ctypes.c_void_p()
        rc = lib.cuptiSubscribe(ctypes.byref(self.handle), self.callback, None)
        if rc != 0:
            raise OSError(f"cuptiSubscribe returned {rc}")
        self.refused = [c for c in cbids
                        if lib.cuptiEnableCallback(1, self.handle, DOMAIN_DRIVER_API, c) != 0]

    def switch(self, cbids, on):
        for c in cbids:
            self.lib.cuptiEnableCallback(1 if on else 0, self.handle, DOMAIN_DRIVER_API, c)

    def close(self):
        self.lib.cuptiUnsubscribe(self.handle)


class PoolReader:
    """A thread reading the device's current pool as the probe's writer
    thread does, every POOL_READ_EVERY_S, until `close`."""

    def __init__(self):
        import threading

        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.stop = threading.Event()
        self.read_us = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        pool = ctypes.c_void_p()
        value = ctypes.c_uint64()
        while not self.stop.wait(POOL_READ_EVERY_S):
            t0 = time.perf_counter()
            if self.cuda.cuDeviceGetMemPool(ctypes.byref(pool), 0) != 0:
                continue
            for attribute in POOL_ATTRIBUTES:
                self.cuda.cuMemPoolGetAttribute(pool, attribute, ctypes.byref(value))
            self.read_us.append(1e6 * (time.perf_counter() - t0))

    def close(self):
        self.stop.set()
        self.thread.join(5)


def native_pool_reader():
    """benches/pool_reader.c built and loaded, or None (said on an
    NVML_POOL_READER line)."""
    import subprocess
    import tempfile

    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool_reader.c")
    library = os.path.join(tempfile.mkdtemp(prefix="pd-pool-reader-"), "pool_reader.so")
    cc = os.environ.get("CC", "gcc")
    try:
        built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl", "-lpthread"],
                               capture_output=True, text=True)
    except OSError as e:
        built = None
        why = f"{cc}: {e}"
    if built is not None and built.returncode != 0:
        why = f"{cc} failed: {built.stderr.strip()[-500:]}"
    if built is None or built.returncode != 0:
        print("NVML_POOL_READER " + json.dumps({"error": why}), flush=True)
        return None
    lib = ctypes.CDLL(library)
    lib.pr_start.argtypes = [ctypes.c_uint]
    for name in ("pr_stop", "pr_busy_ns", "pr_max_ns", "pr_errors"):
        getattr(lib, name).restype = ctypes.c_ulong
    return lib


# The native reader's period per mode, microseconds.
NATIVE_POOL_READ_US = {"pool-reads-native": 100_000, "pool-reads-1ms": 1_000}


def shim_unwind():
    """Switches the shim's program-wide PY_UNWIND callback on or off (the
    real one, from src/shim), or None where sys.monitoring is missing."""
    if getattr(sys, "monitoring", None) is None:
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "shim"))
    import prewarm_doctor_monitor as monitor

    tool = monitor._claim()
    if not tool:
        return None

    def switch(on):
        sys.monitoring.set_events(tool, sys.monitoring.events.PY_UNWIND if on else 0)

    switch(False)
    return switch


def hf_step(torch):
    """One training step of examples/zoo_hf_decoder.py's shape, or None
    where transformers does not import (or NVML_HF_STEP=0)."""
    if os.environ.get("NVML_HF_STEP") == "0":
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    try:
        from zoo_hf_decoder import build
    except ImportError:
        return None
    model = build(1024, layers=4, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 32000, (8, 1024), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    return step


def fsdp2_step(torch):
    """One training step of examples/zoo_fsdp2.py's shape (FSDP2, bf16
    parameters and fp32 reduction, on a 4-layer Mistral, hidden 1024, 8 x
    1024 tokens, AdamW, grad-norm clipping, the logged loss's all_reduce),
    or None (NVML_FSDP2_STEP=0, or no transformers or NCCL here: said on an
    NVML_FSDP2 line). Its one-rank process group is the nccl_comm unit's."""
    if os.environ.get("NVML_FSDP2_STEP") == "0":
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import torch.distributed as dist

    try:
        from zoo_fsdp2 import loss_step, sharded

        if not dist.is_initialized():
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        model = sharded(1024)
    except Exception as e:  # no transformers or NCCL: the other units go on
        print("NVML_FSDP2 " + json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 32000, (8, 1024), device="cuda")

    def step():
        loss_step(model, tokens)
        opt.step()
        opt.zero_grad()
        torch.cuda.synchronize()

    for _ in range(5):
        step()
    return step


def nccl_comm(torch):
    """The `nccl_comm` unit's function, or None (NVML_NCCL=0, or NCCL not
    usable here: said on an NVML_NCCL line): a one-rank process group over
    a HashStore, its first communicator made now."""
    if os.environ.get("NVML_NCCL") == "0":
        return None
    import torch.distributed as dist

    try:
        if not dist.is_initialized():
            dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
        x = torch.ones(1024, device="cuda")

        def communicator():
            group = dist.new_group([0], backend="nccl")
            dist.all_reduce(x, group=group)
            torch.cuda.synchronize()
            dist.destroy_process_group(group)

        communicator()  # NCCL's own first-use work, outside the blocks
    except Exception as e:  # a machine without NCCL: the other units go on
        print("NVML_NCCL " + json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return None
    return communicator


def units(torch, train_step=None, communicator=None, fsdp2=None):
    """Each unit's median over REPEATS (a training step's over HF_REPEATS,
    a new communicator's over NCCL_REPEATS), microseconds."""
    def med(fn, repeats=REPEATS):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(times)

    def alloc_free():
        t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del t
        torch.cuda.empty_cache()

    small = torch.zeros(16, device="cuda")

    def launches():
        # 100 tiny kernels: launch-bound, the per-call cost of the driver
        # path itself (a tenth of a microsecond a call is 2% here).
        for _ in range(100):
            small.add_(1)
        torch.cuda.synchronize()

    def allocations():
        for _ in range(100):
            t = torch.empty(4096, dtype=torch.uint8, device="cuda")
            del t
        torch.cuda.synchronize()

    torch.cuda.synchronize()
    got = {"mem_get_info": med(torch.cuda.mem_get_info), "alloc_free": med(alloc_free),
           "launch_x100": med(launches, REPEATS // 4), "alloc_x100": med(allocations, REPEATS // 4)}
    if train_step is not None:
        got["hf_step"] = med(train_step, HF_REPEATS)
    if communicator is not None:
        got["nccl_comm"] = med(communicator, NCCL_REPEATS)
    if fsdp2 is not None:
        got["fsdp2_step"] = med(fsdp2, HF_REPEATS)
    return got


def async_allocator():
    """True when NVML_ALLOCATOR=async: PyTorch's cudaMallocAsync backend,
    set before torch is imported."""
    if os.environ.get("NVML_ALLOCATOR") != "async":
        return False
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    return True


def open_cupti():
    """libcupti, where one is found and a child process can subscribe with
    it; else None, with a line saying why."""
    path = find_cupti()
    if path is None:
        print("NVML_CUPTI " + json.dumps({"error": "no libcupti found (set PREWARM_DOCTOR_CUPTI)"}), flush=True)
        return None
    works, why = cupti_subscribes(path)
    if not works:
        print("NVML_CUPTI " + json.dumps({"error": f"{path}: a child could not subscribe: {why}"}), flush=True)
        return None
    return ctypes.CDLL(path)


class Bench:
    """The modes this machine can run, and what each block measured."""

    def __init__(self, torch, train_step, on_async, communicator=None, fsdp2=None):
        self.torch = torch
        self.train_step = train_step
        self.communicator = communicator
        self.fsdp2 = fsdp2
        self.cupti = open_cupti()
        self.unwind = shim_unwind()
        # `device+process-max`: the doctor's two queries back to back, no
        # sleep (tens of times the doctor's rate): whether NVML's queries can
        # hold up the training's driver calls at all, amplified.
        self.modes = ["off", "device", "device+process", "device+process-max"]
        if self.cupti is not None:
            # `cupti`: the probe's steady-state callbacks enabled; `cupti-none`:
            # subscribed with none enabled (what a subscription alone costs).
            self.modes += ["cupti", "cupti-none"]
        if self.unwind is not None:
            self.modes.append("shim-unwind")
        self.pool_reader = native_pool_reader() if on_async else None
        self.native_reads = {m: [] for m in NATIVE_POOL_READ_US}
        if on_async:
            self.modes.append("pool-reads")
            if self.pool_reader is not None:
                self.modes += list(NATIVE_POOL_READ_US)
            if self.cupti is not None:
                self.modes += ["cupti-stream-off", "cupti-stream-on", "cupti-stream-resubscribed"]
        self.results = {m: [] for m in self.modes}
        self.queries = {}
        self.callbacks = []
        self.stream = {"off": [], "on": [], "resubscribed": []}
        self.pool_read_us = []
        self.spawn = mp.get_context("spawn")

    def units(self):
        return units(self.torch, self.train_step, self.communicator, self.fsdp2)

    def block(self, mode):
        """One block of every unit under `mode`."""
        if mode == "shim-unwind":
            self.unwind(True)
            self.results[mode].append(self.units())
            self.unwind(False)
        elif mode in NATIVE_POOL_READ_US:
            self.native_block(mode)
        elif mode == "pool-reads":
            reader = PoolReader()
            self.results[mode].append(self.units())
            reader.close()
            self.pool_read_us += reader.read_us
        elif mode.startswith("cupti-stream"):
            self.stream_block(mode)
        elif mode.startswith("cupti"):
            sub = CuptiSubscription(self.cupti, PROBE_STEADY_CBIDS if mode == "cupti" else [])
            self.results[mode].append(self.units())
            sub.close()
            if mode == "cupti":
                self.callbacks.append({"calls": sub.calls, "refused": sub.refused})
        elif mode == "off":
            self.results[mode].append(self.units())
        else:
            self.sampled_block(mode)

    def native_block(self, mode):
        """A block with the native reader reading the pool at `mode`'s period."""
        lib = self.pool_reader
        rc = lib.pr_start(NATIVE_POOL_READ_US[mode])
        if rc != 0:
            sys.exit(f"pool_reader.c: pr_start returned {rc} (-1 no libcuda, -2 no pool functions, "
                     "-3 no pool for device 0, -4 no thread, -5 already running)")
        self.results[mode].append(self.units())
        reads = lib.pr_stop()
        self.native_reads[mode].append((reads, lib.pr_busy_ns(), lib.pr_max_ns(), lib.pr_errors()))

    def stream_block(self, mode):
        """The stream-ordered callbacks traced for a step, then off, on or
        resubscribed away; counts the callbacks that still came."""
        sub = CuptiSubscription(self.cupti, PROBE_STEADY_CBIDS + PROBE_STREAM_ORDERED_CBIDS)
        if self.train_step is not None:
            self.train_step()  # traced, as the probe's first steps are
        if mode == "cupti-stream-off":
            sub.switch(PROBE_STREAM_ORDERED_CBIDS, False)
        if mode == "cupti-stream-resubscribed":
            sub.close()
            sub = CuptiSubscription(self.cupti, PROBE_STEADY_CBIDS)
        before = sub.calls
        self.results[mode].append(self.units())
        sub.close()
        self.stream[mode.removeprefix("cupti-stream-")].append(sub.calls - before)

    def sampled_block(self, mode):
        """A block with the NVML sampler process running in `mode`."""
        stop = self.spawn.Event()
        mine, theirs = self.spawn.Pipe()
        proc = self.spawn.Process(target=sampler, args=(mode, stop, theirs), daemon=True)
        proc.start()
        time.sleep(0.3)  # the sampler's NVML init
        self.results[mode].append(self.units())
        stop.set()
        proc.join(10)
        got = mine.recv() if mine.poll(1) else {"error": "the sampler process sent nothing"}
        self.queries.setdefault(mode, []).append(got)

    def report(self):
        """The NVML, NVML_CUPTI, NVML_POOL_READ and NVML_QUERY lines."""
        off = self.results["off"]
        for unit in off[0]:
            for mode in self.modes:
                v = [r[unit] for r in self.results[mode]]
                paired = [r[unit] - o[unit] for r, o in zip(self.results[mode], off)]
                print("NVML " + json.dumps({
                    "unit": unit, "mode": mode, "us": round(statistics.median(v), 2),
                    "min": round(min(v), 2), "max": round(max(v), 2),
                    "paired_added_us": round(statistics.median(paired), 2),
                    "blocks_slower": sum(p > 0 for p in paired), "blocks": len(paired),
                }), flush=True)
        self.report_cupti()
        if self.pool_read_us:
            print("NVML_POOL_READ " + json.dumps({
                "reads": len(self.pool_read_us), "read_us_median": round(statistics.median(self.pool_read_us), 2),
                "read_us_max": round(max(self.pool_read_us), 2),
            }), flush=True)
        for mode, blocks in self.native_reads.items():
            if blocks:
                reads = sum(b[0] for b in blocks)
                print("NVML_POOL_READER " + json.dumps({
                    "mode": mode, "period_us": NATIVE_POOL_READ_US[mode],
                    "reads_per_block": statistics.median(b[0] for b in blocks),
                    "read_us_mean": round(sum(b[1] for b in blocks) / reads / 1e3, 2) if reads else None,
                    "read_us_max": round(max(b[2] for b in blocks) / 1e3, 2),
                    "refused_attribute_reads": sum(b[3] for b in blocks),
                }), flush=True)
        for mode, q in self.queries.items():
            report_queries(mode, q)

    def report_cupti(self):
        def median_or_none(values):
            return statistics.median(values) if values else None

        if self.callbacks:
            print("NVML_CUPTI " + json.dumps({
                "cbids": len(PROBE_STEADY_CBIDS), "refused": self.callbacks[0]["refused"],
                "callbacks_per_block": statistics.median(c["calls"] for c in self.callbacks),
            }), flush=True)
        if any(self.stream.values()):
            print("NVML_CUPTI " + json.dumps({
                "stream_ordered_cbids": PROBE_STREAM_ORDERED_CBIDS,
                "callbacks_per_block_after_switch_off": median_or_none(self.stream["off"]),
                "callbacks_per_block_kept_on": median_or_none(self.stream["on"]),
                "callbacks_per_block_resubscribed": median_or_none(self.stream["resubscribed"]),
            }), flush=True)


def report_queries(mode, q):
    """The sampler's own rate and query latencies in `mode`."""
    errors = [x["error"] for x in q if "error" in x]
    if errors:
        print("NVML_QUERY " + json.dumps({"mode": mode, "error": errors[0]}), flush=True)
        return
    print("NVML_QUERY " + json.dumps({
        "mode": mode,
        "rate_hz": round(statistics.median(x["rate_hz"] for x in q), 1),
        "device_query_us": statistics.median(x["device_query_us"] for x in q),
        "process_query_us": (statistics.median(x["process_query_us"] for x in q)
                             if q[0]["process_query_us"] is not None else None),
    }), flush=True)


def main():
    on_async = async_allocator()
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    train_step = hf_step(torch)
    communicator = nccl_comm(torch)
    fsdp2 = fsdp2_step(torch)
    units(torch, train_step, communicator, fsdp2)  # warm
    bench = Bench(torch, train_step, on_async, communicator, fsdp2)
    print("NVML_SETUP " + json.dumps({"allocator": torch.cuda.get_allocator_backend(), "modes": bench.modes}),
          flush=True)
    for block in range(BLOCKS):
        # Alternate the order of the modes from block to block.
        for mode in bench.modes if block % 2 == 0 else bench.modes[::-1]:
            bench.block(mode)
    bench.report()
    if communicator is not None:
        import torch.distributed as dist

        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
