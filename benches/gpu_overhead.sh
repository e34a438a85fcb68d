#!/usr/bin/env bash
# Probe overhead on a GPU machine: the same workload plain and under
# `prewarm-doctor run`, alternated ROUNDS times, side by side on one GPU.
# Prints each run's STEPTIMES and the median ratios. BIN: the doctor binary;
# OVERHEAD_ROUNDS (3) and OVERHEAD_STEPS (300, at least 40) size it.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
ROUNDS=${OVERHEAD_ROUNDS:-3}
STEPS=${OVERHEAD_STEPS:-300}
PY=${PY:-python3}
OUTDIR=${OUTDIR:-/tmp/pd-overhead}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUTDIR"
: > "$OUTDIR/steptimes.txt"
for r in $(seq 1 "$ROUNDS"); do
  $PY benches/gpu_overhead.py --steps "$STEPS" | grep STEPTIMES | sed "s/^/plain /" >> "$OUTDIR/steptimes.txt"
  "$BIN" run --out "$OUTDIR/probe-$r" -- $PY benches/gpu_overhead.py --steps "$STEPS" 2>/dev/null | grep STEPTIMES | sed "s/^/probe /" >> "$OUTDIR/steptimes.txt"
done
cat "$OUTDIR/steptimes.txt"
$PY - "$OUTDIR/steptimes.txt" <<'PYEOF'
import json, statistics, sys
rows = {"plain": [], "probe": []}
for line in open(sys.argv[1]):
    kind, _, payload = line.partition(" STEPTIMES ")
    rows[kind.strip()].append(json.loads(payload))
def med(kind, key):
    return statistics.median(r[key] for r in rows[kind])
steady = med("probe", "steady_median") / med("plain", "steady_median")
step1 = med("probe", "step1") / med("plain", "step1")
mem = med("probe", "device_used") - med("plain", "device_used")
print(f"OVERHEAD steady_ratio={steady:.4f} step1_ratio={step1:.4f} probe_device_bytes={mem:.0f} "
      f"plain_steady_ms={1000*med('plain','steady_median'):.3f} probe_steady_ms={1000*med('probe','steady_median'):.3f}")
PYEOF
