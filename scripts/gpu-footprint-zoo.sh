#!/usr/bin/env bash
# Issue 37 on the GPU machine, in one call: (1) `verify`: each script VERIFY
# names (lazy — Triton autotune with spilling candidates, the first cuBLAS
# backward, a new NCCL communicator in step 1 —, hf, fsdp2, compiled;
# default "lazy hf"; warm caches) once under the doctor's defaults and once
# under each of VERIFY_VARIANTS (below): their reports and the probe's
# first-launch and local-memory records, side by side, and the phase ends
# whose account is out of bounds (scripts/account_flags.py); then (2) the
# footprint rounds of benches/gpu_overhead.sh (CELLS: workload:allocator
# pairs, ROUNDS alternated rounds each, interleaved round by round across
# the cells, one shape for step 1 and the steady state), until the call's
# deadline. Usage, from the
# repository root:
#
#   BIN=.gpu/prewarm-doctor OUT=$OUT SECTIONS="verify rounds" \
#     CELLS="lazy:default hf:default fsdp2:default" scripts/gpu-footprint-zoo.sh
#
# MODES (default `doctor`) adds the bench's modes to every round, e.g.
# MODES="doctor no-kernels" for where a step-1 extra goes (2026-12-04's hf
# breakdown had 2 rounds); the `fla` cell needs its wheels in .whl/ (carry
# .whl) and a first cold compile (minutes) before its rounds.
#
# SECTIONS may also name `units` (one launch's cost under each way of taking
# kernel records), `parts` (step 1's lazy parts one by one under the
# doctor's modes, benches/gpu_lazy_parts.py), `contention` (benches/gpu_nvml_contention.py: NVML
# sampling and a CUPTI subscription against a CPU-bound training step, in
# one process) and `toggles` (benches/gpu_steady_toggles.py: fsdp2's steady
# step with one piece of the doctor held off and on in one process;
# TOGGLES_PROCESSES processes, 3), `modules` (benches/gpu_cupti_module_loads.py:
# CUPTI alone, one process, module loads and first launches under each
# CUPTI state; MODULES_PROCESSES processes, 3) and `residual` (benches/gpu_cupti_residual.py:
# CUPTI alone, no probe, set up one way a process — records switched on
# and off around a first launch, toggled, inside a launch callback — then
# a launch timed; RESIDUAL_ROUNDS rounds, 8) and `siblings`
# (benches/cpu_siblings.py: which CPUs, busy, slow the one the examples'
# main thread runs on, or with SIBLINGS_CPU=all every CPU in turn, about
# a minute on 16; a virtual machine hides the cores it shares; then
# SIBLINGS_PROCESSES fresh interpreters timed on that CPU, 24 by default,
# SIBLINGS_SERIES timings in one process, 300, a short loop's timings by
# millisecond for SIBLINGS_GRAIN_S seconds on each CPU (1; SIBLINGS_GRAIN_CPU
# one CPU instead of all), and that CPU beside each other at the same
# moments for SIBLINGS_TOGETHER_S seconds a pair, 2: about 75 s more
# on 16 CPUs).
#
# Results in $OUT: verify/ (reports, record lists, diffs) and
# steptimes-<workload>-<allocator>-<tag>.txt per cell (every STEPTIMES row,
# unmodified, for tests/fixtures/h200-overhead), summary.txt.
set -u
BIN=${BIN:?BIN=path of the prewarm-doctor binary}
OUT=${OUT:?OUT=output folder}
SECTIONS=${SECTIONS:-"verify rounds"}
CELLS=${CELLS:-"lazy:default hf:default fsdp2:default"}
ROUNDS=${ROUNDS:-9}
DEADLINE_S=${DEADLINE_S:-560}
TAG=${TAG:-$(date +%Y%m%d-%H%M)}
START=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PY:-python3}
mkdir -p "$OUT"
. scripts/gpu-wheels.sh
left() { echo $((DEADLINE_S - ($(date +%s) - START))); }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
# The lazy workload's shape: a GPU-bound 20 ms steady step, so that whole
# processes agree to 1% and the steady target can resolve; step 1 judged
# on the same shape.
LAZY_ARGS=${LAZY_ARGS:---batch 65536}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import sys, torch, triton, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"
# Whether this machine counts the main thread's instructions (the rows'
# WORK lines need them): one COUNTER line a counter.
$PY examples/thread_counters.py instructions cycles task_clock

