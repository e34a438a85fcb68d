"""Lazy-init class: a pipeline's stages, P2P links and the clip's PP reduction.

The ranks form a 2-D device mesh (dp, pp); the model's layers are split into
`pp` stages run by torch.distributed.pipelining (`--schedule 1f1b` or
`gpipe`). In step 1 the schedule's first send/recv brings up the P2P
communicators between stages, each stage's first backward initialises cuBLAS,
gradients are averaged over `dp`, and grad-norm clipping reduces each stage's
squared norm across the `pp` dimension — whose communicator comes up there,
after the first backward, at the step-1 peak. Parameters are never sharded
along `pp`, so a prewarm that finds its groups from the parameters' placements
misses that group (the reason seed 000's comm prewarm takes a `pp_mesh`).

Prewarms (flag, or the environment variable `prewarm-doctor run --preset env:...` sets):

  --prewarm-nccl-comm               PREWARM_NCCL_COMM=1: one tiny all-reduce per
                                    group and one send/recv per stage link at setup;
                                    with --comm-prewarm incomplete only the groups the
                                    parameters define (dp): the pp group is missed
  --prewarm-pipeline-stage-compile  PREWARM_PIPELINE_STAGE_COMPILE=1: each stage runs
                                    its own forward+backward once, locally, on a tiny
                                    microbatch at setup (cuBLAS, module loading)

Run under torchrun with any number of ranks (`--pp` must divide it; one rank is
a degenerate one-stage pipeline), one GPU each.
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

import common


def options(p):
    p.add_argument("--pp", type=int, default=0, help="pipeline stages (default: 2 when the world size is even, else 1)")
    p.add_argument("--layers", type=int, default=8, help="layers in total, split evenly over the stages")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b")
    p.add_argument("--comm-prewarm", choices=("exact", "incomplete"), default="exact")


def stage_module(hidden, layers, stage, stages):
    """This stage's share of the layers, in bf16."""
    torch.manual_seed(stage)
    per = layers // stages
    blocks = [torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU()) for _ in range(per)]
    return torch.nn.Sequential(*blocks).to("cuda", torch.bfloat16)


def clip_across_pp(params, pp_group, max_norm=1.0):
    """Each stage's squared norm, summed across the stages over the pp group."""
    grads = [p.grad for p in params if p.grad is not None]
    sq = torch.stack([g.float().square().sum() for g in grads]).sum()
    dist.all_reduce(sq, group=pp_group)
    norm = sq.sqrt()
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale)
    return norm


def warm_links(dev, pp_group, stage, stages, hidden):
    """One send/recv per neighbouring stage pair, as the schedule will do: brings
    up the P2P communicators at setup."""
    ranks = dist.get_process_group_ranks(pp_group)
    t = torch.zeros(1, hidden, device=dev, dtype=torch.bfloat16)
    if stage + 1 < stages:
        dist.send(t, ranks[stage + 1], group=pp_group)
    if stage > 0:
        dist.recv(t, ranks[stage - 1], group=pp_group)
    torch.cuda.synchronize()


def warm_stage(module, dev, hidden):
    """The stage's forward and backward once, locally, without touching its
    gradients or the random stream."""
    with common.fork_rng_on(dev):
        x = torch.randn(2, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
        module(x).float().sum().backward()
    for p in module.parameters():
        p.grad = None
    torch.cuda.synchronize()


def main():
    prewarms = {
        "nccl_comm": "one tiny collective per group and send/recv per stage link at setup (--comm-prewarm says which)",
        "pipeline_stage_compile": "run each stage's forward+backward once at setup",
    }
    args = common.parse(__doc__, prewarms, options)
    dev = common.init_torchrun(29542)
    world = dist.get_world_size()
    pp = args.pp or (2 if world % 2 == 0 else 1)
    if world % pp or args.layers % pp:
        raise SystemExit(f"pipeline_pp.py: --pp {pp} must divide the world size {world} and --layers {args.layers}")
    mesh = init_device_mesh("cuda", (world // pp, pp), mesh_dim_names=("dp", "pp"))
    pp_group, dp_group = mesh.get_group("pp"), mesh.get_group("dp")
    stage = mesh.get_local_rank("pp")
    module = stage_module(args.hidden, args.layers, stage, pp)
    params = list(module.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    if args.prewarm_pipeline_stage_compile:
        warm_stage(module, dev, args.hidden)
    if args.prewarm_nccl_comm:
        groups = [dp_group] if args.comm_prewarm == "incomplete" else [dp_group, pp_group]
        common.warm_groups(dev, groups)
        if args.comm_prewarm == "exact":
            warm_links(dev, pp_group, stage, pp, args.hidden)
    hold = common.occupy(args.occupy_gib)
    pipe = PipelineStage(module, stage, pp, dev, group=pp_group)
    # One stage (one rank) has nothing to interleave: GPipe runs it.
    schedule_cls = Schedule1F1B if args.schedule == "1f1b" and pp > 1 else ScheduleGPipe

    def loss_fn(out, target):
        return (out.float() - target.float()).square().mean()

    schedule = schedule_cls(pipe, args.microbatches, loss_fn=loss_fn)
    torch.manual_seed(100 + mesh.get_local_rank("dp"))
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)
    y = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)
    first, last = stage == 0, stage == pp - 1

    def step(_):
        kwargs = {"target": y, "losses": []} if last else {}
        if first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad, group=dp_group)
                p.grad.div_(dist.get_world_size(dp_group))
        clip_across_pp(params, pp_group)

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
