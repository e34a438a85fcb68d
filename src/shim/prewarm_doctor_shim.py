"""prewarm-doctor's in-process shim (loaded through sitecustomize).

Writes one JSON line per framework event to
``$PREWARM_DOCTOR_DIR/<rank-R|proc>.pid-<pid>.shim.jsonl`` on CLOCK_MONOTONIC
(``time.monotonic_ns``), the clock the CUPTI probe uses:

* ``process``: versions and rank environment (written when torch is imported);
* ``step1_begin``: where step 1 starts, and by which rule (see docs/step-rule.md);
* ``zero_grad`` / ``first_forward``: until step 1 is placed, each ``zero_grad()``
  and the first owning forward after it, so the doctor can place step 1 itself
  for a process that dies before its first step without running Python's hooks;
* ``step_end``: every optimizer step of the primary optimizer, with pool stats;
* ``shim_own``: the shim's own time by entry point (calls, ns), at exit and
  every 100th step;
* ``marker``: NVTX ranges pushed through ``torch.cuda.nvtx`` that match
  ``PREWARM_DOCTOR_STEP_MARKER``;
* ``autotune`` / ``autotune_config`` / ``compile``: Triton activity (see triton hooks);
* ``comm_group``: torch's process groups and their NCCL communicators' pointers
  (see prewarm_doctor_groups.py), after each of the first steps.

Every line carries ``own_ns``, the shim's own time so far on the training's
threads (prewarm_doctor_events): each hook the training calls is timed.

Hooks are installed only when the program itself imports torch/triton, so the
shim is silent and costs nothing in processes that never do. Every hook swallows
its own errors: the training run must behave exactly as without the shim. On
Python >= 3.12 the functions the shim watches (the optimizer's ``__init__`` and
``zero_grad``, ``init_process_group``, NVTX push/pop, Triton's autotuner and
compiler) are observed through sys.monitoring (prewarm_doctor_monitor), not
wrapped, so no frame of ours appears in the program's stack or tracebacks.
"""

import functools
import os
import sys
import threading

from prewarm_doctor_events import emit, now, own_by, own_ns, probe_library as _probe, step_end, timed, writes

_DIR = os.environ.get("PREWARM_DOCTOR_DIR")
_KERNEL_STEPS = int(os.environ.get("PREWARM_DOCTOR_KERNEL_STEPS", "3") or "3")
_MARKER = os.environ.get("PREWARM_DOCTOR_STEP_MARKER") or None
# Steps whose end records torch's pool statistics (cross-checks); later steps
# record only their end time, keeping the shim off the training loop's path.
_DETAIL_STEPS = max(_KERNEL_STEPS, 5)
_STATS_EVERY = 100
_installed = set()
_TRACKER = []


# ---------------------------------------------------------------- torch hooks


