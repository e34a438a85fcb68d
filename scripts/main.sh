#!/usr/bin/env bash
# The main job. On a machine where `prewarm-doctor check` passes (NVIDIA
# driver, CUPTI, injection): a real cold-cache A/B matrix of the bundled
# example (baseline, each prewarm, all; 3 repeats). Elsewhere: the report of
# the bundled real H200 recording (reports/h200-matrix), after saying why,
# also written as HTML and PNG charts into prewarm-report/ (PD_REPORT_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "[main.sh] building prewarm-doctor (release; a first build takes several minutes)" >&2
# Cargo's progress goes to stderr; the JSON artifact messages on stdout say
# where the binary is, wherever CARGO_TARGET_DIR or a config put it.
BIN=$(cargo build --release --locked --message-format=json-render-diagnostics \
  | sed -n 's/.*"executable":"\([^"]*\/prewarm-doctor\)".*/\1/p' | tail -n 1)
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "[main.sh] the build finished but no prewarm-doctor binary was reported by cargo" >&2
  exit 1
fi
echo "[main.sh] binary: $BIN" >&2

if CHECK=$("$BIN" check 2>&1); then
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  export SPILL_BLOCK=${SPILL_BLOCK:-4096}
  exec "$BIN" run --preset env:cublas,triton_autotune,nccl_comm --repeat 3 -- \
    python3 -m torch.distributed.run --standalone --nproc_per_node=1 examples/all_lazy_init.py --steps 4
else
  echo "[main.sh] this machine cannot capture; \`prewarm-doctor check\` says:" >&2
  printf '%s\n' "$CHECK" | grep -E '^FAIL' | sed 's/^/    /' >&2 \
    || printf '%s\n' "$CHECK" | sed 's/^/    /' >&2
  echo "[main.sh] showing the bundled H200 recording (reports/h200-matrix) instead" >&2
  "$BIN" report reports/h200-matrix
  OUT=${PD_REPORT_DIR:-prewarm-report}
  mkdir -p "$OUT"
  # The same report as one offline HTML page and as PNG charts ("wrote ..." says where).
  "$BIN" report reports/h200-matrix --format html -o "$OUT/h200-matrix.html"
  "$BIN" report reports/h200-matrix --format png -o "$OUT/png"
fi
