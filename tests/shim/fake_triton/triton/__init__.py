"""A stand-in for the parts of Triton the shim observes (tests/shim_python.rs):
an autotuner that benchmarks its configs and caches the choice per key, and a
JIT function that compiles. A kernel raises like Triton's out-of-memory when
asked to, so a traceback raised through the autotuner can be compared with and
without the shim."""

from . import runtime  # noqa: F401
