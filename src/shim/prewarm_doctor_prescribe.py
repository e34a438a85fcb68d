"""What ``prewarm-doctor prescribe`` needs from a run, and the injection of a
prescription into a later run (docs/event-format.md, docs/prescribe.md "Let
the doctor write the prewarm").

Recording (every run under the doctor):

* ``autotune_call``: once per (kernel, key) an autotuner had to tune, what is
  needed to replay it: the jitted function's module and qualified name, the
  key, every argument's shape, strides and dtype (tensors) or value (scalars,
  constexprs), and the launch grid (a grid function is evaluated per candidate
  config, since the benchmark timings depend on it). Calls that cannot be
  replayed carry ``replay``: the reason.
* ``pg_created`` / ``pg_first_use``: each process group in creation order
  (index 0 is the default group) with its member ranks and torch's name and
  description, and the first collective the program ran on it.
* ``fingerprint``: world size, parameter count, a hash of the parameter shapes
  and dtypes of the module whose forward begins step 1, and the floating dtypes
  among them (what the cuBLAS warmup runs).

Injection (``PREWARM_DOCTOR_PRESCRIPTION=FILE``): the prescription module is
loaded when torch is imported; each process group it names is warmed by one
tiny collective right after the program creates it (every member is inside
that group's creation then); its cuBLAS and Triton blocks run in a global
forward pre-hook at the first grad-enabled top-level forward of a module that
holds an optimizer's parameters (model, optimizer and groups exist; step 1 has
not begun), and the hook is removed once it fired. Nothing here raises into
the training: failures are written to the run folder and counted.
"""

import os
import sys
import threading

from prewarm_doctor_monitor import observe, unobserve
from prewarm_doctor_events import (
    PRESCRIPTION_ERRORS_PREFIX,
    PRESCRIPTION_ERRORS_SUFFIX,
    emit,
    now,
    process_stem,
    timed,
    untimed,
)

_seen = {}  # id(autotuner) -> set of keys recorded
_lock = threading.Lock()
# One entry per process group in creation order (True: this process is a
# member). Only ids are kept, never the groups: the shim must not change
# when torch frees them.
_groups = []
_group_ids = {}  # id(group) -> index
_used = set()
_state = {"prescription": None, "failures": 0, "fired": False, "handle": None, "torch": None}
_SCALARS = (bool, int, float, str, type(None))


# ------------------------------------------------------------ Triton signatures


def _key(autotuner, args, kwargs):
    """The autotune key exactly as Triton's ``Autotuner.run`` computes it."""
    names = autotuner.arg_names
    all_args = dict(zip(names, args))
    all_args.update(kwargs)
    named = {k: v for k, v in all_args.items() if k in names}
    key = [named[k] for k in autotuner.keys if k in named]
    for v in named.values():
        if hasattr(v, "dtype"):
            key.append(str(v.dtype))
    return tuple(key)


# Integer tensors of up to this many elements are recorded with their
# values (offsets, cu_seqlens, chunk indices: a replay on zeros would describe
# other work); larger ones are replayed as zeros (docs/prescribe.md).
VALUES_MAX = 4096


def _values(value):
    """A small integer or boolean tensor's values (nested lists), else None."""
    try:
        if value.is_floating_point() or value.is_complex():
            return None
        if value.numel() > VALUES_MAX:
            return None
        return value.tolist()
    except Exception:
        return None


def _spec(value):
    """One argument as data: a tensor's layout (a small integer tensor's
    values too), a plain value, or why not."""
    if hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "shape"):
        tensor = {
            "shape": [int(s) for s in value.shape],
            "stride": [int(s) for s in value.stride()],
            "dtype": str(value.dtype),
            "device": str(getattr(getattr(value, "device", None), "type", "cuda")),
            "offset": int(value.storage_offset()) if hasattr(value, "storage_offset") else 0,
        }
        values = _values(value)
        if values is not None:
            tensor["values"] = values
        return {"tensor": tensor}
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return {"float": repr(value)}
    if isinstance(value, _SCALARS):
        return {"value": value}
    return {"unsupported": type(value).__module__ + "." + type(value).__qualname__}


