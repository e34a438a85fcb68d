"""Which of step 1's lazy parts does the doctor slow, and by how much?

A whole-run footprint round (benches/gpu_overhead.sh) takes 20-110 s and
reads step 1 as one number whose process-to-process spread (fsdp2: 1.10 to
1.81 s on one H100) hides a 0.1 s extra for tens of rounds. This runs one
short process a mode and round that times step 1's lazy parts one by one,
each from its start to a device synchronise:

  context         CUDA's context (torch.cuda.init and a first tensor)
  first_kernels   24 elementwise and reduction ops, each's first call (torch's
                  kernels, loaded lazily one function at a time)
  alloc_segments  64 new allocator segments of distinct sizes and their frees
  cublas          the first bf16 matmul (cuBLAS's handle, workspace, kernels)
  nccl_first      init_process_group and the first all_reduce: the process's
                  first NCCL communicator, whose init also loads NCCL's kernels
                  (the one an FSDP2 step 1 makes)
  nccl_further    a further group's first all_reduce (its communicator)
  nccl_gather     the first all_gather_into_tensor and reduce_scatter_tensor
                  (FSDP2's collectives) on the first communicator
  nccl_steady     200 more of each (FSDP2's collectives, while the probe
                  still watches for first launches and the shim for each
                  group's first collective, as in a training's first steps)
  launches        5,000 launches of one loaded kernel (the cost a launch while
                  the probe watches for first launches)
  triton_autotune the Triton autotune of the lazy workload's `rowwise_mix`
                  (examples/triton_spill_autotune.py: 3 configs, one that
                  spills) on its shape (AUTOTUNE_ROWS x 4096 bf16): the
                  compiled kernels loaded from Triton's cache, their first
                  launches (the spilling one grows local memory), and the
                  candidates' benchmarks, which the shim pauses the probe's
                  watch through: lazy's step-1 forward, whose extra under
                  the doctor (1.033, 1.005..1.073, 29 rounds) is mostly not
                  the probe's own time (docs/footprint.md, seventeenth session)
  triton_retune   a second key (4096 + 64 columns), the same compiled
                  kernels: the benchmarks alone, while the watch is on and
                  CUPTI attached after the first launches' record switches
  watch_end       once the shim and the probe are told what a training's
                  third step tells them (the shim's collective watch ends;
                  the probe's step ends, kernel watch off): one
                  launch, then 50 ms asleep (under `detach`, CUPTI's detach
                  and the probe's new subscription happen here)
  nccl_after_watch, launches_after_watch
                  nccl_steady and launches again after it: a steady step's
                  cost (a launch here cost 0.7-0.83 µs more in calls 21-25,
                  0.2 µs under `detach` or `no-kernels`, 0.05 under
                  `detach-bare`; a collective 4 µs more in every mode with
                  the shim, which calls 21-25 left watching the collectives)
  queries_after_watch
                  20,000 stream queries after it (a driver call the probe
                  never traces: what CUPTI's subscription alone costs a call)
  triton_retune_after_watch
                  a third key (4096 + 128 columns) after it: the benchmarks
                  alone with CUPTI detached and attached again (`doctor`),
                  left attached (`attached`) or gone (`detach-bare`)

The Triton parts need Triton and a warm compile cache: the bench runs one
plain process first, not a round (LAZY_PARTS_WARMUP=0 skips it), whose
compiles fill the cache (the spilling candidate takes minutes cold);
LAZY_PARTS_TRITON=0 leaves the Triton parts out.

Modes (LAZY_PARTS_MODES, space-separated; `plain` always runs): `doctor`
(`prewarm-doctor run`), `no-probe` (--no-probe), `no-kernels`
(PREWARM_DOCTOR_KERNEL_RECORDS=0), `kernels-all` (=all), `no-nvml`
(PREWARM_DOCTOR_NVML_SAMPLING=0), `nvml-10ms` (NVML's device query every
10 ms instead of 1), `no-shim` (PREWARM_DOCTOR_SHIM=0), `detach` (PREWARM_DOCTOR_DETACH_AFTER_WATCH=1:
CUPTI detached at the watch's end and attached again with the callbacks
the probe keeps: the doctor's default since 2026-12-07), `attached` (=0:
CUPTI stays attached, the default before), `detach-bare` (=bare: detached and not attached again,
nothing traced after the watch: what is left with CUPTI gone), `nccl-log`
(the plain run with the doctor's NCCL log settings); call 25's stored
`end-cycle` and `linger` rows measured two probe switches removed since
(docs/footprint.md, ninth session). Default:
"doctor no-probe no-kernels no-nvml nccl-log". Each round runs every mode
once, in an order rotated round by round.

Usage, on a GPU machine from the repository root:

  BIN=.gpu/prewarm-doctor python3 benches/gpu_lazy_parts.py [ROUNDS]

(about 6-10 s a process; ROUNDS 8 by default; LAZY_PARTS_DEADLINE_S stops
starting rounds past that many seconds and says how many ran). Every run's
row goes to stdout as `LAZYPARTS mode=M round=R {json}` (and to
LAZY_PARTS_ROWS when set), a run that fails as `FAILED mode=M round=R
exit=N: its last stderr line`, then the summary. `--summary FILE...` prints the
summary of stored rows, pooling several calls (a round pairs only runs of
its own file):

  LAZY_PART mode=M part=P runs=N median_ms=X range_ms=A..B
  LAZY_PART_PAIRED mode=M part=P against=plain rounds=N added_ms=D
      added_ms_90=LO..HI (exact, or nan..nan below 5 rounds) coverage=C
      slower=K/N p=SIGN-TEST-P

LAZY_PARTS_PYTHON names the worker's interpreter (default: this one).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import stored_rows
from exact_interval import paired_text
from gpu_nccl_debug_cost import settings as nccl_settings

PARTS = ("context", "first_kernels", "alloc_segments", "cublas", "nccl_first",
         "nccl_further", "nccl_gather", "nccl_steady", "launches", "triton_autotune",
         "triton_retune", "watch_end", "nccl_after_watch", "launches_after_watch",
         "queries_after_watch", "triton_retune_after_watch")
DEFAULT_MODES = "doctor no-probe no-kernels no-nvml nccl-log"
DOCTOR_ENV = {
    "doctor": {},
    "no-probe": {},
    "no-kernels": {"PREWARM_DOCTOR_KERNEL_RECORDS": "0"},
    "kernels-all": {"PREWARM_DOCTOR_KERNEL_RECORDS": "all"},
    "no-nvml": {"PREWARM_DOCTOR_NVML_SAMPLING": "0"},
    "nvml-10ms": {"PREWARM_DOCTOR_NVML_PERIOD_MS": "10"},
    "no-shim": {"PREWARM_DOCTOR_SHIM": "0"},
    "detach": {"PREWARM_DOCTOR_DETACH_AFTER_WATCH": "1"},
    "detach-bare": {"PREWARM_DOCTOR_DETACH_AFTER_WATCH": "bare"},
    "attached": {"PREWARM_DOCTOR_DETACH_AFTER_WATCH": "0"},
}
LAUNCHES = 5000
COLLECTIVES = 200
QUERIES = 20000
SEGMENTS = 64
# The lazy workload's shape (benches/gpu_overhead_lazy.py --batch 65536,
# hidden 4096): rows of `rowwise_mix`'s input; each Triton part's key is
# its column count.
AUTOTUNE_ROWS = 65536
AUTOTUNE_COLUMNS = {"triton_autotune": 4096, "triton_retune": 4096 + 64,
                    "triton_retune_after_watch": 4096 + 128}


def triton_inputs():
    """The autotuned op and one input a Triton part (allocated and filled
    before any part is timed), or None where LAZY_PARTS_TRITON=0."""
    if os.environ.get("LAZY_PARTS_TRITON", "1") == "0":
        return None
    import torch
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")
    sys.path.insert(0, examples)
    from triton_spill_autotune import Mix
    return Mix, {part: torch.randn(AUTOTUNE_ROWS, cols, device="cuda", dtype=torch.bfloat16)
                 for part, cols in AUTOTUNE_COLUMNS.items()}


def end_first_steps():
    """What a training's first three steps end with, as the shim's step
    tracker does it (its post_step): the shim stops watching the
    collectives, then the probe is told the steps ended and the kernel
    watch is off; so that the parts after it are a steady step's. Each
    only where it is loaded: nothing in a plain process (for the probe:
    none named, or named and not loaded: CUDA refused it, so it costs
    nothing). Before 2026-12-06's ninth session the shim's watch was left
    on: nccl_after_watch of calls 21-25 holds it (4 us a collective)."""
    prescribe = sys.modules.get("prewarm_doctor_prescribe")
    if prescribe is not None:
        for step in (1, 2, 3):
            prescribe.steps_ended(step)
    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return
    import ctypes
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return
    for step in (1, 2, 3):
        lib.prewarm_probe_step_ended(step)
    lib.prewarm_probe_set_kernel_records(0)


def worker():
    """One process's lazy parts, each timed to a device synchronise; prints
    `RESULT {part: ms}` on stdout."""
    import torch
    import torch.distributed as dist

    times = {}

    def timed(part, work):
        t0 = time.perf_counter()
        work()
        torch.cuda.synchronize()
        times[part] = (time.perf_counter() - t0) * 1e3

    timed("context", lambda: (torch.cuda.init(), torch.empty(1, device="cuda")))
    x = torch.rand(1 << 16, device="cuda") + 0.5
    torch.cuda.synchronize()
    ops = [torch.sin, torch.cos, torch.exp, torch.log1p, torch.sqrt, torch.tanh, torch.sigmoid,
           torch.relu, torch.nn.functional.gelu, torch.nn.functional.silu,
           lambda t: torch.softmax(t, 0), lambda t: torch.cumsum(t, 0), lambda t: torch.sort(t),
           lambda t: torch.topk(t, 10), torch.argmax, torch.mean, torch.var,
           lambda t: torch.clamp(t, 0.6, 0.9), lambda t: torch.where(t > 1, t, -t),
           lambda t: torch.flip(t, (0,)), lambda t: torch.roll(t, 3), lambda t: torch.pow(t, 3),
           lambda t: torch.cat([t, t]), lambda t: t.to(torch.bfloat16)]
    timed("first_kernels", lambda: [op(x) for op in ops])

    def segments():
        held = [torch.empty((i + 2) * (2 << 20) + i * 4096, dtype=torch.uint8, device="cuda")
                for i in range(SEGMENTS)]
        del held[:]
        torch.cuda.empty_cache()

    timed("alloc_segments", segments)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    timed("cublas", lambda: a @ a)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    torch.cuda.set_device(0)
    y = torch.ones(1 << 20, device="cuda", dtype=torch.bfloat16)
    # No device_id: the communicator is made at the first collective, as
    # an FSDP2 training's step 1 makes it.
    timed("nccl_first", lambda: (dist.init_process_group("nccl", rank=0, world_size=1), dist.all_reduce(y)))
    group = dist.new_group([0])
    timed("nccl_further", lambda: dist.all_reduce(y, group=group))
    gathered = torch.empty(1 << 20, device="cuda", dtype=torch.bfloat16)
    scattered = torch.empty(1 << 20, device="cuda", dtype=torch.bfloat16)
    def gather():
        dist.all_gather_into_tensor(gathered, y)
        dist.reduce_scatter_tensor(scattered, y)

    timed("nccl_gather", gather)
    timed("nccl_steady", lambda: [gather() for _ in range(COLLECTIVES)])
    z = torch.zeros(16, device="cuda")
    timed("launches", lambda: [z.add_(1) for _ in range(LAUNCHES)])
    triton = triton_inputs()
    torch.cuda.synchronize()

    def tune(part):
        if triton is not None:
            mix, inputs = triton
            timed(part, lambda: mix.apply(inputs[part]))

    tune("triton_autotune")
    tune("triton_retune")
    end_first_steps()
    timed("watch_end", lambda: (z.add_(1), torch.cuda.synchronize(), time.sleep(0.05)))
    timed("nccl_after_watch", lambda: [gather() for _ in range(COLLECTIVES)])
    timed("launches_after_watch", lambda: [z.add_(1) for _ in range(LAUNCHES)])
    stream = torch.cuda.current_stream()
    timed("queries_after_watch", lambda: [stream.query() for _ in range(QUERIES)])
    tune("triton_retune_after_watch")
    print("RESULT " + json.dumps(times), flush=True)
    dist.destroy_process_group()


def command(mode, binary, folder, python):
    """The run's argv and environment for a (checked) mode."""
    argv = [python, os.path.abspath(__file__), "--worker"]
    env = dict(os.environ)
    if mode == "plain":
        return argv, env
    if mode == "nccl-log":
        # The doctor's NCCL log settings, as the NCCL log bench sets them.
        return argv, nccl_settings("doctor", folder)
    env.update(DOCTOR_ENV[mode])
    doctor = [binary, "run", "--cache", "user", "--out", f"{folder}/run"]
    if mode == "no-probe":
        doctor.append("--no-probe")
    return doctor + ["--"] + argv, env


