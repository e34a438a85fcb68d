"""What one unit of step-1 work costs, in one process, repeated until the
median is steady: a kernel launch, the first launch of a PyTorch kernel (lazy
function loading), the first launch of a new Triton kernel (its module loaded
from Triton's cache), a driver allocation with its free, the first cuBLAS
matmul (handle, workspace, module loads: one per process), the process's
first NCCL communicator (NCCL loads its kernels: one per process) and each
further communicator (a one-rank group, created and used once).

benches/gpu_overhead.sh's step-1 ratio cannot resolve a few percent: a step 1
with a Triton autotune, the first cuBLAS backward and an NCCL communicator
varies by about 10% from run to run on its own. These units vary by far
less, so `benches/gpu_overhead.sh units` runs this script plain and under
`prewarm-doctor run` and prints what the doctor adds to each unit; times the
number of each unit in a step 1 (the doctor's report counts them) that bounds
the doctor's step-1 cost from below without the step's noise.

There is no optimizer here, so the doctor never sees a step end: kernel
activity records stay on throughout, as they are in a real step 1.

Prints one `UNITS {json}` line (microseconds, medians over repetitions).
Run it once untimed first so that Triton's cache holds its kernels.
"""

import json
import statistics
import time

import torch

LAUNCHES = 20000
LAUNCH_REPEATS = 7
ALLOC_REPEATS = 400
ALLOC_BYTES = 64 << 20
NCCL_COMMS = 9


def sync_time(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def launch_us():
    """One small elementwise kernel launch (host side: the step is launch-bound)."""
    x = torch.zeros(1024, device="cuda")

    def burst():
        for _ in range(LAUNCHES):
            x.add_(1.0)

    burst()
    return statistics.median(1e6 * sync_time(burst) / LAUNCHES for _ in range(LAUNCH_REPEATS))


def torch_first_launch_us():
    """The first launch of a PyTorch kernel not launched before in this process
    (CUDA loads its function lazily), less the same call's second launch."""
    ops = [torch.sin, torch.cos, torch.tan, torch.exp, torch.log1p, torch.sqrt, torch.rsqrt,
           torch.sigmoid, torch.tanh, torch.erf, torch.erfinv, torch.lgamma, torch.digamma,
           torch.asin, torch.acos, torch.atan, torch.sinh, torch.cosh, torch.expm1, torch.log2,
           torch.log10, torch.reciprocal, torch.trunc, torch.frac, torch.sign, torch.ceil,
           torch.floor, torch.round, torch.abs, torch.neg]
    extra = []
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        x = torch.rand(4096, device="cuda", dtype=dtype) * 0.5 + 0.25
        for op in ops:
            try:
                first = sync_time(lambda: op(x))
                second = sync_time(lambda: op(x))
            except RuntimeError:
                continue  # not implemented for this dtype
            extra.append(1e6 * (first - second))
    return statistics.median(extra), len(extra)


def triton_first_launch_us():
    """The first launch of a Triton kernel new to this process: the compiled
    kernel comes from Triton's cache, its module is loaded and launched."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None, 0

    @triton.jit
    def salted(x_ptr, n, SALT: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(x_ptr + offs, x * 0.5 + SALT, mask=mask)

    x = torch.zeros(4096, device="cuda")
    extra = []
    for salt in range(40):
        call = lambda: salted[(4,)](x, x.numel(), SALT=salt, BLOCK=1024)  # noqa: E731
        first = sync_time(call)
        second = sync_time(call)
        extra.append(1e6 * (first - second))
    return statistics.median(extra), len(extra)


def alloc_free_us():
    """A driver allocation and its free (cudaMalloc and cudaFree through
    PyTorch's allocator, its cache emptied each time)."""
    times = []
    for _ in range(ALLOC_REPEATS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        t = torch.empty(ALLOC_BYTES, dtype=torch.uint8, device="cuda")
        del t
        torch.cuda.empty_cache()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def first_cublas_us():
    """The process's first cuBLAS matmul less its second (one sample)."""
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
    first = sync_time(lambda: a @ a)
    second = sync_time(lambda: a @ a)
    return 1e6 * (first - second)


def nccl_comms_us():
    """A one-rank NCCL communicator: created by the first collective of a new
    group. The first in the process also loads NCCL's kernels; the others
    (median) are the communicator alone. None without NCCL."""
    import socket

    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        return None, None, 0
    torch.cuda.set_device(0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    x = torch.ones(1024, device="cuda")
    times = []
    for _ in range(NCCL_COMMS):
        group = dist.new_group([0])
        times.append(1e6 * sync_time(lambda: dist.all_reduce(x, group=group)))
    dist.destroy_process_group()
    return times[0], statistics.median(times[1:]), len(times) - 1


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    cublas_first = first_cublas_us()
    nccl_first, nccl_next, nccl_n = nccl_comms_us()
    torch_first, torch_n = torch_first_launch_us()
    triton_first, triton_n = triton_first_launch_us()
    units = {
        "launch_us": launch_us(),
        "torch_first_launch_us": torch_first,
        "torch_first_launches": torch_n,
        "triton_first_launch_us": triton_first,
        "triton_first_launches": triton_n,
        "alloc_free_us": alloc_free_us(),
        "first_cublas_us": cublas_first,
        "first_nccl_comm_us": nccl_first,
        "nccl_comm_us": nccl_next,
        "nccl_comms": nccl_n,
    }
    print("UNITS " + json.dumps(units), flush=True)


if __name__ == "__main__":
    main()
