#!/usr/bin/env bash
# What makes the first cuBLAS backward slower under the doctor: the short
# process of benches/gpu_first_backward.py run plain and under pieces of the
# doctor, alternated (the order rotates one place a round), so that CUPTI's
# own cost can be told from the probe's:
#   plain           no CUDA injection
#   bare-sub        a bare CUPTI subscriber, nothing enabled (benches/bare_cupti.c)
#   bare-kernels    the same with concurrent-kernel activity records on
#                   (buffers from malloc: CUPTI clears each on the launching thread)
#   bare-kernels-zeroed  the same with buffers promised zeroed (fresh mappings)
#   probe-nokernels the probe, kernel records off (its allocation callbacks)
#   probe           the probe as the doctor injects it (kernel records on)
#   probe-slowtick  the probe with its writer's early tick at 1 s, not 10 ms
# (FIRSTBW_MODES picks; plain always runs). Prints a FIRSTBW line per mode and
# field: the median over rounds in ms and, against plain, the paired
# difference within each round (median, 90% bootstrap interval, rounds above
# zero). BIN: the doctor (for the extracted probe and the CUPTI it found);
# FIRSTBW_ROUNDS (12), FIRSTBW_DEADLINE_S (stop starting rounds after it),
# PYTORCH_CUDA_ALLOC_CONF passes through (both sides alike). Needs gcc.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
PY=${PY:-python3}
OUTDIR=${OUTDIR:-/tmp/pd-firstbw}
ROUNDS=${FIRSTBW_ROUNDS:-12}
MODES=${FIRSTBW_MODES:-bare-sub bare-kernels bare-kernels-zeroed probe-nokernels probe}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUTDIR"
"$BIN" check > "$OUTDIR/check.txt" 2>&1
PROBE=$(sed -n 's/^probe: //p' "$OUTDIR/check.txt")
CUPTI=$(grep -o '/[^ ]*libcupti[^ ]*' "$OUTDIR/check.txt" | head -1)
[ -n "$PROBE" ] && [ -n "$CUPTI" ] || { echo "no probe or CUPTI from '$BIN check':" >&2; cat "$OUTDIR/check.txt" >&2; exit 2; }
gcc -shared -fPIC -O2 -o "$OUTDIR/bare_cupti.so" "$HERE/bare_cupti.c" -ldl || exit 2
STARTED=$(date +%s)

run_mode() { # mode run-dir
  local probe=(CUDA_INJECTION64_PATH="$PROBE" PREWARM_DOCTOR_CUPTI="$CUPTI" PREWARM_DOCTOR_DIR="$2")
  local bare=(CUDA_INJECTION64_PATH="$OUTDIR/bare_cupti.so" PREWARM_DOCTOR_CUPTI="$CUPTI")
  mkdir -p "$2"
  case $1 in
    plain) "$PY" "$HERE/gpu_first_backward.py" ;;
    bare-sub) env "${bare[@]}" BARE_CUPTI=sub "$PY" "$HERE/gpu_first_backward.py" ;;
    bare-kernels) env "${bare[@]}" BARE_CUPTI=kernels "$PY" "$HERE/gpu_first_backward.py" ;;
    bare-kernels-zeroed) env "${bare[@]}" BARE_CUPTI=kernels-zeroed "$PY" "$HERE/gpu_first_backward.py" ;;
    probe) env "${probe[@]}" "$PY" "$HERE/gpu_first_backward.py" ;;
    probe-nokernels) env "${probe[@]}" PREWARM_DOCTOR_KERNEL_RECORDS=0 "$PY" "$HERE/gpu_first_backward.py" ;;
    probe-slowtick) env "${probe[@]}" PREWARM_DOCTOR_EARLY_TICK_MS=1000 "$PY" "$HERE/gpu_first_backward.py" ;;
    *) echo "unknown mode $1" >&2; return 2 ;;
  esac
}

all=(plain $MODES)
: > "$OUTDIR/results.txt"
last=0
for r in $(seq 1 "$ROUNDS"); do
  if [ "$r" -gt 1 ] && [ -n "${FIRSTBW_DEADLINE_S:-}" ] \
    && [ $(( $(date +%s) - STARTED + last )) -gt "$FIRSTBW_DEADLINE_S" ]; then
    echo "DEADLINE: $((r - 1)) of $ROUNDS rounds ran"
    break
  fi
  began=$(date +%s)
  shift_by=$(( (r - 1) % ${#all[@]} ))
  for mode in "${all[@]:$shift_by}" "${all[@]:0:$shift_by}"; do
    run_mode "$mode" "$OUTDIR/$mode-$r" 2>> "$OUTDIR/stderr.log" \
      | grep '^FIRSTBW ' | sed "s/^/$mode round=$r /" >> "$OUTDIR/results.txt"
  done
  last=$(( $(date +%s) - began ))
done

"$PY" - "$OUTDIR/results.txt" <<'PYEOF'
import json, random, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, rnd, _, doc = line.split(" ", 3)
    runs.setdefault(mode, {})[int(rnd.split("=")[1])] = json.loads(doc)
plain = runs.get("plain", {})
fields = list(next(iter(plain.values()), {}).keys())
rng = random.Random(0)
def interval(diffs):
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(2000))
    return meds[100], meds[1899]
for mode, by_round in runs.items():
    for f in fields:
        values = [d[f] for d in by_round.values() if f in d]
        line = f"FIRSTBW mode={mode} field={f} rounds={len(values)} median_ms={statistics.median(values):.2f} min={min(values):.2f} max={max(values):.2f}"
        if mode != "plain":
            diffs = [d[f] - plain[r][f] for r, d in by_round.items() if r in plain and f in d]
            if diffs:
                lo, hi = interval(diffs)
                line += (f" paired_diff_ms={statistics.median(diffs):+.2f} interval=({lo:+.2f}..{hi:+.2f})"
                         f" above_zero={sum(x > 0 for x in diffs)}/{len(diffs)}")
        print(line)
PYEOF
