"""Zoo (issues 35, 36): flash-linear-attention's chunked gated-delta-rule
kernels, from its wheel (`flash-linear-attention`/`fla-core`), called through
its public function `fla.ops.gated_delta_rule.chunk_gated_delta_rule` inside
a small gated-delta-net block stack (random weights, bf16, AdamW). Its Triton
kernels autotune on first use, forward and backward: what a hybrid
linear-attention model does in step 1. Nothing in the kernels was written for
prewarm-doctor; the script prints `CROSSCHECK` (its own device readings) and
`LOSS` per step.

`--varlen`: one packed batch of variable-length sequences (`cu_seqlens`), so
the kernels also take integer index tensors (offsets, chunk indices).

Prewarm: `--prewarm-gdn-autotune` — written the way a framework's GDN
autotune prewarm is: one forward+backward of every GDN block on the
training's shape at setup, random inputs, the random streams restored.
"""

import torch
import torch.nn.functional as F
from fla.ops.gated_delta_rule import chunk_gated_delta_rule

import common


class GatedDeltaNetBlock(torch.nn.Module):
    def __init__(self, hidden, heads, head_dim):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        inner = heads * head_dim
        self.q = torch.nn.Linear(hidden, inner, bias=False)
        self.k = torch.nn.Linear(hidden, inner, bias=False)
        self.v = torch.nn.Linear(hidden, inner, bias=False)
        self.a = torch.nn.Linear(hidden, heads, bias=False)
        self.b = torch.nn.Linear(hidden, heads, bias=False)
        self.o = torch.nn.Linear(inner, hidden, bias=False)
        self.norm = torch.nn.RMSNorm(hidden)

    def forward(self, x, cu_seqlens=None):
        B, T, _ = x.shape
        h = self.norm(x)
        shape = (B, T, self.heads, self.head_dim)
        q, k, v = self.q(h).view(shape), self.k(h).view(shape), self.v(h).view(shape)
        g = F.logsigmoid(self.a(h).float())
        beta = torch.sigmoid(self.b(h).float()).to(h.dtype)
        o, _ = chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True, cu_seqlens=cu_seqlens)
        return x + self.o(o.reshape(B, T, -1))


def main():
    def extra(p):
        p.add_argument("--seq", type=int, default=4096)
        p.add_argument("--layers", type=int, default=2)
        p.add_argument("--varlen", action="store_true")

    args = common.parse(__doc__, {"gdn_autotune": "fwd+bwd of every GDN block at the training's shape, at setup"}, extra)
    dev = common.device()
    torch.manual_seed(0)
    hidden = args.hidden if args.hidden != 4096 else 1024
    blocks = torch.nn.Sequential(*[GatedDeltaNetBlock(hidden, 8, 128) for _ in range(args.layers)])
    model = blocks.to(device=dev, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = 1 if args.varlen else 2
    cu_seqlens = None
    if args.varlen:
        cuts = [0, args.seq // 5, args.seq // 2, args.seq - args.seq // 7, args.seq]
        cu_seqlens = torch.tensor(cuts, dtype=torch.long, device=dev)

    def run(x):
        for block in model:
            x = block(x, cu_seqlens)
        return x

    if args.prewarm_gdn_autotune:
        with common.fork_rng_on(dev):
            x = torch.randn(batch, args.seq, hidden, device=dev, dtype=torch.bfloat16)
            run(x).float().pow(2).mean().backward()
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    gen = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(batch, args.seq, hidden, device=dev, dtype=torch.bfloat16, generator=gen)
    target = torch.randn(batch, args.seq, hidden, device=dev, dtype=torch.bfloat16, generator=gen)

    def step(n):
        loss = F.mse_loss(run(x).float(), target.float())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return loss

    common.train(args, step, opt)


if __name__ == "__main__":
    main()
