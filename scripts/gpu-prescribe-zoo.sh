#!/usr/bin/env bash
# Issue 36 on the GPU machine: prescribe on models not written for the tool.
# (1) flash-linear-attention's chunked gated delta rule (examples/zoo_fla_gdn.py,
# fla from .whl/): a cold recording, `prewarm-doctor prescribe` of it, then the
# cold matrix baseline vs the prescription; (2) a transformers Qwen3
# (examples/zoo_hf_decoder.py): the matrix baseline vs a prescription made
# beforehand from tests/fixtures/h200-zoo/hf-decoder-matrix (PRESCRIBED_HF).
# Then (3) the first-use follow-up for the stream-ordered pool. Further
# sections: `fsdp2` (FSDP2 over NCCL, examples/zoo_fsdp2.py: a recording, its
# prescription, the matrix baseline vs the prescription vs the communicator
# prewarm), `varlen` (the fla model on packed variable-length sequences: a
# recording, its prescription, one run with it injected), `cudart` (the
# runtime's first stream-ordered allocation), `wheel` (the pip wheel in
# .gpu/wheels installed into a fresh venv runs a real `run`). Each step has
# its own limit; the call's deadline (DEADLINE_S) skips what no longer fits.
#
#   BIN=.gpu/prewarm-doctor OUT=$OUT PRESCRIBED_HF=.gpu/hf-decoder.py scripts/gpu-prescribe-zoo.sh
set -u
BIN=${BIN:?BIN=path of the prewarm-doctor binary}
OUT=${OUT:?OUT=output folder}
DEADLINE_S=${DEADLINE_S:-570}
SECTIONS=${SECTIONS:-"firstuse fla hf"}
START=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=1"
WORK=$(mktemp -d)
mkdir -p "$WORK/zoo" "$OUT"
. scripts/gpu-wheels.sh
export PYTHONPATH=$PWD/examples${PYTHONPATH:+:$PYTHONPATH}
left() { echo $((DEADLINE_S - ($(date +%s) - START))); }
has() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }

# doctor NAME NEED MAX -- run arguments: a run folder under $WORK/zoo/NAME
doctor() {
  local name=$1 need=$2 max=$3; shift 3
  local l; l=$(left)
  if [ "$l" -lt "$need" ]; then echo "=== $name: skipped, $l s left"; return 1; fi
  [ "$l" -lt "$max" ] && max=$l
  echo "=== $name (limit ${max}s)"
  local t0; t0=$(date +%s)
  timeout --foreground -s INT "$max" "$BIN" run --out "$WORK/zoo/$name" "$@" \
    > "$WORK/zoo/$name.stdout" 2> "$WORK/zoo/$name.stderr"
  echo "doctor exit $? after $(( $(date +%s) - t0 )) s"
  [ -d "$WORK/zoo/$name" ] || return 1
  mv "$WORK/zoo/$name.stdout" "$WORK/zoo/$name/console-stdout.txt"
  mv "$WORK/zoo/$name.stderr" "$WORK/zoo/$name/console-stderr.txt"
  "$BIN" report "$WORK/zoo/$name" > "$WORK/zoo/$name/console-report.txt" 2>&1
  sed -n '1,14p' "$WORK/zoo/$name/console-report.txt"
  grep -h "^LOSS" -r "$WORK/zoo/$name" --include=output.log | sort | uniq -c | head -12
  grep -h "" -r "$WORK/zoo/$name" --include='prescription-errors*' | head -5
}

if has firstuse; then
  F="$OUT/firstuse-2.txt"; : > "$F"
  if nvcc -fatbin -arch=sm_90 -o "$WORK/k.fatbin" scripts/first_use_kernels.cu 2>> "$F"; then
    for mode in "FIRSTUSE_ASYNC_FIRST=1" "FIRSTUSE_ASYNC_FIRST=1 FIRSTUSE_POOL_KEEP=1"; do
      echo "# driver plain LAZY $mode" >> "$F"
      env $mode timeout 30 $PY scripts/gpu_first_use_memory.py driver "$WORK/k.fatbin" >> "$F" 2>&1
    done
  fi
  grep -E '^#|async' "$F" | cut -c1-220
