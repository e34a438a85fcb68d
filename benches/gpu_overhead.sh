#!/usr/bin/env bash
# Probe overhead on a GPU machine: the same workload plain and under
# `prewarm-doctor run`, alternated ROUNDS times, side by side on one GPU.
#
# By default (about 6 minutes on an H200): workload `lazy`, both allocators,
# 5 rounds, mode `doctor`. Targets: step 1 <= 1.03x and steady state <= 1.01x
# of the plain run, on each allocator (a TARGET line says ok or over).
# `benches/gpu_overhead.sh breakdown` instead finds where step 1's extra time
# goes: the doctor with one part switched off at a time (kernel records,
# the shim's hooks, NVML sampling, the run folder on tmpfs, the probe itself;
# add `doctor-modules` to OVERHEAD_MODES for the module-loaded callbacks, off
# by default), 3 rounds, default allocator (about 6 minutes on an H200); a
# BREAKDOWN line per part gives the step-1 milliseconds it costs
# (doctor minus doctor-without-it, medians), docs/footprint.md's table.
#
# Workloads (OVERHEAD_WORKLOADS): `lazy` (benches/gpu_overhead_lazy.py under
# torchrun, one rank: the training of examples/all_lazy_init.py, whose step 1
# has a Triton autotune, the first cuBLAS backward and a new NCCL
# communicator; a first untimed plain and doctor run warms the caches;
# OVERHEAD_LAZY_LAUNCH=python runs it as a one-rank job without torchrun:
# a few seconds less a run, so more rounds fit a time-limited call),
# `hf`, `fsdp2`, `fla` (models not written for the tool, examples/zoo_*.py,
# below), `gemm` (large matmuls, GPU-bound, ~20 ms
# steps) and `launch` (small layers, many short kernels: CPU/launch-bound,
# where any per-launch cost shows). Modes (OVERHEAD_MODES, each against
# `plain`): `doctor` (what users run); for finding a cost: `no-probe`
# (doctor with shim and NVML sampler, no probe), `no-kernels` (doctor with
# kernel records off), `shim-only` (the Python shim alone), `probe-only` (the
# probe injected alone, kernel records off), `doctor-modules` and
# `probe-modules` (the same with CUPTI's module-loaded callback on), `no-shim`
# (PREWARM_DOCTOR_SHIM=0), `detach` (PREWARM_DOCTOR_DETACH_AFTER_WATCH=1:
# CUPTI detached after the first-launch watch and attached again — the
# doctor's default since 2026-12-07), `attached` (=0: CUPTI stays attached,
# the doctor's default before), `detach-bare`
# (=bare: not attached again, nothing traced after the watch), `no-nccl-log` (NCCL_DEBUG=WARN set as a user
# would: the doctor leaves NCCL's log alone), `no-nvml` (PREWARM_DOCTOR_NVML_SAMPLING=0),
# `nvml-10ms` (PREWARM_DOCTOR_NVML_PERIOD_MS=10: NVML's device query every
# 10 ms instead of every millisecond),
# `step-lines` (PREWARM_DOCTOR_STEP_FILE=0: warm steps' ends written as
# lines, not stored into the step file), `pool-calls` (PREWARM_DOCTOR_POOL_CALLS=4096:
# stream-ordered calls traced until 4096 in a row on known pools, not only
# until a step on known pools), `no-pool-reads` (PREWARM_DOCTOR_POOL_READ_MS=0:
# the writer no longer reads the async allocator's pool every 100 ms after
# the first steps, only at their end and at exit),
# `bench-records` (PREWARM_DOCTOR_BENCH_RECORDS=1: the kernel watch stays on
# through autotune benchmarks' repetitions, as before it was paused),
# `kernels-all` (PREWARM_DOCTOR_KERNEL_RECORDS=all: a kernel record for every
# launch while the first steps are watched, the path before first-launch
# tracing), `watch-all` (--kernel-steps 100000: the first-launch watch, its
# launch callbacks two a launch, never ends; with `doctor` too, a LAUNCHES
# line gives the launches of a steady step from the two runs' probe lines,
# and its PAIRED line what a traced launch call costs this step),
# `kernels-first` (PREWARM_DOCTOR_KERNEL_RECORDS=first: a record
# for each function's first launch only, from traced launch calls),
# `slow-tick` (PREWARM_DOCTOR_EARLY_TICK_MS=100: the writer's tick while kernel
# records are on), `probe-clock` (PREWARM_DOCTOR_CUPTI_CLOCK=probe: CUPTI calls
# the probe's clock for activity timestamps), `probe-kernels` (the probe alone, kernel records on),
# `tmpfs-out` (the run folder on /dev/shm), `agent-bare` (the doctor with
# torchrun's agent process uninstrumented, its worker instrumented; lazy
# workload under torchrun only), `plain-again` (the plain run once more: an
# A/A control whose PAIRED line is the method's own noise and bias, the
# least a doctor figure must differ by to mean anything; with `doctor` too,
# a CONTROL line pairs the doctor with it within each round), `nccl-log` (no doctor: the plain
# run with the NCCL_DEBUG=INFO log the doctor turns on). Prints one OVERHEAD line per
# workload and mode: median ratios of steady-state and step-1 time, and the
# probe's device memory (difference in device memory in use at the end),
# and a SPREAD line with each side's min-max over rounds (a ratio inside the
# plain runs' own spread is noise), an INTERVAL line: the 90% bootstrap
# interval of each ratio of medians over the rounds, and a PAIRED line: the
# ratio within each round (adjacent runs share the machine's drift), its
# median over the rounds and its 90% bootstrap interval. TARGET, judged on
# the paired figures, says met (the interval's top is within the target),
# over (its bottom is above), or not resolved by N rounds (the interval
# spans the target: run more rounds). For the lazy
# workload a PART line per part of step 1 (forward with the Triton autotune,
# backward, the clip with the NCCL communicator, the optimizer step) gives
# each part's medians, spreads and paired ratio with its interval, and a
# PART_PAIRED line its paired difference in ms; with EXAMPLE_STEP1_CUTS=1
# in the environment the examples (hf, fsdp2) cut their step 1 the same
# way (examples/common.py's `cut`; such rounds pool only with each other). Rows since
# 2026-12-07's nineteenth session carry each process's figures over step 1
# and over the steady steps (examples/common.py's StepWindows): PROCESS and
# THREADS pair them with plain's, STATE ranks them against the time. A run
# that exits non-zero or prints no result row gives a FAILED line (its
# mode, round, exit status): a mode's missing rounds are said, not dropped.
# Allocators (OVERHEAD_ALLOCATORS, default `default`): `default` is PyTorch's
# caching allocator; `async` sets PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
# for the plain and the instrumented runs alike, so every tensor allocation
# and free is a driver call the probe sees (it counts them per pool, see
# crates/probe/src/pools.rs); `OVERHEAD_ALLOCATORS="default async"` measures
# both side by side. Workload `alloc` (many mid-size layers: thousands of
# tensor allocations per step) is the one that shows a per-allocation cost.
# Cells (OVERHEAD_CELLS, e.g. "hf:async lazy:default"; unset: every
# allocator with every workload) run interleaved: round r of every cell
# before round r+1 of any, each cell with its own allocator and environment.
# For doctor modes, a PROBE line repeats what the probe counted of itself
# (callbacks and time inside them) from the first round's report, and an
# OWN line gives what the reports say the doctor spent inside step 1 (the
# probe's callbacks, the shim's hooks) and beside it, medians over rounds.
# `benches/gpu_overhead.sh units` (about 3 minutes) measures what the doctor
# adds to one unit of step-1 work instead (benches/gpu_unit_costs.py: a
# launch, the first launch of a PyTorch and of a Triton kernel, a driver
# allocation and its free, the first cuBLAS matmul, the first and each
# further NCCL communicator; UNIT lines, microseconds), where the noise of a
# whole step 1 does not hide a few percent.
# Rounds rotate the order (each mode, plain too, in each position once
# every n rounds: plain first, then last, with one mode);
# OVERHEAD_PIN=<cpus>|gpu pins both sides to the same CPUs (on the lent H200
# VM `gpu` is all 16 cores, one NUMA node: it pins nothing there);
# OVERHEAD_DEADLINE_S stops starting rounds in time for the summary.
# OVERHEAD_WARMUP=0 skips the untimed warm-up runs (a plain and a doctor
# run a cell): for a later call on a machine an earlier call warmed, whose
# caches and extracted probe are still there; OVERHEAD_WARMUP=once warms a
# cell only the first time this machine runs it (a mark in
# OVERHEAD_WARM_MARKS, /tmp/prewarm-doctor-warmed): on a fresh machine a
# cell's first round would otherwise read a cold file cache (call 57: hf's
# first plain step 1 2.2 s against 0.57-0.82 s in the other 13 rounds).
# BIN: the doctor binary; OVERHEAD_ROUNDS (5; breakdown 3), OVERHEAD_STEPS
# (300 for gemm/launch/alloc, >= 40; 30 for lazy, >= 20).
# OVERHEAD_LAZY_ARGS: more arguments for the lazy workload, the same on
# both sides: its default steady step is launch-bound (~3 ms, whole
# processes differing by ~12% a round); `--batch 65536` makes it GPU-bound
# (16x the matmuls: 20.5 ms a step on the H200, whole processes within 1%),
# Triton autotune, cuBLAS and NCCL still in step 1.
set -u
# CELLS and MODES are scripts/gpu-footprint-zoo.sh's names; this script
# reads OVERHEAD_CELLS and OVERHEAD_MODES. Given alone they would be
# ignored and the defaults would run for minutes of GPU time: refuse.
if [ -z "${1:-}" ] && [ -z "${OVERHEAD_CELLS:-}${OVERHEAD_MODES:-}${OVERHEAD_WORKLOADS:-}" ]; then
  for name in CELLS MODES; do
    if [ -n "${!name:-}" ]; then
      echo "gpu_overhead.sh: $name is scripts/gpu-footprint-zoo.sh's setting; here it is OVERHEAD_$name (or run the zoo script)" >&2
      exit 2
    fi
  done
