"""Lazy-init class: the NCCL communicators of an FSDP2 job, first used in step 1.

The model is sharded with FSDP2 (`fully_shard` over a 1-D DeviceMesh): the
first forward all-gathers parameters and the first backward reduce-scatters
gradients, so the mesh's communicator comes up inside step 1. Grad-norm
clipping all-reduces the shards' squared norms over a second process group
(frameworks keep one for norms and loss scaling so they do not queue behind
FSDP's collectives); its first collective is the clip at the end of step 1's
backward, when every gradient is live: the step-1 peak.

`--prewarm-nccl-comm` (or PREWARM_NCCL_COMM=1) runs one tiny all-reduce on
exactly the groups training uses (the mesh group and the clip group) during
setup. Run under torchrun, one GPU per rank; any number of ranks and nodes.
"""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import common
from nccl_first_collective import prewarm_nccl


def build_model(hidden, layers, mesh):
    """fp32 master weights sharded over the mesh; bf16 compute, fp32 reduce."""
    torch.manual_seed(0)
    blocks = [
        torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU())
        for _ in range(layers)
    ]
    net = torch.nn.Sequential(*blocks).cuda()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(net, mesh=mesh, mp_policy=policy)
    return net


def clip_grad_norm(params, group, max_norm=1.0):
    """Global L2 norm of sharded gradients: each rank sums its shards' squares,
    one all-reduce over `group` (which spans the mesh's ranks) adds them up."""
    local = [p.grad.to_local() for p in params if p.grad is not None]
    total = torch.stack([g.float().square().sum() for g in local]).sum()
    dist.all_reduce(total, group=group)
    scale = (max_norm / (total.sqrt() + 1e-6)).clamp(max=1.0)
    for g in local:
        g.mul_(scale)
    return total.sqrt()


def main():
    args = common.parse(__doc__, {"nccl_comm": "one tiny all-reduce on the mesh group and the clip group at setup"})
    if "RANK" not in os.environ:
        raise SystemExit("fsdp2_clip.py runs under torchrun (one process per GPU)")
    dev = common.device()
    dist.init_process_group("nccl")
    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (world,), mesh_dim_names=("fsdp",))
    clip_group = dist.new_group(list(range(world)))
    net = build_model(args.hidden, 4, mesh)
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    if args.prewarm_nccl_comm:
        prewarm_nccl(dev, (mesh.get_group("fsdp"), clip_group))
    hold = common.occupy(args.occupy_gib)
    x = torch.randn(args.batch, args.hidden, device=dev)

    def step(_):
        net(x).float().square().mean().backward()
        clip_grad_norm(params, clip_group)

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
