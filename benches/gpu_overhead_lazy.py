"""GPU overhead workload with lazy initialisation in step 1: the training of
examples/all_lazy_init.py (the first cuBLAS backward, the Triton autotune of
`rowwise_mix`, the first collective of a second NCCL process group), timed
step by step (CUDA-synchronised wall time), and step 1 also part by part
(the forward's linears, its Triton autotune, backward with the first cuBLAS backward,
the clip with the new NCCL communicator, the optimizer step). Prints one
`STEPTIMES {json}` line as benches/gpu_overhead.py does. Run under torchrun (one rank is enough).

Step 1 here is where a profiler's own cost would inflate every stall it
reports, so benches/gpu_overhead.sh compares it plain and under the doctor.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import common  # noqa: E402
from nccl_first_collective import clip_grad_norm, init_distributed  # noqa: E402
from triton_spill_autotune import Mix  # noqa: E402

WARMUP = common.STEADY_AFTER
# Step 1's parts, in order (each a `step1_<part>` key of STEPTIMES, seconds):
# the forward cut in two — the model's linears (the first cuBLAS matmuls and
# elementwise kernels, the context's first local-memory growth) and the
# Triton autotune with the head — and also written whole as `step1_forward`,
# the part earlier rounds stored.
PARTS = ("forward_net", "forward_mix", "backward", "clip", "optimizer")


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
    parts = {}
    window = common.StepWindows(args.steps)
    for step in range(args.steps):
        torch.cuda.synchronize()
        window.before_step(step + 1)
        t0 = time.perf_counter()
        # Step 1 alone is cut into its parts (synchronised at each cut), so
        # that each part's own run-to-run noise can be told from the others'.
        cuts = [t0]

        def cut():
            if step == 0:
                torch.cuda.synchronize()
                cuts.append(time.perf_counter())

        opt.zero_grad(set_to_none=True)
        h = net(x)  # the first cuBLAS matmuls
        cut()
        y = Mix.apply(h)  # the Triton autotune
        loss = head(y.float()).square().mean()
        cut()
        loss.backward()  # the first cuBLAS backward
        cut()
        clip_grad_norm(params, clip_group)  # the second group's NCCL communicator
        cut()
        opt.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        window.after_step(step + 1)
        if step == 0:
            cuts.append(t0 + times[0])
            for name, a, b in zip(PARTS, cuts, cuts[1:]):
                parts["step1_" + name] = b - a
            parts["step1_forward"] = parts["step1_forward_net"] + parts["step1_forward_mix"]
    common.print_steptimes(args, times, {**parts, **window.figures()})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