fi
BIN=${BIN:-target/release/prewarm-doctor}
UNITS=0
if [ "${1:-}" = units ]; then
  ROUNDS=${OVERHEAD_ROUNDS:-3}
  MODES=${OVERHEAD_MODES:-doctor}
  UNITS=1
elif [ "${1:-}" = breakdown ]; then
  ROUNDS=${OVERHEAD_ROUNDS:-3}
  MODES=${OVERHEAD_MODES:-doctor no-kernels no-shim no-nvml tmpfs-out no-probe}
  ALLOCATORS=${OVERHEAD_ALLOCATORS:-default}
  BREAKDOWN=1
else
  ROUNDS=${OVERHEAD_ROUNDS:-5}
  MODES=${OVERHEAD_MODES:-doctor}
  ALLOCATORS=${OVERHEAD_ALLOCATORS:-default async}
  # A part's cost (doctor minus doctor without it) whenever a mode leaves
  # one out: BREAKDOWN lines beside PAIRED.
  BREAKDOWN=1
fi
# The doctor runs on the user's own caches, as the plain run does: its default
# (--cache cold, a fresh isolated cache per attempt) would re-autotune and
# re-compile every Triton kernel in each doctor run and time that, not the
# probe (measured on the H200 on 2026-12-01: "step 1 7.11x", 12.1 s vs 1.7 s).
CACHE=${OVERHEAD_CACHE:---cache user}
STEPS=${OVERHEAD_STEPS:-}
WORKLOADS=${OVERHEAD_WORKLOADS:-lazy}
LAZY_LAUNCH=${OVERHEAD_LAZY_LAUNCH:-torchrun}
read -r -a LAZY_ARGS <<< "${OVERHEAD_LAZY_ARGS:-}"
STARTED=$(date +%s)
PY=${PY:-python3}
OUTDIR=${OUTDIR:-/tmp/pd-overhead}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUTDIR"
: > "$OUTDIR/nccl-init.txt"
: > "$OUTDIR/failed.txt"
# The extracted probe, shim and CUPTI, for the modes that bypass the doctor.
"$BIN" check > "$OUTDIR/check.txt" 2>&1
PROBE=$(sed -n 's/^probe: //p' "$OUTDIR/check.txt")
SHIM=$(ls -d "$(dirname "$PROBE")"/shim-* 2>/dev/null | head -1)
CUPTI=$(grep -o '/[^ ]*libcupti[^ ]*' "$OUTDIR/check.txt" | head -1)