def _grid(autotuner, args, kwargs, grid):
    """The launch grid per candidate config (a grid function is evaluated on
    each config's meta-parameters), or the reason it cannot be recorded."""
    if grid is None:
        return None, "no launch grid passed to the autotuner"
    if not callable(grid):
        try:
            return {"fixed": [int(g) for g in grid]}, None
        except Exception:
            return None, "the launch grid is not a tuple of integers"
    named = dict(zip(autotuner.arg_names, args))
    named.update(kwargs)
    table = []
    for config in getattr(autotuner, "configs", ()):
        try:
            meta = dict(named)
            meta.update(config.all_kwargs())
            g = grid(meta)
            table.append([dict(config.kwargs), [int(x) for x in g]])
        except Exception as e:
            return None, f"the grid function failed on config {config}: {type(e).__name__}"
    return {"per_config": table}, None


def _where(autotuner):
    base = getattr(autotuner, "base_fn", None) or getattr(autotuner, "fn", None)
    return (
        getattr(base, "__name__", None) or repr(base),
        getattr(base, "__module__", None),
        getattr(base, "__qualname__", None),
    )


def note_autotune_call(autotuner, args, kwargs, tuned=False):
    """Called by the Triton observer for an ``Autotuner.run`` that tuned its
    key (``tuned``: at its end) or that raised, or before every call where
    it cannot tell: records a call whose key was not tuned before, once per
    (kernel, key). Never raises."""
    try:
        if len(getattr(autotuner, "configs", ())) <= 1:
            return
        key = _key(autotuner, args, kwargs)
        if not tuned and key in autotuner.cache:
            return
        with _lock:
            seen = _seen.setdefault(id(autotuner), set())
            if key in seen:
                return
            seen.add(key)
        _record(autotuner, key, args, kwargs)
    except Exception:
        pass


def _record(autotuner, key, args, kwargs):
    kernel, module, qualname = _where(autotuner)
    rest = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
    arg_specs = [_spec(a) for a in args]
    kw_specs = {k: _spec(v) for k, v in rest.items()}
    grid, why = _grid(autotuner, args, rest, kwargs.get("grid"))
    reasons = [why] if why else []
    bad = [k for k, s in list(enumerate(arg_specs)) + list(kw_specs.items()) if "unsupported" in s]
    if bad:
        reasons.append(f"argument(s) {', '.join(map(str, bad))} are neither tensors nor plain values")
    if not module or not qualname or "<locals>" in qualname:
        reasons.append("the kernel is not reachable by module and name (defined inside a function)")
    if getattr(autotuner, "user_defined_pre_hook", False) or getattr(autotuner, "user_defined_post_hook", False):
        reasons.append("the autotuner has user-defined pre/post hooks that may touch state outside its arguments")
    emit(
        "autotune_call",
        kernel=kernel,
        module=module,
        qualname=qualname,
        key=repr(key),
        args=arg_specs,
        kwargs=kw_specs,
        grid=grid,
        replay="; ".join(reasons) or None,
    )


# ------------------------------------------------------------ process groups


def _group_index(group):
    if group is None:
        return 0 if _groups else None
    return _group_ids.get(id(group))


def _note_group(group, ranks, dist):
    index = len(_groups)
    _groups.append(True)
    if group is not None:
        _group_ids[id(group)] = index
    fields = {"index": index, "ranks": ranks}
    for attr, name in (("group_name", "name"), ("group_desc", "desc")):
        try:
            value = getattr(group, attr, None)
            if value is not None:
                fields[name] = str(value)
        except Exception:
            pass
    emit("pg_created", **fields)
    _warm_group(index, group, ranks)


def _group_ranks(dist, group):
    try:
        return [int(r) for r in dist.get_process_group_ranks(group)]
    except Exception:
        return None


@timed
def _default_created(dist, c10d):
    try:
        if not _groups:
            world = dist.get_world_size()
            default = getattr(c10d, "_get_default_group", lambda: None)()
            _note_group(default, list(range(world)), dist)
    except Exception:
        pass


