"""Where a CUDA context's device memory comes from, first use by first use
(issue 35): the device's free memory (cuMemGetInfo) read before and after
each first use, in a fresh process, with nothing else on the GPU.

  driver FATBIN   only the driver API (ctypes), no PyTorch: the context, an
                  allocation, a module load, the first launch of a kernel,
                  another kernel's first launch, a kernel with local memory, a
                  kernel that uses printf, one that uses device malloc, the
                  first stream-ordered allocation (the default pool)
  cudart          the CUDA runtime alone (PyTorch's libcudart): the context,
                  its first stream-ordered allocation, a plain allocation
  torch           PyTorch as a training uses it: the context, the pool's first
                  segment, the first kernel, another kernel, the first cuBLAS
                  matmul forward and backward, a Triton kernel's first launch,
                  the first NCCL communicator and collective

Run plain and under `prewarm-doctor run` (with and without kernel records),
with CUDA_MODULE_LOADING=LAZY/EAGER and each PYTORCH_CUDA_ALLOC_CONF: what
differs between those runs at one stage is what the probe, the loading mode
or the allocator adds there. The context's limits (cuCtxGetLimit: stack size,
printf FIFO, malloc heap) are read after the context and at the end.

Prints one `FIRSTUSE {json}` line per stage: used = total - free (the whole
device), delta = the change since the previous stage.
"""

import ctypes as c
import json
import os
import sys

MIB = 1 << 20
LIMITS = {"stack_size": 0, "printf_fifo_size": 1, "malloc_heap_size": 2}

cuda = c.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [c.c_void_p] + [c.c_uint] * 7 + [c.c_void_p, c.c_void_p, c.c_void_p]
cuda.cuMemAlloc_v2.argtypes = [c.c_void_p, c.c_size_t]
cuda.cuMemAllocAsync.argtypes = [c.c_void_p, c.c_size_t, c.c_void_p]
cuda.cuMemPoolGetAttribute.argtypes = [c.c_void_p, c.c_int, c.c_void_p]
cuda.cuMemPoolSetAttribute.argtypes = [c.c_void_p, c.c_int, c.c_void_p]
cuda.cuModuleLoadData.argtypes = [c.c_void_p, c.c_char_p]
cuda.cuModuleGetFunction.argtypes = [c.c_void_p, c.c_void_p, c.c_char_p]


def ok(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


def nvml_used():
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
    except Exception:
        return None


def mem_info():
    free, total = c.c_size_t(), c.c_size_t()
    ok(cuda.cuMemGetInfo_v2(c.byref(free), c.byref(total)), "cuMemGetInfo")
    return free.value, total.value


def limits():
    out = {}
    for name, code in LIMITS.items():
        value = c.c_size_t()
        out[name] = value.value if cuda.cuCtxGetLimit(c.byref(value), code) == 0 else None
    return out


class Stages:
    def __init__(self, mode):
        self.mode = mode
        self.last = None
        self.env = {
            k: os.environ.get(k)
            for k in ("CUDA_MODULE_LOADING", "PYTORCH_CUDA_ALLOC_CONF", "PREWARM_DOCTOR_KERNEL_RECORDS", "CUDA_INJECTION64_PATH")
        }
        self.env["CUDA_INJECTION64_PATH"] = "set" if self.env["CUDA_INJECTION64_PATH"] else None

    def emit(self, stage, used=None, source="cuMemGetInfo", **extra):
        if used is None and source == "cuMemGetInfo":
            free, total = mem_info()
            used = total - free
        line = {"mode": self.mode, "stage": stage, "source": source, "used": used}
        if used is None:
            print("FIRSTUSE " + json.dumps(line), flush=True)
            return
        line["used_mib"] = round(used / MIB, 1)
        if self.last is not None:
            line["delta_mib"] = round((used - self.last) / MIB, 1)
        self.last = used
        line.update(extra)
        line["env"] = self.env
        print("FIRSTUSE " + json.dumps(line), flush=True)


def launch(function, grid, block, *args):
    params = (c.c_void_p * len(args))(*[c.cast(c.pointer(a), c.c_void_p) for a in args])
    ok(cuda.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, None, params, None), "cuLaunchKernel")
    ok(cuda.cuCtxSynchronize(), "cuCtxSynchronize")


