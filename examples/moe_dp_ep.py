"""Lazy-init class: the communicators of a DP x EP mixture-of-experts layout.

The ranks form a 2-D device mesh (dp, ep). Each rank holds `--experts / ep`
experts; tokens go to their top-1 expert through an all-to-all over the `ep`
dimension (first used in step 1's forward). After the first backward the
gradients are synchronised (dense ones over all ranks, expert ones over `dp`),
then grad-norm clipping reduces the norm per sharding group, as frameworks do
for MoE (expert parameters on the EP mesh, the rest on the DP mesh): the
squared norm of the dense shard over `clip_dense` (all ranks), that of the
local experts over `clip_expert` (the ranks of one EP block). Every one of
these groups gets its NCCL communicator lazily, at its first collective, inside
step 1 — the clip groups at the step-1 peak, after the first backward.

`--prewarm-nccl-comm` (or PREWARM_NCCL_COMM=1) runs one one-element all-reduce
per group at setup; `--comm-prewarm` picks which groups:

  exact        every group training uses (mesh dp, mesh ep, world, clip_dense, clip_expert)
  incomplete   only the groups the dense parameters define (world, clip_dense):
               the expert groups still come up in step 1
  eager        exact, plus one group per pair of ranks that training never uses

Run under torchrun with any number of ranks (`--ep` must divide it; one rank
gives a degenerate 1 x 1 mesh), one GPU each.
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.nn.functional import all_to_all_single

import common


def options(p):
    p.add_argument("--ep", type=int, default=0, help="expert-parallel size (default: 2 when the world size is even, else 1)")
    p.add_argument("--experts", type=int, default=8, help="experts in total (a multiple of --ep)")
    p.add_argument("--ffn", type=int, default=0, help="expert hidden size (default: 2 x --hidden)")
    p.add_argument("--capacity", type=float, default=1.25, help="tokens per expert rank, as a multiple of an even share")
    p.add_argument("--comm-prewarm", choices=("exact", "incomplete", "eager"), default="exact")


class MoE(torch.nn.Module):
    """A dense block, a top-1 router and this rank's experts."""

    def __init__(self, hidden, ffn, local_experts, ep_group, ep):
        super().__init__()
        self.dense = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU())
        self.router = torch.nn.Linear(hidden, local_experts * ep, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(hidden, ffn), torch.nn.GELU(), torch.nn.Linear(ffn, hidden))
            for _ in range(local_experts)
        )
        self.local = local_experts
        self.ep_group = ep_group
        self.ep = ep

    def expert_params(self):
        return [p for e in self.experts for p in e.parameters()]

    def dense_params(self):
        return list(self.dense.parameters()) + list(self.router.parameters())

    def forward(self, x, capacity):
        h = self.dense(x)
        gate = self.router(h).softmax(-1)
        weight, expert = gate.max(-1)
        dest = expert // self.local
        # Fixed capacity per destination rank so the all-to-all has equal splits.
        send = h.new_zeros(self.ep * capacity, h.shape[1])
        ids = torch.full((self.ep * capacity,), -1, device=h.device, dtype=torch.long)
        slots = []
        for d in range(self.ep):
            idx = (dest == d).nonzero().flatten()[:capacity]
            send[d * capacity : d * capacity + idx.numel()] = h[idx]
            ids[d * capacity : d * capacity + idx.numel()] = expert[idx] % self.local
            slots.append(idx)
        recv = all_to_all_single(torch.empty_like(send), send, group=self.ep_group)
        recv_ids = torch.empty_like(ids)
        dist.all_to_all_single(recv_ids, ids, group=self.ep_group)
        out = torch.zeros_like(recv)
        for e, ffn in enumerate(self.experts):
            mine = (recv_ids == e).nonzero().flatten()
            if mine.numel():
                out = out.index_add(0, mine, ffn(recv[mine]))
        back = all_to_all_single(torch.empty_like(out), out, group=self.ep_group)
        y = h.clone()
        for d, idx in enumerate(slots):
            y = y.index_add(0, idx, back[d * capacity : d * capacity + idx.numel()] * weight[idx, None])
        return y