# OVERHEAD_PIN: run both sides on these CPUs (a taskset list such as 0-7,
# or `gpu` for the cores local to GPU 0 by sysfs), since whole processes run
# fast or slow; unset (the default): wherever the scheduler puts them.
PIN_CPUS=${OVERHEAD_PIN:-}
if [ "$PIN_CPUS" = gpu ]; then
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000//')
  PIN_CPUS=$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null) \
    || { echo "OVERHEAD_PIN=gpu: no /sys/bus/pci/devices/$bus/local_cpulist; give a CPU list instead" >&2; exit 2; }
fi
[ -n "$PIN_CPUS" ] && echo "PIN cpus=$PIN_CPUS"

# OVERHEAD_DEADLINE_S: seconds from the start after which no round begins
# that would end past it (judged by the previous round's length), so that a
# call with a time limit still gets its summary; a DEADLINE line says how
# many rounds ran. The first round of each workload always runs.
round_fits() { # seconds the previous round took
  [ -z "${OVERHEAD_DEADLINE_S:-}" ] && return 0
  [ $(( $(date +%s) - STARTED + $1 )) -le "$OVERHEAD_DEADLINE_S" ]
}

# One round (its number first) of every mode running the command (after
# the round: the run folder as a printf format of mode and round, the
# pattern of the result lines to keep, and the file they go to, each tagged
# with its mode and round; a WALL line a run).
run_round() {
  local r=$1 dirs=$2 pattern=$3 out=$4 label=$5 mode dir t0 rows rc
  shift 5
  for mode in $(round_order "$r"); do
    printf -v dir "$dirs" "$mode" "$r"
    rm -rf "$dir"
    t0=$(date +%s%N)
    rows=$(wc -l < "$out")
    run_mode "$mode" "$dir" "$@" 2>> "$OUTDIR/stderr.log" \
      | grep "$pattern" | sed "s/^/$mode round=$r /" >> "$out"
    rc=${PIPESTATUS[0]}
    # A run that failed or gave no result row is said, never dropped
    # silently (call 29's five crashed detach runs left no trace).
    rows=$(( $(wc -l < "$out") - rows ))
    if [ "$rc" != 0 ] || [ "$rows" = 0 ]; then
      echo "FAILED $label mode=$mode round=$r exit=$rc rows=$rows" >> "$OUTDIR/failed.txt"
    fi
    nccl_init_rows "$dir" "$label mode=$mode round=$r"
    # Each run's wall time (start, step 1, teardown and, for the doctor,
    # its report): what a round costs a time-limited call.
    echo "WALL $label mode=$mode round=$r ms=$(( ($(date +%s%N) - t0) / 1000000 ))" >> "$OUTDIR/walls.txt"
  done
}

