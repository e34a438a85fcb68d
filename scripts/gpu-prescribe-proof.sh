#!/usr/bin/env bash
# GPU proof of `prewarm-doctor prescribe` (docs/prescribe.md, "Proven on the
# H200"): for each example, record a baseline, write its prescription, then
# run the cold A/B matrix baseline vs prescribed vs the hand-written prewarm,
# print each matrix's verdict headline, and check that the per-step losses
# (the examples' LOSS lines) are identical with and without the prescription.
#
#   scripts/gpu-prescribe-proof.sh target/release/prewarm-doctor OUTDIR
#
# One H200, about 6-8 minutes. EXAMPLES picks a subset (cublas triton nccl
# all shape), STEPS the steps per run (default 4), NPROC the ranks of the
# NCCL examples (default 1: one GPU). Exit code: 0 when every prescribed
# variant is WORKS and every loss comparison matched, else 1 (each printed).
set -u
BIN=${1:?usage: gpu-prescribe-proof.sh BIN OUTDIR}
OUT=${2:?usage: gpu-prescribe-proof.sh BIN OUTDIR}
BIN=$(readlink -f "$BIN")
STEPS=${STEPS:-4}
EXAMPLES=${EXAMPLES:-cublas triton nccl all shape}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# The spilling candidate at 4096 compiles in seconds and still spills (16384 takes minutes).
export SPILL_BLOCK=${SPILL_BLOCK:-4096}
PY=${PY:-python3}
TORCHRUN="$PY -m torch.distributed.run --standalone --nproc_per_node=${NPROC:-1}"
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT")
failed=0

# The LOSS lines of the attempt-th run in a stdout holding several runs one
# after another (a matrix runs its attempts in order; each restarts at step 1).
losses() { # file attempt(1-based)
  awk -v want="$2" '/^LOSS /{ if ($3 == 1 && $2 == 0) n++; if (n == want) print }' "$1"
}

compare() { # label fileA attemptA fileB attemptB
  local a b
  a=$(losses "$2" "$3"); b=$(losses "$4" "$5")
  if [ -z "$a" ]; then
    echo "LOSSES $1: no LOSS lines (did the run fail?)"; failed=1
  elif [ "$a" = "$b" ]; then
    echo "LOSSES $1: identical ($(echo "$a" | wc -l) lines)"
  else
    echo "LOSSES $1: DIFFER"; diff <(echo "$a") <(echo "$b") | head -10; failed=1
  fi
}

prove() { # name hand-variant-spec(s)... -- command
  local name=$1; shift
  local hand=()
  while [ "$1" != "--" ]; do hand+=("$1"); shift; done
  shift
  local dir="$OUT/$name"
  rm -rf "$dir"; mkdir -p "$dir"
  echo "=== $name: $*"
  timeout 300 "$BIN" run --out "$dir/recording" -- "$@" > "$dir/recording.stdout" 2> "$dir/recording.stderr"
  echo "recording exit=$?"
  if ! "$BIN" prescribe "$dir/recording" -o "$dir/prescription.py" 2> "$dir/prescribe.stderr"; then
    cat "$dir/prescribe.stderr"; failed=1; return
  fi
  cat "$dir/prescribe.stderr"
  grep -E '^# (cuBLAS|NCCL|Triton|  |Not replayed|Lazy)' "$dir/prescription.py"
  timeout 400 "$BIN" run --out "$dir/matrix" --variant baseline --variant "prescribed:@$dir/prescription.py" \
    "${hand[@]}" -- "$@" > "$dir/matrix.stdout" 2> "$dir/matrix.stderr"
  echo "matrix exit=$?"
  "$BIN" report "$dir/matrix" > "$dir/matrix.report.txt" 2>&1
  sed -n '1,/^   variant /p' "$dir/matrix.report.txt"
  grep -h "prescription failed" "$dir/matrix.report.txt" | head -5
  if grep -q "^   prescribed WORKS" "$dir/matrix.report.txt"; then
    echo "VERDICT $name: prescribed WORKS"
  else
    echo "VERDICT $name: prescribed is not WORKS (see $dir/matrix.report.txt)"; failed=1
  fi
  # Attempts run in declaration order (a --variants-file's variants come
  # before --variant ones): BASE_AT and PRES_AT say where baseline and
  # prescribed are.
  compare "$name: matrix baseline vs prescribed" "$dir/matrix.stdout" "${BASE_AT:-1}" "$dir/matrix.stdout" "${PRES_AT:-2}"
  compare "$name: recording vs prescribed" "$dir/recording.stdout" 1 "$dir/matrix.stdout" "${PRES_AT:-2}"
}

for ex in $EXAMPLES; do
  case $ex in
  cublas) prove cublas --variant cublas:--prewarm-cublas -- $PY examples/cublas_first_backward.py --steps $STEPS ;;
  triton) prove triton --variant triton_autotune:--prewarm-triton-autotune -- $PY examples/triton_spill_autotune.py --steps $STEPS ;;
  nccl) prove nccl --variant nccl_comm:--prewarm-nccl-comm -- $TORCHRUN examples/nccl_first_collective.py --steps $STEPS ;;
  all) prove all --variant "hand:--prewarm-cublas --prewarm-triton-autotune --prewarm-nccl-comm" -- $TORCHRUN examples/all_lazy_init.py --steps $STEPS ;;
  shape)
    # Buckets change every 2 steps: the second bucket is first tuned at step 3.
    cat > "$OUT/shape-variants.toml" <<'EOF'
[[variant]]
name = "first_bucket"
args = ["--prewarm-first-bucket"]
prewarms = ["triton_autotune"]

[[variant]]
name = "all_buckets"
args = ["--prewarm-all-buckets"]
prewarms = ["triton_autotune"]
EOF
    BASE_AT=3 PRES_AT=4 prove shape --variants-file "$OUT/shape-variants.toml" -- $PY examples/shape_buckets.py --steps $((STEPS > 5 ? STEPS : 5)) --buckets 1024,2048,4096 --bucket-steps 2
    ;;
  esac
done
echo "prescribe proof: $([ $failed = 0 ] && echo ALL LOSSES IDENTICAL || echo SOME CHECKS FAILED)"
exit $failed
