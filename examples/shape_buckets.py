"""Lazy-init class: a Triton autotune per shape bucket, later buckets first
seen after step 1.

Batches come in buckets of rows (`--buckets 1024,2048,4096`, each used for
`--bucket-steps` steps, so the second bucket first appears at step 3 with the
defaults). `row_act`'s autotune key holds the row count, so every new bucket
autotunes when it first appears: the first in step 1, the others in later
steps (a new shape at step N is the same problem as step 1's).

Hand-written prewarms, by flag or environment variable:
  --prewarm-first-bucket  PREWARM_FIRST_BUCKET=1  the first bucket only (what a
                          user writes after looking at step 1 alone: incomplete)
  --prewarm-all-buckets   PREWARM_ALL_BUCKETS=1   every bucket

The kernel is elementwise (no reduction), so every candidate config computes
bit-identical results: the per-step losses (LOSS lines) do not depend on which
config the autotuner picked, and runs with and without a prewarm compare exactly.
"""

import torch
import triton
import triton.language as tl

import common

CONFIGS = [
    triton.Config({"BLOCK": 512}, num_warps=2),
    triton.Config({"BLOCK": 1024}, num_warps=4),
    triton.Config({"BLOCK": 2048}, num_warps=8),
]


@triton.autotune(configs=CONFIGS, key=["n_rows", "n_cols"])
@triton.jit
def row_act(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
        y = x * tl.sigmoid(x)
        tl.store(y_ptr + row * n_cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class Act(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        row_act[(x.shape[0],)](x, y, x.shape[0], x.shape[1])
        return y

    @staticmethod
    def backward(ctx, g):
        return g


def prewarm_buckets(rows_list, hidden):
    for rows in rows_list:
        Act.apply(torch.zeros(rows, hidden, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()


def main():
    import argparse
    import sys

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--buckets", default="1024,2048,4096")
    extra.add_argument("--bucket-steps", type=int, default=2)
    mine, rest = extra.parse_known_args()
    sys.argv = [sys.argv[0]] + rest
    args = common.parse(
        __doc__,
        {
            "first_bucket": "autotune the first bucket's shape at setup (incomplete)",
            "all_buckets": "autotune every bucket's shape at setup",
        },
    )
    buckets = [int(b) for b in mine.buckets.split(",") if b]
    common.device()
    net = common.model(args.hidden)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    batches = {rows: torch.randn(rows, args.hidden, device="cuda", dtype=torch.bfloat16) for rows in buckets}
    if args.prewarm_all_buckets:
        prewarm_buckets(buckets, args.hidden)
    elif args.prewarm_first_bucket:
        prewarm_buckets(buckets[:1], args.hidden)
    hold = common.occupy(args.occupy_gib)

    def step(n):
        rows = buckets[((n - 1) // mine.bucket_steps) % len(buckets)]
        loss = Act.apply(net(batches[rows])).float().square().mean()
        loss.backward()
        return loss

    common.train(args, step, opt)
    del hold


if __name__ == "__main__":
    main()
