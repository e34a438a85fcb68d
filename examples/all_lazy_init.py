"""All three lazy-init classes in one training script, each with its prewarm.

Step 1 meets: the first cuBLAS backward (fp32 head), the Triton autotune of
`rowwise_mix` (with its register-spilling candidate) and the first collective
of a second NCCL process group (grad-norm clipping). Prewarms, by flag or by
environment variable (what `prewarm-doctor run --preset env:...` sets):

  --prewarm-cublas            PREWARM_CUBLAS=1
  --prewarm-triton-autotune   PREWARM_TRITON_AUTOTUNE=1
  --prewarm-nccl-comm         PREWARM_NCCL_COMM=1

Run under torchrun (any number of ranks, one GPU each) or plain python (one rank).
"""

import torch
import torch.distributed as dist

import common
from cublas_first_backward import prewarm_cublas
from nccl_first_collective import clip_grad_norm, init_distributed, prewarm_nccl
from triton_spill_autotune import Mix, prewarm_triton


def main():
    args = common.parse(
        __doc__,
        {
            "cublas": "tiny fwd+bwd per dtype at setup",
            "triton_autotune": "run the autotuned kernel on every model shape at setup",
            "nccl_comm": "one tiny all-reduce per process group at setup",
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
    hold = common.occupy(args.occupy_gib)
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)

    def step(_):
        y = Mix.apply(net(x))
        loss = head(y.float()).square().mean()
        loss.backward()
        clip_grad_norm(params, clip_group)
        return loss

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
