#!/usr/bin/env bash
# Runs every cargo-fuzz target for RUNS inputs (default 10 million), one after
# another, niced; logs to fuzz/logs/<target>.log. TARGETS picks targets,
# MAX_LEN caps input length. Build first (ASan buys nothing on safe Rust and
# halves the speed):
#   cargo +nightly fuzz build -O --sanitizer none && ./seed-corpus.sh
set -uo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-10000000}
BIN=target/x86_64-unknown-linux-gnu/release
for t in ${TARGETS:-escape nccl_log variants_toml shim_jsonl step_file event_decoder}; do
  mkdir -p "artifacts/$t" "corpus/$t" logs
  start=$(date +%s)
  nice -n 10 "$BIN/$t" "corpus/$t" -runs="$RUNS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 ${MAX_LEN:+-max_len=$MAX_LEN} -artifact_prefix="artifacts/$t/" > "logs/$t.log" 2>&1
  rc=$?
  echo "$t: exit $rc after $(( $(date +%s) - start )) s; $(grep -E '^Done|stat::number_of_executed_units' "logs/$t.log" | tr '\n' ' ')" >> logs/summary.txt
done
