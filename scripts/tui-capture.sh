#!/usr/bin/env bash
# The live dashboard during a real matrix of the bundled example, captured
# from tmux at three moments: setup (a rank still before step 1), step 1 (a
# rank inside its first step), and the verdicts (the matrix finished). Run on
# a GPU machine from the repository root; BIN is a release build of
# prewarm-doctor; tmux must be installed (apt-get install -y tmux).
#
#   BIN=target/release/prewarm-doctor OUT=tui-out bash scripts/tui-capture.sh
#
# Writes to $OUT: 01-setup, 02-step1, 02-step1-timeline, 03-verdicts,
# 03-timeline-step1, 03-events, 03-ranks, 03-account, 04-after-exit
# (each .txt as text and .ansi with colours), the run folder ($OUT/run,
# caches removed) and tui-capture.log (what happened when).
set -u
BIN=${BIN:-target/release/prewarm-doctor}
OUT=${OUT:-tui-out}
W=${W:-120}
H=${H:-40}
REPEAT=${REPEAT:-1}
STEPS=${STEPS:-4}
PY=${PY:-python3}
TIMEOUT=${TIMEOUT:-900}
SOCK=pd-capture-$$
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
command -v tmux >/dev/null || { echo "tmux is needed: apt-get install -y tmux" >&2; exit 2; }
[ -x "$BIN" ] || { echo "no prewarm-doctor binary at $BIN (set BIN)" >&2; exit 2; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RUN="$OUT/run"
rm -rf "$RUN"
LOG="$OUT/tui-capture.log"
: > "$LOG"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$LOG"; }
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
cap() { # name: the pane as text and with colours
  tm capture-pane -p > "$OUT/$1.txt"
  tm capture-pane -p -e > "$OUT/$1.ansi"
  say "captured $1"
}
wait_for() { # regex [seconds]: until the pane matches
  local until=$(( $(date +%s) + ${2:-$TIMEOUT} ))
  while [ "$(date +%s)" -lt "$until" ]; do
    tm capture-pane -p | grep -Eq "$1" && return 0
    sleep 0.2
  done
  say "timed out waiting for /$1/"; tm capture-pane -p >> "$LOG"; return 1
}
keys() { for k in "$@"; do tm send-keys "$k"; sleep 0.3; done; }
trap 'tm kill-server 2>/dev/null' EXIT

CMD="$BIN run --tui --out $RUN --preset env:cublas,triton_autotune,nccl_comm --repeat $REPEAT -- $PY -m torch.distributed.run --standalone --nproc_per_node=1 examples/all_lazy_init.py --steps $STEPS"
say "starting in a ${W}x${H} tmux window: $CMD"
tm new-session -d -x "$W" -y "$H" "$CMD; echo EXIT=\$?; sleep 3600"

# 1. setup: the first attempt's rank is up but before step 1 (Live tab).
wait_for '^rank 0 +setup' && cap 01-setup
# 2. step 1: a rank inside its first step; then the Timeline of that attempt.
if wait_for '^rank 0 +step 1 '; then
  cap 02-step1
  keys Tab Tab 3 && cap 02-step1-timeline && keys BTab BTab
fi
# 3. the verdicts: the matrix ended (status bar EXIT n), Matrix tab.
if wait_for ' EXIT [0-9]+ ' "$TIMEOUT"; then
  sleep 1.5   # the loader's final read
  keys Tab && cap 03-verdicts
  keys Tab 2 && cap 03-timeline-step1
  keys Tab && cap 03-events
  keys Tab && cap 03-ranks
  keys Tab && cap 03-account
  keys q
  wait_for '^EXIT=' 60 && cap 04-after-exit
fi
find "$RUN" -type d -name 'cache-*' -prune -exec rm -rf {} + 2>/dev/null
say "done; captures in $OUT"
ls -1 "$OUT"