@timed
def _group_created(dist, group):
    try:
        if group is not None and getattr(dist, "GroupMember", None) is not None and group is getattr(dist.GroupMember, "NON_GROUP_MEMBER", object()):
            _groups.append(False)  # not a member: the index still advances
        else:
            _note_group(group, _group_ranks(dist, group), dist)
    except Exception:
        pass


def _watch_creation(dist, c10d):
    """Group creation observed through sys.monitoring (no frame of ours in
    the training's stack; DeviceMesh's own reference to new_group is the same
    code object), or wrapped on Python < 3.12."""
    target = c10d if c10d is not None and hasattr(c10d, "new_group") else dist
    started = lambda frame: True  # noqa: E731
    init_ok = observe(dist.init_process_group, started, lambda _t, _r, exc: exc is None and _default_created(dist, c10d))
    new_ok = observe(target.new_group, started, lambda _t, group, exc: exc is None and _group_created(dist, group))
    if not init_ok:
        _wrap_init(dist, c10d)
    if not new_ok:
        _wrap_new_group(dist, target)


def _wrap_init(dist, c10d):
    original_init = dist.init_process_group

    def init_process_group(*args, **kwargs):
        result = original_init(*args, **kwargs)
        _default_created(dist, c10d)
        return result

    dist.init_process_group = init_process_group
    if c10d is not None and c10d is not dist:
        c10d.init_process_group = init_process_group


def _wrap_new_group(dist, target):
    original_new = target.new_group

    def new_group(*args, **kwargs):
        group = original_new(*args, **kwargs)
        _group_created(dist, group)
        return group

    target.new_group = new_group
    dist.new_group = new_group
    # DeviceMesh imported new_group by name before the shim ran.
    mesh = sys.modules.get("torch.distributed.device_mesh")
    if mesh is not None and getattr(mesh, "new_group", None) is original_new:
        mesh.new_group = new_group


_WATCH_STEPS = int(os.environ.get("PREWARM_DOCTOR_KERNEL_STEPS", "3") or "3")
_originals = {}
_observed = []
_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "reduce_scatter", "broadcast", "reduce", "all_to_all", "all_to_all_single", "barrier", "all_gather_object", "broadcast_object_list")


@timed
def _first_use(name, group):
    """The training's first collective on a group (a prescription's own
    warmup collective is not the training's use, and is not recorded: under
    sys.monitoring nothing run inside the creation callback is seen anyway)."""
    if _state.get("warming"):
        return
    if len(_used) < len(_groups):
        try:
            index = _group_index(group)
            if index is not None and index not in _used:
                _used.add(index)
                emit("pg_first_use", index=index, op=name)
        except Exception:
            pass


def _unwrap_collectives(dist):
    """Stops watching the collectives (after the first steps: nothing of
    ours stays on the training loop's path or in compiled regions)."""
    for function in _observed:
        unobserve(function)
    _observed.clear()
    for name, original in _originals.items():
        if getattr(dist, name, None) is not original:
            setattr(dist, name, original)
    _originals.clear()


def _watch_collectives(dist):
    for name in _COLLECTIVES:
        original = getattr(dist, name, None)
        if original is None:
            continue
        if observe(original, lambda frame, name=name: _first_use(name, frame.f_locals.get("group"))):
            _observed.append(original)
            continue

        def make(original, name):
            def collective(*args, **kwargs):
                _first_use(name, kwargs.get("group"))
                return original(*args, **kwargs)

            return collective

        _originals[name] = original
        setattr(dist, name, make(original, name))


# ------------------------------------------------------------ fingerprint


