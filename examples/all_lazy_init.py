"""All three lazy-init classes in one training script, each with its prewarm.

Step 1 meets: the first cuBLAS backward (fp32 head), the Triton autotune of
`rowwise_mix` (with its register-spilling candidate) and the first collective
of a second NCCL process group (grad-norm clipping). Prewarms, by flag or by
environment variable (what `prewarm-doctor run --preset env:...` sets):

  --prewarm-cublas            PREWARM_CUBLAS=1
  --prewarm-triton-autotune   PREWARM_TRITON_AUTOTUNE=1
  --prewarm-nccl-comm         PREWARM_NCCL_COMM=1
  --prewarm-noop-autotune     PREWARM_NOOP_AUTOTUNE=1  (a prewarm that finds
                              nothing to warm: it looks for layers by an
                              attribute this model lacks, says so, and does
                              nothing; run it as the variant
                              `fla_gdn_autotune:--prewarm-noop-autotune`)

Run under torchrun (any number of ranks, one GPU each) or plain python (one rank).
"""

import sys

import torch
import torch.distributed as dist

import common
from cublas_first_backward import prewarm_cublas
from nccl_first_collective import clip_grad_norm, init_distributed, prewarm_nccl
from triton_spill_autotune import Mix, prewarm_triton


def prewarm_noop_autotune(model):
    """Finds the layers to warm by attribute name, as model-specific prewarms
    do; this model has none, so it warms nothing (the real-world case of a
    prewarm enabled for the wrong model)."""
    layers = [m for m in model.modules() if hasattr(m, "gdn_chunk_size")]
    if not layers:
        print("prewarm noop_autotune: enabled but no modules were found", file=sys.stderr, flush=True)
        return
    raise RuntimeError("unreachable: this model has no such layers")


def main():
    args = common.parse(
        __doc__,
        {
            "cublas": "tiny fwd+bwd per dtype at setup",
            "triton_autotune": "run the autotuned kernel on every model shape at setup",
            "nccl_comm": "one tiny all-reduce per process group at setup",
            "noop_autotune": "looks for layers this model lacks, finds none, warms nothing",
        },
    )
    dev, clip_group = init_distributed(29534)
    net = common.model(args.hidden)
    head = torch.nn.Linear(args.hidden, 16, device="cuda", dtype=torch.float32)
    params = list(net.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas()
    if args.prewarm_triton_autotune:
        prewarm_triton([(8, args.hidden)])
    if args.prewarm_nccl_comm:
        prewarm_nccl(dev, (None, clip_group))
    if args.prewarm_noop_autotune:
        prewarm_noop_autotune(net)
    hold = common.occupy(args.occupy_gib)
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)

    def step(_):
        y = Mix.apply(net(x))
        head(y.float()).square().mean().backward()
        clip_grad_norm(params, clip_group)

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
