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
(and the per-process list every 10th sample, as the doctor does). Prints
one `NVML {json}` line per mode and unit (microseconds, median over blocks
of the block medians, with the blocks' min-max) and `NVML_QUERY {json}` with
the sampler's own query latencies. Run: `python3 benches/gpu_nvml_contention.py`
on a GPU machine (about a minute; NVML_BLOCKS sets the blocks, 12); uses
libnvidia-ml.so.1 through ctypes.
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
        if mode == "device+process" and n % PROCESS_EVERY == 0:
            count = ctypes.c_uint(64)
            t0 = time.perf_counter()
            nvml.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), procs)
            process_us.append(1e6 * (time.perf_counter() - t0))
        n += 1
        time.sleep(PERIOD_S)
    elapsed = time.perf_counter() - began
    nvml.nvmlShutdown()
    out.send({
        "mode": mode,
        "rate_hz": n / elapsed,
        "device_query_us": statistics.median(device_us) if device_us else None,
        "process_query_us": statistics.median(process_us) if process_us else None,
    })


def units(torch):
    """Each unit's median over REPEATS, microseconds."""
    def med(fn):
        times = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return 1e6 * statistics.median(times)

    def alloc_free():
        t = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        del t
        torch.cuda.empty_cache()

    torch.cuda.synchronize()
    return {"mem_get_info": med(torch.cuda.mem_get_info), "alloc_free": med(alloc_free)}


def main():
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    units(torch)  # warm
    ctx = mp.get_context("spawn")
    modes = ["off", "device", "device+process"]
    results = {m: [] for m in modes}
    queries = {}
    for block in range(BLOCKS):
        # Alternate the order of the modes from block to block.
        order = modes if block % 2 == 0 else modes[::-1]
        for mode in order:
            proc = None
            if mode != "off":
                stop = ctx.Event()
                mine, theirs = ctx.Pipe()
                proc = ctx.Process(target=sampler, args=(mode, stop, theirs), daemon=True)
                proc.start()
                time.sleep(0.3)  # the sampler's NVML init
            results[mode].append(units(torch))
            if proc is not None:
                stop.set()
                proc.join(10)
                got = mine.recv() if mine.poll(1) else {"error": "the sampler process sent nothing"}
                queries.setdefault(mode, []).append(got)
    for unit in results["off"][0]:
        for mode in modes:
            v = [r[unit] for r in results[mode]]
            paired = [r[unit] - o[unit] for r, o in zip(results[mode], results["off"])]
            print("NVML " + json.dumps({
                "unit": unit, "mode": mode, "us": round(statistics.median(v), 2),
                "min": round(min(v), 2), "max": round(max(v), 2),
                "paired_added_us": round(statistics.median(paired), 2),
                "blocks_slower": sum(p > 0 for p in paired), "blocks": len(paired),
            }), flush=True)
    for mode, q in queries.items():
        errors = [x["error"] for x in q if "error" in x]
        if errors:
            print("NVML_QUERY " + json.dumps({"mode": mode, "error": errors[0]}), flush=True)
            continue
        print("NVML_QUERY " + json.dumps({
            "mode": mode,
            "rate_hz": round(statistics.median(x["rate_hz"] for x in q), 1),
            "device_query_us": statistics.median(x["device_query_us"] for x in q),
            "process_query_us": (statistics.median(x["process_query_us"] for x in q)
                                 if q[0]["process_query_us"] is not None else None),
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
