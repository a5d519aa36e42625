#!/usr/bin/env bash
# End-to-end: memory is checked before it is spent (issue #18). A Llama-3.1-70B-shaped bf16
# folder (the real config, 723 tensors, 141 GB in 28 shards, written sparse: headers only, so it
# costs no disk) opens from its mapping in a small peak RSS; quantize, whose float32 and
# quantized copies cannot fit, is refused before it allocates, with the estimate, the memory
# available and exit code 5, and leaves no report; eval is refused the same way when
# BITLENS_MEMORY_AVAILABLE says the machine is small, and so is `run` on a batch too large.
# Peak RSS is the child's ru_maxrss.
# Usage: test_llm_memory.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$here/lib.sh"

# Runs a command; its peak RSS in KiB goes to $tmp/rss.
rss() { "$py" -c '
import resource, subprocess, sys
r = subprocess.run(sys.argv[2:])
open(sys.argv[1], "w").write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(r.returncode)' "$tmp/rss" "$@"; }
under() { [ "$(cat "$tmp/rss")" -lt "$1" ] || { echo "peak RSS $(cat "$tmp/rss") KiB, bound $1"; false; }; }

check make-70b 0 "$py" "$here/../../scripts/make-llm-folder" "$tmp/l70" --shape llama-3.1-70b --sparse
cp "$here/../data/text/bpe_llama3.json" "$tmp/l70/tokenizer.json"
printf 'In the beginning God created the heaven and the earth.\n%.0s' $(seq 200) > "$tmp/text.txt"

check info-70b 0 rss "$cli" info "$tmp/l70"
expect info-70b-rss under 2000000
expect info-70b-params grep -qE "^params +70553706563 " "$tmp/out"
expect info-70b-arch grep -qE "^arch +llama" "$tmp/out"
expect info-70b-memory grep -qE "^memory  eval ~[0-9.]+ GB, quantize w4-int4 ~5[0-9][0-9]\.[0-9] GB, [0-9.]+ GB available$" "$tmp/out"
expect info-70b-down grep -qE "^layer\.79\.mlp\.down_proj +MatMul +\[1, 1, 8192\] +234881024 +448\.00 MiB" "$tmp/out"
check info-70b-json 0 "$cli" info "$tmp/l70" --json
expect info-70b-json-keys report "$tmp/out" "
assert d['params'] == 70553706563, d['params']
assert d['bytes'] < 2.01 * d['params'], 'bf16 weights are counted at 2 bytes'
assert sum(1 for l in d['layers'] if l['op'] == 'MatMul' and l['params'] > 0) == 80 * 7 + 1
m = d['memory']
assert m['quantize_scheme'] == 'w4-int4' and m['quantize_bytes'] > 4 * d['params'], m
assert 0 < m['eval_bytes'] < m['quantize_bytes'] and m['available_bytes'] > 0, m"

# --engine whole: the whole engine's refusal (the default, auto, runs a model that does not fit
# whole one decoder block at a time when that fits: see quantize-70b-block below).
check quantize-70b-refused 5 rss "$cli" quantize "$tmp/l70" --scheme w4-int4 --calib "$tmp/text.txt" \
  --limit 2 --seq-len 256 --report "$tmp/r.json" --engine whole
expect quantize-70b-rss under 2000000
expect quantize-70b-message grep -qE "^error: $tmp/l70: quantize needs ~[0-9.]+ GB \(held by the process [0-9.]+ (GB|MB), float32 weights [0-9.]+ GB, quantized copies [0-9.]+ GB, activations [0-9.]+ (GB|MB)(, [a-z ]+ [0-9.]+ (GB|MB))*; weights mapped from the file: 141\.1 GB\), [0-9.]+ GB available; use --limit / --seq-len" "$tmp/err"
expect quantize-70b-no-report test ! -e "$tmp/r.json"
BITLENS_MEMORY_AVAILABLE=400G check quantize-70b-400g 5 "$cli" quantize "$tmp/l70" --scheme w4-int4 \
  --calib "$tmp/text.txt" --limit 2 --seq-len 256 --engine whole
expect quantize-70b-400g-message grep -q ", 400.0 GB available" "$tmp/err"
# One block at a time the 70B is estimated before anything is allocated: on a 1 GB budget it is
# refused with that estimate (and auto gives the whole engine's refusal, as neither fits).
BITLENS_MEMORY_AVAILABLE=1G check quantize-70b-block 5 rss "$cli" quantize "$tmp/l70" \
  --scheme w4-int4 --calib "$tmp/text.txt" --limit 1 --seq-len 64 --engine block
expect quantize-70b-block-rss under 2000000
expect quantize-70b-block-message grep -qE "quantize \(block engine\) needs ~[0-9.]+ GB" "$tmp/err"
BITLENS_MEMORY_AVAILABLE=1G check quantize-70b-auto 5 "$cli" quantize "$tmp/l70" \
  --scheme w4-int4 --calib "$tmp/text.txt" --limit 1 --seq-len 64
expect quantize-70b-auto-message grep -q "quantize needs ~" "$tmp/err"

# eval widens one node's weights at a time: it fits a normal machine, and a small one refuses it.
BITLENS_MEMORY_AVAILABLE=500M check eval-70b-small 5 "$cli" eval "$tmp/l70" --data "$tmp/text.txt" \
  --limit 2 --seq-len 256
expect eval-70b-small-message grep -qE "^error: $tmp/l70: eval needs ~[0-9.]+ GB \(held by the process [0-9.]+ (GB|MB), float32 weights [0-9.]+ GB, activations [0-9.]+ (GB|MB)(, [a-z ]+ [0-9.]+ (GB|MB))*; .*\), 500 MB available" "$tmp/err"

# run on a whole input at once: a 64 x 4096-token batch of the 70B is refused the same way.
"$py" -c "import numpy as np; np.save('$tmp/ids.npy', np.zeros((64, 4096), dtype=np.int64))"
check run-70b-refused 5 "$cli" run "$tmp/l70" --input "$tmp/ids.npy" --out "$tmp/outs" --quiet
expect run-70b-message grep -qE "^error: $tmp/l70: run needs ~[0-9.]+ GB" "$tmp/err"
expect run-70b-no-output test ! -e "$tmp/outs/logits.npy"

finish
