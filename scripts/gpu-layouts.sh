#!/usr/bin/env bash
# GPU recordings for the parallel-layout examples (issue 19): a cold A/B
# matrix per example (baseline, its prewarm, and its incomplete or over-eager
# variant) under torchrun with NGPU ranks, and a two-"node" run (two doctors,
# each a torchrun agent with --nnodes 2 on half the GPUs, one shared run
# folder, host tags node0/node1) merged by `report`. After every run it prints
# the report's head, the per-group communicator verdicts, and the account's
# unexplained remainder at every phase end of every rank, checked against
# 2% of device memory used or 64 MiB, whichever is larger.
#
#   scripts/gpu-layouts.sh BIN OUTDIR NGPU
#
# BIN: a release build of prewarm-doctor; OUTDIR: where run folders
# (OUTDIR/runs/<section>-<name>), reports and packed archives
# (OUTDIR/runs-<section>.tar.gz) go; NGPU: GPUs (ranks) to use. With NGPU=1
# every example runs on degenerate one-rank meshes and the two-node run is
# skipped (two ranks of one job cannot share a GPU). Environment: SECTIONS
# (default "moe pipeline cp twonode"), REPEAT (2), STEPS (4), RUN_TIMEOUT
# (seconds per run, 540), PY (python3), NODE_PORT (29631).
# Exit code: 0 when every run exited 0 and every remainder is within bounds.
# `scripts/gpu-layouts.sh --check-remainders REPORT.json` runs only the
# remainder check on a `report --format json` file (tests/examples_compile.rs).
set -u
PY=${PY:-python3}

# The unexplained remainder of every phase end of every rank of every attempt.
remainders() { # json file
  "$PY" - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
MIB = 1 << 20
over = n = 0
worst = (0.0, "")
for a in d["attempts"]:
    for p in a["processes"]:
        if p.get("rank") is None:
            continue
        for ph in p["phases"]:
            g = ph.get("gap_end")
            if not g:
                continue
            n += 1
            u, used = g["unexplained"], g["device_used"]
            bound = max(0.02 * used, 64 * MIB)
            ok = abs(u) <= bound
            over += not ok
            where = f"{a['variant']}/{a['attempt']} {p['host']} rank {p['rank']} {ph['phase']}"
            if abs(u) / max(bound, 1) > worst[0]:
                worst = (abs(u) / bound, where)
            print(f"  remainder {where}: {u / MIB:+.1f} MiB of {used / MIB:.0f} MiB used (bound {bound / MIB:.0f} MiB) {'ok' if ok else 'OVER'}")
print(f"REMAINDER {'ok' if over == 0 and n else 'OVER' if over else 'NONE'}: {n} phase ends, {over} over the bound; worst {worst[0]:.2f} of its bound at {worst[1]}")
sys.exit(1 if over or not n else 0)
EOF
}