# One script run under the doctor with kernel records taken around each
# function's first launch (`first`, the default) and under each of
# VERIFY_VARIANTS (default `all`): `all` a record on every launch
# (PREWARM_DOCTOR_KERNEL_RECORDS=all, the path before), `detach` first
# launches with CUPTI detached after the watch and attached again
# (PREWARM_DOCTOR_DETACH_AFTER_WATCH=1, the default since 2026-12-07),
# `attached` CUPTI left attached after it (=0, the default before). (Call 25's `end-cycle` and
# `linger` variants measured two bench switches removed since: see
# docs/footprint.md, ninth session.) Each against `first`: reports,
# record lists and their differences, timestamps and correlation ids aside.
variant_env() { # variant: the environment assignments it runs with
  case $1 in
  first) echo PREWARM_DOCTOR_KERNEL_RECORDS=first ;;
  all) echo PREWARM_DOCTOR_KERNEL_RECORDS=all ;;
  detach) echo PREWARM_DOCTOR_KERNEL_RECORDS=first PREWARM_DOCTOR_DETACH_AFTER_WATCH=1 ;;
  attached) echo PREWARM_DOCTOR_KERNEL_RECORDS=first PREWARM_DOCTOR_DETACH_AFTER_WATCH=0 ;;
  *) echo "unknown VERIFY_VARIANTS entry $1 (all, detach, attached)" >&2; return 2 ;;
  esac
}
verify_one() { # name, command...
  local name=$1; shift
  local V=$OUT/verify/$name W; W=$(mktemp -d); mkdir -p "$V"
  "$@" > "$V/warm.stdout" 2> "$V/warm.stderr"; echo "$name: warm-up plain exit $?"
  for variant in first ${VERIFY_VARIANTS:-all}; do
    local assignments; assignments=$(variant_env "$variant") || return 2
    env $assignments "$BIN" run --cache user --out "$W/$variant" -- "$@" > "$V/$variant.stdout" 2> "$V/$variant.stderr"
    echo "$name $variant: doctor exit $?"
    "$BIN" report "$W/$variant" > "$V/$variant.report.txt" 2>&1
    "$BIN" report --format json "$W/$variant" > "$V/$variant.report.json" 2>/dev/null
    # The account read as a user would: phase ends out of bounds, named.
    $PY scripts/account_flags.py "$name-$variant" "$V/$variant.report.json"
    find "$W/$variant" -name '*.events' ! -name nvml.events | sort | while read -r f; do
      "$BIN" dump "$f"
    done > "$V/$variant.dump.txt" 2>&1
    grep -E 'KernelFirst|LocalMemory|Activity' "$V/$variant.dump.txt" | sed -E 's/t(_start|_end)?: [0-9]+,? ?//g' \
      > "$V/$variant.kernel-records.txt"
    echo "$name $variant: $(grep -c KernelFirst "$V/$variant.kernel-records.txt") first launches, $(grep -c LocalMemory "$V/$variant.kernel-records.txt") local-memory records, $(grep -c Activity "$V/$variant.kernel-records.txt") switches; $(grep -m1 -o 'activity_records: [0-9]*' <(grep 'Cost' "$V/$variant.dump.txt" | tail -1))"
    grep -E 'STEPTIMES' "$V/$variant.stdout"
    grep -h -o 'CUPTI detached[^"]*' "$V/$variant.dump.txt" | head -2
    # The longest single callbacks of the run (probe 0.2.3 on): time, id.
    echo "$name $variant: slowest callbacks (ns, CUPTI id): $(grep -o 'slowest_callback_ns: [0-9]*, slowest_callback_id: [0-9]*' "$V/$variant.dump.txt" \
      | sed -E 's/slowest_callback_ns: ([0-9]+), slowest_callback_id: ([0-9]+)/\1:\2/' | sort -t: -k1 -n | tail -3 | tr '\n' ' ')"
    # Step 1's, by name, as the report gives it (longest_callback).
    $PY -c 'import json, sys
for a in json.load(open(sys.argv[1])).get("attempts", []):
    for p in a.get("processes", []):
        for ph in p.get("phases", []):
            l = ph.get("phase") == "step1" and (ph.get("probe_callbacks_split") or {}).get("longest_callback")
            if l:
                ms, call = 1e3 * l["seconds"], l["name"]
                print(f"{sys.argv[2]}: step 1 longest callback {ms:.2f} ms, {call}")' \
      "$V/$variant.report.json" "$name $variant"
  done
  grep -E 'LocalMemory' "$V/first.kernel-records.txt" | head -8
  for variant in ${VERIFY_VARIANTS:-all}; do
    diff <(grep -v Activity "$V/$variant.kernel-records.txt" | sed -E 's/correlation_id: [0-9]+//' | sort) \
         <(grep -v Activity "$V/first.kernel-records.txt" | sed -E 's/correlation_id: [0-9]+//' | sort) > "$V/$variant-vs-first.diff"
    echo "$name kernel records, $variant vs first: $(grep -c '^[<>]' "$V/$variant-vs-first.diff") lines differ"
    head -20 "$V/$variant-vs-first.diff"
    # The reports with every number masked: what they say, not their figures.
    diff <(sed -E 's/[0-9]+([.,][0-9]+)*/N/g' "$V/$variant.report.txt") <(sed -E 's/[0-9]+([.,][0-9]+)*/N/g' "$V/first.report.txt") > "$V/$variant-report-words.diff"
    echo "$name reports, $variant vs first, numbers masked: $(grep -c '^[<>]' "$V/$variant-report-words.diff") lines differ"
    head -30 "$V/$variant-report-words.diff"
  done
  sed -n '1,60p' "$V/first.report.txt"
  (cd "$W" && find . -type d -name 'cache-*' -prune -exec rm -rf {} + ; tar czf "$V/runs.tar.gz" first ${VERIFY_VARIANTS:-all})
  echo "$name verify done at $(( $(date +%s) - START )) s"
}

