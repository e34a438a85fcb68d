import os

from . import nvtx  # noqa: F401

# FAKE_TORCH_CUDA=1 pretends CUDA is up, with fixed pool figures.
_UP = os.environ.get("FAKE_TORCH_CUDA") == "1"


def is_initialized():
    return _UP


def memory_reserved():
    return 64 << 20


def memory_allocated():
    return 32 << 20


def max_memory_reserved():
    return 64 << 20


def mem_get_info():
    return (100 << 30, 140 << 30)