fi
if has cudart; then
  echo "# cudart plain" >> "$OUT/firstuse-3.txt"
  timeout 30 $PY scripts/gpu_first_use_memory.py cudart >> "$OUT/firstuse-3.txt" 2>&1
  cut -c1-200 "$OUT/firstuse-3.txt"
fi
if has wheel && ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  echo "=== wheel: a fresh venv (system site packages for torch), pip install, a real run"
  $PY -m venv --system-site-packages "$WORK/venv" && "$WORK/venv/bin/pip" install -q --no-index .gpu/wheels/*.whl
  "$WORK/venv/bin/prewarm-doctor" --version
  ( PATH="$WORK/venv/bin:$PATH"; cd "$WORK" && timeout 90 prewarm-doctor run --out "$WORK/zoo/wheel-run" -- \
      $PY "$OLDPWD/examples/cublas_first_backward.py" --steps 3 > "$WORK/wheel.stdout" 2> "$WORK/wheel.stderr"; echo "run exit $?"
    prewarm-doctor report "$WORK/zoo/wheel-run" | sed -n '1,6p' )
fi

if has hf && [ -n "${PRESCRIBED_HF:-}" ]; then
  cp "$PRESCRIBED_HF" "$WORK/zoo/hf-decoder-prescription.py"
  doctor hf-decoder-prescribed-matrix 60 100 --variant baseline --variant "prescribed:@$WORK/zoo/hf-decoder-prescription.py" \
    -- $TORCHRUN examples/zoo_hf_decoder.py --steps 4 --hidden 1024 --batch 8192
fi
if has fla && doctor fla-gdn-recording 150 240 -- $PY examples/zoo_fla_gdn.py --steps 3; then
  "$BIN" prescribe "$WORK/zoo/fla-gdn-recording" -o "$WORK/zoo/fla-gdn-prescription.py" 2>&1 | tail -2
  [ -f "$WORK/zoo/fla-gdn-prescription.py" ] && doctor fla-gdn-prescribed-matrix 200 330 \
    --variant baseline --variant "prescribed:@$WORK/zoo/fla-gdn-prescription.py" -- $PY examples/zoo_fla_gdn.py --steps 3
fi
# prove NAME NEED -- CMD...: a cold recording, its prescription, then the
# matrix baseline vs the prescription (+ EXTRA_VARIANTS) under NAME-*.
prove() {
  local name=$1 need=$2; shift 3
  doctor "$name-recording" "$need" $((need + 60)) -- "$@" || return
  "$BIN" prescribe "$WORK/zoo/$name-recording" -o "$WORK/zoo/$name-prescription.py" 2>&1 | tail -1
  [ -f "$WORK/zoo/$name-prescription.py" ] || return
  if [ -n "${ONLY_INJECT:-}" ]; then
    doctor "$name-prescribed" "$need" $((need + 60)) --prescribe "$WORK/zoo/$name-prescription.py" -- "$@"
  else
    doctor "$name-prescribed-matrix" $((need * 2)) $((need * 3 + 90)) --variant baseline \
      --variant "prescribed:@$WORK/zoo/$name-prescription.py" ${EXTRA_VARIANTS:-} -- "$@"
  fi
}
has fsdp2 && EXTRA_VARIANTS="--variant nccl_comm:--prewarm-nccl-comm" prove fsdp2 40 -- \
  $TORCHRUN examples/zoo_fsdp2.py --steps 4 --batch 4096
has varlen && ONLY_INJECT=1 prove fla-varlen 140 -- $PY examples/zoo_fla_gdn.py --steps 3 --varlen --seq 8192
find "$WORK/zoo" -type d -name 'cache-*' -prune -exec rm -rf {} +
(cd "$WORK" && tar czf "$OUT/${TAR:-zoo2}.tar.gz" zoo)
ls -la "$OUT"
echo "=== done, $(left) s left of the deadline"