# NCCL's own `Init timings` lines (its account of each communicator's
# creation) from the logs a run left in its folder (the doctor's, or mode
# `nccl-log`'s), numbered in the process's order, into nccl-init.txt:
# benches/gpu_nccl_init_summary.py compares them within each round.
nccl_init_rows() { # run folder, label
  [ -d "$1" ] || return 0
  find "$1" -name 'nccl.*.log' | sort | xargs -r grep -h 'Init timings' \
    | sed 's/.*Init timings - //' | awk -v l="$2" '{ print "NCCLINIT " l " comm=" NR-1 " " $0 }' \
    >> "$OUTDIR/nccl-init.txt"
}

# ROUNDS rounds of every mode running the command (after the four
# arguments: a label for the DEADLINE line, the run folder as a printf
# format of mode and round, the pattern of the result lines to keep, and the
# file they go to).
run_rounds() {
  local label=$1 dirs=$2 pattern=$3 out=$4 last=0 r began
  shift 4
  : > "$out"
  for r in $(seq 1 "$ROUNDS"); do
    if [ "$r" -gt 1 ] && ! round_fits "$last"; then
      echo "DEADLINE $label: $((r - 1)) of $ROUNDS rounds ran (OVERHEAD_DEADLINE_S=$OVERHEAD_DEADLINE_S)"
      break
    fi
    began=$(date +%s)
    run_round "$r" "$dirs" "$pattern" "$out" "$label" "$@"
    last=$(( $(date +%s) - began ))
  done
}

# An OWN line: what the doctor's reports say it spent itself inside step 1
# (the probe's callbacks, the shim's hooks: both inside the training's time;
# the probe's threads beside it) and the shim's per steady step, medians
# over the rounds' run folders of a mode, to hold against its paired step-1
# difference. `?` where the reports do not say it (a shim before own_ns).
# The callbacks of round 1's run of a mode (its report's probe line).
callbacks_of() { # mode tag
  "$BIN" report "$OUTDIR/$1-$2-1" 2>/dev/null | grep -m1 '^ *probe:' | grep -o '[0-9]* callbacks' | grep -o '[0-9]*'
}

# Launches a steady step: `watch-all` keeps the launch callbacks (two a
# launch) on for every step, `doctor` for the first 3 only (the doctor's
# default --kernel-steps); the difference of their round-1 callbacks, over
# the steps after the third. Nothing unless both modes ran.
launches_line() { # tag workload allocator
  local all doc steps
  case " $MODES " in *" doctor "*) ;; *) return 0 ;; esac
  case " $MODES " in *" watch-all "*) ;; *) return 0 ;; esac
  all=$(callbacks_of watch-all "$1") doc=$(callbacks_of doctor "$1")
  steps=$(grep -m1 -o '"steps": [0-9]*' "$OUTDIR/steptimes-$1.txt" | grep -o '[0-9]*$')
  if [ -z "$all" ] || [ -z "$doc" ] || [ -z "$steps" ] || [ "$steps" -le 3 ]; then
    echo "LAUNCHES workload=$2 allocator=$3 per_steady_step=unknown (a probe line or the step count is missing)"
    return 0
  fi
  echo "LAUNCHES workload=$2 allocator=$3 per_steady_step=$(( (all - doc) / 2 / (steps - 3) )) callbacks_watch_all=$all callbacks_doctor=$doc steps=$steps"
}

