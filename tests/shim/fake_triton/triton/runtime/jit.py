class OutOfResources(Exception):
    pass


class JITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.compiled = {}

    def _do_compile(self, key, fail=False):
        if fail:
            raise OutOfResources(f"out of resource: shared memory for {key}")
        self.compiled[key] = f"binary-{key}"
        return self.compiled[key]

    def run(self, *args, config=None, **kwargs):
        key = repr(config)
        if key not in self.compiled:
            self._do_compile(key, fail=kwargs.get("fail_compile", False))
        return self.fn(*args, config=config, **kwargs)
