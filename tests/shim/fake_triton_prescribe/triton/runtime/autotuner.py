class Config:
    def __init__(self, kwargs, num_warps=4):
        self.kwargs = kwargs
        self.num_warps = num_warps

    def all_kwargs(self):
        return dict(self.kwargs, num_warps=self.num_warps)

    def __str__(self):
        return f"{self.kwargs}, num_warps: {self.num_warps}"


class Autotuner:
    """Triton's key rule: the key arguments' values, then every tensor
    argument's dtype; each new key benchmarks every config, then launches."""

    def __init__(self, fn, arg_names, configs, key):
        self.fn = self.base_fn = fn
        self.arg_names = arg_names
        self.configs = configs
        self.keys = key
        self.cache = {}
        self.launches = []

    def _bench(self, *args, config, **meta):
        return [float(sum(config.kwargs.values()))]

    def prune_configs(self, kwargs):
        return self.configs

    def run(self, *args, **kwargs):
        # As Triton's: the grid and warmup flag stay in kwargs (the launch
        # drops them), prune_configs only for a key not tuned yet.
        grid = kwargs["grid"]
        all_args = dict(zip(self.arg_names, args))
        all_args.update(k for k in kwargs.items() if k[0] not in ("grid", "warmup"))
        named = {k: v for k, v in all_args.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        for v in named.values():
            if hasattr(v, "dtype"):
                key.append(str(v.dtype))
        key = tuple(key)
        if key not in self.cache:
            pruned = self.prune_configs(kwargs)
            timings = {c: self._bench(*args, config=c, **kwargs) for c in pruned}
            self.cache[key] = min(timings, key=lambda c: timings[c][0])
        config = self.cache[key]
        meta = dict(all_args, **config.all_kwargs())
        self.launches.append(grid(meta) if callable(grid) else tuple(grid))
        launch = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        return self.fn(*args, **launch, **config.kwargs)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)
