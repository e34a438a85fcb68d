from collections import OrderedDict

# Like torch: ordered dicts of hooks, iterated live while the hooks run (a
# hook that removes itself mid-iteration raises "OrderedDict mutated during
# iteration" in the training's optimizer.step(), as it does in torch).
_pre, _post = OrderedDict(), OrderedDict()


class _Handle:
    def __init__(self, hooks, key):
        self.hooks, self.key = hooks, key

    def remove(self):
        self.hooks.pop(self.key, None)


def register_optimizer_step_pre_hook(hook):
    key = object()
    _pre[key] = hook
    return _Handle(_pre, key)


def register_optimizer_step_post_hook(hook):
    key = object()
    _post[key] = hook
    return _Handle(_post, key)


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]

    def zero_grad(self, set_to_none=True):
        if set_to_none == "raise":
            raise ValueError("zero_grad was asked to fail")

    def step(self):
        for h in _pre.values():
            h(self, (), {})
        for h in _post.values():
            h(self, (), {})
