#!/usr/bin/env bash
# Issue 35 on the GPU machine: (1) where a context's device memory comes from,
# first use by first use (scripts/gpu_first_use_memory.py, plain and under the
# doctor, each loading mode and allocator), then (2) the zoo: models not
# written for this tool recorded under `prewarm-doctor run` (cold isolated
# caches). Every step has its own time limit; the call's deadline (DEADLINE_S
# from the start) skips what no longer fits. Usage, from the repository root:
#
#   BIN=.gpu/prewarm-doctor OUT=$OUT SECTIONS="firstuse fla hf moe fsdp2 compiled" scripts/gpu-zoo.sh
#
# Wheels missing on the machine (flash-linear-attention, fla-core) are
# installed from .whl/ when that folder travelled. Results: $OUT/zoo.tar.gz
# (run folders without caches, each with the doctor's console output and
# report) and $OUT/firstuse.txt.
set -u
BIN=${BIN:?BIN=path of the prewarm-doctor binary}
OUT=${OUT:?OUT=output folder}
SECTIONS=${SECTIONS:-"firstuse fla hf moe fsdp2 compiled"}
DEADLINE_S=${DEADLINE_S:-570}
START=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=1"
WORK=$(mktemp -d)
mkdir -p "$WORK/zoo" "$OUT"
. scripts/gpu-wheels.sh
export PYTHONPATH=$PWD/examples${PYTHONPATH:+:$PYTHONPATH}

left() { echo $((DEADLINE_S - ($(date +%s) - START))); }
# limit NEED SECONDS: the seconds a step may take, or nothing when fewer than NEED are left.
limit() {
  local l; l=$(left)
  if [ "$l" -lt "$1" ]; then echo 0; elif [ "$l" -lt "$2" ]; then echo "$l"; else echo "$2"; fi
}
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# record NAME NEED MAX [ENV=..] -- doctor run arguments
record() {
  local name=$1 need=$2 max=$3; shift 3
  local t; t=$(limit "$need" "$max")
  if [ "$t" -le 0 ]; then echo "=== $name: skipped, $(left) s left"; return; fi
  echo "=== $name (limit ${t}s): $*"
  local t0; t0=$(date +%s)
  timeout --foreground -s INT "$t" env "$@" > "$WORK/zoo/$name.console-stdout.txt" 2> "$WORK/zoo/$name.console-stderr.txt"
  echo "doctor exit $? after $(( $(date +%s) - t0 )) s"
  if [ -d "$WORK/zoo/$name" ]; then
    mv "$WORK/zoo/$name.console-stdout.txt" "$WORK/zoo/$name/console-stdout.txt"
    mv "$WORK/zoo/$name.console-stderr.txt" "$WORK/zoo/$name/console-stderr.txt"
    "$BIN" report "$WORK/zoo/$name" > "$WORK/zoo/$name/console-report.txt" 2>&1
    "$BIN" report "$WORK/zoo/$name" --format json > "$WORK/zoo/$name.json" 2>/dev/null
    $PY scripts/account_summary.py "$WORK/zoo/$name.json" "$name" | sed -n '1,12p'
    grep -h "^CROSSCHECK" -r "$WORK/zoo/$name" --include=output.log | head -3
    grep -E "WORKS|PARTIAL|NO EFFECT|REGRESSION|INCONCLUSIVE" "$WORK/zoo/$name/console-report.txt" | head -4
  fi
}

if has firstuse; then
  echo "=== first uses ($(left) s left)"
  F="$OUT/firstuse.txt"
  : > "$F"
  if nvcc -fatbin -arch=sm_90 -o "$WORK/k.fatbin" scripts/first_use_kernels.cu 2>> "$F"; then
    for loading in LAZY EAGER; do
      echo "# driver plain $loading" >> "$F"
      CUDA_MODULE_LOADING=$loading timeout 30 $PY scripts/gpu_first_use_memory.py driver "$WORK/k.fatbin" >> "$F" 2>&1
    done
    echo "# driver doctor LAZY" >> "$F"
    timeout 40 "$BIN" run --out "$WORK/fu-driver" -- $PY scripts/gpu_first_use_memory.py driver "$WORK/k.fatbin" >> "$F" 2>/dev/null
  fi
  fu() { # label, then env assignments
    local label=$1; shift
    echo "# torch $label" >> "$F"
    timeout 60 env "$@" $PY scripts/gpu_first_use_memory.py torch >> "$F" 2>&1
  }
  fu "plain default LAZY" CUDA_MODULE_LOADING=LAZY
  fu "plain default EAGER" CUDA_MODULE_LOADING=EAGER
  fu "plain async LAZY" PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  fu "plain expandable LAZY" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  dr() { # label, folder, then env assignments
    local label=$1 dir=$2; shift 2
    echo "# torch doctor $label" >> "$F"
    timeout 60 env "$@" "$BIN" run --out "$WORK/$dir" -- $PY scripts/gpu_first_use_memory.py torch >> "$F" 2>/dev/null
    "$BIN" report "$WORK/$dir" > "$WORK/$dir.report.txt" 2>&1
    sed -n '/account\|Account\|context\|unexplained/p' "$WORK/$dir.report.txt" | head -12 >> "$F"
  }
  dr "default LAZY" fu-default CUDA_MODULE_LOADING=LAZY
  dr "default LAZY no kernel records" fu-norecords PREWARM_DOCTOR_KERNEL_RECORDS=0
  dr "default EAGER" fu-eager CUDA_MODULE_LOADING=EAGER
  dr "async LAZY" fu-async PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
  grep -E '^#|"stage": "(context|first_launch|first_kernel|pool_first_segment_64MiB|async_alloc_2MiB|end)"' "$F" | cut -c1-400
  mkdir -p "$WORK/zoo/firstuse"
  for d in fu-driver fu-default fu-norecords fu-eager fu-async; do
    [ -d "$WORK/$d" ] && mv "$WORK/$d" "$WORK/zoo/firstuse/$d"
  done
fi

has fla && record fla-gdn 150 260 "$BIN" run --out "$WORK/zoo/fla-gdn" -- $PY examples/zoo_fla_gdn.py --steps 3
has hf && record hf-decoder-matrix 60 110 "$BIN" run --out "$WORK/zoo/hf-decoder-matrix" --repeat 2 \
  --variant baseline --variant cublas:--prewarm-cublas -- $TORCHRUN examples/zoo_hf_decoder.py --steps 4 --hidden 1024 --batch 8192
has moe && record hf-moe-expandable 40 70 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
  "$BIN" run --out "$WORK/zoo/hf-moe-expandable" -- $PY examples/zoo_hf_moe.py --steps 4 --hidden 1024 --batch 4096
has fsdp2 && record fsdp2-matrix 50 90 "$BIN" run --out "$WORK/zoo/fsdp2-matrix" \
  --variant baseline --variant nccl_comm:--prewarm-nccl-comm -- $TORCHRUN examples/zoo_fsdp2.py --steps 4 --batch 4096
has compiled && record compiled-async 60 120 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
  "$BIN" run --out "$WORK/zoo/compiled-async" -- $PY examples/zoo_compiled.py --steps 4 --batch 4096

find "$WORK/zoo" -type d -name 'cache-*' -prune -exec rm -rf {} +
(cd "$WORK" && tar czf "$OUT/zoo.tar.gz" zoo)
ls -la "$OUT"
echo "=== done, $(left) s left of the deadline"
