"""The shim's one writer: every module of the shim appends its events here,
one JSON line each, to ``$PREWARM_DOCTOR_DIR/<rank-R|proc>.pid-<pid>.shim.jsonl``
on CLOCK_MONOTONIC (the probe's clock). Below the shim, its Triton observer
and the prescription, so none of them imports another to write.

It also keeps the shim's own time: every entry point the training calls
(a torch hook, a sys.monitoring callback, a wrapper's before and after) runs
``timed``, and every line carries ``own_ns``, the shim's time so far on the
training's threads, so that the doctor can say how much of a step was the
shim's. A prescription's warmups are the prewarm's work, not the shim's
(``untimed``).

And it finds the injected probe (``probe_library``), which the shim tells of
steps' ends and the Triton observer of benchmarks, so that neither imports
the other for it.
"""

import os
import threading
import time

_DIR = os.environ.get("PREWARM_DOCTOR_DIR")
_lock = threading.Lock()
_fd = None

_clock = time.perf_counter_ns
# Per thread [when its outermost timed call began (0: none open), its total
# ns, {entry point: [calls, ns]}, its total when the open call began]: each
# thread adds to its own, so a timed call takes no lock; every thread's is
# kept here to be summed. The entry points say which hook the time went to.
_tls = threading.local()
_threads = []
_threads_lock = threading.Lock()


def now():
    return time.monotonic_ns()


def _mine():
    try:
        return _tls.s
    except AttributeError:
        s = _tls.s = [0, 0, {}, 0]
        with _threads_lock:
            _threads.append(s)
        return s


def own_ns():
    """The shim's own time so far (ns, summed over threads), the call still
    open on this thread included."""
    since = _mine()[0]
    threads = _threads
    total = threads[0][1] if len(threads) == 1 else sum([s[1] for s in list(threads)])
    return total + (_clock() - since if since else 0)


def own_by():
    """The shim's own time by entry point, summed over threads:
    {name: [calls, ns]} (closed calls only)."""
    merged = {}
    for s in list(_threads):
        for name, (calls, ns) in list(s[2].items()):
            m = merged.setdefault(name, [0, 0])
            m[0] += calls
            m[1] += ns
    return merged


def begin():
    """Opens this thread's timed stretch: its state for ``end``, or None when
    one is open already (the outer one counts)."""
    try:
        s = _tls.s
    except AttributeError:
        s = _mine()
    if s[0]:
        return None
    s[3] = s[1]
    s[0] = _clock()
    return s


def _close(s, name, call):
    # From the latest start: an untimed stretch restarted it (and added what
    # came before it to the total), so the call's own time is the total's growth.
    s[1] += _clock() - s[0]
    s[0] = 0
    entry = s[2].get(name)
    if entry is None:
        s[2][name] = [call, s[1] - s[3]]
    else:
        entry[0] += call
        entry[1] += s[1] - s[3]


def end(opened, name="?", call=1):
    """Closes the stretch ``begin`` opened (``opened``: what it returned),
    its time counted to entry point ``name``; ``call`` 0 for the end of a
    call whose start counted it."""
    if opened is not None:
        _close(opened, name, call)


def timed(function, name=None, call=1):
    """``function``, its time counted as the shim's own, to entry point
    ``name`` (default: the function's qualified name), ``call`` calls a call
    (0: the end half of a call counted at its start); about 0.3 us a call
    for the two clock reads and the wrapper, partly outside what it counts."""
    name = name or getattr(function, "__qualname__", None) or getattr(function, "__name__", "?")

    def timed_call(*args, **kwargs):
        try:
            s = _tls.s
        except AttributeError:
            s = _mine()
        if s[0]:
            return function(*args, **kwargs)
        s[3] = s[1]
        s[0] = _clock()
        try:
            return function(*args, **kwargs)
        finally:
            _close(s, name, call)

    timed_call.__name__ = getattr(function, "__name__", "timed_call")
    timed_call.__doc__ = getattr(function, "__doc__", None)
    return timed_call


class untimed:
    """A stretch inside a timed call that is not the shim's own time (a
    prescription's warmups: the prewarm's work, reported as such)."""

    def __enter__(self):
        s = self.s = _mine()
        self.was_open = bool(s[0])
        if self.was_open:
            s[1] += _clock() - s[0]
            s[0] = 0

    def __exit__(self, *exc):
        if self.was_open:
            self.s[0] = _clock()
        return False


# The per-process file names, as crates/events/src/names.rs defines them for
# the probe and the loader (tests/shim_python.rs checks they agree).
SHIM_SUFFIX = ".shim.jsonl"
STEPS_SUFFIX = ".shim.steps"
PRESCRIPTION_ERRORS_PREFIX = "prescription-errors."
PRESCRIPTION_ERRORS_SUFFIX = ".txt"


_stem = [None, None]  # [pid, stem]: fixed at a process's first use


def process_stem():
    """`rank-R.pid-P`, or `proc.pid-P` without a RANK: the stem every file of
    this process shares. Fixed at its first use in a process, so that a
    program that sets RANK itself after starting (a one-rank job without
    torchrun) writes its step file beside its lines, where the loader looks;
    the probe, which names its file at CUDA's start, may spell it otherwise
    (the loader pairs them by pid)."""
    pid = os.getpid()
    if _stem[0] != pid:
        rank = os.environ.get("RANK")
        who = f"rank-{rank}" if rank not in (None, "") else "proc"
        _stem[:] = [pid, f"{who}.pid-{pid}"]
    return _stem[1]


def _path():
    return os.path.join(_DIR, process_stem() + SHIM_SUFFIX)