class _StepTracker:
    """Finds step boundaries from torch's global optimizer hooks.

    Step rule (docs/step-rule.md): step N ends when the primary optimizer (the
    first one that steps) finishes its N-th ``step()``. Step 1 begins at the
    first grad-enabled top-level forward of a module holding that optimizer's
    parameters after the optimizer's last ``zero_grad()`` before its first
    step (without such a ``zero_grad()``, at the first such forward; without
    any forward, at the last ``zero_grad()``). Forward/backward a prewarm runs
    during setup, followed by ``zero_grad()``, therefore counts as setup.

    Until step 1 is placed, the tracker also writes what the rule needs as it
    happens (``zero_grad`` and ``first_forward`` lines, a few per iteration at
    most), so that the doctor can place step 1 itself when the process dies
    before its first optimizer step without running Python's exception hook
    (killed by a signal, aborted by NCCL).
    """

    def __init__(self, torch):
        self.torch = torch
        self.primary = None
        self.steps = 0
        self.resolved = False
        self.forwards = []  # (t, weakref(module), own_ns at t) top-level, grad-enabled
        self.last_zero_grad = {}  # id(optimizer) -> (t, own_ns at t)
        self.last_optimizer = None
        self.optimizers = []  # weakrefs in creation order: "opt" in the records
        self.pending = {}  # optimizer index -> its next owning forward is recorded (after a zero_grad?)
        self.param_ids = {}  # optimizer index -> ids of its parameters (refreshed at zero_grad)
        self.not_owner = {}  # optimizer index -> ids of modules known not to hold its parameters
        self.depth = threading.local()
        self.handles = []  # forward hooks and zero_grad's observation: until step 1 is placed
        self.pre_step_handle = None  # removed after the first step (not from inside the pre-hooks)
        self.kernel_records_off = False

    # optimizers ---------------------------------------------------------------
    def index_of(self, optimizer):
        for i, ref in enumerate(self.optimizers):
            if ref() is optimizer:
                return i
        import weakref

        self.optimizers.append(weakref.ref(optimizer))
        i = len(self.optimizers) - 1
        self.pending[i] = False
        return i

    @timed
    def optimizer_created(self, optimizer):
        if self.steps == 0 and not self.resolved:
            self.index_of(optimizer)

    def owns(self, i, module):
        """True when `module` holds parameters of optimizer `i`."""
        known_not = self.not_owner.setdefault(i, set())
        if id(module) in known_not:
            return False
        params = self.param_ids.get(i)
        if params is None:
            opt = self.optimizers[i]()
            params = set()
            if opt is not None:
                for group in getattr(opt, "param_groups", []):
                    for p in group.get("params", []):
                        params.add(id(p))
            self.param_ids[i] = params
        try:
            found = any(id(p) in params for p in module.parameters())
        except Exception:
            found = False
        if not found:
            known_not.add(id(module))
        return found

    # forward tracking -------------------------------------------------------
    @timed
    def fwd_pre(self, module, args):
        d = getattr(self.depth, "n", 0)
        self.depth.n = d + 1
        if d == 0 and self.steps == 0 and not self.resolved and self.torch.is_grad_enabled():
            import weakref

            t = now()
            try:
                self.forwards.append((t, weakref.ref(module), own_ns()))
                if len(self.forwards) > 100000:
                    del self.forwards[:50000]
            except TypeError:
                pass
            try:
                for i, after_zero_grad in list(self.pending.items()):
                    if self.owns(i, module) and self.pending.pop(i, None) is not None:
                        emit("first_forward", t=t, opt=i, after_zero_grad=after_zero_grad)
            except Exception:
                pass

    @timed
    def fwd_post(self, module, args, output):
        self.depth.n = max(0, getattr(self.depth, "n", 1) - 1)

    @timed
    def zero_grad_called(self, optimizer):
        if self.steps == 0 and not self.resolved:
            t = now()
            self.last_zero_grad[id(optimizer)] = (t, own_ns())
            self.last_optimizer = optimizer
            i = self.index_of(optimizer)
            self.pending[i] = True
            self.param_ids.pop(i, None)
            self.not_owner.pop(i, None)
            emit("zero_grad", t=t, opt=i)

    def resolve_on_death(self):
        """The process is dying before its first optimizer step (e.g. an OOM in
        step 1): place step 1 with the optimizer that called ``zero_grad()``
        last (else the first whose module ran a forward), so the failure is
        reported in step 1, not in setup."""
        if self.steps != 0 or self.primary is not None or self.resolved:
            return
        opt = self.last_optimizer
        if opt is None:
            for i, ref in enumerate(self.optimizers):
                o = ref()
                modules = (ref() for _, ref, _own in self.forwards)
                if o is not None and any(self.owns(i, m) for m in modules if m is not None):
                    opt = o
                    break
        if opt is not None:
            self.primary = id(opt)
            self.resolve_step1(opt, died=True)

    # optimizer hooks --------------------------------------------------------
    @timed
    def pre_step(self, optimizer, args, kwargs):
        if self.primary is None:
            self.primary = id(optimizer)
            self.resolve_step1(optimizer)

    def resolve_step1(self, optimizer, died=False):
        t_step, own_step = now(), own_ns()
        self.resolved = True
        params = set()
        for group in optimizer.param_groups:
            for p in group.get("params", []):
                params.add(id(p))
        zero = self.last_zero_grad.get(id(optimizer))

        def owns(ref):
            m = ref()
            if m is None:
                return False
            try:
                return any(id(p) in params for p in m.parameters())
            except Exception:
                return False

        candidates = [(t, own) for t, ref, own in self.forwards if (zero is None or t >= zero[0]) and owns(ref)]
        suffix = " (the process died before its first optimizer step)" if died else ""
        if candidates:
            t, own = candidates[0]
            emit("step1_begin", t=t, own_ns=own, rule=("first-forward-after-zero-grad" if zero else "first-forward") + suffix)
        elif zero is not None:
            emit("step1_begin", t=zero[0], own_ns=zero[1], rule="last-zero-grad" + suffix)
        elif not died:
            emit("step1_begin", t=t_step, own_ns=own_step, rule="first-optimizer-step")
        self.forwards.clear()
        self.pending.clear()
        self.param_ids.clear()
        self.not_owner.clear()
        # Forward tracking and zero_grad() were only needed to place step 1.
        for h in self.handles:
            try:
                h.remove()
            except Exception:
                pass
        self.handles = []

    @timed
    def post_step(self, optimizer, args, kwargs):
        if id(optimizer) != self.primary:
            return
        self.steps += 1
        if self.steps > _DETAIL_STEPS and self.steps % _STATS_EVERY:
            # Steady state: the step's end alone, the least a step can cost.
            step_end(self.steps)
            return
        if self.pre_step_handle is not None:
            # Step 1 is placed: the pre-hook has nothing left to do (removed
            # here, not while torch iterates the pre-hooks).
            handle, self.pre_step_handle = self.pre_step_handle, None
            try:
                handle.remove()
            except Exception:
                pass
        fields = {"step": self.steps}
        try:
            cuda = self.torch.cuda
            # torch's statistics dict takes hundreds of microseconds to
            # build: the first steps, where lazy init lands, get it; steady
            # state only every _STATS_EVERY-th step.
            detailed = self.steps <= _DETAIL_STEPS or self.steps % _STATS_EVERY == 0
            if detailed and cuda.is_initialized():
                # One statistics dict for the three figures: torch's
                # memory_reserved(), memory_allocated() and
                # max_memory_reserved() each build it anew.
                stats = cuda.memory_stats()
                fields["reserved"] = stats.get("reserved_bytes.all.current", 0)
                fields["allocated"] = stats.get("allocated_bytes.all.current", 0)
                fields["max_reserved"] = stats.get("reserved_bytes.all.peak", 0)
                free, total = cuda.mem_get_info()
                fields["device_free"] = free
                fields["device_total"] = total
        except Exception:
            pass
        if self.steps <= _DETAIL_STEPS:
            _snapshot_groups(self.steps)
            _prescribe_steps_ended(self.steps)
            _probe_step_ended(self.steps)
        if self.steps >= _KERNEL_STEPS and not self.kernel_records_off:
            self.kernel_records_off = True
            lib = _probe()
            if lib is not None:
                try:
                    lib.prewarm_probe_set_kernel_records(0)
                except Exception:
                    pass
        if self.steps % _STATS_EVERY == 0:
            _emit_own_by()  # so that a run killed later still says it
        # Last, when this hook's work is done: the training's optimizer.step()
        # returns after it, so the step that ended holds it (its time and
        # the shim's own_ns alike).
        emit("step_end", **fields)


