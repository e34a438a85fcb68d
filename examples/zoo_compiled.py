"""Zoo (issue 35): a randomly initialised Hugging Face `transformers` GPT-2
under `torch.compile` (Inductor: its own Triton kernels, compiled at the
first forward and backward), trained on random tokens with AdamW. Nothing in
it was written for prewarm-doctor. Run it with
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync to check the account on
CUDA's stream-ordered pool. Prints `CROSSCHECK` and `LOSS` per step.

Prewarm: `--prewarm-cublas` (a tiny forward+backward per dtype at setup).
"""

import torch

import common
from zoo_hf_decoder import prewarm_cublas


def build(hidden, layers, vocab):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=max(1, hidden // 64), n_positions=1024)
    return GPT2LMHeadModel(cfg).to(device="cuda", dtype=torch.bfloat16)


def main():
    args = common.parse(__doc__, {"cublas": "tiny fwd+bwd per dtype at setup"})
    common.device()
    hidden = args.hidden if args.hidden != 4096 else 768
    model = build(hidden, layers=2, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas(model)
    compiled = torch.compile(model)
    gen = torch.Generator(device="cuda").manual_seed(1)
    seq = 1024
    tokens = torch.randint(0, 32000, (max(1, args.batch // seq), seq), device="cuda", generator=gen)

    def step(n):
        out = compiled(input_ids=tokens, labels=tokens)
        out.loss.backward()
        return out.loss

    common.train(args, step, opt)


if __name__ == "__main__":
    main()
