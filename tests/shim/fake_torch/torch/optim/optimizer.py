_pre, _post = [], []


def register_optimizer_step_pre_hook(hook):
    _pre.append(hook)


def register_optimizer_step_post_hook(hook):
    _post.append(hook)


class Optimizer:
    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]

    def zero_grad(self, set_to_none=True):
        if set_to_none == "raise":
            raise ValueError("zero_grad was asked to fail")

    def step(self):
        for h in _pre:
            h(self, (), {})
        for h in _post:
            h(self, (), {})
