"""A Triton autotune that dies of a CUDA out-of-memory inside the autotuner
(raised from a config's pre_hook, which Triton's `_bench` does not catch, so
it travels up through `Autotuner._bench` and `Autotuner.run`), with the stack
the kernel's caller sees. Prints the traceback's frames (not the message: its
free-memory figures differ run to run) and the stack depth, for
scripts/gpu-traceback.sh to compare plain and under `prewarm-doctor run`.
"""

import inspect
import traceback

import torch
import triton
import triton.language as tl


def exhaust(nargs):
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # 1 PiB: out of memory


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512}, pre_hook=exhaust)],
    key=["n"],
)
@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)


def main():
    x = torch.ones(4096, device="cuda")
    print("DEPTH", len(inspect.stack(0)))
    try:
        double[lambda meta: (triton.cdiv(4096, meta["BLOCK"]),)](x, 4096)
    except torch.OutOfMemoryError as e:
        print("TRACEBACK", type(e).__name__)
        print("".join(traceback.format_tb(e.__traceback__)), end="")
    else:
        print("NO OUT-OF-MEMORY: the check did not exercise the autotuner's failure path")


if __name__ == "__main__":
    main()
