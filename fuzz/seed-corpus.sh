#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ for cargo-fuzz from the real H200 recordings
# (event files and NCCL logs cut to their first bytes, shim JSON lines), the
# variants examples of docs/variants.md and hostile strings. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")"
FIX=../tests/fixtures/h200
seed() { # target, max bytes, find arguments...
  local target=$1 max=$2; shift 2
  mkdir -p "corpus/$target"
  find "$FIX" "$@" -type f -print0 | while IFS= read -r -d '' f; do
    head -c "$max" "$f" > "corpus/$target/$(sha1sum "$f" | cut -c1-16)"
  done
}
seed event_decoder 4096 -name '*.events'
seed shim_jsonl 4096 -name '*.shim.jsonl'
seed nccl_log 8192 -name 'nccl.*.log'
mkdir -p corpus/variants_toml corpus/escape
awk '/^```toml/{f=1; n++; next} /^```/{f=0} f{print > ("corpus/variants_toml/doc-" n)}' ../docs/variants.md
printf 'baseline = "b"\n[[variant]]\nname = "b"\n[[variant]]\nname = "cublas"\nargs = ["--prewarm-cublas"]\nenv = { PREWARM_CUBLAS = "1" }\n' > corpus/variants_toml/two
printf 'k\033[31mred\033[0m\033]8;;http://evil\007x\033]8;;\007\r\n| a | <b> `c` *d* _e_ [f](g)' > corpus/escape/ansi
printf '\xc2\x9b2J\xe2\x80\xaeabc\x7f\xff\xfe=cmd|x' > corpus/escape/c1-bidi
# report_pipeline: one selector byte (which file of the recording to replace), then the file.
mkdir -p corpus/report_pipeline
i=0
for f in "$FIX"/examples-cublas-baseline/default/1/vm/proc.pid-427.events \
         "$FIX"/examples-cublas-baseline/default/1/vm/proc.pid-427.shim.jsonl \
         "$FIX"/examples-cublas-baseline/default/1/vm/nvml.events \
         "$FIX"/examples-cublas-baseline/default/1/vm/host.json \
         "$FIX"/examples-nccl-baseline/default/1/vm/nccl.vm.780.log \
         "$FIX"/examples-cublas-baseline/run.json; do
  { printf "\\$(printf '%03o' $i)"; cat "$f"; } > "corpus/report_pipeline/file-$i"
  i=$((i + 1))
done
ls corpus | while read -r t; do echo "$t: $(ls "corpus/$t" | wc -l) seeds"; done
