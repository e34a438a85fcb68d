"""Which piece of the doctor costs fsdp2's steady step, inside one process?

fsdp2 (examples/zoo_fsdp2.py --hidden 1024 --batch 8192) reads 1.097 on its
steady step under the doctor (1.036-1.124, 32 rounds on an H100: +3.5 ms a
38 ms step), yet the doctor's own accounted time there is a fraction of a
millisecond. Whole-run modes cannot place it: the plain run's steady step
spreads 29-46 ms from process to process. This runs zoo_fsdp2's model and
step under the doctor and, after its first steps, times blocks of steady
steps with one piece of the doctor switched off and then on again, in the
same process, so that process-to-process spread cancels:

  none     nothing switched (the same blocks against each other: the floor)
  probe    every CUPTI callback the probe has on, held off
           (prewarm_probe_hold_callbacks, crates/probe/src/hold.rs)
  unwind   the shim's program-wide sys.monitoring event (PY_UNWIND) off
  doctor   the doctor's own process stopped (SIGSTOP, then SIGCONT): its
           NVML sampler, which queries the device every millisecond

Each pair is one block with the piece on and one with it off, in an order
that alternates pair by pair; the pieces take turns pair by pair. Per piece
the summary gives the median over pairs of (on - off) in microseconds a
step, its exact interval and the sign test; `none` says how wide a nothing
reads. A piece this process cannot switch (no probe, no shim, Python < 3.12)
is left out and said.

Usage, on a GPU machine from the repository root:

  BIN=.gpu/prewarm-doctor python3 benches/gpu_steady_toggles.py [PROCESSES]

(PROCESSES 3 by default; STEADY_TOGGLES_PAIRS pairs a piece, 20;
STEADY_TOGGLES_BLOCK steps a block, 5; STEADY_TOGGLES_DEADLINE_S stops
starting processes past that many seconds). Every pair's row goes to stdout
as `TOGGLE process=P piece=X pair=I {json}` (and to STEADY_TOGGLES_ROWS
when set), then the summary; `--summary FILE...` prints the summary of
stored rows. STEADY_TOGGLES_PYTHON names the worker's interpreter.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stored_rows
from exact_interval import paired_text

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARM_STEPS = 6
SEQ = 1024


def switches():
    """{piece: (off, on)} for the pieces this process can switch, and the
    names of those it cannot, with why."""
    found = {"none": (lambda: None, lambda: None)}
    missing = []
    for piece in (probe_piece, unwind_piece, doctor_piece):
        name, switch, why = piece()
        if switch is None:
            missing.append(f"{name} ({why})")
        else:
            found[name] = switch
    return found, missing


def probe_piece():
    """The probe's callbacks held off and released (its hold export)."""
    path = os.environ.get("CUDA_INJECTION64_PATH")
    if not path:
        return "probe", None, "none injected"
    import ctypes

    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
    except OSError:
        return "probe", None, "CUDA has not loaded it in this process"
    if not hasattr(lib, "prewarm_probe_hold_callbacks"):
        return "probe", None, "this probe has no prewarm_probe_hold_callbacks"
    return "probe", (lambda: lib.prewarm_probe_hold_callbacks(1),
                     lambda: lib.prewarm_probe_hold_callbacks(0)), None


def unwind_piece():
    """The shim's program-wide sys.monitoring event off and back on."""
    tool = getattr(sys.modules.get("prewarm_doctor_monitor"), "_tool", None)
    if tool in (None, False) or not hasattr(sys, "monitoring"):
        return "unwind", None, "no shim monitoring tool in this process"
    events = sys.monitoring.get_events(tool)
    return "unwind", (lambda: sys.monitoring.set_events(tool, 0),
                      lambda: sys.monitoring.set_events(tool, events)), None


