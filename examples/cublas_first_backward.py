"""Lazy-init class: cuBLAS/cuBLASLt first backward.

The first backward matmul of each dtype creates cuBLASLt handles, loads GEMM
kernels and allocates workspaces outside PyTorch's pool. Without the prewarm
that lands in step 1; `--prewarm-cublas` (or PREWARM_CUBLAS=1) runs a tiny
forward+backward per dtype during setup, then clears its gradients.
"""

import torch

import common


def prewarm_cublas(dtypes=(torch.bfloat16, torch.float32)):
    for dtype in dtypes:
        a = torch.randn(64, 64, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(64, 64, device="cuda", dtype=dtype, requires_grad=True)
        (a @ b).sum().backward()
    torch.cuda.synchronize()


def main():
    args = common.parse(__doc__, {"cublas": "tiny fwd+bwd per dtype at setup"})
    common.device()
    net = common.model(args.hidden)
    head = torch.nn.Linear(args.hidden, 16, device="cuda", dtype=torch.float32)
    opt = torch.optim.AdamW(list(net.parameters()) + list(head.parameters()), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas()
    hold = common.occupy(args.occupy_gib)
    x = torch.randn(args.batch, args.hidden, device="cuda", dtype=torch.bfloat16)

    def step(_):
        y = net(x)
        loss = head(y.float()).square().mean()
        loss.backward()
        return loss

    common.train(args, step, opt)
    del hold


if __name__ == "__main__":
    main()
