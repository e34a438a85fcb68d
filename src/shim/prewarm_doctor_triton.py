"""Triton hooks of the prewarm-doctor shim: autotune and compile events.

* ``autotune``: one per (kernel, key) the autotuner resolved — start/end, the
  number of configs benchmarked, the chosen config, and whether the result came
  from Triton's on-disk autotune cache (``source``: ``benchmark`` or ``disk-cache``).
* ``autotune_config``: one per candidate benchmarked, with its start/end and
  timing, so device events (local-memory growth, out-of-pool requests) inside
  that window are attributed to the candidate.
* ``compile``: one per JIT compile, with duration and on-disk cache hit/miss.

Only Triton's public-ish entry points are wrapped (``Autotuner.run``,
``Autotuner._bench``, ``JITFunction._do_compile``, ``knobs.compilation.listener``);
if a Triton version lacks one, that hook is skipped silently.
"""

import threading

from prewarm_doctor_shim import emit, now

try:  # prescribe's replay signatures (src/shim/prewarm_doctor_prescribe.py)
    from prewarm_doctor_prescribe import note_autotune_call
except Exception:  # never lose the Triton hooks over it

    def note_autotune_call(autotuner, args, kwargs):
        pass

_local = threading.local()


def _name(autotuner):
    fn = getattr(autotuner, "base_fn", None) or getattr(autotuner, "fn", None)
    return getattr(fn, "__name__", None) or repr(fn)


def _config_text(config):
    try:
        return str(config)
    except Exception:
        return "?"


def _install_autotuner(triton):
    from triton.runtime import autotuner as at

    cls = at.Autotuner
    original_run = cls.run
    original_bench = cls._bench

    def _bench(self, *args, config, **meta):
        t0 = now()
        result = None
        try:
            result = original_bench(self, *args, config=config, **meta)
            return result
        finally:
            t1 = now()
            state = getattr(_local, "tuning", None)
            if state is not None:
                state["benchmarked"] += 1
            timing = None
            try:
                timing = float(result[0]) if result is not None else None
            except Exception:
                pass
            emit(
                "autotune_config",
                kernel=_name(self),
                config=_config_text(config),
                t0=t0,
                t1=t1,
                ms=timing if timing is None or timing < float("inf") else None,
                failed=timing == float("inf"),
            )

    def run(self, *args, **kwargs):
        note_autotune_call(self, args, kwargs)  # prescribe's replay signature, once per (kernel, key)
        cache = getattr(self, "cache", None)
        before = len(cache) if isinstance(cache, dict) else -1
        if before < 0 or len(getattr(self, "configs", ())) <= 1:
            return original_run(self, *args, **kwargs)
        outer = getattr(_local, "tuning", None)
        state = {"benchmarked": 0}
        _local.tuning = state
        t0 = now()
        try:
            return original_run(self, *args, **kwargs)
        finally:
            t1 = now()
            _local.tuning = outer
            try:
                if len(self.cache) > before:
                    key = next(reversed(self.cache))
                    emit(
                        "autotune",
                        kernel=_name(self),
                        key=repr(key),
                        t0=t0,
                        t1=t1,
                        configs=len(self.configs),
                        benchmarked=state["benchmarked"],
                        chosen=_config_text(self.cache[key]),
                        source="benchmark" if state["benchmarked"] else "disk-cache",
                    )
            except Exception:
                pass

    cls._bench = _bench
    cls.run = run


def _install_compile(triton):
    from triton.runtime import jit

    knobs = getattr(triton, "knobs", None)
    compilation = getattr(knobs, "compilation", None) if knobs else None
    if compilation is not None and hasattr(compilation, "listener"):
        previous = compilation.listener

        def listener(*args, **kwargs):
            try:
                _local.cache_hit = bool(kwargs.get("cache_hit", False))
            except Exception:
                pass
            if previous is not None:
                return previous(*args, **kwargs)

        compilation.listener = listener

    cls = jit.JITFunction
    original = getattr(cls, "_do_compile", None)
    if original is None:
        return

    def _do_compile(self, *args, **kwargs):
        _local.cache_hit = None
        t0 = now()
        try:
            return original(self, *args, **kwargs)
        finally:
            emit(
                "compile",
                kernel=getattr(getattr(self, "fn", None), "__name__", repr(self)),
                t0=t0,
                t1=now(),
                cache_hit=getattr(_local, "cache_hit", None),
            )

    cls._do_compile = _do_compile


def install_triton(triton):
    for step in (_install_autotuner, _install_compile):
        try:
            step(triton)
        except Exception:
            pass
