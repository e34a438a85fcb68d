from . import nvtx  # noqa: F401


def is_initialized():
    return False
