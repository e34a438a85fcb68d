"""Stand-in for c10d's group registry (see __init__.py)."""


class _Backend:
    def __init__(self):
        self.ptr = 0

    def _comm_ptr(self):
        return self.ptr


class ProcessGroup:
    def __init__(self, desc, ranks=None, name=None):
        self.group_desc = desc or "undefined"
        self.ranks, self.group_name = ranks or [0], name
        self.backend = _Backend()

    def _get_backend(self, device):
        return self.backend

    def _set_comm(self, ptr):
        self.backend.ptr = ptr


class _World:
    def __init__(self):
        self.pg_names = {}
        self.pg_group_ranks = {}


_world = _World()
