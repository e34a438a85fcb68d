#!/usr/bin/env bash
# GPU end-to-end: every example under `prewarm-doctor run`, with and without its
# prewarm, plus deliberate out-of-memory scenarios. Run on a GPU machine from
# the repository root; BIN points at a release build of prewarm-doctor.
# Results: $OUT (or ./gpu-out) gets runs.tar.gz and a log.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
OUT=${OUT:-gpu-out}
RUNS=${RUNS:-/tmp/pd-runs}
STEPS=${STEPS:-6}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$RUNS"
PY=${PY:-python3}

run() { # name, then the command
  local name=$1; shift
  echo "=== $name: $*"
  local t0=$(date +%s.%N)
  "$BIN" run --out "$RUNS/$name" -- "$@" > "$RUNS/$name.stdout" 2> "$RUNS/$name.stderr"
  local rc=$?
  local t1=$(date +%s.%N)
  echo "exit=$rc wall=$(echo "$t1 - $t0" | bc)s"
  grep CROSSCHECK "$RUNS/$name.stdout" | head -2
  tail -n 60 "$RUNS/$name.stderr"
}

if [ "${ONLY:-}" = "" ] || [ "${ONLY}" = "cublas" ]; then
run cublas-baseline $PY examples/cublas_first_backward.py --steps $STEPS
run cublas-prewarm  $PY examples/cublas_first_backward.py --steps $STEPS --prewarm-cublas
fi
if [ "${ONLY:-}" = "" ] || [ "${ONLY}" = "triton" ]; then
run triton-baseline $PY examples/triton_spill_autotune.py --steps $STEPS
run triton-prewarm  $PY examples/triton_spill_autotune.py --steps $STEPS --prewarm-triton-autotune
fi
if [ "${ONLY:-}" = "" ] || [ "${ONLY}" = "nccl" ]; then
run nccl-baseline $PY -m torch.distributed.run --standalone --nproc_per_node=1 examples/nccl_first_collective.py --steps $STEPS
run nccl-prewarm  $PY -m torch.distributed.run --standalone --nproc_per_node=1 examples/nccl_first_collective.py --steps $STEPS --prewarm-nccl-comm
fi
if [ "${OOM:-1}" = "1" ]; then
run oom-triton-baseline $PY examples/triton_spill_autotune.py --steps 3 --occupy-gib=-${OOM_FREE_GIB:-1}
run oom-triton-prewarm  $PY examples/triton_spill_autotune.py --steps 3 --occupy-gib=-${OOM_FREE_GIB:-1} --prewarm-triton-autotune
run oom-nccl-baseline $PY -m torch.distributed.run --standalone --nproc_per_node=1 examples/nccl_first_collective.py --steps 3 --occupy-gib=-${OOM_NCCL_FREE_GIB:-0.05}
run oom-nccl-prewarm  $PY -m torch.distributed.run --standalone --nproc_per_node=1 examples/nccl_first_collective.py --steps 3 --occupy-gib=-${OOM_NCCL_FREE_GIB:-0.05} --prewarm-nccl-comm
fi
# Keep the runs small: drop the isolated caches before packing.
find "$RUNS" -maxdepth 4 -type d -name 'cache-*' -prune -exec rm -rf {} +
tar -C "$RUNS" -czf "$OUT/runs.tar.gz" .
ls -la "$OUT"