def doctor_piece():
    """The doctor's own process (its NVML sampler, the only thread it runs
    beside waiting for the training) stopped and continued: SIGSTOP cannot
    be caught, so the doctor forwards nothing, and the training, its child,
    runs on."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm") as f:
            name = f.read().strip()
    except OSError:
        name = ""
    if name != "prewarm-doctor":
        return "doctor", None, f"the parent process is {name or 'unknown'}, not the doctor"
    import signal

    return "doctor", (lambda: os.kill(parent, signal.SIGSTOP),
                      lambda: os.kill(parent, signal.SIGCONT)), None


def worker():
    """zoo_fsdp2's model and step, its first steps, then the pairs; prints
    `TOGGLE` rows on stdout."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    import torch
    import torch.distributed as dist
    from zoo_fsdp2 import loss_step, sharded

    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"),
                       ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29650")):
        os.environ.setdefault(key, value)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    model = sharded(1024)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 32000, (8192 // SEQ, SEQ), device="cuda")

    def step():
        loss_step(model, tokens)
        opt.step()
        opt.zero_grad()

    block_steps = int(os.environ.get("STEADY_TOGGLES_BLOCK", "5"))

    def block():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(block_steps):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / block_steps

    for _ in range(WARM_STEPS):
        step()
    found, missing = switches()
    for why in missing:
        print(f"TOGGLE_MISSING {why}", flush=True)
    for pair in range(int(os.environ.get("STEADY_TOGGLES_PAIRS", "20"))):
        for piece, (off, on) in found.items():
            if pair % 2:
                off()
                off_ms = block()
                on()
                on_ms = block()
            else:
                on_ms = block()
                off()
                off_ms = block()
                on()
            row = {"on_ms": on_ms, "off_ms": off_ms, "first": "off" if pair % 2 else "on"}
            print(f"TOGGLE piece={piece} pair={pair} {json.dumps(row)}", flush=True)
    dist.destroy_process_group()


def read_rows(lines, source):
    """[(piece, on_ms, off_ms)] from TOGGLE rows; a broken one is an error
    naming its place."""
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.startswith("TOGGLE "):
            continue
        try:
            fields, values = stored_rows.parse(line, "TOGGLE")
            rows.append((fields["piece"], float(values["on_ms"]), float(values["off_ms"])))
        except (ValueError, KeyError) as e:
            sys.exit(f"{source}:{n}: not a TOGGLE row (piece=X pair=I {{json}}): {e}")
    return rows


def summarise(rows):
    """A TOGGLE_PAIRED line a piece: what it adds to a step, within pairs."""
    lines = []
    for piece in sorted({r[0] for r in rows}, key=lambda p: (p != "none", p)):
        added = [(on - off) * 1e3 for p, on, off in rows if p == piece]
        steps = [on for p, on, _ in rows if p == piece]
        lines.append(f"TOGGLE_PAIRED piece={piece} pairs={len(added)} "
                     f"step_ms={statistics.median(steps):.2f} " + paired_text(added, "us", 1))
    return lines


def run_process(number, binary, python):
    """One worker under the doctor: its stdout lines, or none after a
    FAILED line with its exit and last stderr line (the next process
    still runs)."""
    with tempfile.TemporaryDirectory() as folder:
        # CUPTI stays attached: the pieces held off are the attached probe's
        # (detached after the watch, the default since 2026-12-07, there is
        # no `probe` piece left to hold).
        env = dict(os.environ, MASTER_PORT=str(29650 + number % 100),
                   PREWARM_DOCTOR_DETACH_AFTER_WATCH="0")
        argv = [binary, "run", "--cache", "user", "--out", f"{folder}/run", "--",
                python, os.path.abspath(__file__), "--worker"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        print(f"FAILED process={number} exit={out.returncode}: {last}", flush=True)
        return []
    return [l for l in out.stdout.splitlines() if l.startswith("TOGGLE")]


def main(argv):
    files = stored_rows.summary_files(argv, "gpu_steady_toggles.py")
    if files is not None:
        rows = []
        for path in files:
            with open(path) as stored:
                rows += read_rows(stored.read().splitlines(), path)
        print("\n".join(summarise(rows)))
        return
    processes = int(argv[1]) if len(argv) > 1 else 3
    binary = os.environ.get("BIN", "target/release/prewarm-doctor")
    python = os.environ.get("STEADY_TOGGLES_PYTHON", sys.executable)
    deadline = float(os.environ.get("STEADY_TOGGLES_DEADLINE_S", "0"))
    store = os.environ.get("STEADY_TOGGLES_ROWS")
    start = time.monotonic()
    rows = []
    for number in range(1, processes + 1):
        if deadline and time.monotonic() - start > deadline:
            print(f"DEADLINE {number - 1} of {processes} processes ran (STEADY_TOGGLES_DEADLINE_S={deadline:g})", flush=True)
            break
        for line in run_process(number, binary, python):
            stored = line.replace("TOGGLE ", f"TOGGLE process={number} ", 1) if line.startswith("TOGGLE ") else line
            print(stored, flush=True)
            if store:
                with open(store, "a") as f:
                    f.write(stored + "\n")
            rows += read_rows([stored], f"process {number}")
    print("\n".join(summarise(rows)))


if __name__ == "__main__":
    worker() if "--worker" in sys.argv else main(sys.argv)
