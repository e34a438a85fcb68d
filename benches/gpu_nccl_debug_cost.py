"""Does the NCCL log the doctor turns on slow the training's collectives?

The doctor sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT and a log file per
process (src/capture/env.rs) to read each communicator's init from NCCL's
own lines. Only INIT lines are written, but the level is process-wide. This
runs one-rank NCCL processes (no torchrun), alternating the NCCL settings
round by round, and in each times: the process's first all_reduce (the
world group's communicator, whose init also loads NCCL's kernels: the one a
training's step 1 makes, `first_init_ms`), the first all_reduce of a further
group (its communicator's init, `init_ms`), a burst of small all_reduces (the CPU's cost a call,
what a launch-bound step pays) and synchronised ones (latency a call).

Settings (NCCL_DEBUG_COST_SETTINGS, space-separated, default all):
`none` (the plain run's), `doctor` (the doctor's variables, log file under
a temporary folder), `info-init` (INFO + INIT, the file, no timestamps),
`warn` (NCCL_DEBUG=WARN: what the doctor leaves when the user set it).
Prints one `NCCL_DEBUG_COST {json}` line per setting: medians over rounds
with min-max (microseconds; init in milliseconds) and the ratio to `none`.
Run: `python3 benches/gpu_nccl_debug_cost.py [ROUNDS]` on a GPU machine
(about 6 s a process; ROUNDS 5 by default).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CALLS = 3000
SYNCED = 300


def worker():
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    torch.cuda.set_device(0)
    # No device_id: each group's communicator is then made at its first collective.
    dist.init_process_group("nccl", rank=0, world_size=1)
    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    dist.all_reduce(x)  # the world group's communicator, NCCL's first
    torch.cuda.synchronize()
    first_init_ms = (time.perf_counter() - t0) * 1e3
    group = dist.new_group([0])
    t0 = time.perf_counter()
    dist.all_reduce(x, group=group)
    torch.cuda.synchronize()
    init_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(200):
        dist.all_reduce(x, group=group)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        dist.all_reduce(x, group=group)
    burst = (time.perf_counter() - t0) / CALLS * 1e6
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(SYNCED):
        dist.all_reduce(x, group=group)
        torch.cuda.synchronize()
    synced = (time.perf_counter() - t0) / SYNCED * 1e6
    print("RESULT " + json.dumps({"first_init_ms": first_init_ms, "init_ms": init_ms, "call_us": burst, "synced_us": synced}), flush=True)
    dist.destroy_process_group()


def settings(name, folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_DEBUG")}
    if name == "doctor":
        env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", NCCL_DEBUG_FILE=f"{folder}/nccl.%h.%p.log",
                   NCCL_DEBUG_TIMESTAMP_FORMAT="[%s.%6f]_", NCCL_DEBUG_TIMESTAMP_LEVELS="ALL")
    elif name == "info-init":
        env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", NCCL_DEBUG_FILE=f"{folder}/nccl.%h.%p.log")
    elif name == "warn":
        env.update(NCCL_DEBUG="WARN")
    elif name != "none":
        sys.exit(f"NCCL_DEBUG_COST_SETTINGS: unknown setting {name!r} (none doctor info-init warn)")
    return env


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    names = os.environ.get("NCCL_DEBUG_COST_SETTINGS", "none doctor info-init warn").split()
    results = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]  # each setting in each place
        for i, name in enumerate(order):
            with tempfile.TemporaryDirectory() as folder:
                env = settings(name, folder)
                env["MASTER_PORT"] = str(29600 + (r * len(names) + i) % 300)
                out = subprocess.run([sys.executable, __file__, "--worker"], env=env, capture_output=True, text=True)
                lines = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")]
                if out.returncode != 0 or not lines:
                    sys.exit(f"setting {name}: the worker failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
                results[name].append(json.loads(lines[0][7:]))
    keys = ("first_init_ms", "init_ms", "call_us", "synced_us")
    base = {k: statistics.median(x[k] for x in results[names[0]]) for k in keys}
    for name in names:
        line = {"setting": name, "rounds": rounds}
        for k in keys:
            values = [x[k] for x in results[name]]
            line[k] = round(statistics.median(values), 2)
            line[k + "_range"] = [round(min(values), 2), round(max(values), 2)]
            line[k + "_ratio"] = round(statistics.median(values) / base[k], 3)
        print("NCCL_DEBUG_COST " + json.dumps(line), flush=True)


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main()
