"""Stand-in for torch.distributed: init_process_group, and a group registry
shaped like c10d's (`distributed_c10d._world.pg_names` / `pg_group_ranks`)
whose groups expose `group_desc` and `_get_backend(device)._comm_ptr()` (0
until the test says a communicator exists)."""

from . import distributed_c10d

_initialized = [False]


def init_process_group(*a, **k):
    if k.get("fail"):
        raise RuntimeError("NCCL timed out")
    _initialized[0] = True
    return None


def is_available():
    return True


def is_initialized():
    return _initialized[0]


def destroy_process_group(*a, **k):
    distributed_c10d._world.pg_names.clear()
    distributed_c10d._world.pg_group_ranks.clear()
    _initialized[0] = False


def new_group(ranks, group_desc=None):
    """Registers a group; its communicator pointer is 0 until `_set_comm`."""
    pg = distributed_c10d.ProcessGroup(group_desc)
    w = distributed_c10d._world
    w.pg_names[pg] = str(len(w.pg_names))
    w.pg_group_ranks[pg] = {r: i for i, r in enumerate(ranks)}
    return pg