def _probe_step_ended(steps):
    """Tells the probe a step ended: a step on known pools stops its tracing
    of stream-ordered calls (crates/probe/src/pools.rs has the rule)."""
    lib = _probe()
    if lib is None:
        return
    try:
        lib.prewarm_probe_step_ended(steps)
    except Exception:
        pass  # an older probe without the call: its call count still applies


def _prescribe_steps_ended(steps):
    try:
        import prewarm_doctor_prescribe

        prewarm_doctor_prescribe.steps_ended(steps)
    except Exception:
        pass


def _install_prescribe(torch):
    try:
        import prewarm_doctor_prescribe

        prewarm_doctor_prescribe.install(torch)
    except Exception:
        pass


def _versions(torch):
    v = {"torch": getattr(torch, "__version__", None), "python": sys.version.split()[0]}
    try:
        v["cuda"] = torch.version.cuda
    except Exception:
        pass
    try:
        from importlib import metadata

        v["triton"] = metadata.version("triton")
    except Exception:
        pass
    return v


def _install_torch(torch):
    emit(
        "process",
        versions=_versions(torch),
        env={k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "LOCAL_WORLD_SIZE")},
        argv=sys.argv,
    )
    import torch.optim.optimizer as optim_mod
    import torch.nn.modules.module as module_mod

    _install_prescribe(torch)  # before the tracker's hooks: a prescription runs before step 1 begins
    tracker = _StepTracker(torch)
    _TRACKER.append(tracker)
    tracker.pre_step_handle = optim_mod.register_optimizer_step_pre_hook(tracker.pre_step)
    optim_mod.register_optimizer_step_post_hook(tracker.post_step)
    tracker.handles.append(module_mod.register_module_forward_pre_hook(tracker.fwd_pre))
    tracker.handles.append(module_mod.register_module_forward_hook(tracker.fwd_post, always_call=True))

    _install_optimizer_hooks(optim_mod.Optimizer, tracker)
    if _MARKER:
        try:
            _install_nvtx_markers(torch)
        except Exception:
            pass
    _install_nccl_version_probe(torch)


