#!/usr/bin/env bash
# End-to-end: `bitlens-cli plan` — the BLOOM-176B figures (8 A100-80GB to serve it in bf16, the
# minimum 5 shown too; each fine-tuning term), --json keys, --list, a config.json, a user's own
# cards file, and the exit codes of bad input (3, "error: <path>: <reason>") and unknown names
# (2, naming the choices). No model is opened: it runs anywhere in a second.
# Usage: test_plan.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The figure people quote: BLOOM-176B in bf16 needs 8 A100-80GB (tensor parallel is a power of
# two; 5 is the fewest that hold it).
check bloom-inference 0 "$cli" plan bloom-176b --precision bf16 --use inference --gpu a100-80gb
expect bloom-eight grep -q "^GPUs     8 x NVIDIA A100 80GB SXM (tensor parallel 8" "$tmp/out"
expect bloom-min-five grep -q "the minimum that holds .* is 5 x 80 GiB" "$tmp/out"
expect bloom-weights grep -qE "^Weights +328.3 GiB  176.247e9 params x 2 B \(bf16\)" "$tmp/out"
expect bloom-kv grep -qE "^KV cache .*2 \(K,V\) x 70 layers x 112 kv heads x 128 head dim" "$tmp/out"
expect bloom-decode grep -q "^decode   .*tokens/s per sequence on 8" "$tmp/out"

# Fine-tuning: every term behind the figure, and their sum.
check bloom-finetune 0 "$cli" plan bloom-176b --precision bf16 --use finetune --gpu a100-80gb --batch 1 --context 2048
for term in "^Weights " "^Gradients " "^Master weights \(fp32\) " "^Optimizer states \(Adam m, v\) " \
            "^Activations .*70 layers x 1 seq x 2048 tokens" "^total +2689.5 GiB"; do
  expect "finetune-term $term" grep -qE "$term" "$tmp/out"
done
expect finetune-order bash -c "grep -oE '^(Weights|Gradients|Master|Optimizer|Activations)' '$tmp/out' | tr '\n' ' ' | grep -qx 'Weights Gradients Master Optimizer Activations '"
expect finetune-gpus grep -q "^GPUs     64 x .* is 34 x 80 GiB" "$tmp/out"

# --json: the keys scripts read.
check json 0 "$cli" plan bloom-176b --use inference --gpu a100-80gb --json
expect json-keys report "$tmp/out" "
assert d['min_gpus'] == 5 and d['tensor_parallel'] == 8, d
assert d['model']['params'] == 176247271424
assert [p['key'] for p in d['parts']] == ['weights', 'kv_cache', 'activations']
assert all(p['how'] and p['bytes'] > 0 for p in d['parts'])
assert abs(d['total_bytes'] - sum(p['bytes'] for p in d['parts'])) < 1
assert d['decode']['tokens_per_s_tensor_parallel'] > d['decode']['tokens_per_s_min_gpus'] > 0
assert d['card']['id'] == 'a100-80gb' and d['price']['usd'] is None
assert set(d['precision']) >= {'weights', 'kv_cache', 'activations'}
"
check json-qlora 0 "$cli" plan llama-3.1-70b --use qlora --gpu rtx-5090 --json
expect json-qlora-keys report "$tmp/out" "
keys = [p['key'] for p in d['parts']]
assert keys == ['weights', 'lora_adapters', 'gradients', 'optimizer_states', 'activations'], keys
assert d['precision']['weights'] == 'nf4' and d['precision']['weights_bits'] == 4.5
assert d['decode'] is None and d['price']['usd_per_fp4_tflop'] > 0
"

# --list: presets, cards and precisions.
check list 0 "$cli" plan --list
for name in bloom-176b qwen3-235b-a22b smollm2-135m a100-40gb mi355x rtx-5090 mxfp4; do
  expect "list-$name" grep -q "$name" "$tmp/out"
done
check list-json 0 "$cli" plan --list --json
expect list-json-keys report "$tmp/out" "
assert len(d['presets']) == 9 and all(abs(p['params'] - p['published_params']) < 0.015 * p['published_params'] for p in d['presets'])
assert all(c['source'] for c in d['cards'])
"

# A config.json and a folder holding one.
mkdir -p "$tmp/smol"
cat > "$tmp/smol/config.json" <<'JSON'
{"model_type": "llama", "hidden_size": 576, "num_hidden_layers": 30, "num_attention_heads": 9,
 "num_key_value_heads": 3, "intermediate_size": 1536, "vocab_size": 49152, "tie_word_embeddings": true}
