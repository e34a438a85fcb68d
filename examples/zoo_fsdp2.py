"""Zoo (issue 35): FSDP2 (`torch.distributed.fsdp.fully_shard`, bf16 params,
fp32 reduce) over NCCL on a randomly initialised Hugging Face `transformers`
Mistral (no download), one process per GPU under torchrun, AdamW and
grad-norm clipping over the sharded parameters, the loss averaged over ranks
for the log (`all_reduce`: with one rank, FSDP2 itself runs no collective,
so this is the default group's first). Nothing in it was written for
prewarm-doctor. Prints `CROSSCHECK` and `LOSS` per step.

Prewarms: `--prewarm-cublas` (a tiny forward+backward per dtype at setup);
`--prewarm-nccl-comm` (one all-reduce on the default group at setup, which
FSDP2's all-gathers and reduce-scatters use).
"""

import os

import torch
import torch.distributed as dist

import common
from zoo_hf_decoder import prewarm_cublas


def build(hidden, layers, vocab):
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 128),
        num_key_value_heads=max(1, hidden // 256),
        head_dim=128,
        max_position_embeddings=4096,
    )
    return MistralForCausalLM(cfg).to(device="cuda")


def sharded(hidden, layers=4, vocab=32000):
    """The model built and sharded as main() shards it: FSDP2 on each layer,
    then on the whole, bf16 parameters and fp32 reduction (benches/ time its
    steady step in one process the same way)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = build(hidden, layers=layers, vocab=vocab)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def loss_step(model, tokens):
    """A step before its optimizer: forward, backward, grad-norm clipping,
    and the mean loss over ranks for the log, as training loops do (the
    default group's first collective: with one rank FSDP2 runs none)."""
    out = model(input_ids=tokens, labels=tokens)
    common.cut("forward")  # FSDP2's lazy init, the first all-gathers' copies
    out.loss.backward()
    common.cut("backward")
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    common.cut("clip")
    logged = out.loss.detach().clone()
    dist.all_reduce(logged, op=dist.ReduceOp.AVG)
    common.cut("all_reduce")  # the default group's NCCL communicator
    return logged


def main():
    args = common.parse(
        __doc__,
        {"cublas": "tiny fwd+bwd per dtype at setup", "nccl_comm": "one all-reduce on the default group at setup"},
    )
    dev = common.init_torchrun(port=29561)
    model = sharded(args.hidden if args.hidden != 4096 else 1024)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.prewarm_cublas:
        prewarm_cublas(model)
    if args.prewarm_nccl_comm:
        common.warm_groups(dev, [dist.group.WORLD])
    gen = torch.Generator(device=dev).manual_seed(1 + int(os.environ.get("RANK", "0")))
    seq = 1024
    tokens = torch.randint(0, 32000, (max(1, args.batch // seq), seq), device=dev, generator=gen)

    common.train(args, lambda n: loss_step(model, tokens), opt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