def run_once(mode, rnd, port, binary, python):
    """One process of a mode: its parts, or None after a FAILED line with
    its exit and last stderr line (the round goes on without it; one dead
    worker used to end the whole call)."""
    with tempfile.TemporaryDirectory() as folder:
        argv, env = command(mode, binary, folder, python)
        env["MASTER_PORT"] = str(port)
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
    return stored_rows.worker_result(out, f"mode={mode} round={rnd}")


def row_line(mode, rnd, parts):
    return f"LAZYPARTS mode={mode} round={rnd} {json.dumps(parts, sort_keys=True)}"


def read_rows(paths):
    """{(file, round): {mode: parts}} from stored LAZYPARTS lines."""
    return stored_rows.read_rounds(paths, "LAZYPARTS", "mode")


def summarise(rounds):
    """The LAZY_PART and LAZY_PART_PAIRED lines of the rounds."""
    lines = []
    modes = sorted({m for r in rounds.values() for m in r}, key=lambda m: (m != "plain", m))
    for mode in modes:
        for part in PARTS:
            values = [r[mode][part] for r in rounds.values() if mode in r and part in r[mode]]
            if values:
                lines.append(f"LAZY_PART mode={mode} part={part} runs={len(values)} "
                             f"median_ms={statistics.median(values):.2f} "
                             f"range_ms={min(values):.2f}..{max(values):.2f}")
    for mode in modes:
        if mode == "plain":
            continue
        for part in PARTS:
            diffs = [r[mode][part] - r["plain"][part] for r in rounds.values()
                     if mode in r and "plain" in r and part in r[mode] and part in r["plain"]]
            if not diffs:
                continue
            lines.append(f"LAZY_PART_PAIRED mode={mode} part={part} against=plain rounds={len(diffs)} "
                         + paired_text(diffs, "ms", 2))
    return lines