def emit_ints(event, **fields):
    """``emit`` for a line of integer fields only (a steady step's end, each
    step): the line formatted directly, not through json. Never raises."""
    if not _DIR:
        return
    try:
        parts = "".join([f', "{k}": {int(v)}' for k, v in fields.items()])
        _write(f'{{"ev": "{event}"{parts}, "t": {now()}, "own_ns": {own_ns()}}}\n'.encode())
    except Exception:
        pass


# The shim's line writes so far: [count, ns inside os.write], so that the
# report can tell the file system's part of the shim's time from its hooks'.
_writes = [0, 0]


def writes():
    """The line writes so far: [count, ns spent in os.write]."""
    return list(_writes)


def _write(line):
    global _fd
    with _lock:
        if _fd is None:
            os.makedirs(_DIR, exist_ok=True)
            _fd = os.open(_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        began = _clock()
        os.write(_fd, line)
        _writes[1] += _clock() - began
        _writes[0] += 1


# The step file (the default; PREWARM_DOCTOR_STEP_FILE=0 keeps lines): a warm step's end as
# one 24-byte record stored into a shared mapping of
# <stem>.pid-<pid>.shim.steps, a memory store instead of a write call, which
# the kernel keeps even when the process is killed. Header (32 bytes,
# little-endian): magic, record size, reserved, the first step it holds;
# record i: (step, t, own_ns) of step base + i, all zero until written.
STEP_FILE_MAGIC = b"PDSTEP01"
_STEP_HEADER = 32
_STEP_RECORD = 24
_STEP_CHUNK = 1 << 16  # records the file grows by (1.5 MiB, sparse)
_step_file_on = os.environ.get("PREWARM_DOCTOR_STEP_FILE") != "0"
# [mapping, first step, records mapped] once open; False where it cannot be.
_steps = None


def _open_step_file(first):
    import mmap
    import struct

    path = os.path.join(_DIR, process_stem() + STEPS_SUFFIX)
    os.makedirs(_DIR, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, _STEP_HEADER + _STEP_CHUNK * _STEP_RECORD)
        m = mmap.mmap(fd, _STEP_HEADER + _STEP_CHUNK * _STEP_RECORD)
    finally:
        os.close(fd)
    struct.pack_into("<8sIIQQ", m, 0, STEP_FILE_MAGIC, _STEP_RECORD, 0, first, 0)
    import atexit

    atexit.register(_trim_step_file, path)
    return [m, first, _STEP_CHUNK, struct.Struct("<QQQ").pack_into]


def _trim_step_file(path):
    """At exit: the file cut to its last written record, so that a run
    folder copied without keeping holes (tar, scp, a fixture) does not carry
    the unwritten rest of the file's last 65,536-record chunk. Step ends
    after it (another atexit hook, a thread still running) are lines: the
    mapping is closed first. Never raises."""
    global _steps
    r = _steps
    if not r:
        return  # never opened, given up, or a forked child's copy
    _steps = False
    try:
        m = r[0]
        end = len(m)
        block = 1 << 16
        while end > _STEP_HEADER:
            start = max(_STEP_HEADER, end - block)
            data = m[start:end].rstrip(b"\0")
            if data:
                end = start + len(data)
                break
            end = start
        used = -(-(end - _STEP_HEADER) // _STEP_RECORD)
        m.close()
        os.truncate(path, _STEP_HEADER + used * _STEP_RECORD)
    except Exception:
        pass


def _forget_step_file_in_child():
    # A forked child must not store into its parent's file: it writes lines.
    global _steps
    _steps = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_step_file_in_child)


def step_end(step):
    """A warm step's end: a record in the step file where it is on and can
    be kept, else a ``step_end`` line. Never raises."""
    r = _steps
    if r:
        i = step - r[1]
        if 0 <= i < r[2]:
            try:
                r[3](r[0], _STEP_HEADER + _STEP_RECORD * i, step, now(), own_ns())
                return
            except Exception:
                pass
    _step_end_slow(step)


def _step_end_slow(step):
    global _steps
    if _DIR and _step_file_on and _steps is not False:
        try:
            if _steps is None:
                _steps = _open_step_file(step)
            else:
                # Past the mapped records: the file grows by chunks (one
                # call in 65,536 steps).
                m, first, mapped, _ = _steps
                grown = mapped
                while step - first >= grown:
                    grown += _STEP_CHUNK
                if grown != mapped:
                    m.resize(_STEP_HEADER + grown * _STEP_RECORD)
                    _steps[2] = grown
            i = step - _steps[1]
            if 0 <= i < _steps[2]:
                _steps[3](_steps[0], _STEP_HEADER + _STEP_RECORD * i, step, now(), own_ns())
                return
        except Exception:
            pass
        # Out of order or not storable: lines from here on.
        _steps = False
    emit_ints("step_end", step=step)


def emit(event, **fields):
    """Appends one event line; never raises. ``own_ns`` is the shim's own
    time at the line's ``t`` (a caller giving a past ``t`` gives it too)."""
    if not _DIR:
        return
    try:
        import json

        fields["ev"] = event
        fields.setdefault("t", now())
        fields.setdefault("own_ns", own_ns())
        _write((json.dumps(fields, default=str) + "\n").encode())
    except Exception:
        pass


_probe_lib = None


def probe_library():
    """The injected probe library, if CUDA loaded it into this process (kept
    once found: CUDA never unloads it, and each lookup is a dlopen)."""
    global _probe_lib
    if _probe_lib is not None:
        return _probe_lib
    try:
        import ctypes

        path = os.environ.get("CUDA_INJECTION64_PATH")
        if not path:
            return None
        _probe_lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        return _probe_lib
    except Exception:
        return None
