"""Triton hooks of the prewarm-doctor shim: autotune and compile events.

* ``autotune``: one per (kernel, key) the autotuner resolved — start/end, the
  number of configs benchmarked, the chosen config, and whether the result came
  from Triton's on-disk autotune cache (``source``: ``benchmark`` or ``disk-cache``).
* ``autotune_config``: one per candidate benchmarked, with its start/end and
  timing, so device events (local-memory growth, out-of-pool requests) inside
  that window are attributed to the candidate.
* ``compile``: one per JIT compile, with duration and on-disk cache hit/miss;
  ``compile_begin`` at its start (one with no ``compile`` line was still
  running when the process ended).

Triton's public-ish entry points are observed (``Autotuner.run``,
``Autotuner._bench``, ``JITFunction._do_compile``, ``knobs.compilation.listener``);
if a Triton version lacks one, that hook is skipped silently. On Python >= 3.12
they are observed through sys.monitoring (prewarm_doctor_monitor: no frame of
ours in the program's stack or tracebacks); on older Pythons they are wrapped.
``Autotuner.run`` runs at every launch of an autotuned kernel, so under
sys.monitoring it is not observed itself: ``Autotuner.prune_configs``, which
it calls only for a key not tuned yet, is, and only that ``run``'s end is
asked for (a tuned kernel's launches call nothing of ours).
Each hook is one pair of functions (start: the call's arguments, returning a
state; end: that state and the result) used by both ways of observing.
"""

import os
import threading
import types

from prewarm_doctor_monitor import active, end_of, observe, unobserve
from prewarm_doctor_events import emit, now, probe_library, timed

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


def _locals(frame):
    return frame.f_locals


# ------------------------------------------------------------ Autotuner.run


def _run_started(autotuner, args, kwargs):
    """The start of every ``Autotuner.run`` call (every launch of an
    autotuned kernel), with its arguments: the state for ``_run_ended``, or
    None (a single config or no cache: nothing to time). Kept to a length
    check: a call whose key is tuned already costs no more."""
    cache = getattr(autotuner, "cache", None)
    before = len(cache) if isinstance(cache, dict) else -1
    if before < 0 or len(getattr(autotuner, "configs", ())) <= 1:
        # No cache to watch grow: prescribe's replay signature before the call.
        note_autotune_call(autotuner, args, kwargs)
        return None
    state = {"self": autotuner, "before": before, "benchmarked": 0, "outer": getattr(_local, "tuning", None)}
    # The call's own dict under sys.monitoring, which it may change (pop
    # its grid): a copy, for the replay signature at its end.
    state["args"], state["kwargs"] = args, dict(kwargs)
    _local.tuning = state
    state["t0"] = now()
    return state


def _run_ended(state, result, exc):
    t1 = now()
    _local.tuning = state["outer"]
    self = state["self"]
    try:
        key = state.get("key", _NO_KEY)
        tuned = key in self.cache if key is not _NO_KEY else len(self.cache) > state["before"]
        if tuned or exc is not None:
            # prescribe's replay signature, once per (kernel, key): of a key
            # just tuned, or of the call that died tuning it.
            note_autotune_call(self, state["args"], state["kwargs"], tuned=tuned)
        if tuned:
            if key is _NO_KEY:
                key = next(reversed(self.cache))
            emit(
                "autotune",
                kernel=_name(self),
                key=repr(key),
                t0=state["t0"],
                t1=t1,
                configs=len(self.configs),
                benchmarked=state["benchmarked"],
                chosen=_config_text(self.cache[key]),
                source="benchmark" if state["benchmarked"] else "disk-cache",
            )
    except Exception:
        pass


def _run_frame(frame):
    f = _locals(frame)
    return _run_started(f.get("self"), f.get("args", ()), f.get("kwargs", {}))


_NO_KEY = object()


