_pre, _post = {}, {}
_next = [0]


class _Handle:
    def __init__(self, table, key):
        self.table, self.key = table, key

    def remove(self):
        self.table.pop(self.key, None)


def _register(table, hook):
    _next[0] += 1
    table[_next[0]] = hook
    return _Handle(table, _next[0])


def register_module_forward_pre_hook(hook):
    return _register(_pre, hook)


def register_module_forward_hook(hook, always_call=False):
    return _register(_post, hook)


class Parameter:
    pass


class Module:
    def __init__(self):
        self._params = [Parameter()]
        self._children = []

    def parameters(self):
        out = list(self._params)
        for c in self._children:
            out += c.parameters()
        return out

    def forward(self, x):
        for c in self._children:
            x = c(x)
        return x

    def __call__(self, x):
        for h in list(_pre.values()):
            h(self, (x,))
        try:
            return self.forward(x)
        finally:
            for h in list(_post.values()):
                h(self, (x,), None)