own_line() { # mode tag workload allocator
  local d reports="$OUTDIR/own-$1-$2.json"
  : > "$reports"
  for d in "$OUTDIR/$1-$2-"*; do
    [ -d "$d" ] && "$BIN" report "$d" --format json >> "$reports" 2>/dev/null && echo >> "$reports"
  done
  $PY - "$reports" "$1" "$3" "$4" <<'PYEOF'
import json, statistics, sys
mode, workload, allocator = sys.argv[2:5]
runs = []
warm = []  # the shim's median time in a steady step, per run (the report's)
decoder = json.JSONDecoder()
text = open(sys.argv[1]).read()
i = 0
while i < len(text):
    if text[i].isspace():
        i += 1
        continue
    try:
        doc, i = decoder.raw_decode(text, i)
    except ValueError:
        break
    for attempt in doc.get("attempts", []):
        for proc in attempt.get("processes", []):
            phases = {ph.get("phase"): ph for ph in proc.get("phases", [])}
            if "step1" in phases:
                runs.append(phases)
                warm.append((proc.get("steps") or {}).get("steady_shim_s"))
def med(values):
    values = [v for v in values if v is not None]
    return f"{1000 * statistics.median(values):.2f}" if values else "?"
step1 = [r["step1"] for r in runs]
steady = [r.get("steady") for r in runs]
per_step = [s["shim_s"] / s["steps"] if s and s.get("shim_s") is not None and s.get("steps") else None for s in steady]
# The callbacks' parts (probe 0.2.2 on; caller walks 0.2.3 on), said only where a report has them.
split = [p.get("probe_callbacks_split") for p in step1]
parts = ""
if any(split):
    part = lambda key: med(s.get(key) if s else None for s in split)
    parts = (f" step1_probe_launches_ms={part('launches_s')} "
             f"step1_probe_module_loads_ms={part('module_loads_s')} "
             f"step1_probe_readings_ms={part('readings_s')}")
    if any(s and s.get("caller_walks_s") is not None for s in split):
        parts += f" step1_probe_walks_ms={part('caller_walks_s')}"
    # The longest single callback in any run's step 1 (probe 0.2.3 on): a
    # rare slow one shows here, where the medians above would hide it.
    longest = [s["longest_callback"] for s in split if s and s.get("longest_callback")]
    if longest:
        worst = max(longest, key=lambda l: l["seconds"])
        parts += (f" step1_probe_longest_max_ms={1000 * worst['seconds']:.2f}"
                  f" step1_probe_longest_max_call={worst['name'].replace(' ', '_')}")
if runs:
    print(f"OWN workload={workload} allocator={allocator} mode={mode} runs={len(runs)} "
          f"step1_probe_callbacks_ms={med(p['probe_callbacks_s'] for p in step1)} "
          f"step1_probe_beside_ms={med(p['probe_s'] - p['probe_callbacks_s'] for p in step1)} "
          f"step1_shim_ms={med(p.get('shim_s') for p in step1)} steady_shim_ms_per_step={med(per_step)} "
          f"shim_ms_steady_step_median={med(warm)}{parts}")
PYEOF
}

