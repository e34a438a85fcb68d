#!/usr/bin/env python3
"""How many Python frames an exception leaves in each training step of a
model nobody here wrote: the zoo's randomly initialised transformers Qwen3
decoder (examples/zoo_hf_decoder.py's config, 4 layers), AdamW and
grad-norm clipping. Each such frame calls the shim's program-wide
PY_UNWIND callback once (benches/shim_hook_cost.py's UNWIND line gives
what one call costs), so frames x cost is what that callback adds to a
step.

    python3 benches/py_unwinds_per_step.py [--device cpu|cuda] [--hidden 1024]
        [--tokens 2048] [--steps 5]

Prints one UNWINDS line a step (the frames, the step's seconds) and, for
steps 1 and 2, UNWIND_FROM lines: the code each frame was in and the
exception, most frequent first. Counting uses its own sys.monitoring tool
(Python >= 3.12); it needs torch and transformers.
"""
import argparse
import collections
import sys
import time

COUNTER_TOOL = 4  # sys.monitoring's tool ids 0-5; the shim takes 2-3 when it runs


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--tokens", type=int, default=2048, help="tokens a step (sequences of 1024, or fewer)")
    p.add_argument("--steps", type=int, default=5)
    return p.parse_args()


def model_and_step(args, torch, transformers):
    torch.manual_seed(0)
    h = args.hidden
    cfg = transformers.Qwen3Config(
        vocab_size=32000, hidden_size=h, intermediate_size=h * 3, num_hidden_layers=4,
        num_attention_heads=max(1, h // 128), num_key_value_heads=max(1, h // 256),
        head_dim=128, max_position_embeddings=4096)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = transformers.Qwen3ForCausalLM(cfg).to(device=args.device, dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seq = min(1024, args.tokens)
    tokens = torch.randint(0, 32000, (max(1, args.tokens // seq), seq), device=args.device)

    def step():
        out = model(input_ids=tokens, labels=tokens)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if args.device == "cuda":
            torch.cuda.synchronize()

    return step


def main():
    args = parse()
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        sys.exit(f"py_unwinds_per_step.py: Python {sys.version.split()[0]} has no sys.monitoring; run it with Python >= 3.12")
    try:
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"py_unwinds_per_step.py needs torch and transformers ({e}): pip install torch transformers")
    step = model_and_step(args, torch, transformers)
    frames = collections.Counter()

    def on_unwind(code, offset, exc):
        where = code.co_filename.rsplit("site-packages/", 1)[-1]
        frames[f"{where}:{code.co_name}:{type(exc).__name__}"] += 1

    mon.use_tool_id(COUNTER_TOOL, "py_unwinds_per_step")
    mon.register_callback(COUNTER_TOOL, mon.events.PY_UNWIND, on_unwind)
    for n in range(1, args.steps + 1):
        frames.clear()
        mon.set_events(COUNTER_TOOL, mon.events.PY_UNWIND)
        t0 = time.perf_counter()
        step()
        seconds = time.perf_counter() - t0
        mon.set_events(COUNTER_TOOL, 0)
        print(f"UNWINDS step={n} frames={sum(frames.values())} seconds={seconds:.3f} "
              f"device={args.device} hidden={args.hidden} tokens={args.tokens} "
              f"torch={torch.__version__} transformers={transformers.__version__}")
        if n <= 2:
            for where, count in frames.most_common(8):
                print(f"UNWIND_FROM step={n} count={count} where={where}")


if __name__ == "__main__":
    main()