def _prune_frame(frame, run_code):
    """The start of ``Autotuner.prune_configs``, which ``run`` calls only when
    its key is not tuned yet: the start of a tuning. Its caller's frame is
    that ``run`` (its arguments and key in its locals), whose end is asked
    for; every other launch of the kernel calls nothing of ours."""
    caller = frame.f_back
    if caller is None or caller.f_code is not run_code:
        return None  # Autotuner.warmup's pruning, or a subclass's own run
    f = _locals(caller)
    self = f.get("self")
    if self is None or not isinstance(getattr(self, "cache", None), dict):
        return None
    state = {
        "self": self,
        "key": f.get("key", _NO_KEY),
        "before": len(self.cache),
        "benchmarked": 0,
        "outer": getattr(_local, "tuning", None),
        "args": f.get("args", ()),
        "kwargs": dict(f.get("kwargs") or {}),
        "t0": now(),
    }
    if end_of(caller, _run_ended, state):
        _local.tuning = state
    return None


# ---------------------------------------------------------- Autotuner._bench


def _bench_started(autotuner, config, frame=None):
    return {"self": autotuner, "config": config, "t0": now(), "paused": _count_candidate_calls(frame)}


def _bench_ended(state, result, exc):
    t1 = now()
    _end_candidate_calls(state["paused"])
    tuning = getattr(_local, "tuning", None)
    if tuning is not None:
        tuning["benchmarked"] += 1
    timing = None
    try:
        timing = float(result[0]) if result is not None else None
    except Exception:
        pass
    emit(
        "autotune_config",
        kernel=_name(state["self"]),
        config=_config_text(state["config"]),
        t0=state["t0"],
        t1=t1,
        ms=timing if timing is None or timing < float("inf") else None,
        failed=timing == float("inf"),
    )


# ------------------------------------ kernel records in a candidate's timing
#
# A candidate's benchmark (triton.testing.do_bench) calls its kernel_call
# once and synchronises, then five times to estimate its time and
# synchronises again: by then every kernel the candidate launches has had
# its first launch (with any local-memory growth) on the GPU, recorded.
# The warm-up and timed repetitions that follow, often hundreds a
# candidate and 100,000+ in a step 1 that tunes, repeat those launches:
# the probe's kernel records would only add a record each that it then
# drops (not a first launch, no growth). From the seventh call on, the
# probe pauses its kernel records until the benchmark returns. Counted
# through sys.monitoring (kernel_call's starts, switched off once paused),
# never by wrapping: where that cannot be done (Python < 3.12), or with
# PREWARM_DOCTOR_BENCH_RECORDS=1, kernel records stay on throughout.
_RECORDED_CALLS = 6
_kernel_call = []  # [kernel_call's code object, _bench's] once found


def _pause_records(paused):
    """Asks the probe to pause (or resume) its kernel records; whether it did."""
    try:
        lib = probe_library()
        return lib is not None and lib.prewarm_probe_pause_kernel_records(1 if paused else 0) == 1
    except Exception:
        return False


def _benchmark_of(frame):
    """The nearest ``Autotuner._bench`` frame above a kernel_call's frame
    (do_bench stands between them)."""
    f = frame.f_back
    for _ in range(8):
        if f is None or f.f_code is _kernel_call[1]:
            return f
        f = f.f_back
    return None


def _candidate_call(frame):
    calls = getattr(_local, "candidate_calls", None)
    # Only the counted benchmark's own calls: an autotune nested in its
    # candidate (tuned in its first call) benchmarks with the same
    # kernel_call code, and its candidates' first launches must be recorded.
    if calls is None or _benchmark_of(frame) is not _local.bench_frame:
        return None
    calls += 1
    _local.candidate_calls = calls
    if calls > _RECORDED_CALLS:
        _local.candidate_calls = None
        unobserve(_kernel_call[0])
        _local.paused = _pause_records(True)
    return None


def _count_candidate_calls(bench_frame):
    """At a benchmark's start (its ``_bench`` frame): count its
    kernel_call's starts (the outermost benchmark of the thread only).
    False: nothing to end."""
    if bench_frame is None or not _kernel_call or getattr(_local, "candidate_calls", None) is not None:
        return False
    _local.candidate_calls = 0
    _local.bench_frame = bench_frame
    _local.paused = False
    if not observe(_kernel_call[0], _candidate_call):
        _local.candidate_calls = _local.bench_frame = None
        return False
    return True