# The modes of round r: plain and the modes, rotated by one place a round,
# so that over n rounds (n runs a round) each mode runs once in each position
# and whatever the run order itself does (caches, clocks, the first run
# after the previous round) falls on every mode alike. With one mode this
# is plain first in odd rounds, last in even ones.
round_order() {
  local all=(plain $MODES) shift
  shift=$(( ($1 - 1) % ${#all[@]} ))
  echo "${all[@]:$shift}" "${all[@]:0:$shift}"
}

run_mode() { # mode run-dir, then the workload command
  ( [ -n "$PIN_CPUS" ] && taskset -cp "$PIN_CPUS" $BASHPID > /dev/null
    run_unpinned "$@" )
}

run_unpinned() {
  local mode=$1 dir=$2; shift 2
  case $mode in
  plain) "$@" ;;
  doctor) "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  no-probe) "$BIN" run $CACHE --no-probe --out "$dir" -- "$@" 2>/dev/null ;;
  no-kernels) PREWARM_DOCTOR_KERNEL_RECORDS=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  shim-only) mkdir -p "$dir"; PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}" PREWARM_DOCTOR_DIR="$dir" PREWARM_DOCTOR_SHIM=1 "$@" ;;
  probe-only) mkdir -p "$dir"; CUDA_INJECTION64_PATH="$PROBE" PREWARM_DOCTOR_CUPTI="$CUPTI" PREWARM_DOCTOR_DIR="$dir" PREWARM_DOCTOR_KERNEL_RECORDS=0 "$@" ;;
  doctor-modules) PREWARM_DOCTOR_MODULE_RECORDS=1 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  probe-modules) mkdir -p "$dir"; CUDA_INJECTION64_PATH="$PROBE" PREWARM_DOCTOR_CUPTI="$CUPTI" PREWARM_DOCTOR_DIR="$dir" PREWARM_DOCTOR_KERNEL_RECORDS=0 PREWARM_DOCTOR_MODULE_RECORDS=1 "$@" ;;
  slow-tick) PREWARM_DOCTOR_EARLY_TICK_MS=100 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  probe-clock) PREWARM_DOCTOR_CUPTI_CLOCK=probe "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  probe-kernels) mkdir -p "$dir"; CUDA_INJECTION64_PATH="$PROBE" PREWARM_DOCTOR_CUPTI="$CUPTI" PREWARM_DOCTOR_DIR="$dir" "$@" ;;
  no-shim) PREWARM_DOCTOR_SHIM=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  watch-all) "$BIN" run $CACHE --kernel-steps 100000 --out "$dir" -- "$@" 2>/dev/null ;;
  detach) PREWARM_DOCTOR_DETACH_AFTER_WATCH=1 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  attached) PREWARM_DOCTOR_DETACH_AFTER_WATCH=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  detach-bare) PREWARM_DOCTOR_DETACH_AFTER_WATCH=bare "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  no-nccl-log) NCCL_DEBUG=WARN "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  no-nvml) PREWARM_DOCTOR_NVML_SAMPLING=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  nvml-10ms) PREWARM_DOCTOR_NVML_PERIOD_MS=10 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  step-lines) PREWARM_DOCTOR_STEP_FILE=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  pool-calls) PREWARM_DOCTOR_POOL_CALLS=4096 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  no-pool-reads) PREWARM_DOCTOR_POOL_READ_MS=0 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  bench-records) PREWARM_DOCTOR_BENCH_RECORDS=1 "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  kernels-all) PREWARM_DOCTOR_KERNEL_RECORDS=all "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  kernels-first) PREWARM_DOCTOR_KERNEL_RECORDS=first "$BIN" run $CACHE --out "$dir" -- "$@" 2>/dev/null ;;
  plain-again) "$@" ;;
  agent-bare) run_agent_bare "$dir" "$@" ;;
  nccl-log) mkdir -p "$dir"; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_DEBUG_FILE="$dir/nccl.%h.%p.log" \
    NCCL_DEBUG_TIMESTAMP_FORMAT="[%s.%6f]_" NCCL_DEBUG_TIMESTAMP_LEVELS=ALL "$@" ;;
  tmpfs-out) rm -rf "/dev/shm/pd-overhead-run"; "$BIN" run $CACHE --out /dev/shm/pd-overhead-run -- "$@" 2>/dev/null; rm -rf "/dev/shm/pd-overhead-run" ;;
  *) echo "unknown mode $mode" >&2; return 2 ;;
  esac
}

# Mode agent-bare: the doctor, but torchrun's agent process runs without
# the doctor's variables (no probe, no shim there; the agent calls cuInit, so
# CUDA would load the probe into it) and its worker with them: the agent's
# variables are set aside, and `torchrun --no-python` starts the worker
# through a bash that puts them back. Arguments: run folder, then a torchrun
# command whose worker is a python script (the first argument ending .py).
run_agent_bare() {
  local dir=$1; shift
  local launcher=() worker=()
  while [ $# -gt 0 ] && [ "${1%.py}" = "$1" ]; do launcher+=("$1"); shift; done
  worker=("$@")
  case " ${launcher[*]} " in
  *" torch.distributed.run "*) ;;
  *) echo "agent-bare needs a torchrun launch (OVERHEAD_LAZY_LAUNCH=torchrun)" >&2; return 2 ;;
  esac
  "$BIN" run $CACHE --out "$dir" -- bash -c \
    'export PD_INJECTION="${CUDA_INJECTION64_PATH-}" PD_PYTHONPATH="${PYTHONPATH-}"; unset CUDA_INJECTION64_PATH PYTHONPATH; exec "$@"' \
    agent-bare "${launcher[@]}" --no-python bash -c \
    'CUDA_INJECTION64_PATH="$PD_INJECTION" PYTHONPATH="$PD_PYTHONPATH" exec "$0" -u "$@"' "$PY" "${worker[@]}" 2>/dev/null
}

# `units`: what the doctor adds to one unit of step-1 work (a launch, a
# first launch of a PyTorch or a Triton kernel, a driver allocation and its
# free), each measured in one process over many repetitions
# (benches/gpu_unit_costs.py), plain and doctor alternated ROUNDS times.
if [ "$UNITS" = 1 ]; then
  unset PYTORCH_CUDA_ALLOC_CONF
  run_mode plain "$OUTDIR/units-warm" $PY benches/gpu_unit_costs.py > /dev/null 2>> "$OUTDIR/stderr.log"
  run_rounds units "$OUTDIR/units-%s-%s" '^UNITS ' "$OUTDIR/units.txt" $PY benches/gpu_unit_costs.py
  cat "$OUTDIR/units.txt"
  grep -h "^FAILED" "$OUTDIR/failed.txt"
  $PY - "$OUTDIR/units.txt" <<'PYEOF'
