#!/usr/bin/env python3
"""Does the shim's program-wide ``PY_UNWIND`` event (sys.monitoring, Python
>= 3.12; src/shim/prewarm_doctor_monitor.py) slow code that runs for the
first time? With any global event set, CPython re-instruments each code
object at its first execution, and a training's step 1 runs thousands of
functions for the first time (FSDP2's lazy init, a transformers forward).

Each process compiles N fresh functions (~60 instructions each) and times
their first calls and their second, with no event set (`none`) or with
PY_UNWIND set for the whole program and a callback that does nothing
(`unwind`); processes alternate, and the summary gives each mode's median
over processes and the paired difference within rounds:

    python3 benches/py_unwind_first_call.py [ROUNDS] [N]   # 15, 20000

Needs Python >= 3.12 (sys.monitoring); PYTHON names the interpreter.
"""
import os
import statistics
import subprocess
import sys
import time


def worker(mode, n):
    body = "\n".join(f"    x = x + {i} * y if x > {i} else x - y" for i in range(12))
    src = "\n".join(f"def f{k}(x, y):\n{body}\n    return x\n" for k in range(n))
    ns = {}
    exec(compile(src, "generated", "exec"), ns)
    functions = [ns[f"f{k}"] for k in range(n)]
    if mode == "unwind":
        m = sys.monitoring
        m.use_tool_id(4, "py_unwind_first_call")
        m.register_callback(4, m.events.PY_UNWIND, lambda code, offset, exc: None)
        m.set_events(4, m.events.PY_UNWIND)
    timed = []
    for _ in range(2):
        t = time.perf_counter()
        for f in functions:
            f(1, 2)
        timed.append(1e6 * (time.perf_counter() - t) / n)
    print(f"FIRSTCALL mode={mode} first_us={timed[0]:.4f} again_us={timed[1]:.4f}")


def main(argv):
    if len(argv) > 1 and argv[1] == "--worker":
        worker(argv[2], int(argv[3]))
        return
    python = os.environ.get("PYTHON", sys.executable)
    probe = subprocess.run([python, "-c", "import sys; sys.monitoring"], capture_output=True)
    if probe.returncode != 0:
        sys.exit(f"{python} has no sys.monitoring: this bench needs Python >= 3.12 (PYTHON names another)")
    rounds = int(argv[1]) if len(argv) > 1 else 15
    n = int(argv[2]) if len(argv) > 2 else 20000
    rows = {}
    for r in range(rounds):
        for mode in ("none", "unwind") if r % 2 == 0 else ("unwind", "none"):
            done = subprocess.run([python, os.path.abspath(__file__), "--worker", mode, str(n)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"worker {mode} failed: {done.stderr.strip()[-300:]}")
            fields = dict(kv.split("=") for kv in done.stdout.split()[1:])
            rows.setdefault(r, {})[mode] = {k: float(v) for k, v in fields.items() if k != "mode"}
    for key in ("first_us", "again_us"):
        med = {m: statistics.median(rows[r][m][key] for r in rows) for m in ("none", "unwind")}
        diff = statistics.median(rows[r]["unwind"][key] - rows[r]["none"][key] for r in rows)
        slower = sum(rows[r]["unwind"][key] > rows[r]["none"][key] for r in rows)
        print(f"FIRSTCALL_SUMMARY figure={key} rounds={rounds} functions={n} none={med['none']:.3f} "
              f"unwind={med['unwind']:.3f} paired_added_us={diff:.3f} slower={slower}/{rounds}")


if __name__ == "__main__":
    main(sys.argv)
