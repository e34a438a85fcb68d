#!/usr/bin/env bash
# GPU check of issue 16's fixes on fresh recordings (run on the GPU machine
# from the repository root, with a release build: cargo build --release).
# Prints one "ok:" or "FAIL:" line per check and exits 1 if any failed.
#
#   1. --step-marker in Python `re` syntax (a lookahead) is accepted and
#      the shim's markers place step 1 (the rule names the marker).
#   2. A command that does not exist: exit 127, attempt "(the command could
#      not be started)", never "(interrupted)".
#   3. A Triton autotune that runs out of memory before any step: the HTML
#      report carries each prewarm's what-if ("still short by") and the fix,
#      names the phase as the terminal does ("before any step" when no step
#      could be placed); PNG charts are written; `--format perfetto | head -1`
#      exits 0; `--format png` without -o is exit 2.
set -u
BIN=${BIN:-target/release/prewarm-doctor}
OUT=${OUT:-/tmp/pd-verify-fixes}
PY=${PY:-python3}
rm -rf "$OUT" && mkdir -p "$OUT"
fails=0
check() { # description, then a command that must succeed
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then echo "ok: $what"; else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

# 1. A lookahead step marker on a small training whose steps are NVTX ranges.
cat > "$OUT/nvtx_steps.py" <<'EOF'
import torch
model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(256, 1024, device="cuda")
for i in range(1, 5):
    torch.cuda.nvtx.range_push(f"step {i}")
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
EOF
"$BIN" run --out "$OUT/marker" --step-marker 'step (?=\d)' -- "$PY" "$OUT/nvtx_steps.py" \
  > "$OUT/marker.stdout" 2> "$OUT/marker.stderr"
rc=$?
check "--step-marker 'step (?=\\d)' accepted, the run exits 0" test "$rc" = 0
check "step 1 placed by the marker" grep -q "explicit step markers" <("$BIN" report "$OUT/marker" --format json)

# 2. A command that is not there.
"$BIN" run --out "$OUT/missing" -- prewarm-doctor-no-such-command > /dev/null 2> "$OUT/missing.stderr"
rc=$?
check "no-such-command exits 127" test "$rc" = 127
check "its attempt says it could not be started" grep -q "(the command could not be started)" <("$BIN" report "$OUT/missing")
check "and not interrupted" bash -c "! '$BIN' report '$OUT/missing' | grep -q interrupted"

# 3. The Triton OOM before any step (as tests/fixtures/h200/oom-triton-baseline).
"$BIN" run --out "$OUT/oom" -- "$PY" examples/triton_spill_autotune.py --steps 3 --occupy-gib=-1 \
  > /dev/null 2> "$OUT/oom.stderr"
echo "oom run exit: $? (1 expected: the training ran out of memory)"
"$BIN" report "$OUT/oom" --format html -o "$OUT/oom.html" 2>/dev/null
check "HTML has the what-if per prewarm" grep -q "still short by\|fits with" "$OUT/oom.html"
check "HTML has the fix that removes the demand" grep -q "The fix that removes the demand" "$OUT/oom.html"
# Today's shim places step 1 even for a process that dies in its first
# forward (docs/step-rule.md); only when it cannot is the run one phase,
# "before any step" — and then every format must say so.
"$BIN" report "$OUT/oom" > "$OUT/oom.txt" 2>/dev/null
if grep -q "before any step" "$OUT/oom.txt"; then
  check "HTML names the phase 'before any step', as the terminal does" grep -q "before any step" "$OUT/oom.html"
  check "HTML does not say 'Nothing lazy lands after setup'" bash -c "! grep -q 'Nothing lazy lands after setup' '$OUT/oom.html'"
else
  check "step 1 placed: HTML names step 1 as the terminal does" grep -q "step 1" "$OUT/oom.html"
fi
check "PNG charts written" "$BIN" report "$OUT/oom" --format png -o "$OUT/oom-png"
check "report --format png without -o is exit 2" test "$("$BIN" report "$OUT/oom" --format png >/dev/null 2>&1; echo $?)" = 2
check "perfetto | head -1 exits 0" bash -c "'$BIN' report '$OUT/oom' --format perfetto | head -1 >/dev/null; test \${PIPESTATUS[0]} = 0"
echo "recordings and reports are under $OUT (copy $OUT/oom-png/*.png back to look at them)"
[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