def _install_optimizer_hooks(cls, tracker):
    """Every optimizer's creation and ``zero_grad()``: observed through
    sys.monitoring where it exists (no frame of ours in the program's stack),
    else wrapped."""
    from prewarm_doctor_monitor import observe, unobserve

    def created(frame):
        return frame.f_locals.get("self")

    def init_ended(optimizer, result, exc):
        if exc is None:
            tracker.optimizer_created(optimizer)

    def zero_grad_started(frame):
        tracker.zero_grad_called(frame.f_locals.get("self"))

    if not observe(cls.__init__, created, init_ended):
        original_init = cls.__init__

        @functools.wraps(original_init)
        def __init__(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            try:
                tracker.optimizer_created(self)
            except Exception:
                pass

        cls.__init__ = __init__
    original_zero_grad = cls.zero_grad
    if observe(original_zero_grad, zero_grad_started):
        tracker.handles.append(_Stop(lambda: unobserve(original_zero_grad)))
    else:

        def zero_grad(self, *args, **kwargs):
            try:
                tracker.zero_grad_called(self)
            except Exception:
                pass
            return original_zero_grad(self, *args, **kwargs)

        cls.zero_grad = zero_grad

        def restore():
            if cls.zero_grad is zero_grad:
                cls.zero_grad = original_zero_grad

        tracker.handles.append(_Stop(restore))


class _Stop:
    """A removable handle (as torch's hooks return) for a hook of ours."""

    def __init__(self, remove):
        self.remove = remove


def _install_nccl_version_probe(torch):
    """Records the NCCL version once a process group exists (cheap, no CUDA init)."""
    try:
        import torch.distributed as dist
        from prewarm_doctor_monitor import observe

        @timed
        def created():
            try:
                emit("process_group", backend=str(dist.get_backend()), world=dist.get_world_size(), rank=dist.get_rank(), nccl=".".join(map(str, torch.cuda.nccl.version())))
            except Exception:
                pass

        def ended(token, result, exc):
            if exc is None:
                created()

        from prewarm_doctor_groups import install as install_groups

        install_groups(dist, emit)
        original = dist.init_process_group
        if observe(original, lambda frame: True, ended):
            return

        def init_process_group(*args, **kwargs):
            result = original(*args, **kwargs)
            created()
            return result

        dist.init_process_group = init_process_group
    except Exception:
        pass


def _snapshot_groups(step):
    """Names the communicators that exist now after torch's groups."""
    try:
        from prewarm_doctor_groups import snapshot

        snapshot(emit, step)
    except Exception:
        pass


def _install_nvtx_markers(torch):
    import re

    from prewarm_doctor_monitor import observe

    pattern = re.compile(_MARKER)
    nvtx = torch.cuda.nvtx
    stack = threading.local()
    push, pop = nvtx.range_push, nvtx.range_pop

    @timed
    def pushed(msg):
        s = getattr(stack, "s", None)
        if s is None:
            s = stack.s = []
        s.append((str(msg), now()))

    @timed
    def popped():
        s = getattr(stack, "s", None)
        if s:
            name, t0 = s.pop()
            if pattern.search(name):
                emit("marker", name=name, t0=t0, t1=now())

    def push_started(frame):
        pushed(frame.f_locals.get("msg"))

    def pop_ended(token, result, exc):
        if exc is None:
            popped()

    def range_push(msg, *a, **k):
        pushed(msg)
        return push(msg, *a, **k)

    def range_pop(*a, **k):
        r = pop(*a, **k)
        popped()
        return r

    if not observe(push, push_started):
        nvtx.range_push = range_push
    if not observe(pop, lambda frame: True, pop_ended):
        nvtx.range_pop = range_pop


# ---------------------------------------------------------------- import hook


class _AfterImport:
    """Meta-path finder that runs a callback right after a module finishes importing."""

    def __init__(self, callbacks):
        self.callbacks = callbacks
        self.busy = set()

    def find_spec(self, name, path=None, target=None):
        if name not in self.callbacks or name in self.busy:
            return None
        import importlib.util

        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        loader = spec.loader
        callback = self.callbacks[name]

        class Loader:
            def create_module(self, s):
                return loader.create_module(s)

            def exec_module(self, module):
                loader.exec_module(module)
                if name not in _installed:
                    _installed.add(name)
                    try:
                        timed(callback)(module)
                    except Exception:
                        pass

        spec.loader = Loader()
        return spec


def _install_excepthooks():
    """Records an uncaught exception (e.g. "Triton Error [CUDA]: out of memory",
    NCCL's "Cuda failure 2 'out of memory'") before the process dies, then lets
    the previous hook print it exactly as before."""
    import traceback

    def record(exc_type, exc, tb, thread=None):
        if "torch" not in sys.modules:
            return
        tracker = _TRACKER[0] if _TRACKER else None
        if tracker is not None:
            try:
                tracker.resolve_on_death()
            except Exception:
                pass
        pool = {}
        try:
            # The pool as the process dies (the traceback still holds the
            # failing step's tensors): its unallocated cache is what it could
            # have given back to an out-of-pool request.
            cuda = sys.modules["torch"].cuda
            if cuda.is_initialized():
                pool["pool_reserved"] = cuda.memory_reserved()
                pool["pool_allocated"] = cuda.memory_allocated()
        except Exception:
            pass
        try:
            frames = traceback.extract_tb(tb)[-6:] if tb is not None else []
            emit(
                "exception",
                type=getattr(exc_type, "__name__", str(exc_type)),
                message=str(exc)[:2000],
                thread=thread,
                where=[f"{f.filename}:{f.lineno} {f.name}" for f in frames],
                **pool,
            )
        except Exception:
            pass

    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        record(exc_type, exc, tb)
        return previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    previous_thread = threading.excepthook

    def thread_excepthook(args):
        record(args.exc_type, args.exc_value, args.exc_traceback, getattr(args.thread, "name", None))
        return previous_thread(args)

    threading.excepthook = thread_excepthook


def _emit_own_by():
    """A ``shim_own`` line: the shim's own time so far by entry point (the
    hook it went to: calls and ns), for the report's costliest hooks. Only
    where a hook was installed: a process that never imported torch or
    triton gets no shim file. Never raises: it runs inside the training's
    optimizer.step() and as an atexit callback, where an error would be
    printed into the training's stderr."""
    try:
        if _installed:
            emit("shim_own", by=own_by(), writes=writes())
    except Exception:
        pass


@timed
def install():
    if not _DIR or os.environ.get("PREWARM_DOCTOR_SHIM") == "0":
        return
    try:
        import atexit

        atexit.register(_emit_own_by)
    except Exception:
        pass
    try:
        _install_excepthooks()
    except Exception:
        pass
    callbacks = {"torch": _install_torch}
    try:
        from prewarm_doctor_triton import install_triton

        callbacks["triton"] = install_triton
    except Exception:
        pass
    for name, cb in callbacks.items():
        if name in sys.modules and name not in _installed:
            _installed.add(name)
            try:
                cb(sys.modules[name])
            except Exception:
                pass
    sys.meta_path.insert(0, _AfterImport(callbacks))
