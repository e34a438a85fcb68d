"""The first cuBLAS backward, in one short process: the part of the lazy
workload's step 1 (benches/gpu_overhead_lazy.py) that every `torchrun` call of
benches/gpu_overhead.sh found slower under the doctor (+10 to +15 ms), timed
alone so that many processes fit a call and CUPTI's cost can be told from the
probe's (benches/gpu_first_backward.sh runs it under each).

The same model as the lazy workload (two bf16 linears and an fp32 head): the
forward (the first cuBLAS matmuls, on the main thread), the first backward
(autograd's device thread: its first CUDA calls, its cuBLAS handle and
workspace, the backward's kernels loaded), a second forward and backward,
and the first fp32 matmul on a new Python thread (a new thread's cuBLAS handle
alone). CUDA-synchronised wall time, milliseconds; one `FIRSTBW {json}` line.
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import torch  # noqa: E402

import common  # noqa: E402


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - t0)


def main():
    hidden, batch = 4096, 4096
    out = {}
    out["init"] = timed(lambda: torch.zeros(1, device="cuda"))
    net = common.model(hidden)
    head = torch.nn.Linear(hidden, 16, device="cuda", dtype=torch.float32)
    x = torch.randn(batch, hidden, device="cuda", dtype=torch.bfloat16)
    held = {}

    def forward():
        held["loss"] = head(net(x).float()).square().mean()

    def backward():
        held.pop("loss").backward()

    out["forward"] = timed(forward)
    out["backward"] = timed(backward)
    out["forward2"] = timed(forward)
    out["backward2"] = timed(backward)
    a = torch.randn(256, 256, device="cuda")

    def on_a_new_thread():
        def matmul():
            held["t"] = timed(lambda: a @ a)

        t = threading.Thread(target=matmul)
        t.start()
        t.join()

    on_a_new_thread()
    out["thread_matmul"] = held["t"]
    print("FIRSTBW " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
