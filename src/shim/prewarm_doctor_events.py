"""The shim's one writer: every module of the shim appends its events here,
one JSON line each, to ``$PREWARM_DOCTOR_DIR/<rank-R|proc>.pid-<pid>.shim.jsonl``
on CLOCK_MONOTONIC (the probe's clock). Below the shim, its Triton observer
and the prescription, so none of them imports another to write.
"""

import os
import threading
import time

_DIR = os.environ.get("PREWARM_DOCTOR_DIR")
_lock = threading.Lock()
_fd = None


def now():
    return time.monotonic_ns()


def _path():
    rank = os.environ.get("RANK")
    stem = f"rank-{rank}" if rank not in (None, "") else "proc"
    return os.path.join(_DIR, f"{stem}.pid-{os.getpid()}.shim.jsonl")


def emit(event, **fields):
    """Appends one event line; never raises."""
    global _fd
    if not _DIR:
        return
    try:
        import json

        fields["ev"] = event
        fields.setdefault("t", now())
        line = (json.dumps(fields, default=str) + "\n").encode()
        with _lock:
            if _fd is None:
                os.makedirs(_DIR, exist_ok=True)
                _fd = os.open(_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(_fd, line)
    except Exception:
        pass
