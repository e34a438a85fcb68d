# prewarm-doctor shim entry point. Python imports this at start-up because
# prewarm-doctor puts its folder first on PYTHONPATH. It installs the step and
# Triton hooks lazily (only once torch / triton are imported by the program),
# then runs the user's own sitecustomize, if any. It never raises.
try:
    import prewarm_doctor_shim as _pwd_shim

    _pwd_shim.install()
except Exception:  # the training run is sacred: never fail start-up
    pass


def _pwd_chain_user_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # Whatever the user's sitecustomize defines stays reachable as usual.
    globals().update({k: v for k, v in vars(module).items() if not k.startswith("__")})


_pwd_chain_user_sitecustomize()