if has verify; then
  read -r -a extra <<< "$LAZY_ARGS"
  for w in ${VERIFY:-lazy hf}; do
    case $w in
    lazy) verify_one lazy $PY benches/gpu_overhead_lazy.py --steps 30 "${extra[@]}" ;;
    hf) verify_one hf $PY examples/zoo_hf_decoder.py --steps 30 --hidden 1024 --batch 8192 ;;
    fsdp2) verify_one fsdp2 $PY examples/zoo_fsdp2.py --steps 30 --hidden 1024 --batch 8192 ;;
    compiled) verify_one compiled $PY examples/zoo_compiled.py ;;
    *) echo "unknown VERIFY entry $w (lazy, hf, fsdp2, compiled)" >&2 ;;
    esac
  done
fi

# What one launch costs under each way of taking kernel records
# (benches/gpu_overhead.sh units: the doctor never sees a step end there,
# so the watch stays on throughout), UNITS_ROUNDS alternated rounds.
if has units; then
  D=$(mktemp -d /tmp/pd-units.XXXXXX)
  OVERHEAD_ROUNDS=${UNITS_ROUNDS:-3} OVERHEAD_MODES="kernels-first kernels-all no-kernels" BIN=$BIN OUTDIR=$D PY=$PY \
    timeout $(( $(left) - 5 )) bash benches/gpu_overhead.sh units > "$D/units-out.txt" 2>&1
  cp "$D/units.txt" "$OUT/units-$TAG.txt" 2>/dev/null
  grep -E '^(UNIT|FAILED|ELAPSED)' "$D/units-out.txt" | tee -a "$OUT/summary.txt"
  tail -5 "$D/stderr.log" 2>/dev/null | sed "s/^/stderr units: /"
fi

# Where a CPU-bound step's steady extra comes from, inside one process
# (benches/gpu_nvml_contention.py: the hf training step, and the driver
# calls, with NVML sampled at the doctor's rates and with CUPTI subscribed
# to the probe's steady-state callbacks, against neither, block by block).
# CONTENTION_ALLOCATORS (default: "default") runs it once a allocator;
# `async` adds the stream-ordered and pool-read modes.
if has contention; then
  for a in ${CONTENTION_ALLOCATORS:-default}; do
    NVML_ALLOCATOR=$a NVML_BLOCKS=${CONTENTION_BLOCKS:-12} timeout $(( $(left) - 5 )) \
      $PY benches/gpu_nvml_contention.py > "$OUT/contention-$a-$TAG.txt" 2>&1
    grep -E '^NVML' "$OUT/contention-$a-$TAG.txt" | sed "s/^/$a /" | tee -a "$OUT/summary.txt"
    tail -3 "$OUT/contention-$a-$TAG.txt"
  done
fi

