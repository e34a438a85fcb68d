"""GPU overhead workload with lazy initialisation in step 1: the training of
examples/all_lazy_init.py (the first cuBLAS backward, the Triton autotune of
`rowwise_mix`, the first collective of a second NCCL process group), timed
step by step (CUDA-synchronised wall time). Prints one `STEPTIMES {json}` line
as benches/gpu_overhead.py does. Run under torchrun (one rank is enough).

Step 1 here is where a profiler's own cost would inflate every stall it
reports, so benches/gpu_overhead.sh compares it plain and under the doctor.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import common  # noqa: E402
from nccl_first_collective import clip_grad_norm, init_distributed  # noqa: E402
from triton_spill_autotune import Mix  # noqa: E402

WARMUP = 10


def main():
    args = common.parse(__doc__, {})
    if args.steps < WARMUP + 10:
        sys.exit(f"--steps must be at least {WARMUP + 10} (the first {WARMUP} are not steady state)")
    dev, clip_group = init_distributed(29535)
    net = common.model(args.hidden)
    head = torch.nn.Linear(args.hidden, 16, device="cuda", dtype=torch.float32)
    params = list(net.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)
    times = []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        y = Mix.apply(net(x))
        head(y.float()).square().mean().backward()
        clip_grad_norm(params, clip_group)
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    free, total = torch.cuda.mem_get_info()
    try:
        allocator = torch.cuda.get_allocator_backend()
    except Exception:
        allocator = "unknown"
    steady = times[WARMUP:]
    print("STEPTIMES " + json.dumps({
        "step1": times[0],
        "step2": times[1],
        "steady_median": statistics.median(steady),
        "steady_mean": statistics.fmean(steady),
        "steps": args.steps,
        "device_used": total - free,
        "reserved": torch.cuda.memory_reserved(),
        "allocator": allocator,
    }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
