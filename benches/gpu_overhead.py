"""GPU overhead benchmark workload: a steady training loop that times its own
steps (CUDA-synchronised wall time) and prints one `STEPTIMES {json}` line.

benches/gpu_overhead.sh runs it plain and under `prewarm-doctor run`,
alternating, and reports the probe's step-time ratio (target <= 1.01 for
steady state, <= 1.03 for step 1) and its device-memory footprint.
"""

import argparse
import os
import sys
import json
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=8192)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--layers", type=int, default=4)
    args = p.parse_args()
    if args.steps < 40:
        p.error("--steps must be at least 40 (the first 20 are warm-up, the rest are measured)")
    torch.manual_seed(0)
    layers = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.hidden, args.hidden, dtype=torch.bfloat16, device="cuda"), torch.nn.GELU()]
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-5)
    x = torch.randn(args.batch, args.hidden, device="cuda", dtype=torch.bfloat16)
    times = []
    for _ in range(args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        net(x).float().square().mean().backward()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    free, total = torch.cuda.mem_get_info()
    try:
        # "native" or "cudaMallocAsync" (PYTORCH_CUDA_ALLOC_CONF=backend:...).
        allocator = torch.cuda.get_allocator_backend()
    except Exception:
        allocator = "unknown"
    steady = times[20:]
    print("STEPTIMES " + json.dumps({
        "step1": times[0],
        "steady_median": statistics.median(steady),
        "steady_mean": statistics.fmean(steady),
        "steps": args.steps,
        "device_used": total - free,
        "reserved": torch.cuda.memory_reserved(),
        "allocator": allocator,
        "workload": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }), flush=True)


if __name__ == "__main__":
    main()