def sync_grads(params, group):
    """Average gradients over `group` (data-parallel replicas). An expert that
    got no tokens on this rank has no gradient: it gets zeros, so every
    replica issues the same all-reduces in the same order."""
    size = dist.get_world_size(group)
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, group=group)
        p.grad.div_(size)


def clip_per_group(shards, max_norm=1.0):
    """Grad-norm clipping per sharding group: `shards` is [(local grads, group)];
    each group's squared norm is summed over its own communicator, then the
    total scales every gradient."""
    total = None
    for grads, group in shards:
        sq = torch.stack([g.float().square().sum() for g in grads]).sum() if grads else torch.zeros((), device="cuda")
        dist.all_reduce(sq, group=group)
        total = sq if total is None else total + sq
    norm = total.sqrt()
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for grads, _ in shards:
        for g in grads:
            g.mul_(scale)
    return norm


def layout(world, ep):
    """(dp, ep) sizes and this rank's EP block (the ranks holding different experts)."""
    if ep <= 0:
        ep = 2 if world % 2 == 0 else 1
    if world % ep:
        raise SystemExit(f"moe_dp_ep.py: --ep {ep} does not divide the world size {world}")
    blocks = [list(range(b * ep, (b + 1) * ep)) for b in range(world // ep)]
    return world // ep, ep, blocks


def main():
    args = common.parse(__doc__, {"nccl_comm": "one tiny all-reduce per process group at setup (--comm-prewarm says which)"}, options)
    dev = common.init_torchrun(29541)
    world, rank = dist.get_world_size(), dist.get_rank()
    dp, ep, blocks = layout(world, args.ep)
    if args.experts % ep:
        raise SystemExit(f"moe_dp_ep.py: --experts {args.experts} is not a multiple of --ep {ep}")
    mesh = init_device_mesh("cuda", (dp, ep), mesh_dim_names=("dp", "ep"))
    clip_dense = common.new_group(list(range(world)), "clip_dense")
    clip_expert = None
    for block in blocks:  # every rank creates every block's group
        g = common.new_group(block, "clip_expert")
        if rank in block:
            clip_expert = g
    pairs = []
    if args.prewarm_nccl_comm and args.comm_prewarm == "eager":
        for a in range(world):
            for b in range(a + 1, world):
                g = common.new_group([a, b], "eager_pair")
                if rank in (a, b):
                    pairs.append(g)
    torch.manual_seed(0)
    net = MoE(args.hidden, args.ffn or 2 * args.hidden, args.experts // ep, mesh.get_group("ep"), ep).to(dev, torch.bfloat16)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    dense, experts = net.dense_params(), net.expert_params()
    if args.prewarm_nccl_comm:
        groups = [dist.group.WORLD, clip_dense]
        if args.comm_prewarm != "incomplete":
            groups += [mesh.get_group("dp"), mesh.get_group("ep"), clip_expert] + pairs
        common.warm_groups(dev, groups)
    hold = common.occupy(args.occupy_gib)
    torch.manual_seed(1 + rank)
    x = torch.randn(args.batch, args.hidden, device=dev, dtype=torch.bfloat16)
    capacity = max(1, int(args.capacity * args.batch / ep))

    def step(_):
        net(x, capacity).float().square().mean().backward()
        sync_grads(dense, dist.group.WORLD)
        sync_grads(experts, mesh.get_group("dp"))
        # The dense parameters are replicated: each rank owns every world-th one's norm.
        mine = [p.grad for i, p in enumerate(dense) if i % world == rank and p.grad is not None]
        clip_per_group([(mine, clip_dense), ([p.grad for p in experts if p.grad is not None], clip_expert)])

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
