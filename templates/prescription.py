# prewarm-doctor prescription: the warmup this run was missing, written by
# `prewarm-doctor prescribe`. Run it without editing the training script:
#   prewarm-doctor run --prescribe THIS_FILE -- CMD
#   prewarm-doctor run --variant baseline --variant prescribed:@THIS_FILE -- CMD
# Regenerate it rather than editing it. Recorded text appears only as escaped
# Python literals below.
#
{%- for line in header %}
#{% if !line.is_empty() %} {{ line }}{% endif %}
{%- endfor %}

FORMAT = 2
RUN = {{ run }}
ATTEMPT = {{ attempt }}
# What the run was (world size, the optimizers' parameters): the shim refuses
# to run this prescription on another unless PREWARM_DOCTOR_PRESCRIPTION_FORCE=1.
FINGERPRINT = {{ fingerprint }}
# cuBLAS/cuBLASLt: one tiny forward+backward per dtype (ranks: None = every process).
CUBLAS = {{ cublas }}
# NCCL: one tiny all-reduce on each group (by creation order; index 0 is the
# default group) once model, optimizer and groups exist, before step 1's first
# forward, on the rank's own device (that of the model's parameters), however
# the program ordered set_device and init_process_group. Groups the training
# never used after setup are not here, so no extra communicator is created.
GROUPS = {{ groups }}
# Triton: each autotune key replayed through the kernel's own autotuner on
# scratch tensors of the recorded layout, arguments in the recorded order and
# form (Triton's key appends the tensors' dtypes in call order), integer
# tensors of up to VALUES_MAX elements with their recorded values (offsets,
# cu_seqlens, chunk indices), larger ones as zeros (every index the first
# element: in bounds). After each key the autotuner's cache must hold exactly
# the recorded key ("step": where the key was first tuned).
TRITON = {{ triton }}
# Landed after setup, not warmed here: (block, what, why).
NOT_REPLAYED = {{ not_replayed }}
# Advice only, never applied automatically.
ADVICE = {{ advice }}

import os
import sys


def _rank():
    try:
        return int(os.environ.get("RANK", "0") or "0")
    except ValueError:
        return 0


def _mine(entry):
    ranks = entry.get("ranks")
    return ranks is None or _rank() in ranks


def mismatch(fingerprint):
    """None when this process is the model and world size the prescription was
    made for, else why not (the shim then runs none of it)."""
    if FINGERPRINT is None:
        return None
    for field in ("world", "params", "numel", "shapes"):
        if fingerprint.get(field) != FINGERPRINT.get(field):
            return "made for %s=%r, this run has %r" % (field, FINGERPRINT.get(field), fingerprint.get(field))
    return None


def _device(torch):
    return torch.device("cuda", torch.cuda.current_device())


def warm_group(torch, index, group, ranks, force, device=None):
    """Called by the shim before step 1 for each process group the program
    created (index: creation order); returns None, or why the group was not
    warmed. The collective runs on `device` (the rank's own) and must sum to
    the group's size: the communicator exists and works."""
    for entry in GROUPS:
        if entry["index"] != index:
            continue
        import torch.distributed as dist

        if not force:
            if FINGERPRINT is not None and dist.get_world_size() != FINGERPRINT["world"]:
                return "world size %d, the prescription was made for %d" % (dist.get_world_size(), FINGERPRINT["world"])
            if entry["members"] is not None and ranks is not None and list(ranks) != entry["members"]:
                return "group %d has ranks %r, the prescription was made for %r" % (index, list(ranks), entry["members"])
        if device is None:
            device = getattr(group, "bound_device_id", None) or _device(torch)
        t = torch.ones(1, device=device)
        dist.all_reduce(t, group=group)
        torch.cuda.synchronize(device)
        size = dist.get_world_size(group)
        if float(t.item()) != float(size):
            return "the warm-up all-reduce on group %d gave %r, not its size %d" % (index, float(t.item()), size)
        return None
    return None