def _end_candidate_calls(counting):
    if not counting:
        return
    _local.bench_frame = None
    if _local.candidate_calls is not None:
        _local.candidate_calls = None
        unobserve(_kernel_call[0])
    if _local.paused:
        _local.paused = False
        _pause_records(False)


def _find_kernel_call(cls):
    """kernel_call's code object in ``Autotuner._bench`` and ``_bench``'s
    own (None where this Triton has none, or pausing is switched off)."""
    if os.environ.get("PREWARM_DOCTOR_BENCH_RECORDS") == "1" or not active():
        return None
    code = getattr(getattr(cls, "_bench", None), "__code__", None)
    for const in getattr(code, "co_consts", ()):
        if isinstance(const, types.CodeType) and const.co_name == "kernel_call":
            return const, code
    return None


def _bench_frame(frame):
    f = _locals(frame)
    return _bench_started(f.get("self"), f.get("config"), frame)


# ------------------------------------------------------ JITFunction._do_compile


def _compile_started(jit_function):
    _local.cache_hit = None
    name = getattr(getattr(jit_function, "fn", None), "__name__", None) or repr(jit_function)
    t0 = now()
    # Written first: a process killed or dying inside a long compile (minutes
    # for a spilling candidate) still says which kernel it was compiling.
    emit("compile_begin", kernel=name, t0=t0, t=t0)
    return {"kernel": name, "t0": t0}


def _compile_ended(state, result, exc):
    emit(
        "compile",
        kernel=state["kernel"],
        t0=state["t0"],
        t1=now(),
        cache_hit=getattr(_local, "cache_hit", None),
    )


def _compile_frame(frame):
    return _compile_started(_locals(frame).get("self"))


# ------------------------------------------------------------- installation


def _wrap(cls, attr, started, ended):
    """The fallback (Python < 3.12): a wrapper around ``cls.attr`` calling
    ``started(self, args, kwargs)`` and ``ended`` around the original."""
    original = getattr(cls, attr)

    def wrapper(self, *args, **kwargs):
        state = None
        try:
            state = started(self, args, kwargs)
        except Exception:
            pass
        result = exc = None
        try:
            result = original(self, *args, **kwargs)
            return result
        except BaseException as e:
            exc = e
            raise
        finally:
            if state is not None:
                try:
                    ended(state, result, exc)
                except Exception:
                    pass

    wrapper.__name__ = getattr(original, "__name__", attr)
    wrapper.__qualname__ = getattr(original, "__qualname__", attr)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    setattr(cls, attr, wrapper)


def _hook(cls, attr, frame_started, call_started, ended):
    """Observes ``cls.attr`` (sys.monitoring), else wraps it."""
    if not observe(getattr(cls, attr), frame_started, ended):
        name = f"{cls.__name__}.{attr}"
        _wrap(cls, attr, timed(call_started, name), timed(ended, name, 0))


def _observe_tunings(cls):
    """Observes the tunings of ``cls.run`` through the ``prune_configs`` it
    calls on a key not tuned yet (sys.monitoring), so that the launches of a
    tuned kernel pay nothing. False where that cannot be done (no
    sys.monitoring, a Triton whose ``run`` does not call ``prune_configs``)."""
    run = getattr(cls.run, "__code__", None)
    prune = getattr(cls, "prune_configs", None)
    if run is None or prune is None or "prune_configs" not in run.co_names:
        return False
    return observe(prune, lambda frame: _prune_frame(frame, run))


def _install_autotuner(triton):
    from triton.runtime import autotuner as at

    cls = at.Autotuner
    _hook(cls, "_bench", _bench_frame, lambda self, args, kwargs: _bench_started(self, kwargs.get("config")), _bench_ended)
    codes = _find_kernel_call(cls)
    if codes is not None:
        _kernel_call.extend(codes)
    if not _observe_tunings(cls):
        _hook(cls, "run", _run_frame, _run_started, _run_ended)


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
    if getattr(cls, "_do_compile", None) is None:
        return
    _hook(cls, "_do_compile", _compile_frame, lambda self, args, kwargs: _compile_started(self), _compile_ended)


def install_triton(triton):
    for step in (_install_autotuner, _install_compile):
        try:
            step(triton)
        except Exception:
            pass
