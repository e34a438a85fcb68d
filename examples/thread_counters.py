"""The main thread's own counters, through perf_event_open: how many
instructions it retired (and cycles it ran) over a window of steps.

Why: the lent GPU machine runs the same instructions at two speeds, about
1.8x apart, for seconds at a time (docs/footprint.md, twenty-first to
twenty-third sessions), so a step's time says little about whether the
doctor's process did more work. The instructions a thread retires are its
work whatever the speed: the doctor's added instructions in step 1, against
plain's, would be the work the doctor adds, apart from the speed it ran at.

Only user-space counts (exclude_kernel, exclude_hv: what an unprivileged
process may count at perf_event_paranoid 2). A counter the machine cannot
give (a virtual machine without a virtual PMU: ENOENT) is said so, with
the reason, and left out; nothing fails.

EXAMPLE_THREAD_COUNTERS names the counters (default "instructions
cycles"); "task_clock" (a software counter: the thread's CPU time in ns)
is there for machines without hardware counters, where it tests the
plumbing against the thread's schedstat time.

    python3 examples/thread_counters.py [NAME...]

says which of them this machine gives (one COUNTER line each; the GPU
zoo prints them first in every call).
"""

import ctypes
import errno
import os
import struct

# (perf type, config): PERF_TYPE_HARDWARE 0 (PERF_COUNT_HW_CPU_CYCLES 0,
# PERF_COUNT_HW_INSTRUCTIONS 1), PERF_TYPE_SOFTWARE 1 (PERF_COUNT_SW_TASK_CLOCK 1).
KNOWN = {"instructions": (0, 1), "cycles": (0, 0), "task_clock": (1, 1)}
DEFAULT = "instructions cycles"
# perf_event_open's system call number per machine.
SYSCALL = {"x86_64": 298, "aarch64": 241}
# attr.flags bits: exclude_kernel (5), exclude_hv (6).
EXCLUDE_KERNEL_AND_HV = (1 << 5) | (1 << 6)
# attr.read_format: PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING.
READ_TIMES = 1 | 2


class _Attr(ctypes.Structure):
    """struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1, 72 bytes)."""

    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64)]


class ThreadCounters:
    """Counters of the thread that creates this (pid 0, any CPU): `read`
    gives each one's count so far, `unavailable` why a named one is not
    counted."""

    def __init__(self, names=None):
        if names is None:
            names = os.environ.get("EXAMPLE_THREAD_COUNTERS", DEFAULT).split()
        self.fds, self.unavailable = {}, {}
        number = SYSCALL.get(os.uname().machine)
        libc = ctypes.CDLL(None, use_errno=True)
        for name in names:
            if name not in KNOWN:
                self.unavailable[name] = f"unknown counter (known: {', '.join(sorted(KNOWN))})"
            elif number is None:
                self.unavailable[name] = f"no perf_event_open number for {os.uname().machine}"
            else:
                self._open(libc, number, name)

    def _open(self, libc, number, name):
        attr = _Attr()
        attr.type, attr.config = KNOWN[name]
        attr.size = ctypes.sizeof(_Attr)
        attr.read_format = READ_TIMES
        attr.flags = EXCLUDE_KERNEL_AND_HV
        fd = libc.syscall(number, ctypes.byref(attr), 0, -1, -1, 0)
        if fd < 0:
            code = ctypes.get_errno()
            self.unavailable[name] = f"{errno.errorcode.get(code, code)}: {os.strerror(code)}"
        else:
            self.fds[name] = fd

    def read(self):
        """name -> count so far, scaled by enabled over running time where
        the kernel shared the counter with others; a counter that has not
        run yet or cannot be read is left out."""
        out = {}
        for name, fd in self.fds.items():
            try:
                value, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
            except (OSError, struct.error):
                continue
            if running:
                out[name] = value * enabled / running
        return out


def _loop():
    total = 0
    for i in range(100_000):
        total += i * i
    return total


def check(names=None):
    """One COUNTER line a counter: whether this machine gives it to this
    thread, and where it does, its count over the same fixed loop run
    three times (a counter of work reads the same each time, whatever the
    machine's speed; a clock does not)."""
    counters = ThreadCounters(names)
    runs = {name: [] for name in counters.fds}
    for _ in range(3):
        before = counters.read()
        _loop()
        after = counters.read()
        for name in runs:
            if name in before and name in after:
                runs[name].append(after[name] - before[name])
    lines = []
    for name in (names if names is not None else list(counters.fds) + list(counters.unavailable)):
        if name in counters.unavailable:
            lines.append(f"COUNTER name={name} available=no reason={counters.unavailable[name]!r}")
        else:
            counts = runs.get(name) or []
            spread = (max(counts) - min(counts)) / max(counts) if counts and max(counts) else float("nan")
            lines.append(f"COUNTER name={name} available=yes loop_counts={','.join(f'{c:.0f}' for c in counts)} "
                         f"spread={spread:.4f}")
    return lines


if __name__ == "__main__":
    import sys

    print("\n".join(check(sys.argv[1:] or None)))
