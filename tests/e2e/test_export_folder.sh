#!/usr/bin/env bash
# End-to-end: safetensors exports to a folder (issue #37 item 5): `--out DIR/` with a trailing
# slash works whether DIR exists or not, as `--out DIR` does.
# Usage: test_export_folder.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
data="$(cd "$(dirname "${BASH_SOURCE[0]}")/../data" && pwd)"

# A tiny random Hugging Face llama (config.json, model.safetensors, tokenizer.json).
"$py" "$(dirname "${BASH_SOURCE[0]}")/make_tiny_llama.py" "$tmp/a" "$data/text/bpe_smollm.json"
model="$tmp/a/hf"
export_to() { # export_to OUT [SCHEME]: a quick weight-only export of the tiny llama
  "$cli" export "$model" --scheme "${2:-w4-int4:sym=true}" --format safetensors --out "$1" \
    --calib "$tmp/a/text.txt" --seq-len 32 --limit 2 --json
}
folder_ok() { # folder_ok DIR: the folder holds a whole export (weights and config agree)
  "$py" - "$1" <<'PY'
import json, sys
from safetensors import safe_open
d = sys.argv[1]
with safe_open(d + "/model.safetensors", "pt") as f:
    meta = json.loads(f.metadata()["quantization_config"])
assert json.load(open(d + "/config.json"))["quantization_config"] == meta, d
PY
}

# A trailing slash on a folder that does not exist yet, relative and absolute (was exit 3:
# "folder new-folder does not exist", the parent of "new-folder/" taken as new-folder).
check slash-new-relative 0 bash -c "cd '$tmp' && $(printf '%q' "$cli") export '$model' \
  --scheme w4-int4:sym=true --format safetensors --out new-folder/ --calib '$tmp/a/text.txt' \
  --seq-len 32 --limit 2 --json"
expect slash-new-relative-path report "$tmp/out" "
assert d['path'] == 'new-folder/model.safetensors', d['path']"
expect slash-new-relative-whole folder_ok "$tmp/new-folder"
check slash-new-absolute 0 export_to "$tmp/new2/"
expect slash-new-absolute-whole folder_ok "$tmp/new2"
check slash-new-double 0 export_to "$tmp/new3//"
expect slash-new-double-whole folder_ok "$tmp/new3"
# The same folders again, now that they exist, with and without the slash.
check slash-existing 0 export_to "$tmp/new2/"
expect slash-existing-whole folder_ok "$tmp/new2"
check no-slash-existing 0 export_to "$tmp/new3"
expect no-slash-existing-whole folder_ok "$tmp/new3"
# A missing parent is still bad input, naming it.
check slash-missing-parent 3 export_to "$tmp/no/such/"
expect slash-missing-parent-message grep -q "folder $tmp/no does not exist" "$tmp/err"

finish
