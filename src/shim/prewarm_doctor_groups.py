"""Names NCCL communicators after torch's process groups (prewarm-doctor shim).

NCCL's init log says a communicator's pointer, rank and size, never which
process group or mesh dimension it belongs to. torch knows: each group has a
name, a description (``mesh_<dim>`` for a DeviceMesh dimension, or what
``new_group(group_desc=...)`` was given) and its global ranks, and
``ProcessGroupNCCL._comm_ptr()`` (torch >= 2.8) returns the pointer of the
group's communicator on the current device: 0 while it does not exist, and a
plain map lookup that never creates one. So at the end of each of the first
steps, and just before ``destroy_process_group``, this walks torch's group
registry and writes one ``comm_group`` line per group the first time it is
seen and again when its communicator appears:

  {"ev": "comm_group", "t": ..., "step": N|null, "name": "2", "desc": "clip_expert",
   "ranks": [0, 1], "comm": "0x4a654200"|null}

Nothing here issues a collective, creates a communicator or touches CUDA
memory; every error is swallowed.
"""

_seen = {}


def _groups(dist):
    """(group, name, desc, global ranks) for every group torch knows of."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    names = getattr(world, "pg_names", {}) or {}
    ranks_of = getattr(world, "pg_group_ranks", {}) or {}
    for pg, name in list(names.items()):
        try:
            ranks = sorted(int(r) for r in ranks_of.get(pg, {}).keys())
        except Exception:
            ranks = []
        desc = getattr(pg, "group_desc", None)
        yield pg, str(name), (str(desc) if desc else None), ranks


def _comm_of(torch, pg):
    """The group's NCCL communicator pointer as NCCL logs it (0x...), or None."""
    try:
        backend = pg._get_backend(torch.device("cuda"))
        ptr = int(backend._comm_ptr())
    except Exception:
        return None
    return hex(ptr) if ptr else None


def snapshot(emit, step=None):
    """Writes the groups and communicators that are new since the last call."""
    try:
        import torch
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            return
        for pg, name, desc, ranks in _groups(dist):
            comm = _comm_of(torch, pg)
            key = (name, comm)
            if key in _seen or (comm is None and any(k[0] == name for k in _seen)):
                continue
            _seen[key] = True
            emit("comm_group", step=step, name=name, desc=desc, ranks=ranks, comm=comm)
    except Exception:
        pass


def install(dist, emit):
    """Snapshots once more just before torch forgets its groups: observed
    through sys.monitoring where it can be (no frame of ours in the
    program's stack), else wrapped."""
    try:
        from prewarm_doctor_events import timed
        from prewarm_doctor_monitor import observe

        original = dist.destroy_process_group
        if observe(original, lambda frame: snapshot(emit)):
            return

        def destroy_process_group(*args, **kwargs):
            timed(snapshot)(emit)
            return original(*args, **kwargs)

        dist.destroy_process_group = destroy_process_group
    except Exception:
        pass