def _warm_cublas(torch, device, entry):
    dtype = getattr(torch, entry["dtype"].rsplit(".", 1)[-1])
    with torch.enable_grad():
        a = torch.ones(64, 64, device=device, dtype=dtype, requires_grad=True)
        b = torch.ones(64, 64, device=device, dtype=dtype, requires_grad=True)
        # forward (NN) and both backward products (NT, TN).
        (a @ b).sum().backward()
        torch.nn.functional.linear(a, b).sum().backward()


VALUES_MAX = 4096


def _tensor(torch, device, spec):
    dtype = getattr(torch, spec["dtype"].rsplit(".", 1)[-1])
    shape, stride, offset = spec["shape"], spec["stride"], spec.get("offset", 0)
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride) if n > 0)
    if any(n == 0 for n in shape):
        extent = offset + 1
    where = device if spec.get("device", "cuda") == "cuda" else torch.device(spec["device"])
    base = torch.zeros(extent, dtype=dtype, device=where)
    if base.is_floating_point():
        try:
            base.normal_()
        except Exception:
            pass
    view = base.as_strided(shape, stride, offset)
    if spec.get("values") is not None:
        # The recorded values (small integer tensors: offsets, indices).
        view.copy_(torch.tensor(spec["values"], dtype=dtype).reshape(shape))
    return view


def _value(torch, device, spec):
    if "tensor" in spec:
        return _tensor(torch, device, spec["tensor"])
    if "float" in spec:
        return float(spec["float"])
    return spec["value"]


def _grid(grid):
    if "fixed" in grid:
        return tuple(grid["fixed"])
    table = grid["per_config"]

    def per_config(meta):
        for kwargs, launch in table:
            if all(meta.get(k) == v for k, v in kwargs.items()):
                return tuple(launch)
        raise LookupError("no recorded launch grid for these meta-parameters")

    return per_config


def _autotuner(entry):
    module = sys.modules.get(entry["module"])
    if module is None:
        # Not imported yet (a model that imports its kernels at first use):
        # the kernel's module is where the recording found it.
        try:
            import importlib

            module = importlib.import_module(entry["module"])
        except Exception as e:
            raise LookupError("module %r cannot be imported here: %s" % (entry["module"], e))
    obj = module
    for part in entry["qualname"].split("."):
        obj = getattr(obj, part)
    for _ in range(8):
        if all(hasattr(obj, a) for a in ("cache", "configs", "arg_names", "run")):
            return obj
        obj = getattr(obj, "fn", None)
    raise LookupError("%s.%s is not an autotuned kernel" % (entry["module"], entry["qualname"]))


class KeyMismatch(LookupError):
    """The replay tuned another key than the training did."""


def _replay(torch, device, entry):
    tuner = _autotuner(entry)
    args = [_value(torch, device, s) for s in entry["args"]]
    # In the recorded order: a dict keeps it, and so does **kwargs.
    kwargs = {k: _value(torch, device, s) for k, s in entry["kwargs"]}
    before = set(repr(k) for k in tuner.cache)
    tuner.run(*args, grid=_grid(entry["grid"]), warmup=False, **kwargs)
    keys = [repr(k) for k in tuner.cache]
    if entry["key"] not in keys:
        tuned = [k for k in keys if k not in before] or ["none"]
        raise KeyMismatch("the replay tuned key %s where the training tuned %s" % (", ".join(tuned), entry["key"]))


def _guard(fn, *args):
    try:
        fn(*args)
        return None
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)


def warm_at_step1(torch, device=None):
    """Called by the shim once model, optimizer and groups exist, before step
    1's first forward: the cuBLAS and Triton blocks of this rank on `device`
    (the rank's own: that of the model's parameters), with the CPU and CUDA
    random number generators restored afterwards. Returns (block, None or why
    it failed) per item."""
    if device is None:
        device = _device(torch)
    cpu_rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(device)
    out = []
    try:
        for entry in CUBLAS:
            if _mine(entry):
                out.append(("cublas:" + entry["dtype"], _guard(_warm_cublas, torch, device, entry)))
        for entry in TRITON:
            if _mine(entry):
                out.append(("triton:%s:%s" % (entry["kernel"], entry["key"]), _guard(_replay, torch, device, entry)))
        torch.cuda.synchronize(device)
    finally:
        torch.set_rng_state(cpu_rng)
        torch.cuda.set_rng_state(cuda_rng, device)
    return out
