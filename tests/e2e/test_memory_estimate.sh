#!/usr/bin/env bash
# End-to-end: the memory estimate is within 15 % of the measured peak (issue #49 item 4).
# For the fast zoo cases (eval, quantize of w4-int4 / static-int8 / gguf-q4_k, compare of the
# four schemes of scripts/measure-memory-estimate), the estimate the command checks before its
# run is read from its refusal under BITLENS_MEMORY_AVAILABLE=1 (exit 5, the estimate in the
# message), then the same command runs for real while its anonymous memory (RssAnon of
# /proc/PID/status) is sampled; an estimate more than 15 % off the peak, either way, fails.
# Usage: test_memory_estimate.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$here/lib.sh"
measure=$here/../../scripts/measure-memory-estimate

for model in fashion-cnn minilm-l6 kjv-llama smollm2-135m; do
  if ! "$cli" zoo path "$model" > /dev/null 2>&1; then
    skip "zoo model $model is not built here (scripts/zoo-ensure builds it)"
  fi
done
if [ "$skipped" = 0 ]; then
  check within-15pct 0 "$py" "$measure" "$cli" --cases default --check 15
  cat "$tmp/out"
  # Every case ran and was measured: a line per case with both figures.
  expect every-case [ "$(grep -cE '^[a-z0-9-]+:[a-z0-9_-]+ +estimate +[0-9.]+ GB +peak anon +[0-9.]+ GB' "$tmp/out")" = 11 ]
  # The check can fail: the same figures against a 1 % bound, which no estimate on this list
  # meets for every case, exit 1 naming the cases.
  check bound-enforced 1 "$py" "$measure" "$cli" --cases fashion-cnn:eval,kjv-llama:eval,minilm-l6:eval --check 0.01
  expect bound-names-case grep -q "^FAIL .*eval: estimate .* off the peak" "$tmp/err"
fi
finish
