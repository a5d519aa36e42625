#!/usr/bin/env bash
# End-to-end: safetensors exports to a folder. Issue #37 item 5: `--out DIR/` with a trailing
# slash works whether DIR exists or not, as `--out DIR` does. Issue #49 item 3: a folder export
# is all-or-nothing (staging folder swapped in with one rename, under a lock): no files of
# another model stay, a failed or killed export leaves the old folder as it was, two concurrent
# exports never mix.
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

# --- #49 item 3: all-or-nothing folder exports ---
files_of() { (cd "$1" && ls -A | sort | tr '\n' ' '); }
no_leftovers() { # no_leftovers PARENT: no staging folder or lock file beside the exports
  ! ls -A "$1" | grep -q "bitlens-staging\|bitlens-lock"
}
fingerprint() { (cd "$1" && ls -A | sort && cat config.json && sha256sum model.safetensors); }

# A previous export of another model (its folder had vocab.txt and special_tokens_map.json,
# copied into the export): exporting the tiny llama there leaves none of them.
cp -r "$model" "$tmp/other"
echo '[PAD]' > "$tmp/other/vocab.txt"
echo '{}' > "$tmp/other/special_tokens_map.json"
mkdir "$tmp/x"
check other-export 0 "$cli" export "$tmp/other" --scheme w4-int4:sym=true --format safetensors \
  --out "$tmp/x/m" --calib "$tmp/a/text.txt" --seq-len 32 --limit 2 --json
expect other-export-has-vocab test -f "$tmp/x/m/vocab.txt" -a -f "$tmp/x/m/special_tokens_map.json"
check over-other-model 0 export_to "$tmp/x/m"
expect over-other-model-whole folder_ok "$tmp/x/m"
expect over-other-model-no-vocab test "$(files_of "$tmp/x/m")" = \
  "config.json model.safetensors tokenizer.json "
expect over-other-model-no-leftovers no_leftovers "$tmp/x"

# A folder that is not a BitLens export (a source model's own folder) is refused, untouched.
before=$(fingerprint "$tmp/other")
check not-an-export-refused 3 export_to "$tmp/other"
expect not-an-export-message grep -q "not a BitLens export" "$tmp/err"
expect not-an-export-untouched test "$(fingerprint "$tmp/other")" = "$before"
expect not-an-export-no-leftovers no_leftovers "$tmp"

# A write that fails after model.safetensors is written (before config.json): exit 5, the old
# folder as it was, no staging folder or lock file left.
before=$(fingerprint "$tmp/x/m")
check fail-midway 5 env BITLENS_FOLDER_EXPORT_FAULT=fail "$cli" export "$model" --scheme w4-int4 \
  --format safetensors --out "$tmp/x/m" --calib "$tmp/a/text.txt" --seq-len 32 --limit 2
expect fail-midway-old-intact test "$(fingerprint "$tmp/x/m")" = "$before"
expect fail-midway-no-leftovers no_leftovers "$tmp/x"
# Into a new folder: no folder at all.
check fail-midway-new 5 env BITLENS_FOLDER_EXPORT_FAULT=fail "$cli" export "$model" \
  --scheme w4-int4 --format safetensors --out "$tmp/x/fresh" --calib "$tmp/a/text.txt" \
  --seq-len 32 --limit 2
expect fail-midway-new-nothing test ! -e "$tmp/x/fresh"
expect fail-midway-new-no-leftovers no_leftovers "$tmp/x"

# Killed (SIGKILL) at the same point: the old folder as it was; the next export removes what
# the killed one left beside it and writes a whole folder.
check killed-midway 137 env BITLENS_FOLDER_EXPORT_FAULT=kill "$cli" export "$model" \
  --scheme w4-int4 --format safetensors --out "$tmp/x/m" --calib "$tmp/a/text.txt" \
  --seq-len 32 --limit 2
expect killed-midway-old-intact test "$(fingerprint "$tmp/x/m")" = "$before"
expect killed-midway-left-staging bash -c "ls -A '$tmp/x' | grep -q bitlens-staging"
check after-kill 0 export_to "$tmp/x/m" w4-int4
expect after-kill-whole folder_ok "$tmp/x/m"
expect after-kill-no-leftovers no_leftovers "$tmp/x"

# Two concurrent exports to one folder, the first paused between its weights and its config:
# both succeed, one after the other (the lock), and the folder is whole (weights and config of
# the same export), the second one's.
BITLENS_FOLDER_EXPORT_FAULT=sleep:4 "$cli" export "$model" --scheme w4-int4:sym=true \
  --format safetensors --out "$tmp/x/c" --calib "$tmp/a/text.txt" --seq-len 32 --limit 2 \
  > "$tmp/c1.out" 2> "$tmp/c1.err" &
first=$!
for _ in $(seq 100); do ls -A "$tmp/x" | grep -q "^\.c\.bitlens-staging" && break; sleep 0.1; done
check concurrent-second 0 "$cli" export "$model" --scheme w4-int4 --format safetensors \
  --out "$tmp/x/c" --calib "$tmp/a/text.txt" --seq-len 32 --limit 2
expect concurrent-second-waited grep -q "waiting for another export" "$tmp/err"
wait $first
expect concurrent-first-ok test $? = 0
expect concurrent-whole folder_ok "$tmp/x/c"
expect concurrent-second-wins "$py" -c "
import json
q = json.load(open('$tmp/x/c/config.json'))['quantization_config']
assert q['config_groups']['group_0']['weights']['symmetric'] is False, q"
expect concurrent-no-leftovers no_leftovers "$tmp/x"

# --- #49 item 5: info, run and eval open BitLens's own safetensors export (was exit 3: "tensor
# 'model.layers.0.self_attn.q_proj.weight' is missing"), and it runs as the in-app model. ---
"$py" -c "
import json, numpy as np
vocab = json.load(open('$model/config.json'))['vocab_size']
np.save('$tmp/ids.npy', ((np.arange(24, dtype=np.int64) * 29 + 3) % vocab).reshape(1, -1))"
for scheme in w4-int4:sym=true w4-int4 nvfp4-w; do
  name=${scheme//[:=]/_}
  check "reopen-export-$name" 0 export_to "$tmp/re-$name" "$scheme"
  check "reopen-info-$name" 0 "$cli" info "$tmp/re-$name"
  expect "reopen-info-note-$name" grep -q "dequantized compressed-tensors weights" "$tmp/out"
  check "reopen-eval-$name" 0 "$cli" eval "$tmp/re-$name" --data "$tmp/a/text.txt" --seq-len 32 \
    --limit 2
  check "reopen-run-$name" 0 "$cli" run "$tmp/re-$name" --input "$tmp/ids.npy" \
    --out "$tmp/re-$name-out"
  check "inapp-run-$name" 0 "$cli" run "$model" --scheme "$scheme" --input "$tmp/ids.npy" \
    --out "$tmp/inapp-$name-out" --calib "$tmp/a/text.txt" --seq-len 32 --limit 2
  expect "reopen-same-logits-$name" "$py" -c "
import glob, numpy as np
a = np.load(glob.glob('$tmp/re-$name-out/*.npy')[0])
b = np.load(glob.glob('$tmp/inapp-$name-out/*.npy')[0])
d = np.abs(a - b).max() / np.abs(b).max()
print('$scheme: reopened export vs in-app max |diff| / max |logit|', d)
assert a.shape == b.shape and d < 1e-4, d"
done

finish
