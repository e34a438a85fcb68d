"""Observing a function without wrapping it: ``sys.monitoring`` (PEP 669).

A wrapper puts a frame of ours between the caller and the function: it shows
in every traceback raised through the function, in ``inspect.stack()`` and in
the frame depth. On Python >= 3.12 the shim instead asks the interpreter to
call back at the start (``PY_START``) and the end (``PY_RETURN``) of the
specific code objects it observes (local events: no other code pays), and
reads the arguments from the observed frame (``sys._getframe(1)`` in the
callback). The stack the program sees is exactly the plain run's.

``PY_UNWIND`` (a call ending by an exception) cannot be set per code object
(the interpreter refuses it as a local event), so it is set for the whole
program; its callback is one dictionary look-up for frames the shim does not
observe, and it runs only when an exception leaves a Python frame.

``end_of`` asks for the end of one running frame (a caller of an observed
function, found through its frame): its code's ``PY_RETURN`` is switched on
only until that frame ends, so a function called on every launch (Triton's
``Autotuner.run``) is observed only on the calls that matter (those that
tune), and costs nothing on the rest.

``observe`` returns False where sys.monitoring is missing (Python < 3.12),
switched off (``PREWARM_DOCTOR_SHIM_MONITORING=0``) or every free tool id is
taken; the caller then installs its wrapper instead (the older behaviour).
Every callback swallows its own errors: a callback that raised would raise
into the program. Each callback's time is the shim's own (prewarm_doctor_events).
"""

import os
import sys
import threading

from prewarm_doctor_events import begin, end

_mon = getattr(sys, "monitoring", None)
# Tool ids 3 and 4 have no assigned role (0 debugger, 1 coverage, 2 profiler,
# 5 optimizer): the shim takes the first one free.
_TOOL_IDS = (4, 3)
_tool = None  # the tool id once claimed; False when it could not be
# id(code object) -> (on_start, on_end): code objects hash by content (slow,
# and this is looked up for every frame an exception leaves); the observed
# code objects are kept alive in _observed, so their ids stay theirs.
_handlers = {}
_observed = []
_kept = set()  # ids of the code objects in _observed
_local = threading.local()
# id(code object) -> how many running frames of it ``end_of`` waits for
# (its PY_RETURN is on while above zero), and the events ``observe`` set on
# it (what it goes back to); kept alive in _observed.
_frames_waited = {}
_events_set = {}
_waited_lock = threading.Lock()


def _stack():
    s = getattr(_local, "calls", None)
    if s is None:
        s = _local.calls = []
    return s


def _on_start(code, offset):
    """One stack entry per observed call: the ``on_end`` of every observer
    that asked for the call's end, with its token."""
    handlers = _handlers.get(id(code))
    if handlers is None:
        return
    opened = begin()
    try:
        frame = sys._getframe(1)
        ends = []
        for on_start, on_end in handlers:
            try:
                token = on_start(frame)
                if on_end is not None and token is not None:
                    ends.append((on_end, token))
            except Exception:
                pass
        if ends:
            _stack().append((code, ends, None))
    finally:
        end(opened, _name(code))


def _name(code):
    """The observed function's name, the entry point its callbacks' time goes to."""
    return getattr(code, "co_qualname", None) or code.co_name


def _finish(code, retval, exc, frame=None):
    """Ends the innermost open call of ``code`` (of ``frame``, for an entry
    ``end_of`` made), dropping entries above it left by calls that never
    ended (a generator, say); whether there was one."""
    try:
        s = _stack()
        for i in range(len(s) - 1, -1, -1):
            entry_code, ends, entry_frame = s[i]
            if entry_code is code and (entry_frame is None or entry_frame is frame):
                dropped = s[i:]
                del s[i:]
                for _code, _ends, waited in dropped:
                    if waited is not None:
                        _stop_waiting(_code)
                for on_end, token in ends:
                    try:
                        on_end(token, retval, exc)
                    except Exception:
                        pass
                return True
    except Exception:
        pass
    return False


def _ended(code, retval, exc):
    """A return or unwind of an observed or waited-for code object."""
    opened = begin()
    observed = id(code) in _handlers
    ended = False
    try:
        ended = _finish(code, retval, exc, None if observed else sys._getframe(2))
    finally:
        # An observed call was counted at its start; a waited-for frame's
        # end is the one callback its call makes (the other frames of its
        # code that return meanwhile are not its calls: their time only).
        end(opened, _name(code), 0 if observed or not ended else 1)


