"""What the shim's hooks cost the training per call, on the Python that runs
this (no GPU, no torch): a torch-style hook plain and wrapped by the shim's
own-time meter (``timed``), and a function called plain and observed through
sys.monitoring (Python >= 3.12: the shim's observer, meter included, with a
start and an end callback that do nothing else; and of that, the meter's
part); with folders after N, one event line written (``emit``, what each
step's end costs) into each folder, to tell a slow file system from the
shim's own work. Best of 5 runs of N calls.

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
    monitor.begin, monitor.end = (lambda: None), (lambda opened: None)
    unmetered = best_ns(observed)
    print(
        f"BENCH python={sys.version.split()[0]} call_ns={bare:.0f} observed_call_ns={seen:.0f} "
        f"observation_ns={seen - bare:.0f} of_it_meter_ns={seen - unmetered:.0f}"
    )
else:
    print(f"BENCH python={sys.version.split()[0]} no sys.monitoring: the shim wraps instead")
for folder in sys.argv[2:]:
    # A fresh module, so that its file goes into this folder.
    os.environ["PREWARM_DOCTOR_DIR"] = folder
    import importlib

    fresh = importlib.reload(events)
    written = best_ns(lambda a, b: fresh.emit("step_end", step=a))
    print(f"BENCH python={sys.version.split()[0]} folder={folder} emit_step_end_ns={written:.0f}")