# Step 1's lazy parts one by one (benches/gpu_lazy_parts.py: CUDA's
# context, torch's first kernels, new allocator segments, cuBLAS, the first
# and a further NCCL communicator, FSDP2's collectives, launches), one short
# process a mode and round: which part the doctor slows. PARTS_MODES picks
# the modes (the bench's default without), PARTS_ROUNDS the rounds (12).
if has parts; then
  LAZY_PARTS_MODES=${PARTS_MODES:-"doctor no-probe no-kernels no-nvml nccl-log"} \
  LAZY_PARTS_ROWS="$OUT/lazy-parts-$TAG.txt" LAZY_PARTS_DEADLINE_S=$(( $(left) - 40 )) BIN=$BIN \
    timeout $(( $(left) - 5 )) $PY benches/gpu_lazy_parts.py ${PARTS_ROUNDS:-12} > "$OUT/lazy-parts-out-$TAG.txt" 2>&1
  grep -E '^(LAZY_PART|FAILED|DEADLINE)' "$OUT/lazy-parts-out-$TAG.txt" | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/lazy-parts-out-$TAG.txt"
fi

# fsdp2's steady step with the probe's callbacks, the shim's program-wide
# monitoring event or the doctor's own process (its NVML sampler) held off
# and on in blocks within one process.
if has toggles; then
  STEADY_TOGGLES_ROWS="$OUT/steady-toggles-$TAG.txt" STEADY_TOGGLES_DEADLINE_S=$(( $(left) - 90 )) BIN=$BIN \
    timeout $(( $(left) - 5 )) $PY benches/gpu_steady_toggles.py ${TOGGLES_PROCESSES:-3} > "$OUT/steady-toggles-out-$TAG.txt" 2>&1
  grep -E '^(TOGGLE_PAIRED|TOGGLE_MISSING|FAILED|DEADLINE)' "$OUT/steady-toggles-out-$TAG.txt" | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/steady-toggles-out-$TAG.txt"
fi

# CUPTI alone, in one process, on module loads and first launches (a cubin
# loaded again and again, blocks under each CUPTI state in ABBA order):
# whether CUPTI attached slows step 1's first-use work beyond the probe's
# own callbacks.
if has modules; then
  CUPTI_MODULES_ROWS="$OUT/modloads-$TAG.txt" CUPTI_MODULES_DEADLINE_S=$(( $(left) - 60 )) BIN=$BIN \
    timeout $(( $(left) - 5 )) $PY benches/gpu_cupti_module_loads.py ${MODULES_PROCESSES:-3} > "$OUT/modloads-out-$TAG.txt" 2>&1
  grep -E '^(MODLOADS_|FAILED|DEADLINE)' "$OUT/modloads-out-$TAG.txt" | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/modloads-out-$TAG.txt"
fi

# What CUPTI alone leaves on a launch after kernel records were on: which
# part of the probe's first-launch pattern makes the 0.8 µs a launch after
# the watch (docs/footprint.md, tenth session).
if has residual; then
  CUPTI_RESIDUAL_ROWS="$OUT/cupti-residual-$TAG.txt" CUPTI_RESIDUAL_DEADLINE_S=$(( $(left) - 40 )) BIN=$BIN \
    timeout $(( $(left) - 5 )) $PY benches/gpu_cupti_residual.py ${RESIDUAL_ROUNDS:-8} > "$OUT/cupti-residual-out-$TAG.txt" 2>&1
  grep -E '^(CUPTI_RESIDUAL|FAILED|DEADLINE)' "$OUT/cupti-residual-out-$TAG.txt" | tee -a "$OUT/summary.txt"
  tail -3 "$OUT/cupti-residual-out-$TAG.txt"
fi

