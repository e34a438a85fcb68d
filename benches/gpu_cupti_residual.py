"""What does CUPTI leave on a launch once kernel records are off again?

Under the doctor a launch after the first-launch watch still costs 0.7-0.8 us
more than without the probe on an H100 (docs/footprint.md, seventh to ninth
sessions): the watch's launch callbacks and kernel records are off by then,
and the cost goes only when CUPTI is detached. At fsdp2's 691 launches a
CPU-paced steady step that is about 0.55 ms of its +0.96 ms. The probe
switches concurrent-kernel records on and off inside the launch callbacks
of each function's first launch; records on all watch long (one switch on,
one off) left 0.2-0.3 us. Which part of that pattern leaves the cost?
(On an H200, docs/footprint.md's eleventh session: any switch on while a
context runs, once as much as a hundred times; cuptiFinalize takes it.)

This bench asks CUPTI alone, no probe: one short process a scenario and
round, each subscribed to CUPTI before CUDA starts (as the probe is), sets
CUPTI up one way, then times LAUNCHES launches of one elementwise kernel
(one float: the launch is the cost) in BLOCKS blocks:

  plain        no CUPTI at all
  subscribed   a subscriber, no callback on, records never on
  once-idle    records switched on and off once, nothing launched between
  timed-on     records on, the timed kernel's first launch, records off
               (its function first launched while records were on)
  other-on     the same with another kernel: the timed one's function was
               never launched while records were on
  toggled      TOGGLES times: records on, the timed kernel, records off
  in-callback  the launch callbacks on; at the timed kernel's first launch
               records on at its entry and off at its exit, inside the
               callback, as the probe's watch does; then the callbacks off
  finalized    once-idle, then cuptiFinalize and a new subscription, as the
               probe's detach (the default since 2026-12-07) does after its watch
  kernel-kind  once-idle with the serial kernel kind (CUPTI_ACTIVITY_KIND_KERNEL)
               instead of the concurrent one the probe uses
  early-once   records switched on before CUDA starts (no context yet) and
               off after every kernel's first launch (`kernels-all`'s
               pattern, which left 0.2-0.3 us)
  early-then-once  early-once, then once-idle: whether a switch on a
               context that had records from its start still leaves it
  context-once once-idle with the switch for the running context only
               (cuptiActivityEnableContext/DisableContext), not CUPTI-wide

Each row holds the median over blocks of microseconds a launch and the bytes
of records CUPTI handed back (records were taken where a scenario says so).
The summary pairs every scenario with `plain` and with `subscribed` within
rounds (adjacent processes share the machine's drift): median added
microseconds a launch, its exact interval, the sign test. A worker that
fails gives a FAILED line and its rounds go without it; nothing is dropped
silently.

Usage, on a GPU machine from the repository root:

  BIN=.gpu/prewarm-doctor python3 benches/gpu_cupti_residual.py [ROUNDS]

(ROUNDS 8; CUPTI_RESIDUAL_SCENARIOS picks scenarios, `plain` always runs;
CUPTI_RESIDUAL_DEADLINE_S stops starting rounds past that many seconds;
the libcupti is PREWARM_DOCTOR_CUPTI, else the one `$BIN check` names).
Every row goes to stdout as `CUPTIRESIDUAL scenario=S round=R {json}` (and
to CUPTI_RESIDUAL_ROWS when set), then the summary; `--summary FILE...`
prints the summary of stored rows. CUPTI_RESIDUAL_PYTHON names the worker's
interpreter.
"""

import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stored_rows
from exact_interval import paired_text

SCENARIOS = ("plain", "subscribed", "once-idle", "timed-on", "other-on", "toggled", "in-callback",
             "finalized", "kernel-kind", "early-once", "early-then-once", "context-once")
LAUNCHES = int(os.environ.get("CUPTI_RESIDUAL_LAUNCHES", "5000"))
BLOCKS = int(os.environ.get("CUPTI_RESIDUAL_BLOCKS", "5"))
TOGGLES = int(os.environ.get("CUPTI_RESIDUAL_TOGGLES", "100"))
KIND_KERNEL = 3
KIND_CONCURRENT_KERNEL = 10
DOMAIN_DRIVER_API = 1
SITE_ENTER = 0
# The driver launch calls the probe's watch traces (crates/probe/src/launches.rs).
LAUNCH_CBIDS = (115, 116, 117, 307, 442, 477, 478, 514, 515, 652, 653)
BUFFER_BYTES = 1 << 20

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)),
                           ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8),
                            ctypes.c_size_t, ctypes.c_size_t)


