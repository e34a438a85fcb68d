#!/usr/bin/env bash
# GPU verification of the account's arithmetic (issue 15), at most ~4 minutes
# on one H200. Usage, from the repository root on the GPU machine:
#
#   scripts/gpu-verify-account.sh target/release/prewarm-doctor OUTDIR
#
# 1. A cold matrix of examples/all_lazy_init.py under torchrun (one GPU):
#    baseline, each prewarm (cublas, triton_autotune, nccl_comm) and
#    fla_gdn_autotune, a prewarm that is enabled but finds nothing to warm
#    (--prewarm-noop-autotune: logs "enabled but no modules were found").
# 2. One run of examples/cublas_first_backward.py on a GPU shared with a
#    background python that holds 20 GiB (torch.empty) and sleeps.
# Then, per attempt, scripts/account_summary.py prints the remainder at every
# phase end, the tightest step-1 headroom beside the step-1 device peak, the
# smallest device, and per verdict the charged cost beside the total device
# difference; it exits non-zero on an over-explained phase end or a charge
# above the total's change. Run folders, reports and the summaries are left
# in OUTDIR (summary.txt is the closing note). Exit status: 0 when both
# summaries pass.
set -u
BIN=${1:?usage: $0 BIN OUTDIR}
OUT=${2:?usage: $0 BIN OUTDIR}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
STEPS=${STEPS:-3}
REPEAT=${REPEAT:-1}
mkdir -p "$OUT"
rm -rf "$OUT/matrix" "$OUT/shared-gpu"
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=1"
status=0

echo "=== cold matrix: all_lazy_init.py, $REPEAT attempt(s) per variant"
timeout ${MATRIX_TIMEOUT:-240} "$BIN" run --out "$OUT/matrix" --cache cold --repeat "$REPEAT" \
  --variant baseline \
  --variant cublas:--prewarm-cublas \
  --variant triton_autotune:--prewarm-triton-autotune \
  --variant nccl_comm:--prewarm-nccl-comm \
  --variant fla_gdn_autotune:--prewarm-noop-autotune \
  -- $TORCHRUN examples/all_lazy_init.py --steps "$STEPS" --hidden 2048 --batch 2048 \
  > "$OUT/matrix.stdout" 2> "$OUT/matrix.stderr"
echo "doctor exit $?"
grep -h "enabled but no modules were found" -r "$OUT/matrix" --include=output.log | head -1
"$BIN" report "$OUT/matrix" --format json > "$OUT/matrix.json" 2> "$OUT/matrix.report.stderr"
"$BIN" report "$OUT/matrix" > "$OUT/matrix.report.txt" 2>&1
$PY scripts/account_summary.py "$OUT/matrix.json" matrix | tee "$OUT/summary.txt" || status=1

echo "=== shared GPU: another process holds 20 GiB"
rm -f "$OUT/holder.ready"
$PY -c "
import time, torch
x = torch.empty(20 << 30, dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
open('$OUT/holder.ready', 'w').close()
time.sleep(300)
" &
holder=$!
for _ in $(seq 1 60); do [ -e "$OUT/holder.ready" ] && break; sleep 1; done
timeout 45 "$BIN" run --out "$OUT/shared-gpu" -- $PY examples/cublas_first_backward.py --steps "$STEPS" \
  > "$OUT/shared-gpu.stdout" 2> "$OUT/shared-gpu.stderr"
echo "doctor exit $?"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
"$BIN" report "$OUT/shared-gpu" --format json > "$OUT/shared-gpu.json" 2> "$OUT/shared-gpu.report.stderr"
"$BIN" report "$OUT/shared-gpu" > "$OUT/shared-gpu.report.txt" 2>&1
$PY scripts/account_summary.py "$OUT/shared-gpu.json" shared-gpu | tee -a "$OUT/summary.txt" || status=1
exit $status
