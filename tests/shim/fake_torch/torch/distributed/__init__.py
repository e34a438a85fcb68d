"""Process groups as the prescribe hooks see them: creation, member ranks and
collectives that log the group they ran on (``calls``)."""

calls = []
_world = [None]


class ProcessGroup:
    def __init__(self, ranks, name):
        self.ranks, self.group_name = ranks, name


class GroupMember:
    NON_GROUP_MEMBER = object()


def init_process_group(*a, **k):
    _world[0] = ProcessGroup([0], "0")
    return None


def is_available():
    return True


def is_initialized():
    return _world[0] is not None


def get_world_size(group=None):
    return 1


_made = [0]


def new_group(ranks=None, **k):
    _made[0] += 1
    return ProcessGroup(list(ranks or [0]), str(99 + _made[0]))


def get_process_group_ranks(group):
    return group.ranks


def all_reduce(tensor, op=None, group=None, async_op=False):
    calls.append(("all_reduce", None if group is None else group.group_name))
