"""What the shim's hooks cost the training per call, on the Python that runs
this (no GPU, no torch): a torch-style hook plain and wrapped by the shim's
own-time meter (``timed``), and a function called plain and observed through
sys.monitoring (Python >= 3.12: the shim's observer, meter included, with a
start and an end callback that do nothing else; and of that, the meter's
part); with folders after N, one event line written (``emit``; the
integer-only line a warm step's end writes, ``emit_ints``) into each folder,
to tell a slow file system from the shim's own work, and a warm step's end
stored into the step file (PREWARM_DOCTOR_STEP_FILE=1) instead; best of 5
runs of N calls; and the same two once a step after a 64 MiB copy flushed
the caches (``cold_``, median of 200), as a hook called once a step runs.

    python3 benches/shim_hook_cost.py [N [FOLDER...]]
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "shim"))
os.environ.pop("PREWARM_DOCTOR_DIR", None)  # nothing is written

import prewarm_doctor_events as events  # noqa: E402
import prewarm_doctor_monitor as monitor  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000


def best_ns(call):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(N):
            call(1, 2)
        best = min(best, (time.perf_counter_ns() - t0) / N)
    return best


def hook(module, args):
    return None


def observed(a, b):
    return a


def unobserved(a, b):
    return a


plain = best_ns(hook)
timed = best_ns(events.timed(hook))
print(f"BENCH python={sys.version.split()[0]} hook_ns={plain:.0f} timed_hook_ns={timed:.0f} meter_ns={timed - plain:.0f}")
if monitor.observe(observed, lambda frame: True, lambda token, result, exc: None):
    bare = best_ns(unobserved)
    seen = best_ns(observed)
    # The same with the meter's begin/end made no-ops: what the meter adds.
    monitor.begin, monitor.end = (lambda: None), (lambda *opened: None)
    unmetered = best_ns(observed)
    print(
        f"BENCH python={sys.version.split()[0]} call_ns={bare:.0f} observed_call_ns={seen:.0f} "
        f"observation_ns={seen - bare:.0f} of_it_meter_ns={seen - unmetered:.0f}"
    )
else:
    print(f"BENCH python={sys.version.split()[0]} no sys.monitoring: the shim wraps instead")


class _Missing:
    """An attribute miss through a Python ``__getattr__`` (as torch's
    nn.Module has): one exception leaving one Python frame."""

    def __getattr__(self, name):
        raise AttributeError(name)


def unwinds(missing, n):
    for _ in range(n):
        hasattr(missing, "absent")


def unwind_lines(count=1000):
    """UNWIND: what the shim's program-wide PY_UNWIND callback adds to each
    Python frame an exception leaves (median ns of a miss, its event on
    against off, 30 alternations), and how many of `count` such frames the
    shim's callback, with the events the shim set, was really called for."""
    mon, tool = sys.monitoring, monitor._tool
    on, missing = mon.events.PY_UNWIND, _Missing()
    shims_events = mon.get_events(tool)  # what the shim itself set
    medians = {True: [], False: []}
    for r in range(30):
        for state in (True, False) if r % 2 else (False, True):
            mon.set_events(tool, on if state else 0)
            unwinds(missing, 100)  # the code objects instrumented for this state
            t0 = time.perf_counter_ns()
            unwinds(missing, N // 10)
            medians[state].append((time.perf_counter_ns() - t0) / (N // 10))
    seen = [0]
    mon.set_events(tool, shims_events)

    def counted(code, offset, exc):
        seen[0] += 1
        return shims(code, offset, exc)

    shims = mon.register_callback(tool, on, counted)  # the one the shim registered
    unwinds(missing, count)
    mon.register_callback(tool, on, shims)
    off_ns, on_ns = (sorted(medians[s])[len(medians[s]) // 2] for s in (False, True))
    print(
        f"UNWIND python={sys.version.split()[0]} miss_ns={off_ns:.0f} miss_with_shim_ns={on_ns:.0f} "
        f"shim_per_unwind_ns={on_ns - off_ns:.0f} unwinds_seen={seen[0]}/{count}"
    )


if monitor.active():
    unwind_lines()


def cold_ns(call, runs=200):
    """Median ns of one call after the caches were flushed by a 64 MiB copy:
    what a hook costs once a step, between a step's own work."""
    big = bytearray(64 << 20)
    times = []
    for k in range(runs):
        flushed = bytes(big)  # noqa: F841 (held until the next copy)
        t0 = time.perf_counter_ns()
        call(k + 10, 0)
        times.append(time.perf_counter_ns() - t0)
    times.sort()
    return times[len(times) // 2]


for folder in sys.argv[2:]:
    # A fresh module, so that its files go into this folder.
    os.environ["PREWARM_DOCTOR_DIR"] = folder
    os.environ["PREWARM_DOCTOR_STEP_FILE"] = "1"
    import importlib

    fresh = importlib.reload(events)
    written = best_ns(lambda a, b: fresh.emit("step_end", step=a))
    line = best_ns(lambda a, b: fresh.emit_ints("step_end", step=a))
    counter = iter(range(10, 1 << 62))
    stored = best_ns(lambda a, b: fresh.step_end(next(counter)))
    fresh = importlib.reload(events)  # a new step file, from step 10
    line_cold = cold_ns(lambda a, b: fresh.emit_ints("step_end", step=a))
    stored_cold = cold_ns(lambda a, b: fresh.step_end(a))
    nothing_cold = cold_ns(lambda a, b: None)
    print(
        f"BENCH python={sys.version.split()[0]} folder={folder} emit_step_end_ns={written:.0f} "
        f"step_end_line_ns={line:.0f} step_file_ns={stored:.0f} cold_step_end_line_ns={line_cold:.0f} "
        f"cold_step_file_ns={stored_cold:.0f} cold_call_ns={nothing_cold:.0f}"
    )