def _on_return(code, offset, retval):
    if id(code) in _handlers or id(code) in _frames_waited:
        _ended(code, retval, None)


def _on_unwind(code, offset, exc):
    if id(code) in _handlers or id(code) in _frames_waited:
        _ended(code, None, exc)


def _claim():
    global _tool
    if _tool is not None:
        return _tool
    _tool = False
    if _mon is None or os.environ.get("PREWARM_DOCTOR_SHIM_MONITORING") == "0":
        return _tool
    events = _mon.events
    for tool in _TOOL_IDS:
        try:
            _mon.use_tool_id(tool, "prewarm-doctor")
        except ValueError:
            continue
        _mon.register_callback(tool, events.PY_START, _on_start)
        _mon.register_callback(tool, events.PY_RETURN, _on_return)
        _mon.register_callback(tool, events.PY_UNWIND, _on_unwind)
        _mon.set_events(tool, events.PY_UNWIND)
        _tool = tool
        break
    return _tool


def _keep(code):
    """Keeps ``code`` alive (its id keys the tables above), once: a code
    object observed again and again (a benchmark's kernel_call, observed
    for each candidate) is not kept once per time."""
    if id(code) not in _kept:
        _kept.add(id(code))
        _observed.append(code)


def _code_of(function):
    """The code object that actually runs: decorators built with
    functools.wraps (torch's, for instance) are looked through."""
    seen = 0
    while hasattr(function, "__wrapped__") and seen < 16:
        function = function.__wrapped__
        seen += 1
    function = getattr(function, "__func__", function)
    if isinstance(function, type(_code_of.__code__)):
        return function  # a code object itself (a nested function's)
    return getattr(function, "__code__", None)


def observe(function, on_start, on_end=None):
    """Calls ``on_start(frame)`` at each start of ``function`` (its frame,
    arguments in ``frame.f_locals``) and, when ``on_end`` is given and
    ``on_start`` returned something other than None, ``on_end(token, retval,
    exc)`` when that call returns (``exc`` None) or raises (``retval`` None).
    Returns False when sys.monitoring cannot be used: wrap instead."""
    tool = _claim()
    code = _code_of(function)
    if tool is False or code is None:
        return False
    try:
        events = _mon.events
        _keep(code)
        _handlers.setdefault(id(code), []).append((on_start, on_end))
        wanted = events.PY_START | (events.PY_RETURN if on_end is not None else 0)
        with _waited_lock:
            _events_set[id(code)] = _events_set.get(id(code), 0) | wanted
            _mon.set_local_events(tool, code, _mon.get_local_events(tool, code) | wanted)
        return True
    except Exception:
        handlers = _handlers.get(id(code)) or []
        if (on_start, on_end) in handlers:
            handlers.remove((on_start, on_end))
        if not handlers:
            _handlers.pop(id(code), None)
        return False


def end_of(frame, on_end, token):
    """Calls ``on_end(token, retval, exc)`` when the running ``frame`` returns
    or raises (called from an observed function's start, with its caller's
    frame). Returns False when sys.monitoring is not in use."""
    if not _tool:
        return False
    code = frame.f_code
    try:
        with _waited_lock:
            waited = _frames_waited.get(id(code), 0)
            if not waited:
                _keep(code)
                _mon.set_local_events(_tool, code, _events_set.get(id(code), 0) | _mon.events.PY_RETURN)
            _frames_waited[id(code)] = waited + 1
        _stack().append((code, [(on_end, token)], frame))
        return True
    except Exception:
        return False


def _stop_waiting(code):
    """One frame of ``code`` that ``end_of`` waited for has ended: its
    PY_RETURN goes back off with the last."""
    try:
        with _waited_lock:
            waited = _frames_waited.get(id(code), 0) - 1
            if waited > 0:
                _frames_waited[id(code)] = waited
                return
            _frames_waited.pop(id(code), None)
            _mon.set_local_events(_tool, code, _events_set.get(id(code), 0))
    except Exception:
        pass


def unobserve(function):
    """Stops observing ``function`` (its code object no longer calls back)."""
    code = _code_of(function)
    if not _tool or code is None or id(code) not in _handlers:
        return
    try:
        with _waited_lock:
            _events_set.pop(id(code), None)
            _mon.set_local_events(_tool, code, _mon.events.PY_RETURN if id(code) in _frames_waited else 0)
    except Exception:
        pass
    _handlers.pop(id(code), None)


def active():
    """Whether observation goes through sys.monitoring in this process."""
    return bool(_tool)