def driver(fatbin_path):
    s = Stages("driver")
    before = nvml_used()
    ok(cuda.cuInit(0), "cuInit")
    dev = c.c_int()
    ok(cuda.cuDeviceGet(c.byref(dev), 0), "cuDeviceGet")
    s.emit("before_context", used=before, source="nvml")
    ctx = c.c_void_p()
    ok(cuda.cuDevicePrimaryCtxRetain(c.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    s.emit("context", nvml=nvml_used(), limits=limits())
    pool = c.c_void_p()
    ok(cuda.cuDeviceGetDefaultMemPool(c.byref(pool), dev), "cuDeviceGetDefaultMemPool")
    if os.environ.get("FIRSTUSE_POOL_KEEP") == "1":
        # As PyTorch's cudaMallocAsync backend does: the pool keeps all it
        # reserved (release threshold UINT64_MAX).
        keep = c.c_uint64(2**64 - 1)
        ok(cuda.cuMemPoolSetAttribute(pool, 4, c.byref(keep)), "cuMemPoolSetAttribute")
    if os.environ.get("FIRSTUSE_ASYNC_FIRST") == "1":
        # The first stream-ordered allocation before any module is loaded.
        async_allocs(s, pool, "first_")
    ptr = c.c_uint64()
    ok(cuda.cuMemAlloc_v2(c.byref(ptr), 2 * MIB), "cuMemAlloc")
    s.emit("alloc_2MiB")
    image = open(fatbin_path, "rb").read()
    module = c.c_void_p()
    ok(cuda.cuModuleLoadData(c.byref(module), image), "cuModuleLoadData")
    s.emit("module_loaded")
    functions = {}
    for name in ("trivial", "trivial_again", "local_heavy", "uses_printf", "uses_malloc"):
        f = c.c_void_p()
        ok(cuda.cuModuleGetFunction(c.byref(f), module, name.encode()), f"cuModuleGetFunction {name}")
        functions[name] = f
    s.emit("functions_got")
    out = c.c_uint64(ptr.value)
    launch(functions["trivial"], 1, 1, out)
    s.emit("first_launch", nvml=nvml_used(), limits=limits())
    launch(functions["trivial"], 1, 1, out)
    s.emit("same_kernel_again")
    launch(functions["trivial_again"], 1, 1, out)
    s.emit("other_kernel_first_launch")
    launch(functions["local_heavy"], 132 * 16, 128, out, c.c_int(3))
    s.emit("local_memory_kernel", limits=limits())
    launch(functions["uses_printf"], 1, 1, c.c_int(0))
    s.emit("printf_kernel", limits=limits())
    launch(functions["uses_malloc"], 1, 1, c.c_int(0))
    s.emit("malloc_kernel", limits=limits())
    async_allocs(s, pool, "")
    s.emit("end", nvml=nvml_used(), limits=limits())


def async_allocs(s, pool, prefix):
    """Two stream-ordered allocations on the default pool, each read with
    what the pool says it reserved."""
    for size_mib in (2, 64):
        aptr = c.c_uint64()
        ok(cuda.cuMemAllocAsync(c.byref(aptr), size_mib * MIB, None), "cuMemAllocAsync")
        ok(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        reserved = c.c_uint64()
        ok(cuda.cuMemPoolGetAttribute(pool, 5, c.byref(reserved)), "cuMemPoolGetAttribute")
        s.emit(f"{prefix}async_alloc_{size_mib}MiB", pool_reserved_mib=round(reserved.value / MIB, 1))


def torch_stages():
    s = Stages("torch")
    before = nvml_used()
    import torch

    s.emit("before_context", used=before, source="nvml")
    torch.cuda.set_device(0)
    free, total = torch.cuda.mem_get_info()
    s.emit("context", used=total - free, nvml=nvml_used(), limits=limits())

    def reading(stage, **extra):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        s.emit(stage, used=total - free, reserved_mib=round(torch.cuda.memory_reserved() / MIB, 1), **extra)

    x = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    reading("pool_first_segment_64MiB")
    x.zero_()
    reading("first_kernel")
    x.add_(1)
    reading("other_kernel_first_launch")
    a = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    reading("ones_bf16")
    y = a @ a
    reading("cublas_forward")
    y.sum().backward()
    reading("cublas_backward")
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def double(ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(ptr + i, tl.load(ptr + i, mask=i < n) * 2, mask=i < n)

        z = torch.ones(4096, device="cuda")
        reading("before_triton")
        double[(4,)](z, 4096, BLOCK=1024)
        reading("triton_first_launch")
    except Exception as e:
        s.emit("triton_failed", error=f"{type(e).__name__}: {e}")
    try:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29700 + os.getpid() % 200))
        dist.init_process_group("nccl", rank=0, world_size=1)
        reading("nccl_process_group")
        t = torch.ones(1, device="cuda")
        dist.all_reduce(t)
        reading("nccl_first_collective")
        dist.all_reduce(t)
        reading("nccl_second_collective")
        dist.destroy_process_group()
    except Exception as e:
        s.emit("nccl_failed", error=f"{type(e).__name__}: {e}")
    reading("end", limits=limits())


def cudart_stages():
    """The CUDA runtime (libcudart, as PyTorch loads it), no PyTorch: its
    first stream-ordered allocation right after the context comes up."""
    import glob
    import importlib.util

    s = Stages("cudart")
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec else []
    found = [p for r in roots for p in glob.glob(os.path.join(r, "cu*", "lib", "libcudart.so*"))]
    rt = c.CDLL(found[0] if found else "libcudart.so")
    rt.cudaMallocAsync.argtypes = [c.c_void_p, c.c_size_t, c.c_void_p]
    rt.cudaMalloc.argtypes = [c.c_void_p, c.c_size_t]
    before = nvml_used()
    s.emit("before_context", used=before, source="nvml")
    ok(rt.cudaFree(None), "cudaFree(0)")
    s.emit("context", nvml=nvml_used(), library=found[0] if found else None)
    for size_mib in (64, 64):
        p = c.c_void_p()
        ok(rt.cudaMallocAsync(c.byref(p), size_mib * MIB, None), "cudaMallocAsync")
        ok(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        s.emit(f"cudaMallocAsync_{size_mib}MiB")
    p = c.c_void_p()
    ok(rt.cudaMalloc(c.byref(p), 64 * MIB), "cudaMalloc")
    s.emit("cudaMalloc_64MiB")
    s.emit("end", nvml=nvml_used())


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "torch"
    if mode == "driver":
        driver(sys.argv[2])
    elif mode == "cudart":
        cudart_stages()
    else:
        torch_stages()
