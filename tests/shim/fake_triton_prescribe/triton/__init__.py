"""A stand-in for the few Triton pieces prewarm-doctor's shim observes
(``Autotuner.run`` / ``Autotuner._bench``), so signature recording and
prescription replay are tested on machines without Triton. It computes the
autotune key as Triton 3.x does; it is not Triton."""

__version__ = "0.0-fake"

from .runtime.autotuner import Autotuner, Config  # noqa: E402,F401


def autotune(configs, key):
    def wrap(fn):
        import inspect

        return Autotuner(fn, list(inspect.signature(fn).parameters), configs, key)

    return wrap
