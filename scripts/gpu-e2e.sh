#!/usr/bin/env bash
# GPU end-to-end: the examples under `prewarm-doctor run` with and without
# their prewarms, deliberate out-of-memory scenarios, and the A/B matrix.
# Run on a GPU machine from the repository root. SECTIONS picks what to run
# (examples repeat silence oom matrix shared multigpu multinode overhead breakdown traceback); BIN is a release build of prewarm-doctor.
# Every finished run is packed into $OUT/runs-<section>.tar.gz right away.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
OUT=${OUT:-gpu-out}
RUNS=${RUNS:-/tmp/pd-runs}
STEPS=${STEPS:-6}
SECTIONS=${SECTIONS:-examples oom}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$RUNS"
PY=${PY:-python3}
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=${NPROC:-1}"
GPUS=${GPUS:-2}
TORCHRUN_N="$PY -m torch.distributed.run --standalone --nproc_per_node=$GPUS"

pack() { # section
  find "$RUNS" -type d -name 'cache-*' -prune -exec rm -rf {} +
  tar -C "$RUNS" -czf "$OUT/runs-$1.tar.gz" $(cd "$RUNS" && ls -d $1-* 2>/dev/null)
}

run() { # section name, then doctor options, then -- command
  local section=$1 name=$2; shift 2
  echo "=== $section-$name: $*"
  local t0=$(date +%s%N)
  rm -rf "$RUNS/$section-$name" # a second run of the same command would add attempts to it
  timeout ${RUN_TIMEOUT:-600} "$BIN" run --out "$RUNS/$section-$name" "$@" > "$RUNS/$section-$name.stdout" 2> "$RUNS/$section-$name.stderr"
  local rc=$?
  echo "exit=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
  grep -h CROSSCHECK "$RUNS/$section-$name.stdout" | head -1
  grep -E "Error|error:|step 1 took|local memory grew|FAILED|out-of-pool in|unexplained" "$RUNS/$section-$name.stderr" | head -20
  # The account read as a user would: phase ends out of bounds, named.
  "$BIN" report --format json "$RUNS/$section-$name" > "$RUNS/$section-$name.report.json" 2>/dev/null &&
    $PY scripts/account_flags.py "$section-$name" "$RUNS/$section-$name.report.json"
  pack "$section"
}

