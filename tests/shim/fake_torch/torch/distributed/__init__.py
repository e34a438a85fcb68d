"""Stand-in for torch.distributed, for the shim's group observers:
init_process_group, a group registry shaped like c10d's
(`distributed_c10d._world.pg_names` / `pg_group_ranks`) whose groups expose
`group_desc`, `group_name`, their ranks and `_get_backend(device)._comm_ptr()`
(0 until the test says a communicator exists), and collectives that log the
group they ran on (``calls``) for the prescribe hooks."""

from . import distributed_c10d
from .distributed_c10d import ProcessGroup

calls = []
_world = [None]
_initialized = [False]
_made = [0]


class GroupMember:
    NON_GROUP_MEMBER = object()


def init_process_group(*a, **k):
    if k.get("fail"):
        raise RuntimeError("NCCL timed out")
    _initialized[0] = True
    _world[0] = ProcessGroup(None, [0], "0")
    return None


def is_available():
    return True


def is_initialized():
    return _initialized[0]


def get_world_size(group=None):
    return 1


def destroy_process_group(*a, **k):
    if k.get("fail"):
        raise RuntimeError("destroy failed")
    distributed_c10d._world.pg_names.clear()
    distributed_c10d._world.pg_group_ranks.clear()
    _initialized[0] = False
    _world[0] = None


def new_group(ranks=None, group_desc=None, **k):
    """Registers a group; its communicator pointer is 0 until `_set_comm`."""
    _made[0] += 1
    ranks = list(ranks or [0])
    pg = ProcessGroup(group_desc, ranks, str(99 + _made[0]))
    w = distributed_c10d._world
    w.pg_names[pg] = str(len(w.pg_names))
    w.pg_group_ranks[pg] = {r: i for i, r in enumerate(ranks)}
    return pg


def get_process_group_ranks(group):
    return group.ranks


def all_reduce(tensor, op=None, group=None, async_op=False):
    calls.append(("all_reduce", None if group is None else group.group_name))