def _optimizer_params():
    """The parameters of every optimizer created so far, in creation order
    (each once)."""
    seen, out = set(), []
    for ref in _state.get("optimizers") or []:
        opt = ref()
        for group in getattr(opt, "param_groups", []) if opt is not None else []:
            for p in group.get("params", []):
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def fingerprint(params):
    """World size and the optimizers' parameter layout: what a prescription
    was made for (DTensors report their global shape, so FSDP2 shards do not
    change it). ``dtypes``: the floating dtypes among them, which the cuBLAS
    warmup runs (autocast is not observed)."""
    import hashlib

    h = hashlib.sha256()
    numel = 0
    dtypes = []
    for p in params:
        shape = tuple(int(s) for s in getattr(p, "shape", ()))
        n = 1
        for s in shape:
            n *= s
        numel += n
        dtype = str(getattr(p, "dtype", "?"))
        h.update(f"{shape}{dtype};".encode())
        floating = getattr(p, "is_floating_point", None)
        if callable(floating) and floating() and dtype not in dtypes:
            dtypes.append(dtype)
    world = 1
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            world = dist.get_world_size()
    except Exception:
        world = int(os.environ.get("WORLD_SIZE", "1") or "1")
    return {"world": world, "params": len(params), "numel": numel, "shapes": h.hexdigest()[:16], "dtypes": dtypes}


# ------------------------------------------------------------ injection


def _fail(block, what, error):
    _state["failures"] += 1
    try:
        directory = os.environ.get("PREWARM_DOCTOR_DIR")
        if directory:
            name = PRESCRIPTION_ERRORS_PREFIX + process_stem() + PRESCRIPTION_ERRORS_SUFFIX
            with open(os.path.join(directory, name), "a") as f:
                f.write(f"{block}\t{what}\t{type(error).__name__}: {error}\n")
    except Exception:
        pass


