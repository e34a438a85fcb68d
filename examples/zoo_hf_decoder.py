"""Zoo (issue 35): a randomly initialised Hugging Face `transformers` Qwen3
decoder (no download: built from a small config), trained on random tokens in
bf16 with AdamW and grad-norm clipping, one process per GPU. Nothing in it was
written for prewarm-doctor: the doctor's account and verdicts are checked
against it, with the script's own `mem_get_info()` / `memory_reserved()`
readings (`CROSSCHECK` lines) as ground truth.

Prewarm: `--prewarm-cublas` — a tiny forward+backward per parameter dtype at
setup, as NeMo AutoModel's `prewarm.cublas_backward` does.
"""

import os

import torch

import common


def prewarm_cublas(model):
    dtypes = sorted({p.dtype for p in model.parameters() if p.is_floating_point()}, key=str)
    with common.fork_rng_on(torch.device("cuda", torch.cuda.current_device())):
        for dtype in dtypes:
            a = torch.randn(64, 64, device="cuda", dtype=dtype, requires_grad=True)
            torch.nn.functional.linear(a, a).sum().backward()
    torch.cuda.synchronize()


def build(hidden, layers, vocab):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128),
        num_key_value_heads=max(1, hidden // 256),
        head_dim=128,
        max_position_embeddings=4096,
    )
    return Qwen3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def main():
    args = common.parse(__doc__, {"cublas": "tiny fwd+bwd per dtype at setup"})
    common.device()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        torch.distributed.init_process_group("nccl")
    model = build(args.hidden, layers=4, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas(model)
    hold = common.occupy(args.occupy_gib)
    gen = torch.Generator(device="cuda").manual_seed(1)
    seq = 1024
    tokens = torch.randint(0, 32000, (max(1, args.batch // seq), seq), device="cuda", generator=gen)

    def step(n):
        out = model(input_ids=tokens, labels=tokens)
        common.cut("forward")
        out.loss.backward()
        common.cut("backward")
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        common.cut("clip")
        return out.loss

    common.train(args, step, opt)
    del hold


if __name__ == "__main__":
    main()
