#!/usr/bin/env bash
# End-to-end: hostile input is refused by the exit-code contract (issue #49, items 2, 6, 7).
# tests/data/hostile/make_hostile.py writes the corpus: config.json and tokenizer.json values of
# the wrong type and rope_scaling forms transformers refuses (exit 3 naming the file and the
# key; an unsupported rope_type exit 4), ONNX files with malformed Conv / pool / Flatten /
# Resize attributes (exit 3 naming the node and the attribute, before anything is allocated),
# opsets above the newest BitLens knows (exit 4) and a graph input without an element type
# (exit 3); tiny ONNX files whose attributes imply gigabytes of activations (exit 5, refused
# before the shape trace allocates); the accepted neighbours of each open (exit 0). `info`
# runs on each; every refusal is one line, "error: <path>: ...", holding the words the case
# lists. Then: a newline in a path is printed escaped, a folder that cannot be listed says so,
# and BITLENS_MEMORY_AVAILABLE that
# is not a size is refused (exit 2) while a huge one is read as 1 EB.
# Usage: test_hostile_inputs.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'chmod -R u+rwx "$tmp"; rm -rf "$tmp"' EXIT
source "$here/lib.sh"

if ! "$py" -c "import onnx, numpy" 2> /dev/null; then
  echo "FAIL: onnx or numpy is missing from $py (scripts/bootstrap installs them)"
  exit 1
fi
check make-corpus 0 "$py" "$here/../data/hostile/make_hostile.py" "$tmp/c"

# refused NAME: the last command's stderr is one line naming PATH, holding each of WORDS.
refused() { # refused NAME PATH WORD...
  local name=$1 path=$2
  shift 2
  expect "$name-one-line" test "$(wc -l < "$tmp/err")" = 1
  expect "$name-names-path" grep -qF -- "error: $path" "$tmp/err"
  expect "$name-not-internal" test -z "$(grep -F 'internal failure' "$tmp/err")"
  for word in "$@"; do
    expect "$name-says-$word" grep -qF -- "$word" "$tmp/err"
  done
  return 0
}

while IFS=$'\t' read -r name code path words; do
  [ -n "$name" ] || continue
  check "$name" "$code" "$cli" info "$path"
  [ "$code" = 0 ] && continue
  IFS='|' read -ra need <<< "$words"
  refused "$name" "$path" "${need[@]}"
done < "$tmp/c/cases.tsv"

# plan reads config.json on its own: the same refusal.
check plan-model-type-number 3 "$cli" plan "$tmp/c/cfg-model-type-number/config.json"
refused plan-model-type-number "$tmp/c/cfg-model-type-number/config.json" "key 'model_type'"

# A newline in a path is written \n: the message stays one line.
odd="$tmp/line"$'\n'"break"
cp -r "$tmp/c/cfg-model-type-number" "$odd"
check newline-path 3 "$cli" info "$odd"
refused newline-path "$tmp/line\\nbreak" "model_type"

# A folder this process may not list says so, not "a folder without config.json". Root reads
# any folder: the check runs without the capabilities that let it.
cp -r "$tmp/c/cfg-ok" "$tmp/locked"
chmod 000 "$tmp/locked"
as_user=()
[ "$(id -u)" = 0 ] && as_user=(setpriv --bounding-set -dac_override,-dac_read_search)
check unreadable-folder 3 "${as_user[@]}" "$cli" info "$tmp/locked"
refused unreadable-folder "$tmp/locked" "cannot open folder: Permission denied"
chmod 755 "$tmp/locked"

# BITLENS_MEMORY_AVAILABLE: not a size is a usage error before any work; a huge size is 1 EB.
model="$tmp/c/onnx-ok.onnx"
for value in abc -1 nanG inf 12Q 1e; do
  BITLENS_MEMORY_AVAILABLE=$value check "memory-$value" 2 "$cli" info "$model"
  expect "memory-$value-message" grep -qF "error: BITLENS_MEMORY_AVAILABLE='$value' is not a size" \
    "$tmp/err"
done
BITLENS_MEMORY_AVAILABLE=1e30 check memory-huge 0 "$cli" info "$model"
expect memory-huge-clamped grep -qE "^memory .* 1000000000\.0 GB available$" "$tmp/out"
BITLENS_MEMORY_AVAILABLE=16G check memory-16g 0 "$cli" info "$model"
expect memory-16g-read grep -qE "^memory .* 16\.0 GB available$" "$tmp/out"
BITLENS_MEMORY_AVAILABLE= check memory-empty 0 "$cli" info "$model"

finish
