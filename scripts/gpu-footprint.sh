#!/usr/bin/env bash
# The footprint checks of issue 18 in one GPU call: on each allocator the
# silence check (the lazy workload's training stderr plain vs under the
# doctor) and the traceback check (a Triton out-of-memory's traceback plain
# vs under the doctor), then benches/gpu_overhead.sh rounds of OVERHEAD_MODES
# until the call's time is spent. Every allocator's steptimes file is kept
# in $OUT, to pool over calls with benches/gpu_overhead_summary.py.
# BIN: a release build; OUT: where results go; CALL_S: the call's seconds
# (default 560); ALLOCATORS (default "default async"); CHECKS=0 skips the
# silence and traceback checks. The bench's own variables pass through
# (OVERHEAD_STEPS, OVERHEAD_LAZY_ARGS, OVERHEAD_PIN, ...).
set -u
BIN=${BIN:-target/release/prewarm-doctor}
OUT=${OUT:-gpu-out}
CALL_S=${CALL_S:-560}
ALLOCATORS=${ALLOCATORS:-default async}
T0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
for alloc in $ALLOCATORS; do
  if [ "$alloc" = async ]; then export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync; else unset PYTORCH_CUDA_ALLOC_CONF; fi
  [ "${CHECKS:-1}" = 1 ] || continue
  echo "== $alloc: silence ($(( $(date +%s) - T0 )) s)"
  # A 4096 block keeps the cold-cache compile of the silence runs short.
  SPILL_BLOCK=4096 BIN=$BIN OUT=$OUT/silence-$alloc RUNS=/tmp/pd-footprint-$alloc SECTIONS=silence \
    bash scripts/gpu-e2e.sh 2>&1 | grep -A8 -E '^(plain|doctor) exit|^SILENCE'
  "$BIN" report /tmp/pd-footprint-$alloc/silence-doctor > "$OUT/silence-$alloc/report.txt" 2>&1
  rm -f "$OUT/silence-$alloc"/runs-*.tar.gz
  echo "== $alloc: traceback ($(( $(date +%s) - T0 )) s)"
  BIN=$BIN OUT=/tmp/pd-footprint-tb-$alloc bash scripts/gpu-traceback.sh > "$OUT/traceback-$alloc.txt" 2>&1
  grep -E '^TRACEBACK-' "$OUT/traceback-$alloc.txt"
done
unset PYTORCH_CUDA_ALLOC_CONF
LEFT=$(( CALL_S - ($(date +%s) - T0) ))
echo "== overhead: ${OVERHEAD_MODES:-doctor} on $ALLOCATORS, ${LEFT} s left"
# A fresh folder each call: on a machine still warm from an earlier call, an
# old folder's steptimes files of another allocator would be copied as this
# call's (and pooled twice).
ROUNDS_DIR=$(mktemp -d /tmp/pd-footprint-overhead.XXXXXX)
OVERHEAD_ALLOCATORS="$ALLOCATORS" OVERHEAD_ROUNDS=${OVERHEAD_ROUNDS:-40} BIN=$BIN OUTDIR=$ROUNDS_DIR \
  OVERHEAD_DEADLINE_S=$(( LEFT - 45 )) timeout $(( LEFT > 10 ? LEFT - 5 : 5 )) bash benches/gpu_overhead.sh > "$OUT/overhead.txt" 2>&1
grep -E '^(OVERHEAD|PAIRED|PART|TARGET|OWN|PROBE|DEADLINE|ELAPSED)' "$OUT/overhead.txt"
cp "$ROUNDS_DIR"/steptimes-*.txt "$OUT/" 2>/dev/null
echo "== done in $(( $(date +%s) - T0 )) s"