class Cupti:
    """The few CUPTI entry points the scenarios use, from one libcupti;
    every call checked (a scenario CUPTI refused is no measurement)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.subscriber = ctypes.c_void_p()
        self.buffers = {}
        self.record_bytes = 0
        self.armed = False
        # Kept referenced: CUPTI calls them for the process's life.
        self.on_callback = CALLBACK(self.callback)
        self.on_request = REQUEST(self.request)
        self.on_complete = COMPLETE(self.complete)

    def check(self, name, *args):
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} returned CUPTI error {rc}")

    def subscribe(self):
        self.check("cuptiSubscribe", ctypes.byref(self.subscriber), self.on_callback, None)
        self.check("cuptiActivityRegisterCallbacks", self.on_request, self.on_complete)

    def records(self, on, kind=KIND_CONCURRENT_KERNEL):
        self.check("cuptiActivityEnable" if on else "cuptiActivityDisable", kind)

    def context_records(self, on):
        """Records switched for the calling thread's current context only."""
        context = ctypes.c_void_p()
        rc = ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(context))
        if rc != 0 or not context:
            raise RuntimeError(f"cuCtxGetCurrent returned {rc} (no current context)")
        name = "cuptiActivityEnableContext" if on else "cuptiActivityDisableContext"
        self.check(name, context, KIND_CONCURRENT_KERNEL)

    def detach_and_subscribe(self):
        """CUPTI torn down (every callback and record kind off) and a new
        subscriber, no callback on: the detach's state after its watch."""
        self.flush()
        self.check("cuptiFinalize")
        self.subscriber = ctypes.c_void_p()
        self.subscribe()

    def launch_callbacks(self, on):
        for cbid in LAUNCH_CBIDS:
            # An id this CUDA lacks is refused; the others are what counts.
            self.lib.cuptiEnableCallback(int(on), self.subscriber, DOMAIN_DRIVER_API, cbid)

    def callback(self, _user, domain, _cbid, data):
        if domain != DOMAIN_DRIVER_API or not self.armed or not data:
            return
        site = ctypes.cast(data, ctypes.POINTER(ctypes.c_int))[0]
        if site == SITE_ENTER:
            self.records(True)
        else:
            self.records(False)
            self.armed = False

    def request(self, buffer, size, max_records):
        block = (ctypes.c_uint64 * (BUFFER_BYTES // 8))()
        self.buffers[ctypes.addressof(block)] = block
        buffer[0] = ctypes.cast(block, ctypes.POINTER(ctypes.c_uint8))
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def complete(self, _ctx, _stream, buffer, _size, valid):
        self.record_bytes += valid
        self.buffers.pop(ctypes.cast(buffer, ctypes.c_void_p).value, None)

    def flush(self):
        self.check("cuptiActivityFlushAll", 1)


def set_up(scenario, cupti, timed, other, sync):
    """CUPTI set up as `scenario` says; every kernel launched once."""
    if scenario in ("plain", "subscribed"):
        timed()
        other()
    elif scenario == "context-once":
        cupti.context_records(True)
        cupti.context_records(False)
        timed()
        other()
    elif scenario in ("early-once", "early-then-once"):
        timed()
        other()
        sync()
        cupti.records(False)
        if scenario == "early-then-once":
            cupti.records(True)
            cupti.records(False)
    elif scenario in ("once-idle", "finalized", "kernel-kind"):
        kind = KIND_KERNEL if scenario == "kernel-kind" else KIND_CONCURRENT_KERNEL
        cupti.records(True, kind)
        cupti.records(False, kind)
        if scenario == "finalized":
            cupti.detach_and_subscribe()
        timed()
        other()
    elif scenario == "timed-on":
        cupti.records(True)
        timed()
        sync()
        cupti.records(False)
        other()
    elif scenario == "other-on":
        cupti.records(True)
        other()
        sync()
        cupti.records(False)
        timed()
    elif scenario == "toggled":
        for _ in range(TOGGLES):
            cupti.records(True)
            timed()
            cupti.records(False)
        other()
    elif scenario == "in-callback":
        cupti.launch_callbacks(True)
        cupti.armed = True
        timed()
        sync()
        cupti.launch_callbacks(False)
        if cupti.armed:
            raise RuntimeError("the timed kernel's launch reached no launch callback")
        other()
    sync()
    if cupti:
        cupti.flush()


def worker(scenario):
    """One process: CUPTI set up as `scenario` says, then the timed
    launches; prints its RESULT line."""
    cupti = None
    if scenario != "plain":
        cupti = Cupti(os.environ["PREWARM_DOCTOR_CUPTI"])
        cupti.subscribe()
        if scenario.startswith("early-"):
            cupti.records(True)
    import torch

    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    set_up(scenario, cupti, lambda: x.add_(1), lambda: x.mul_(1), torch.cuda.synchronize)
    blocks = []
    for _ in range(BLOCKS):
        t0 = time.perf_counter()
        for _ in range(LAUNCHES):
            x.add_(1)
        torch.cuda.synchronize()
        blocks.append((time.perf_counter() - t0) / LAUNCHES * 1e6)
    print("RESULT " + json.dumps({
        "launch_us": statistics.median(blocks), "blocks_us": blocks, "launches": LAUNCHES,
        "record_bytes": cupti.record_bytes if cupti else 0, "toggles": TOGGLES}), flush=True)


def cupti_path(binary):
    """The libcupti to load: PREWARM_DOCTOR_CUPTI, else the one the doctor's
    `check` names; exits saying how to name one."""
    path = os.environ.get("PREWARM_DOCTOR_CUPTI")
    if path:
        return path
    try:
        out = subprocess.run([binary, "check"], capture_output=True, text=True).stdout
    except OSError as e:
        sys.exit(f"cannot run {binary} check ({e}): set BIN, or PREWARM_DOCTOR_CUPTI to a libcupti")
    found = re.search(r"/\S*libcupti\S*", out)
    if not found:
        sys.exit(f"{binary} check named no libcupti: set PREWARM_DOCTOR_CUPTI to one")
    return found.group(0)


def run_once(scenario, rnd, python, cupti):
    """One worker: its row, or None after a FAILED line saying why."""
    env = dict(os.environ, PREWARM_DOCTOR_CUPTI=cupti)
    out = subprocess.run([python, os.path.abspath(__file__), "--worker", scenario],
                         env=env, capture_output=True, text=True)
    return stored_rows.worker_result(out, f"scenario={scenario} round={rnd}")


def read_rows(paths):
    """{(file, round): {scenario: row}} from stored CUPTIRESIDUAL lines."""
    return stored_rows.read_rounds(paths, "CUPTIRESIDUAL", "scenario")


def summarise(rounds):
    """The CUPTI_RESIDUAL and CUPTI_RESIDUAL_PAIRED lines of the rounds."""
    lines = []
    present = {s for r in rounds.values() for s in r}
    scenarios = [s for s in SCENARIOS if s in present] + sorted(present - set(SCENARIOS))
    for s in scenarios:
        values = [r[s]["launch_us"] for r in rounds.values() if s in r]
        recorded = sorted({r[s].get("record_bytes", 0) > 0 for r in rounds.values() if s in r})
        lines.append(f"CUPTI_RESIDUAL scenario={s} runs={len(values)} median_us={statistics.median(values):.3f} "
                     f"range_us={min(values):.3f}..{max(values):.3f} "
                     f"records={'/'.join('yes' if r else 'no' for r in recorded)}")
    for against in ("plain", "subscribed"):
        for s in scenarios:
            if s in ("plain", against):
                continue
            diffs = [r[s]["launch_us"] - r[against]["launch_us"] for r in rounds.values()
                     if s in r and against in r]
            if not diffs:
                continue
            lines.append(f"CUPTI_RESIDUAL_PAIRED scenario={s} against={against} rounds={len(diffs)} "
                         + paired_text(diffs, "us", 3))
    return lines


def main(argv):
    files = stored_rows.summary_files(argv, "gpu_cupti_residual.py")
    if files is not None:
        print("\n".join(summarise(read_rows(files))))
        return
    rounds_wanted = int(argv[1]) if len(argv) > 1 else 8
    asked = os.environ.get("CUPTI_RESIDUAL_SCENARIOS", " ".join(SCENARIOS)).split()
    for s in asked:
        if s not in SCENARIOS:
            sys.exit(f"CUPTI_RESIDUAL_SCENARIOS: unknown scenario {s!r} ({' '.join(SCENARIOS)})")
    scenarios = ["plain"] + [s for s in asked if s != "plain"]
    python = os.environ.get("CUPTI_RESIDUAL_PYTHON", sys.executable)
    cupti = cupti_path(os.environ.get("BIN", "target/release/prewarm-doctor"))
    deadline = float(os.environ.get("CUPTI_RESIDUAL_DEADLINE_S", "0"))
    store = os.environ.get("CUPTI_RESIDUAL_ROWS")
    start = time.monotonic()
    rounds = {}
    for r in range(1, rounds_wanted + 1):
        if deadline and time.monotonic() - start > deadline:
            print(f"DEADLINE {r - 1} of {rounds_wanted} rounds ran (CUPTI_RESIDUAL_DEADLINE_S={deadline:g})",
                  flush=True)
            break
        order = scenarios[r % len(scenarios):] + scenarios[:r % len(scenarios)]
        for s in order:
            row = run_once(s, r, python, cupti)
            if row is None:
                continue
            rounds.setdefault((0, str(r)), {})[s] = row
            line = f"CUPTIRESIDUAL scenario={s} round={r} {json.dumps(row, sort_keys=True)}"
            print(line, flush=True)
            if store:
                with open(store, "a") as f:
                    f.write(line + "\n")
    print("\n".join(summarise(rounds)))


if __name__ == "__main__":
    worker(sys.argv[sys.argv.index("--worker") + 1]) if "--worker" in sys.argv else main(sys.argv)
