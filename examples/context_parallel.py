"""Lazy-init class: context parallelism's communicator and its own kernels.

The ranks form a CP mesh (size `--cp`, default the world size; the rest is
data parallel): each sequence is sharded along its length across the CP ranks
by torch's context parallel (torch.distributed.tensor.experimental.
context_parallel), whose SDPA exchanges keys and values over the CP group:
that group's NCCL communicator comes up at step 1's first attention. The
model's rotary embedding is two autotuned Triton kernels: `rope_contiguous`
(positions 0..S-1, the single-device path) and `rope_gathered` (positions read
from memory: under CP with causal load balancing each rank holds two
non-adjacent chunks of the sequence), plus an autotuned `rms_gate` norm on
every path. Their autotunes (forward and backward) land in step 1.

Prewarms (flag, or the environment variable `prewarm-doctor run --preset env:...` sets):

  --prewarm-triton-autotune  PREWARM_TRITON_AUTOTUNE=1: a tiny forward+backward of
                             the model outside the CP context at setup. It cannot
                             reach `rope_gathered` (the CP path): incomplete on its
                             own, as seed 000's end-to-end GDN warmup is without
                             its separate context-parallel kernel warmup
  --prewarm-cp-kernels       PREWARM_CP_KERNELS=1: launch `rope_gathered` directly,
                             forward and backward, on a tiny tensor at setup
  --prewarm-nccl-comm        PREWARM_NCCL_COMM=1: one tiny all-reduce on the CP group
                             and on the world (gradient averaging) at setup; with
                             --comm-prewarm eager also on the mesh's dp group, which
                             training never uses (over-eager)

Run under torchrun with any number of ranks (`--cp` must divide it; one rank
is a degenerate CP mesh of 1), one GPU each.
"""

import torch
import torch.distributed as dist
import triton
import triton.language as tl
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel

import common

ROPE_CONFIGS = [
    triton.Config({"BLOCK_R": 16}, num_warps=2),
    triton.Config({"BLOCK_R": 32}, num_warps=4),
    triton.Config({"BLOCK_R": 64}, num_warps=4),
    triton.Config({"BLOCK_R": 128}, num_warps=8),
]


@triton.jit
def _rope_rows(x_ptr, y_ptr, pos, rows, sign, HALF: tl.constexpr, offs_r):
    cols = tl.arange(0, HALF)
    mask = offs_r[:, None] < rows
    base = offs_r[:, None] * (2 * HALF) + cols[None, :]
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF, mask=mask, other=0.0).to(tl.float32)
    inv_freq = tl.exp(-(cols.to(tl.float32) * 2.0 / (2 * HALF)) * 9.210340371976184)  # 10000^(-2i/D)
    angle = pos[:, None].to(tl.float32) * inv_freq[None, :]
    c = tl.cos(angle)
    s = tl.sin(angle) * sign
    tl.store(y_ptr + base, (x1 * c - x2 * s).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(y_ptr + base + HALF, (x2 * c + x1 * s).to(y_ptr.dtype.element_ty), mask=mask)


@triton.autotune(configs=ROPE_CONFIGS, key=["seq", "HALF"])
@triton.jit
def rope_contiguous(x_ptr, y_ptr, rows, seq, sign, HALF: tl.constexpr, BLOCK_R: tl.constexpr):
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    _rope_rows(x_ptr, y_ptr, offs_r % seq, rows, sign, HALF, offs_r)


@triton.autotune(configs=ROPE_CONFIGS, key=["seq", "HALF"])
@triton.jit
def rope_gathered(x_ptr, y_ptr, pos_ptr, rows, seq, sign, HALF: tl.constexpr, BLOCK_R: tl.constexpr):
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    pos = tl.load(pos_ptr + offs_r % seq, mask=offs_r < rows, other=0)
    _rope_rows(x_ptr, y_ptr, pos, rows, sign, HALF, offs_r)


@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (2, 4, 8, 16)],
    key=["n_cols"],
)
@triton.jit
def rms_gate(x_ptr, w_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, 0) / n_cols + 1e-6)
    tl.store(y_ptr + row * n_cols + offs, (x * r * w).to(y_ptr.dtype.element_ty), mask=mask)


def _rope(x, pos, sign):
    """x: [B, H, S, D] contiguous; pos: None (0..S-1) or [S] global positions."""
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, seq, half = x.numel() // x.shape[-1], x.shape[-2], x.shape[-1] // 2

    def grid(meta):
        return (triton.cdiv(rows, meta["BLOCK_R"]),)

    if pos is None:
        rope_contiguous[grid](x, y, rows, seq, sign, HALF=half)
    else:
        rope_gathered[grid](x, y, pos, rows, seq, sign, HALF=half)
    return y


class Rope(torch.autograd.Function):
    """A rotation; its backward is the inverse rotation (the same kernel)."""

    @staticmethod
    def forward(ctx, x, pos):
        ctx.pos = pos
        return _rope(x, pos, 1.0)

    @staticmethod
    def backward(ctx, g):
        return _rope(g, ctx.pos, -1.0), None


class RmsGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        rms_gate[(x2.shape[0],)](x2, w, y, x2.shape[1], BLOCK=triton.next_power_of_2(x2.shape[1]))
        ctx.save_for_backward(x2, w)
        ctx.shape = x.shape
        return y.view_as(x)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        g = g.contiguous().view_as(x).float()
        xf, wf = x.float(), w.float()
        r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + 1e-6)
        gw = g * wf
        dx = r * gw - xf * r.pow(3) * (gw * xf).mean(-1, keepdim=True)
        dw = (g * xf * r).sum(0)
        return dx.to(x.dtype).view(ctx.shape), dw.to(w.dtype)


class Block(torch.nn.Module):
    """Attention (SDPA, causal) with rotary positions, then an MLP; pre-norm."""

    def __init__(self, hidden, head_dim):
        super().__init__()
        self.heads, self.head_dim = hidden // head_dim, head_dim
        self.norm1 = torch.nn.Parameter(torch.ones(hidden))
        self.norm2 = torch.nn.Parameter(torch.ones(hidden))
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = torch.nn.Linear(hidden, hidden, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(), torch.nn.Linear(4 * hidden, hidden))

    def forward(self, x, pos):
        b, s, h = x.shape
        q, k, v = self.qkv(RmsGate.apply(x, self.norm1)).view(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = Rope.apply(q, pos), Rope.apply(k, pos)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v.contiguous(), is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp(RmsGate.apply(x, self.norm2))


def options(p):
    p.add_argument("--cp", type=int, default=0, help="context-parallel size (default: the world size)")
    p.add_argument("--seq", type=int, default=8192, help="sequence length before sharding")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--comm-prewarm", choices=("exact", "eager"), default="exact")


def warm_end_to_end(net, dev, hidden, head_dim):
    """Tiny forward+backward outside the CP context: contiguous positions."""
    with common.fork_rng_on(dev):
        x = torch.randn(1, 64, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
        y = x
        for blk in net:
            y = blk(y, None)
        y.float().sum().backward()
    for p in net.parameters():
        p.grad = None
    torch.cuda.synchronize()


def warm_cp_kernels(dev, heads, head_dim, seq):
    """`rope_gathered` forward and backward at the model's key (seq, head_dim):
    the CP path's kernel the end-to-end warmup cannot reach."""
    q = torch.zeros(1, heads, seq, head_dim, device=dev, dtype=torch.bfloat16)
    pos = torch.arange(seq, device=dev)
    _rope(q, pos, 1.0)
    _rope(q, pos, -1.0)
    torch.cuda.synchronize()


def main():
    prewarms = {
        "triton_autotune": "tiny forward+backward outside the CP context at setup",
        "cp_kernels": "launch the CP path's kernel (rope_gathered) directly at setup",
        "nccl_comm": "one tiny all-reduce on the CP group and the world at setup (--comm-prewarm says which)",
    }
    args = common.parse(__doc__, prewarms, options)
    dev = common.init_torchrun(29543)
    world = dist.get_world_size()
    cp = args.cp or world
    if world % cp or args.seq % (2 * cp):
        raise SystemExit(f"context_parallel.py: --cp {cp} must divide the world size {world}, and 2 x --cp the --seq {args.seq}")
    mesh = init_device_mesh("cuda", (world // cp, cp), mesh_dim_names=("dp", "cp"))
    cp_mesh = mesh["cp"]
    torch.manual_seed(0)
    net = torch.nn.ModuleList(Block(args.hidden, args.head_dim) for _ in range(args.layers)).to(dev, torch.bfloat16)
    params = list(net.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    heads = args.hidden // args.head_dim
    if args.prewarm_triton_autotune:
        warm_end_to_end(net, dev, args.hidden, args.head_dim)
    if args.prewarm_cp_kernels:
        warm_cp_kernels(dev, heads, args.head_dim, args.seq // cp)
    if args.prewarm_nccl_comm:
        groups = [mesh.get_group("cp"), dist.group.WORLD]
        if args.comm_prewarm == "eager":
            groups.append(mesh.get_group("dp"))
        common.warm_groups(dev, groups)
    hold = common.occupy(args.occupy_gib)
    seqs = max(1, args.batch // args.seq)
    torch.manual_seed(1 + mesh.get_local_rank("dp"))

    def step(_):
        # Fresh full-length buffers each step: context_parallel shards them in place.
        x = torch.randn(seqs, args.seq, args.hidden, device=dev, dtype=torch.bfloat16)
        pos = torch.arange(args.seq, device=dev)
        with context_parallel(cp_mesh, buffers=[x, pos], buffer_seq_dims=[1, 0], no_restore_buffers={x, pos}):
            y = x
            for blk in net:
                y = blk(y, pos)
            y.float().square().mean().backward()
        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad.div_(world)
        torch.nn.utils.clip_grad_norm_(params, 1.0)

    common.train(args, step, opt)
    del hold
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
