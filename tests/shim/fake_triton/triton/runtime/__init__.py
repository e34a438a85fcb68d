from . import autotuner, jit  # noqa: F401