def main(argv):
    files = stored_rows.summary_files(argv, "gpu_lazy_parts.py")
    if files is not None:
        print("\n".join(summarise(read_rows(files))))
        return
    rounds_wanted = int(argv[1]) if len(argv) > 1 else 8
    binary = os.environ.get("BIN", "target/release/prewarm-doctor")
    python = os.environ.get("LAZY_PARTS_PYTHON", sys.executable)
    deadline = float(os.environ.get("LAZY_PARTS_DEADLINE_S", "0"))
    modes = ["plain"] + [m for m in os.environ.get("LAZY_PARTS_MODES", DEFAULT_MODES).split() if m != "plain"]
    for mode in modes:
        if mode not in ("plain", "nccl-log") and mode not in DOCTOR_ENV:
            sys.exit(f"LAZY_PARTS_MODES: unknown mode {mode!r} (plain nccl-log {' '.join(DOCTOR_ENV)})")
    store = os.environ.get("LAZY_PARTS_ROWS")
    start = time.monotonic()
    if os.environ.get("LAZY_PARTS_WARMUP", "1") != "0":
        # Fills Triton's compile cache (and the page cache): not a round.
        warm = run_once("plain", "warmup", 29699, binary, python)
        print(f"WARMUP plain: {'done' if warm is not None else 'failed'} (not a round)", flush=True)
    rounds = {}
    for r in range(1, rounds_wanted + 1):
        if deadline and time.monotonic() - start > deadline:
            print(f"DEADLINE {r - 1} of {rounds_wanted} rounds ran (LAZY_PARTS_DEADLINE_S={deadline:g})", flush=True)
            break
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for i, mode in enumerate(order):
            parts = run_once(mode, r, 29700 + (r * len(modes) + i) % 200, binary, python)
            if parts is None:
                continue
            rounds.setdefault((0, str(r)), {})[mode] = parts
            line = row_line(mode, r, parts)
            print(line, flush=True)
            if store:
                with open(store, "a") as f:
                    f.write(line + "\n")
    print("\n".join(summarise(rounds)))


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main(sys.argv)
