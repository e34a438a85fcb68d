"""Zoo (issue 35): a randomly initialised Hugging Face `transformers`
mixture-of-experts decoder (Qwen3-MoE: 8 experts, 2 per token; no download),
trained on random tokens in bf16 with AdamW. Nothing in it was written for
prewarm-doctor. Run it with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to
check the account on the expandable-segments pool (cuMemCreate/cuMemMap).
Prints `CROSSCHECK` (the script's own device readings) and `LOSS` per step.

Prewarm: `--prewarm-cublas` (a tiny forward+backward per dtype at setup).
"""

import torch

import common
from zoo_hf_decoder import prewarm_cublas


def build(hidden, layers, vocab):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        moe_intermediate_size=hidden // 2,
        num_experts=8,
        num_experts_per_tok=2,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128),
        num_key_value_heads=max(1, hidden // 256),
        head_dim=128,
        max_position_embeddings=4096,
    )
    return Qwen3MoeForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def main():
    args = common.parse(__doc__, {"cublas": "tiny fwd+bwd per dtype at setup"})
    common.device()
    model = build(args.hidden, layers=4, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas(model)
    gen = torch.Generator(device="cuda").manual_seed(1)
    seq = 1024
    tokens = torch.randint(0, 32000, (max(1, args.batch // seq), seq), device="cuda", generator=gen)

    def step(n):
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        return out.loss

    common.train(args, step, opt)


if __name__ == "__main__":
    main()