for section in $SECTIONS; do
  case $section in
  examples)
    run examples cublas-baseline -- $PY examples/cublas_first_backward.py --steps $STEPS
    run examples cublas-prewarm -- $PY examples/cublas_first_backward.py --steps $STEPS --prewarm-cublas
    run examples triton-baseline -- $PY examples/triton_spill_autotune.py --steps $STEPS
    run examples triton-prewarm -- $PY examples/triton_spill_autotune.py --steps $STEPS --prewarm-triton-autotune
    run examples nccl-baseline -- $TORCHRUN examples/nccl_first_collective.py --steps $STEPS
    run examples nccl-prewarm -- $TORCHRUN examples/nccl_first_collective.py --steps $STEPS --prewarm-nccl-comm
    ;;
  repeat)
    # Each example as a cold A/B matrix with repeats: the verdicts' evidence.
    R=${REPEAT:-3}
    RUN_TIMEOUT=${REPEAT_TIMEOUT:-300} run repeat cublas --variant baseline --variant cublas:--prewarm-cublas --repeat $R -- $PY examples/cublas_first_backward.py --steps $STEPS
    RUN_TIMEOUT=${REPEAT_TIMEOUT:-300} run repeat triton --variant baseline --variant triton_autotune:--prewarm-triton-autotune --repeat $R -- $PY examples/triton_spill_autotune.py --steps $STEPS
    RUN_TIMEOUT=${REPEAT_TIMEOUT:-300} run repeat nccl --variant baseline --variant nccl_comm:--prewarm-nccl-comm --repeat $R -- $TORCHRUN examples/nccl_first_collective.py --steps $STEPS
    for n in cublas triton nccl; do "$BIN" report "$RUNS/repeat-$n" > "$OUT/repeat-$n.report.txt" 2>&1; sed -n '1,/^   (the baseline/p' "$OUT/repeat-$n.report.txt"; done
    ;;
  silence)
    # A real Triton + NCCL training with and without the doctor: the training's
    # stdout and stderr must carry nothing of ours (the doctor's own summary
    # follows the training's output and is cut off at its first
    # '== prewarm-doctor' line). Twice into one run folder: a fresh run, and
    # one that adds an attempt to it (what the doctor says about the folder
    # comes after the training, not before it).
    cmd="$TORCHRUN examples/all_lazy_init.py --steps $STEPS"
    $cmd > "$RUNS/silence-plain.stdout" 2> "$RUNS/silence-plain.stderr"; echo "plain exit=$?"
    rm -rf "$RUNS/silence-doctor"
    norm() { sed -E 's/[0-9]+/N/g' "$1"; }
    for attempt in 1 2; do
      d=$RUNS/silence-doctor-$attempt
      "$BIN" run --out "$RUNS/silence-doctor" -- $cmd > "$d.stdout" 2> "$d.stderr"; echo "doctor attempt $attempt exit=$?"
      sed '/^== prewarm-doctor/,$d' "$d.stderr" > "$d.training-stderr"
      for stream in stdout stderr; do
        mine=$d.$stream; [ $stream = stderr ] && mine=$d.training-stderr
        if diff <(norm "$RUNS/silence-plain.$stream") <(norm "$mine") > "$OUT/silence-$attempt.$stream.diff"; then
          echo "SILENCE attempt $attempt $stream identical (digits normalised)"
        else
          echo "SILENCE attempt $attempt $stream differs:"; head -40 "$OUT/silence-$attempt.$stream.diff"
        fi
      done
      grep -n -i -E "panick|prewarm|probe|backtrace|cupti" "$d.training-stderr" | head; echo "grep done"
      grep -E "capture:|probe:|adding attempts" "$d.stderr" | head -5
      cp "$d.stderr" "$d.stdout" "$OUT/" 2>/dev/null
    done
    cp "$RUNS/silence-plain.stderr" "$RUNS/silence-plain.stdout" "$OUT/" 2>/dev/null
    ;;
  oom)
    [ "${OOM_TRITON:-1}" = 1 ] && run oom triton-baseline -- $PY examples/triton_spill_autotune.py --steps 3 --occupy-gib=-${OOM_FREE_GIB:-1}
    [ "${OOM_TRITON:-1}" = 1 ] && run oom triton-prewarm -- $PY examples/triton_spill_autotune.py --steps 3 --occupy-gib=-${OOM_FREE_GIB:-1} --prewarm-triton-autotune
    [ "${OOM_NCCL:-1}" = 1 ] && run oom nccl-baseline -- $TORCHRUN examples/all_lazy_init.py --steps 3 --prewarm-cublas --prewarm-triton-autotune --occupy-gib=-${OOM_NCCL_FREE_GIB:-0.85}
    [ "${OOM_NCCL:-1}" = 1 ] && run oom nccl-prewarm -- $TORCHRUN examples/all_lazy_init.py --steps 3 --prewarm-cublas --prewarm-triton-autotune --prewarm-nccl-comm --occupy-gib=-${OOM_NCCL_FREE_GIB:-0.85}
    ;;
  matrix)
    RUN_TIMEOUT=${MATRIX_TIMEOUT:-600} run matrix cold --preset env:cublas,triton_autotune,nccl_comm --repeat ${REPEAT:-3} -- $TORCHRUN examples/all_lazy_init.py --steps $STEPS
    ;;
  shared)
    RUN_TIMEOUT=${SHARED_TIMEOUT:-600} run shared cache --preset env:cublas,triton_autotune,nccl_comm --cache shared -- $TORCHRUN examples/all_lazy_init.py --steps $STEPS
    ;;
  multigpu)
    run multigpu fsdp2-baseline -- $TORCHRUN_N examples/fsdp2_clip.py --steps $STEPS
    run multigpu fsdp2-prewarm -- $TORCHRUN_N examples/fsdp2_clip.py --steps $STEPS --prewarm-nccl-comm
    RUN_TIMEOUT=${MATRIX_TIMEOUT:-600} run multigpu matrix --preset env:nccl_comm --repeat ${REPEAT:-2} -- $TORCHRUN_N examples/fsdp2_clip.py --steps $STEPS
    ;;
  multinode)
    # Two doctors on one machine acting as two nodes of one job: torchrun
    # --nnodes 2 with a local static rendezvous, one GPU and one host tag per
    # node, one shared run folder; `report` merges the nodes.
    echo "=== multinode-fsdp2: 2 nodes x 1 GPU, baseline and nccl_comm"
    t0=$(date +%s%N)
    rm -rf "$RUNS/multinode-fsdp2"
    for node in 0 1; do
      CUDA_VISIBLE_DEVICES=$node timeout ${RUN_TIMEOUT:-400} "$BIN" run --out "$RUNS/multinode-fsdp2" --host-tag node$node --preset env:nccl_comm -- \
        $PY -m torch.distributed.run --nnodes 2 --node_rank $node --nproc_per_node 1 --master_addr 127.0.0.1 --master_port ${NODE_PORT:-29611} \
        examples/fsdp2_clip.py --steps $STEPS > "$RUNS/multinode-fsdp2.node$node.stdout" 2> "$RUNS/multinode-fsdp2.node$node.stderr" &
    done
    for job in $(jobs -p); do wait $job; echo "node exit=$?"; done
    echo "wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
    "$BIN" report "$RUNS/multinode-fsdp2" > "$RUNS/multinode-fsdp2.report" 2>&1; echo "report exit=$?"
    grep -E "worst|slowest|skew|verdict|WORKS|PARTIAL|NO EFFECT|REGRESSION" "$RUNS/multinode-fsdp2.report" | head -20
    pack multinode
    ;;
  overhead)
    # Rounds stop in time for the summary, well before the hard timeout.
    BIN=$BIN OUTDIR=$RUNS/overhead-runs OVERHEAD_DEADLINE_S=${OVERHEAD_DEADLINE_S:-$(( ${OVERHEAD_TIMEOUT:-540} - 60 ))} \
      timeout ${OVERHEAD_TIMEOUT:-540} bash benches/gpu_overhead.sh 2>&1 | tee "$OUT/overhead.txt" | grep -E '^(OVERHEAD|SPREAD|INTERVAL|PAIRED|PART|TARGET|PROBE|DEADLINE|ELAPSED)'
    tar -C "$RUNS" -czf "$OUT/runs-overhead.tar.gz" overhead-runs
    # Each allocator's rows, to pool with other calls' (benches/gpu_overhead_summary.py).
    cp "$RUNS"/overhead-runs/steptimes-*.txt "$OUT/" 2>/dev/null
    ;;
  breakdown)
    BIN=$BIN OUTDIR=$RUNS/breakdown-runs OVERHEAD_DEADLINE_S=${OVERHEAD_DEADLINE_S:-$(( ${OVERHEAD_TIMEOUT:-540} - 60 ))} \
      timeout ${OVERHEAD_TIMEOUT:-540} bash benches/gpu_overhead.sh breakdown 2>&1 | tee "$OUT/breakdown.txt" | grep -E '^(BREAKDOWN|OVERHEAD|PAIRED|PART|SPREAD|DEADLINE|ELAPSED)'
    ;;
  traceback)
    BIN=$BIN OUT=$RUNS/traceback bash scripts/gpu-traceback.sh 2>&1 | tee "$OUT/traceback.txt"
    ;;
  esac
done
ls -la "$OUT"