import json, statistics, sys
rows = {}
rounds = {}  # round -> mode -> row, for the paired differences
for line in open(sys.argv[1]):
    kind, _, payload = line.partition(" UNITS ")
    mode, _, tag = kind.strip().partition(" round=")
    row = json.loads(payload)
    rows.setdefault(mode, []).append(row)
    rounds.setdefault(tag or str(len(rows[mode])), {})[mode] = row
for mode in rows:
    if mode == "plain":
        continue
    for key in ("launch_us", "torch_first_launch_us", "triton_first_launch_us", "alloc_free_us",
                "first_cublas_us", "first_nccl_comm_us", "nccl_comm_us"):
        a = [r[key] for r in rows[mode] if r.get(key) is not None]
        b = [r[key] for r in rows["plain"] if r.get(key) is not None]
        if not a or not b:
            continue
        # Within each round (adjacent processes), then the median over rounds.
        pairs = [r[mode][key] - r["plain"][key] for r in rounds.values()
                 if r.get(mode, {}).get(key) is not None and r.get("plain", {}).get(key) is not None]
        paired = f" paired_added={statistics.median(pairs):.2f} ({min(pairs):.2f}..{max(pairs):.2f})" if pairs else ""
        print(f"UNIT mode={mode} unit={key} plain={statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}) "
              f"{mode}={statistics.median(a):.2f} ({min(a):.2f}-{max(a):.2f}) "
              f"added={statistics.median(a) - statistics.median(b):.2f}{paired}")
PYEOF
  echo "ELAPSED seconds=$(( $(date +%s) - STARTED ))"
  exit 0
fi

# The zoo workloads: models nobody here wrote (issue 37), each one script
# and its shape (the same for step 1 and the steady state). `hf`: a
# transformers Qwen3 decoder (4 layers, hidden 1024, 8 x 1024 tokens);
# `fsdp2`: FSDP2 over NCCL on a transformers Mistral, one rank; `fla`:
# flash-linear-attention's chunked gated delta rule (its wheel: .whl/ or
# installed), whose Triton kernels autotune in step 1 even with a warm
# compile cache. OVERHEAD_ZOO_ARGS_<name> replaces a shape.
declare -A ZOO_SCRIPT=([hf]=zoo_hf_decoder.py [fsdp2]=zoo_fsdp2.py [fla]=zoo_fla_gdn.py)
declare -A ZOO_ARGS=(
  [hf]=${OVERHEAD_ZOO_ARGS_hf:---hidden 1024 --batch 8192}
  [fsdp2]=${OVERHEAD_ZOO_ARGS_fsdp2:---hidden 1024 --batch 8192}
  [fla]=${OVERHEAD_ZOO_ARGS_fla:---seq 4096})

# The cells, workload:allocator pairs: OVERHEAD_CELLS (e.g. "hf:async
# lazy:default"), else every allocator with every workload. Their rounds
# interleave — round r of every cell before round r+1 of any — so that the
# machine's drift over a call falls on every cell alike, and a deadline
# leaves every cell the same number of rounds.
CELLS=${OVERHEAD_CELLS:-}
if [ -z "$CELLS" ]; then
  for alloc in $ALLOCATORS; do for w in $WORKLOADS; do CELLS+="$w:$alloc "; done; done
fi
BASE_PYTHONPATH=${PYTHONPATH:-}

use_allocator() {
  case $1 in
  default) unset PYTORCH_CUDA_ALLOC_CONF ;;
  async) export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ;;
  *) echo "unknown allocator $1 (default, async)" >&2; exit 2 ;;
  esac
}

# Sets `workload`, the command of workload $1, and its environment; `warm`
# says whether it wants untimed warm-up runs (caches).
use_workload() {
  local w=$1 steps=${STEPS:-300} shape=""
  case $w in
  lazy) steps=${STEPS:-30} ;;
  gemm) shape="--hidden 8192 --batch 8192 --layers 4" ;;
  launch) shape="--hidden 512 --batch 256 --layers 24" ;;
  alloc) shape="--hidden 2048 --batch 1024 --layers 96" ;;
  hf|fsdp2|fla) steps=${STEPS:-30} ;;
  *) echo "unknown workload $w" >&2; exit 2 ;;
  esac
  unset EXAMPLE_STEPTIMES
  if [ -n "$BASE_PYTHONPATH" ]; then export PYTHONPATH=$BASE_PYTHONPATH; else unset PYTHONPATH; fi
  warm=1
  if [ -n "${ZOO_SCRIPT[$w]:-}" ]; then
    # A model not written for the tool (examples/zoo_*.py), timed by the
    # examples' own loop (EXAMPLE_STEPTIMES=1), one process; warm caches.
    # In the environment, not an `env` prefix: the doctor's own PYTHONPATH
    # (its shim) is set on top of the one it finds.
    local zoo_args
    read -r -a zoo_args <<< "${ZOO_ARGS[$w]}"
    export EXAMPLE_STEPTIMES=1 PYTHONPATH="$PWD/examples${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}"
    workload=($PY "examples/${ZOO_SCRIPT[$w]}" --steps "$steps" "${zoo_args[@]}")
  elif [ "$w" = lazy ]; then
    case $LAZY_LAUNCH in
    torchrun) workload=($PY -m torch.distributed.run --standalone --nproc_per_node=1 benches/gpu_overhead_lazy.py --steps "$steps" "${LAZY_ARGS[@]}") ;;
    python) workload=($PY benches/gpu_overhead_lazy.py --steps "$steps" "${LAZY_ARGS[@]}") ;;
    *) echo "unknown OVERHEAD_LAZY_LAUNCH $LAZY_LAUNCH (torchrun, python)" >&2; exit 2 ;;
    esac
  else
    workload=($PY benches/gpu_overhead.py --steps "$steps" $shape)
    warm=0
  fi
}