# Which CPUs share a hidden core with the highest one, where the examples'
# main thread runs: 2026-12-07's calls 64-66 found one fixed loop taking
# about 10 ms in some processes and 18 in most, on that CPU.
if has siblings; then
  timeout $(( $(left) - 5 )) $PY benches/cpu_siblings.py ${SIBLINGS_CPU:+--cpu $SIBLINGS_CPU} \
    > "$OUT/siblings-$TAG.txt" 2>&1
  grep -E '^SIBLINGS' "$OUT/siblings-$TAG.txt" | tee -a "$OUT/summary.txt"
  # And whether the speed belongs to the process: SIBLINGS_PROCESSES fresh
  # interpreters (default 24) on the same CPU, the loop 5 times in each.
  timeout $(( $(left) - 5 )) $PY benches/cpu_siblings.py ${SIBLINGS_CPU:+--cpu $SIBLINGS_CPU} \
    --processes "${SIBLINGS_PROCESSES:-24}" > "$OUT/process-speeds-$TAG.txt" 2>&1
  grep -E '^PROCESS_SPEEDS' "$OUT/process-speeds-$TAG.txt" | tee -a "$OUT/summary.txt"
  # Or the moment: SIBLINGS_SERIES timings (default 300, a few seconds) in
  # one process.
  timeout $(( $(left) - 5 )) $PY benches/cpu_siblings.py ${SIBLINGS_CPU:+--cpu $SIBLINGS_CPU} \
    --series "${SIBLINGS_SERIES:-300}" > "$OUT/series-$TAG.txt" 2>&1
  grep -E '^SERIES_SPEEDS' "$OUT/series-$TAG.txt" | tee -a "$OUT/summary.txt"
  # What a slow stretch is (every timing slower, or a few taken away), on
  # every CPU; then whether CPUs are slow at the same moments (where they
  # are, plain and doctor run side by side would share the moment).
  timeout $(( $(left) - 5 )) $PY benches/cpu_siblings.py --cpu "${SIBLINGS_GRAIN_CPU:-all}" \
    --grain "${SIBLINGS_GRAIN_S:-1}" > "$OUT/grain-$TAG.txt" 2>&1
  grep -E '^GRAIN' "$OUT/grain-$TAG.txt" | tee -a "$OUT/summary.txt"
  timeout $(( $(left) - 5 )) $PY benches/cpu_siblings.py ${SIBLINGS_TOGETHER_CPU:+--cpu $SIBLINGS_TOGETHER_CPU} \
    --together "${SIBLINGS_TOGETHER_S:-2}" > "$OUT/together-$TAG.txt" 2>&1
  grep -E '^TOGETHER' "$OUT/together-$TAG.txt" | tee -a "$OUT/summary.txt"
fi

# The cells' rounds interleave (round r of every cell before round r+1 of
# any), so the machine's drift falls on every cell alike and the deadline
# leaves each the same number of rounds; 15 s a cell are kept for the
# summaries (the doctor's reports of every run, for the OWN lines). The
# SPREAD lines give the plain runs' own range: a machine whose plain steady
# step spreads by tens of percent (calls 29-31) resolves no 1% target.
if has rounds; then
  l=$(left)
  if [ "$l" -lt 90 ]; then
    echo "CELLS $CELLS: skipped, $l s left"
  else
    D=$(mktemp -d /tmp/pd-fp.XXXXXX)
    n=$(wc -w <<< "$CELLS")
    echo "== $CELLS: $ROUNDS rounds, interleaved, $l s left"
    OVERHEAD_CELLS=$CELLS OVERHEAD_ROUNDS=$ROUNDS OVERHEAD_MODES=${MODES:-doctor} \
      OVERHEAD_LAZY_LAUNCH=python OVERHEAD_LAZY_ARGS="$LAZY_ARGS" OVERHEAD_DEADLINE_S=$((l - 10 - 15 * n)) \
      BIN=$BIN OUTDIR=$D PY=$PY timeout $((l - 5)) bash benches/gpu_overhead.sh > "$D/bench.txt" 2>&1
    grep -E '^(PAIRED|DETACH_PAIRED|SPREAD|SIGN|SPEED|ISSUE|PROCESS|THREADS|STATE|PLACEMENT|TARGET|CONTROL|PART|PART_PAIRED|BREAKDOWN|OWN|PROBE|LAUNCHES|FAILED|NCCL_INIT|DEADLINE|ELAPSED)' "$D/bench.txt" | tee -a "$OUT/summary.txt"
    cp "$D/nccl-init.txt" "$OUT/nccl-init-$TAG.txt" 2>/dev/null
    [ -f "$D/walls.txt" ] && tee -a "$OUT/summary.txt" < "$D/walls.txt"
    for cell in $CELLS; do
      w=${cell%%:*}; a=${cell##*:}
      cp "$D/steptimes-$w-$a.txt" "$OUT/steptimes-$w-$a-$TAG.txt" 2>/dev/null
    done
    tail -5 "$D/stderr.log" 2>/dev/null | sed "s/^/stderr: /"
  fi
fi
echo "== done in $(( $(date +%s) - START )) s"