if [ "${1:-}" = --check-remainders ] && [ $# -eq 2 ]; then
  remainders "$2"
  exit $?
fi
if [ $# -ne 3 ]; then
  echo "usage: $0 BIN OUTDIR NGPU" >&2
  exit 2
fi
BIN=$1 OUT=$2 NGPU=$3
case $NGPU in '' | *[!0-9]* | 0) echo "$0: NGPU must be a positive integer, got '$NGPU'" >&2; exit 2 ;; esac
[ -x "$BIN" ] || { echo "$0: BIN '$BIN' is not an executable" >&2; exit 2; }
SECTIONS=${SECTIONS:-moe pipeline cp twonode}
REPEAT=${REPEAT:-2}
STEPS=${STEPS:-4}
# NVLink multicast stays off on the lent machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
RUNS=$OUT/runs
mkdir -p "$RUNS"
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=$NGPU"
STATUS=0

pack() { # section
  find "$RUNS" -type d -name 'cache-*' -prune -exec rm -rf {} +
  tar -C "$RUNS" -czf "$OUT/runs-$1.tar.gz" $(cd "$RUNS" && ls -d "$1"-* 2>/dev/null)
}

report() { # run folder, label
  local dir=$1 label=$2
  "$BIN" report "$dir" > "$RUNS/$label.report.txt" 2>&1 || echo "report exit=$?"
  "$BIN" report "$dir" --format json -o "$RUNS/$label.json" 2>/dev/null || echo "json report exit=$?"
  sed -n '1,/^   (the baseline/p' "$RUNS/$label.report.txt" | head -60
  grep -E "NCCL group " "$RUNS/$label.report.txt" | head -40
  remainders "$RUNS/$label.json" || STATUS=1
}

run() { # section name, then doctor options, then -- command
  local section=$1 name=$2; shift 2
  echo "=== $section-$name: $*"
  local t0=$(date +%s%N)
  rm -rf "$RUNS/$section-$name"
  timeout ${RUN_TIMEOUT:-540} "$BIN" run --out "$RUNS/$section-$name" "$@" > "$RUNS/$section-$name.stdout" 2> "$RUNS/$section-$name.stderr"
  local rc=$?
  echo "exit=$rc wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
  [ $rc -eq 0 ] || { STATUS=1; tail -20 "$RUNS/$section-$name.stderr"; }
  report "$RUNS/$section-$name" "$section-$name"
  pack "$section"
}

two_nodes() { # the MoE example over 2 "nodes" of NGPU/2 GPUs each
  local half=$(( NGPU / 2 )) dir=$RUNS/twonode-moe
  if [ "$NGPU" -lt 2 ]; then
    echo "=== twonode-moe: SKIP (needs NGPU >= 2; two ranks of one job cannot share a GPU)"
    return
  fi
  echo "=== twonode-moe: 2 nodes x $half GPU(s), baseline and nccl_comm"
  rm -rf "$dir"
  local t0=$(date +%s%N) node devs
  for node in 0 1; do
    devs=$(seq -s, $(( node * half )) $(( node * half + half - 1 )))
    CUDA_VISIBLE_DEVICES=$devs timeout ${RUN_TIMEOUT:-540} "$BIN" run --out "$dir" --host-tag node$node \
      --variant baseline --variant nccl_comm:--prewarm-nccl-comm --repeat "$REPEAT" -- \
      $PY -m torch.distributed.run --nnodes 2 --node_rank $node --nproc_per_node $half \
      --master_addr 127.0.0.1 --master_port ${NODE_PORT:-29631} \
      examples/moe_dp_ep.py --steps "$STEPS" > "$RUNS/twonode-moe.node$node.stdout" 2> "$RUNS/twonode-moe.node$node.stderr" &
  done
  local job
  for job in $(jobs -p); do wait "$job"; local rc=$?; echo "node exit=$rc"; [ $rc -eq 0 ] || STATUS=1; done
  echo "wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))"
  report "$dir" twonode-moe
  pack twonode
}

for section in $SECTIONS; do
  case $section in
  moe)
    run moe matrix --variant baseline --variant nccl_comm:--prewarm-nccl-comm \
      --variant nccl_incomplete:'--prewarm-nccl-comm --comm-prewarm incomplete' \
      --variant nccl_eager:'--prewarm-nccl-comm --comm-prewarm eager' \
      --repeat "$REPEAT" -- $TORCHRUN examples/moe_dp_ep.py --steps "$STEPS"
    ;;
  pipeline)
    run pipeline matrix --variant baseline --variant nccl_comm:--prewarm-nccl-comm \
      --variant nccl_incomplete:'--prewarm-nccl-comm --comm-prewarm incomplete' \
      --variant pipeline_stage_compile:--prewarm-pipeline-stage-compile \
      --variant all:'--prewarm-nccl-comm --prewarm-pipeline-stage-compile' \
      --repeat "$REPEAT" -- $TORCHRUN examples/pipeline_pp.py --steps "$STEPS"
    ;;
  cp)
    run cp matrix --variant baseline --variant triton_autotune:--prewarm-triton-autotune \
      --variant cp_kernels:--prewarm-cp-kernels \
      --variant triton_and_cp:'--prewarm-triton-autotune --prewarm-cp-kernels' \
      --variant nccl_comm:--prewarm-nccl-comm \
      --variant nccl_eager:'--prewarm-nccl-comm --comm-prewarm eager' \
      --repeat "$REPEAT" -- $TORCHRUN examples/context_parallel.py --steps "$STEPS"
    ;;
  twonode)
    two_nodes
    ;;
  *)
    echo "$0: unknown section '$section' (moe pipeline cp twonode)" >&2
    STATUS=2
    ;;
  esac
done
ls -la "$OUT"
exit $STATUS
