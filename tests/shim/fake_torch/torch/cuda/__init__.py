import os

from . import nvtx  # noqa: F401

# FAKE_TORCH_CUDA=1 pretends CUDA is up, with fixed pool figures.
_UP = os.environ.get("FAKE_TORCH_CUDA") == "1"


def is_initialized():
    return _UP


# FAKE_TORCH_SLOW_STATS_MS=N: each memory_stats() takes N ms (torch's own
# takes hundreds of microseconds): time spent in the shim's hook.
_SLOW_S = float(os.environ.get("FAKE_TORCH_SLOW_STATS_MS") or 0) / 1000


def memory_stats():
    if _SLOW_S:
        import time

        time.sleep(_SLOW_S)
    return {
        "reserved_bytes.all.current": memory_reserved(),
        "allocated_bytes.all.current": memory_allocated(),
        "reserved_bytes.all.peak": max_memory_reserved(),
    }


def memory_reserved():
    return 64 << 20


def memory_allocated():
    return 32 << 20


def max_memory_reserved():
    return 96 << 20


def mem_get_info():
    return (100 << 30, 140 << 30)


_device = [0]


def set_device(index):
    _device[0] = index


def current_device():
    return _device[0]
