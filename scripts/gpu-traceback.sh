#!/usr/bin/env bash
# No frames of ours in the training's tracebacks (issue 18), on a GPU with
# real Triton: scripts/gpu_traceback_oom.py raises a CUDA out-of-memory inside
# Triton's autotuner; its traceback frames and stack depth must be the same
# byte for byte plain and under `prewarm-doctor run` (on Python >= 3.12 the
# shim observes Triton through sys.monitoring). Prints TRACEBACK-SAME or
# TRACEBACK-DIFFERS (with the diff) and exits 0 or 1.
# BIN: a release build of prewarm-doctor; PY: python3.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
PY=${PY:-python3}
OUT=${OUT:-/tmp/pd-traceback}
rm -rf "$OUT"; mkdir -p "$OUT"
"$PY" -c 'import sys; print("python", sys.version.split()[0], "sys.monitoring:", hasattr(sys, "monitoring"))'
"$PY" scripts/gpu_traceback_oom.py > "$OUT/plain.txt" 2> "$OUT/plain.err"
"$BIN" run --out "$OUT/run" -- "$PY" scripts/gpu_traceback_oom.py > "$OUT/doctor.txt" 2> "$OUT/doctor.err"
cat "$OUT/plain.txt"
if grep -q '^TRACEBACK' "$OUT/plain.txt" && cmp -s "$OUT/plain.txt" "$OUT/doctor.txt"; then
  echo "TRACEBACK-SAME"
else
  echo "TRACEBACK-DIFFERS"
  diff "$OUT/plain.txt" "$OUT/doctor.txt"
  exit 1
fi
# The autotune was still observed: its configs appear in the shim's events.
grep -h '"ev": "autotune_config"' "$OUT"/run/*/*/*/*.shim.jsonl 2>/dev/null | head -3 || echo "(no autotune_config event found)"
