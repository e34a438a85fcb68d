"""A stand-in for the few torch APIs the prewarm-doctor shim hooks, so the
shim's step rule and crash handling are tested on machines without torch.
It mimics torch's global hook semantics; it is not torch."""

__version__ = "0.0-fake"


class _Version:
    cuda = None


version = _Version()
_grad = [True]


def is_grad_enabled():
    return _grad[0]


class no_grad:
    def __enter__(self):
        _grad.append(False)

    def __exit__(self, *a):
        _grad.pop()


def device(kind, index=None):
    return (kind, index)


from . import cuda, nn, optim  # noqa: E402,F401