JSON
check config 0 "$cli" plan "$tmp/smol/config.json" --gpu rtx-4090 --json
expect config-params report "$tmp/out" "assert d['model']['params'] == 134515008 and d['min_gpus'] == 1"
check folder 0 "$cli" plan "$tmp/smol" --gpu rtx-4090 --precision int4
expect folder-price grep -q "^price    \$1599 per card" "$tmp/out"

# A user's own cards file.
cat > "$tmp/cards.json" <<'JSON'
{"cards": [{"id": "my-card", "name": "My card", "memory_gib": 12, "memory_bandwidth_gbps": 500,
            "bf16_tflops": 50, "fp8_tflops": 100, "price_usd": 400}]}
JSON
check own-cards 0 "$cli" plan llama-3.1-8b --gpu my-card --cards "$tmp/cards.json"
expect own-cards-line grep -q "^GPUs     2 x My card" "$tmp/out"
expect own-cards-price grep -q "\$4.00 per dense FP8 TFLOP" "$tmp/out"

# The cards file is found where an install puts it (<prefix>/share/bitlens/hardware, beside
# <prefix>/bin), and its absence is a bad input that says where it looked.
src=${BITLENS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
mkdir -p "$tmp/prefix/bin" "$tmp/prefix/share/bitlens/hardware"
cp "$cli" "$tmp/prefix/bin/bitlens-cli"
cp "$src/resources/hardware/accelerators.json" "$tmp/prefix/share/bitlens/hardware/"
check installed-layout 0 env -u BITLENS_SOURCE_DIR -u BITLENS_DATA_DIR "$tmp/prefix/bin/bitlens-cli" plan bloom-176b --gpu a100-80gb
expect installed-layout-eight grep -q "^GPUs     8 x " "$tmp/out"
rm "$tmp/prefix/share/bitlens/hardware/accelerators.json"
check no-cards-file 3 env -u BITLENS_SOURCE_DIR -u BITLENS_DATA_DIR "$tmp/prefix/bin/bitlens-cli" plan bloom-176b
expect no-cards-file-message grep -q "^error: accelerators.json: not found (looked in: $tmp/prefix/share/bitlens/hardware/accelerators.json" "$tmp/err"
check data-dir 0 env BITLENS_DATA_DIR="$src/resources" "$tmp/prefix/bin/bitlens-cli" plan bloom-176b --gpu h200 --json
expect data-dir-h200 report "$tmp/out" "assert d['card']['id'] == 'h200' and d['min_gpus'] == 3 and d['tensor_parallel'] == 4, d['gpu_line']"

# Bad input: exit 3, "error: <path>: <reason>".
check missing-config 3 "$cli" plan "$tmp/none/config.json"
expect missing-config-message grep -q "^error: $tmp/none/config.json: cannot open file" "$tmp/err"
printf '{"model_type": "llama", "num_hidden_layers": 2}' > "$tmp/bad.json"
check bad-config 3 "$cli" plan "$tmp/bad.json"
expect bad-config-message grep -qx "error: $tmp/bad.json: missing \"hidden_size\"" "$tmp/err"
printf '{nope' > "$tmp/broken.json"
check broken-config 3 "$cli" plan "$tmp/broken.json"
expect broken-config-message grep -qx "error: $tmp/broken.json: not valid JSON" "$tmp/err"
printf '{"cards": [{"id": "x", "memory_bandwidth_gbps": 1, "bf16_tflops": 1}]}' > "$tmp/badcards.json"
check bad-cards 3 "$cli" plan bloom-176b --gpu x --cards "$tmp/badcards.json"
expect bad-cards-message grep -qx "error: $tmp/badcards.json: card 'x': missing \"memory_gib\"" "$tmp/err"

# Unknown names: exit 2, naming the choices.
check unknown-preset 2 "$cli" plan bloom-7b
expect unknown-preset-choices grep -q "unknown preset 'bloom-7b' (presets: bloom-176b, llama-3.1-8b" "$tmp/err"
check unknown-gpu 2 "$cli" plan bloom-176b --gpu a100
expect unknown-gpu-choices grep -q "unknown card 'a100' (choices: a100-40gb, a100-80gb" "$tmp/err"
check unknown-precision 2 "$cli" plan bloom-176b --precision int3
expect unknown-precision-choices grep -q "unknown precision 'int3' (choices: fp32, bf16" "$tmp/err"
check unknown-use 2 "$cli" plan bloom-176b --use pretrain
check qlora-bf16 2 "$cli" plan bloom-176b --use qlora --precision bf16
expect qlora-bf16-message grep -q "4-bit format" "$tmp/err"
check no-model 2 "$cli" plan
check bad-batch 2 "$cli" plan bloom-176b --batch 0

finish
