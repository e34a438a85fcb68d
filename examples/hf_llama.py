"""A model this project did not write: a randomly initialised Hugging Face
`transformers` Llama (no download: built from a small config), trained on random
tokens in bf16 with AdamW and grad-norm clipping, one process per GPU
(torchrun). It checks the account and verdicts against code that was not written
for the tool.

Prewarms, each a flag or PREWARM_<NAME>=1:
- `--prewarm-cublas`: a tiny forward+backward per dtype at setup (cuBLAS/cuBLASLt
  handles and workspaces).
- `--prewarm-gdn-autotune`: written the way a framework's model-specific
  autotune prewarm is — it looks for gated-delta-net layers by their attribute
  name, finds none in a Llama, logs "enabled but no modules were found" and
  does nothing. The tool must call it NO EFFECT, with no cost.

Needs `transformers` (the H200 image has it). Prints the loss of every step to
stdout (`LOSS step=N value=...`), so runs with and without a prewarm can be
compared for an identical trajectory.
"""

import os
import sys

import torch

import common


def prewarm_cublas(dtypes=(torch.bfloat16, torch.float32)):
    state = torch.cuda.get_rng_state()
    for dtype in dtypes:
        a = torch.randn(64, 64, device="cuda", dtype=dtype, requires_grad=True)
        b = torch.randn(64, 64, device="cuda", dtype=dtype, requires_grad=True)
        (a @ b).sum().backward()
    torch.cuda.synchronize()
    torch.cuda.set_rng_state(state)


def prewarm_gdn_autotune(model):
    """Finds the layers to warm by attribute name, as such prewarms do."""
    layers = [m for m in model.modules() if hasattr(m, "gdn_chunk_size")]
    if not layers:
        print("prewarm gdn_autotune: enabled but no modules were found", file=sys.stderr, flush=True)
        return
    raise RuntimeError("unreachable for a Llama")


def build(hidden, layers, vocab):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128),
        num_key_value_heads=max(1, hidden // 256),
        max_position_embeddings=4096,
    )
    return LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def main():
    args = common.parse(
        __doc__,
        {
            "cublas": "tiny fwd+bwd per dtype at setup",
            "gdn_autotune": "looks for GDN layers by name (a Llama has none)",
        },
    )
    common.device()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        torch.distributed.init_process_group("nccl")
    model = build(args.hidden, layers=4, vocab=32000)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas()
    if args.prewarm_gdn_autotune:
        prewarm_gdn_autotune(model)
    hold = common.occupy(args.occupy_gib)
    gen = torch.Generator(device="cuda").manual_seed(1)
    seq = 1024
    batch = max(1, args.batch // seq)
    tokens = torch.randint(0, 32000, (batch, seq), device="cuda", generator=gen)

    def step(n):
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        print(f"LOSS step={n} value={out.loss.item():.6f}", flush=True)

    common.train(args, step, opt)
    del hold
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