def _load_prescription():
    path = os.environ.get("PREWARM_DOCTOR_PRESCRIPTION")
    if not path:
        return None
    try:
        import importlib.util

        spec = importlib.util.spec_from_file_location("prewarm_doctor_prescription", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except Exception as e:
        _fail("load", path, e)
        emit("prescription", file=path, ran=[], failed=_state["failures"], skipped="the prescription could not be loaded")
        return None


def _forced():
    return os.environ.get("PREWARM_DOCTOR_PRESCRIPTION_FORCE", "") in ("1", "true", "yes")


def _format(p):
    try:
        return int(getattr(p, "FORMAT", 1))
    except Exception:
        return 1


def _warm_group(index, group, ranks, device=None):
    """Warms the index-th group through the prescription. A prescription of
    format 2 or later warms before step 1, on the rank's own device
    (`_at_step1`): here the group is only kept until then (only the groups it
    names). Format 1 warmed right after creation, on the current device."""
    p = _state["prescription"]
    if p is None or group is None:
        return
    if device is None and _format(p) >= 2:
        if any(entry.get("index") == index for entry in getattr(p, "GROUPS", ())):
            _state.setdefault("pending_groups", []).append((index, group, ranks))
        return
    _state["warming"] = True
    try:
        with untimed():  # the prescription's warmup: the prewarm's time, not the shim's
            if device is None:
                failure = p.warm_group(_state["torch"], index, group, ranks, _forced())
            else:
                failure = p.warm_group(_state["torch"], index, group, ranks, _forced(), device)
        if failure:
            _fail("nccl", f"group {index}", RuntimeError(failure))
        return not failure
    except Exception as e:
        _fail("nccl", f"group {index}", e)
        return False
    finally:
        _state["warming"] = False


def _own_device(torch, module):
    """The rank's own device: that of the module's first CUDA parameter (the
    model is on it by the time it runs), else the current device."""
    try:
        for param in module.parameters():
            device = getattr(param, "device", None)
            if getattr(device, "type", None) == "cuda":
                return device
    except Exception:
        pass
    return torch.device("cuda", torch.cuda.current_device())


def _owns_optimizer_params(module):
    count = len(_state.get("optimizers") or [])
    if _state.get("ids_for") != count:
        _state["ids"] = set(id(p) for p in _optimizer_params())
        _state["ids_for"] = count
    ids = _state["ids"]
    if not ids:
        return False
    try:
        return any(id(p) in ids for p in module.parameters())
    except Exception:
        return False


@timed
def _before_first_forward(module, args):
    """Global forward pre-hook: fires once, at the first grad-enabled
    forward of a module holding an optimizer's parameters."""
    torch = _state["torch"]
    if _state["fired"] or _state.get("busy") or not torch.is_grad_enabled():
        return
    if not _owns_optimizer_params(module):
        return
    _state["fired"] = True
    handle = _state.pop("handle", None)
    if handle is not None:
        try:
            handle.remove()
        except Exception:
            pass
    _state["busy"] = True
    try:
        _at_step1(torch, module)
    except Exception:
        pass
    finally:
        _state["busy"] = False


def before_forward(module):
    """For a step tracker that observes forwards another way than torch's
    global hooks (e.g. sys.monitoring): call it before taking a forward's
    timestamp, so the prescription (once, when its moment has come) is
    setup, not step 1. Never raises."""
    try:
        _before_first_forward(module, ())
    except Exception:
        pass


def _at_step1(torch, module):
    print_fp = fingerprint(_optimizer_params())
    emit("fingerprint", **print_fp)
    p = _state["prescription"]
    if p is None:
        return
    t0 = now()
    ran, skipped = [], None
    try:
        skipped = p.mismatch(print_fp) if not _forced() else None
        pending = _state.pop("pending_groups", [])
        if skipped is None:
            device = _own_device(torch, module) if _format(p) >= 2 else None
            for index, group, ranks in pending:
                if _warm_group(index, group, ranks, device):
                    ran.append(f"nccl:group {index}")
            with untimed():  # the prescription's warmups: the prewarm's time, not the shim's
                if device is None:
                    results = list(p.warm_at_step1(torch))
                else:
                    results = list(p.warm_at_step1(torch, device))
            for block, failure in results:
                if failure is None:
                    ran.append(block)
                else:
                    _fail(block.split(":")[0], block, RuntimeError(failure))
    except Exception as e:
        _fail("prescription", "warm_at_step1", e)
    emit("prescription", t0=t0, t1=now(), file=os.environ.get("PREWARM_DOCTOR_PRESCRIPTION"), ran=ran, failed=_state["failures"], skipped=skipped)


def steps_ended(steps):
    """Called by the step tracker at the end of each of the first steps (of
    the optimizer that marks them): the collectives are watched for the first
    PREWARM_DOCTOR_KERNEL_STEPS steps (default 3); a group first used later
    is not recorded. No optimizer hook of its own: torch would call it at
    every step for the rest of the training. Never raises."""
    try:
        dist = _state.get("dist")
        if steps >= _WATCH_STEPS and dist is not None:
            _state["dist"] = None
            _unwrap_collectives(dist)
    except Exception:
        pass


def install(torch):
    """Called once torch is imported: wraps process-group creation and the
    collectives (creation order, first use), loads a prescription if one was
    given, and registers the one-shot step-1 pre-hook (registered before the
    step tracker's hooks, so the prescription's work is not counted as step 1)."""
    import weakref

    _state["torch"] = torch
    _state["prescription"] = _load_prescription()
    try:
        import torch.distributed as dist

        c10d = sys.modules.get("torch.distributed.distributed_c10d")
        _watch_creation(dist, c10d)
        _watch_collectives(dist)
        _state["dist"] = dist  # until steps_ended() unwraps the collectives
    except Exception:
        pass
    try:
        import torch.nn.modules.module as module_mod
        import torch.optim.optimizer as optim_mod

        optimizers = _state.setdefault("optimizers", [])
        original_init = optim_mod.Optimizer.__init__

        def created(optimizer):
            if not _state["fired"]:
                try:
                    optimizers.append(weakref.ref(optimizer))
                except Exception:
                    pass

        def init_ended(optimizer, _result, exc):
            if exc is None:
                created(optimizer)

        if not observe(original_init, lambda frame: frame.f_locals.get("self"), init_ended):

            def __init__(self, *a, **k):
                original_init(self, *a, **k)
                created(self)

            optim_mod.Optimizer.__init__ = __init__
        handle = module_mod.register_module_forward_pre_hook(_before_first_forward)
        _state["handle"] = handle
        hooks = getattr(module_mod, "_global_forward_pre_hooks", None)
        if hooks is not None and hasattr(hooks, "move_to_end") and hasattr(handle, "id"):
            hooks.move_to_end(handle.id, last=False)
    except Exception:
        pass