use_cell() { # workload:allocator
  use_allocator "${1##*:}"
  use_workload "${1%%:*}"
}

# Warm caches (Triton's kernels, the doctor's extracted probe): untimed.
case ${OVERHEAD_WARMUP:-1} in
  0|1|once) ;;
  *) echo "OVERHEAD_WARMUP must be 0, 1 or once, got '$OVERHEAD_WARMUP'" >&2; exit 2 ;;
esac
for cell in $CELLS; do
  use_cell "$cell"
  : > "$OUTDIR/steptimes-${cell%%:*}-${cell##*:}.txt"
  [ "$warm" = 1 ] && [ "${OVERHEAD_WARMUP:-1}" != 0 ] || continue
  mark="${OVERHEAD_WARM_MARKS:-/tmp/prewarm-doctor-warmed}/${cell%%:*}-${cell##*:}"
  [ "${OVERHEAD_WARMUP:-1}" = once ] && [ -e "$mark" ] && continue
  run_mode plain "$OUTDIR/warm-plain" "${workload[@]}" > /dev/null 2>> "$OUTDIR/stderr.log"
  rm -rf "$OUTDIR/warm-doctor"; run_mode doctor "$OUTDIR/warm-doctor" "${workload[@]}" > /dev/null 2>> "$OUTDIR/stderr.log"
  mkdir -p "${mark%/*}" && touch "$mark"
done

last=0
for r in $(seq 1 "$ROUNDS"); do
  if [ "$r" -gt 1 ] && ! round_fits "$last"; then
    for cell in $CELLS; do
      echo "DEADLINE workload=${cell%%:*} allocator=${cell##*:}: $((r - 1)) of $ROUNDS rounds ran (OVERHEAD_DEADLINE_S=$OVERHEAD_DEADLINE_S)"
    done
    break
  fi
  began=$(date +%s)
  for cell in $CELLS; do
    use_cell "$cell"
    w=${cell%%:*}; alloc=${cell##*:}; tag=$w-$alloc
    run_round "$r" "$OUTDIR/%s-$tag-%s" STEPTIMES "$OUTDIR/steptimes-$tag.txt" \
      "workload=$w allocator=$alloc" "${workload[@]}"
  done
  last=$(( $(date +%s) - began ))
done

for cell in $CELLS; do
  w=${cell%%:*}; alloc=${cell##*:}; tag=$w-$alloc
  cat "$OUTDIR/steptimes-$tag.txt"
  $PY benches/gpu_overhead_summary.py "$w" "$alloc" "$BREAKDOWN" "$OUTDIR/steptimes-$tag.txt"
  if [ -s "$OUTDIR/nccl-init.txt" ]; then
    $PY benches/gpu_nccl_init_summary.py "$w" "$alloc" "$OUTDIR/nccl-init.txt"
  fi
  for mode in $MODES; do
    case $mode in
    doctor|watch-all|no-kernels|doctor-modules|no-shim|detach|detach-bare|no-nvml|nvml-10ms|agent-bare|step-lines|pool-calls|no-pool-reads|bench-records|kernels-all|kernels-first)
      "$BIN" report "$OUTDIR/$mode-$tag-1" 2>/dev/null | grep -m1 '^ *probe:' | sed "s/^ */PROBE workload=$w allocator=$alloc mode=$mode /"
      own_line "$mode" "$tag" "$w" "$alloc" ;;
    esac
  done
  launches_line "$tag" "$w" "$alloc"
  grep -h "^FAILED workload=$w allocator=$alloc " "$OUTDIR/failed.txt" 2>/dev/null
done
echo "ELAPSED seconds=$(( $(date +%s) - STARTED ))"
