"""Lazy-init class: an NCCL communicator first used at step 1.

The default process group and a second group (as grad-norm clipping over a
model-parallel group would use) are created at setup, but NCCL builds a
communicator — and cuMemCreate's its buffers — only at a group's first
collective, which here is the clipping all-reduce in step 1.
`--prewarm-nccl-comm` (or PREWARM_NCCL_COMM=1) runs one tiny all-reduce per
group during setup. Run under torchrun (any number of ranks, one GPU each).
"""

import os

import torch
import torch.distributed as dist

import common


def clip_grad_norm(params, group, max_norm=1.0):
    norms = torch.stack([p.grad.float().norm() for p in params if p.grad is not None])
    total = norms.square().sum()
    dist.all_reduce(total, group=group)
    scale = (max_norm / (total.sqrt() + 1e-6)).clamp(max=1.0)
    for p in params:
        if p.grad is not None:
            p.grad.mul_(scale)


def init_distributed(port):
    """The default process group (plain `python` works as a one-rank job) and a
    second group for grad-norm clipping; NCCL creates neither communicator yet."""
    if "RANK" not in os.environ:
        os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    dev = common.device()
    dist.init_process_group("nccl")
    return dev, dist.new_group(list(range(dist.get_world_size())))


def prewarm_nccl(dev, groups):
    """One tiny all-reduce per group creates its communicator at setup. Note:
    warming the default group too, as here, creates a communicator these
    examples' training never uses (prewarm-doctor reports the extra memory)."""
    for group in groups:
        t = torch.zeros(1, device=dev)
        dist.all_reduce(t, group=group)
    torch.cuda.synchronize()


def main():
    args = common.parse(__doc__, {"nccl_comm": "one tiny all-reduce per process group at setup"})
    dev, clip_group = init_distributed(29533)
    net = common.model(args.hidden)
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    if args.prewarm_nccl_comm:
        prewarm_nccl(dev, (None, clip_group))
    hold = common.occupy(args.occupy_gib)
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)

    def step(_):
        loss = net(x).float().square().mean()
        loss.backward()
        clip_grad_norm(params, clip_group)
        return loss

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
